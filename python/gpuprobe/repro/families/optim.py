"""optim family: one optimizer case (``optim_run.run_optimizer``) or one GradScaler case
(``optim_run.run_gradscaler``), rebuilt with the probe's own code.

An optimizer probe's failure names its case in ``variant``: the implementation, the
configuration and the parameter list (``fused+weight_decay=0.1+amsgrad+mixed_dtypes``), the
step it went wrong at (``direction`` ``step<N>``) and the parameter or state. The script
rebuilds the probe's parameter list, initial values and seeded gradients with the probe's
builders (copied from ``optim_run``: ``make_param_set`` and what it calls, seeded with the
probe's ``seed`` metric), steps the named implementation on the device (and the device's
for-loop implementation, the probe's second yardstick for foreach and fused), steps the
for-loop implementation in float64 on the CPU, and judges with the probe's judge
(``judge_trajectory``, ``Bounds``, copied), printing every step's largest difference, the
element and the bound there.

The configuration is found by its name among the probe's own (``optim_run.configurations``,
and for the zero-gradient list ``edge_configurations`` too, named as the probe names them),
so its arguments, tensor learning rates and betas included, are the probe's exactly; a
configuration not there is rebuilt from its name (``config_name``'s grammar: ``key``,
``no_key``, ``key=value``, ``key=a,b``, ``key=tensor(v)``), and a tag that is neither an
argument of the optimizer nor a parameter list this generator knows is a ``NoRepro`` with
the tag named.

A GradScaler case (``variant`` ``fused+adamw``) runs the probe's schedule of finite and
non-finite gradients through ``torch.amp.GradScaler`` with the named optimizer and
implementation, against the same optimizer on the unscaled gradients, as ``_scaler_case``
does: a skipped step must leave parameters and state bit for bit, a finite one equal the
unscaled step within the bound, the scale follow GradScaler's rule.

For a crash or hang the worker's last ``gpuprobe optim:`` log line names the configuration
(or GradScaler case); the script then runs every implementation of it in a child process.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from typing import Any

from gpuprobe.repro.families import copied
from gpuprobe.repro.families.base import Case, NoRepro
from gpuprobe.repro.families.copied import Copier
from gpuprobe.repro.script import Recipe

#: Parameter lists a variant may end with (``run_optimizer``'s list suffixes) and the
#: probe's builder of each; ``main`` is the stress list every probe steps. A list whose
#: builder the installed probe lacks is not offered.
LISTS = {"mixed_dtypes": "mixed_list", "grad_layouts": "grad_layout_list", "zero_grads": "zero_grad_list"}
#: The worker's log line before each configuration / GradScaler case.
_LOG = re.compile(r"gpuprobe optim: (\S+) (\S+) (\S+)")
#: The constructor arguments that select an implementation, never part of a configuration.
_FLAGS = ("foreach", "fused", "differentiable")

_HEADER = """\
# Copied from gpuprobe (gpuprobe/worker/probes/optim/run.py and sweep/oracle.py): the probe's
# parameter lists, input builders, trajectories and judge, unchanged."""


@functools.cache
def _copier() -> Copier:
    from gpuprobe.worker.probes.optim import run as optim_run
    from gpuprobe.worker.probes.sweep import oracle as sweep_oracle

    return Copier(optim_run, sweep_oracle, strip=("sweep_oracle",), provided={"torch"})


_OPTIMIZER_ROOTS = (
    "make_param_set",
    "without_empty",
    "run_trajectory",
    "judge_trajectory",
    "Bounds",
    "compare_flat",
    "_locate",
    "_fmt",
    "YARDSTICK_DTYPES",
    "ROUNDING_FACTOR",
)
_SCALER_ROOTS = (
    "scaler_param_specs",
    "make_param_set",
    "make_params",
    "set_grads",
    "run_trajectory",
    "Trajectory",
    "Bounds",
    "compare_flat",
    "_unchanged",
    "_state_snapshot",
    "expected_scales",
    "_flat",
    "_fmt",
    "Finding",
    "SCALER_FACTOR",
    "WRONG_VALUE",
)


def _literal(value: Any) -> str:
    """Python source for a configuration value (a tensor as the ``torch.full`` that makes it)."""
    from gpuprobe.worker.probes.optim import run as optim_run

    if isinstance(value, optim_run.TensorArg):
        return f"torch.full({tuple(value.shape)!r}, {_literal(value.value)})"
    if isinstance(value, _TensorValue):
        return f"torch.full((), {float(value)!r})"
    if type(value).__name__ in ("Tensor", "Parameter") and hasattr(value, "dtype"):
        flat = value.detach().cpu().reshape(-1)
        if flat.numel() == 0 or not bool((flat == flat[0]).all()):
            raise NoRepro("a tensor hyperparameter of the configuration is not one value; it cannot be written out")
        dtype = str(value.dtype).replace("torch.", "")
        return f"torch.full({tuple(value.shape)!r}, {_literal(float(flat[0]))}, dtype=torch.{dtype})"
    if isinstance(value, tuple):
        inner = ", ".join(_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    raise NoRepro(f"a configuration value of type {type(value).__name__} cannot be written into a script")


def _kwargs_source(kwargs: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k!r}: {_literal(v)}" for k, v in kwargs.items()) + "}"


def _configurations(cls: Any, class_name: str, device_type: str, list_name: str) -> dict[str, Any]:
    """The probe's configurations of this list on ``device_type`` by name (``optim_run.Config``:
    the name the probe gives it, its arguments with tensors made): the database's, and for
    the zero-gradient list the extreme ones too, as ``run_optimizer`` steps them."""
    import torch

    from gpuprobe.worker.probes.optim import run as optim_run

    configs = list(optim_run.configurations(torch, class_name, device_type))
    edges = getattr(optim_run, "edge_configurations", None)
    if list_name == "zero_grads" and edges is not None:
        unique = getattr(optim_run, "_unique", lambda items: items)
        configs = unique(configs + list(edges(torch, cls, class_name, device_type)))
    return {config.name: config for config in configs}


def _number(text: str) -> Any:
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


class _TensorValue(float):
    """A hyperparameter the configuration gives as a 0-d tensor (``lr=tensor(0)``)."""


def _parse_config(name: str, cls: Any) -> dict[str, Any]:
    """The arguments a configuration name spells (``config_name``'s grammar), for a name the
    probe's table does not hold; ``NoRepro`` for a tag the optimizer does not take."""
    if name in ("", "default"):
        return {}
    try:
        accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "params", *_FLAGS}
    except (TypeError, ValueError):
        accepted = set()
    out: dict[str, Any] = {}
    for token in name.split("+"):
        if token == "default":
            continue
        key, sep, value = token.partition("=")
        if not sep and key.startswith("no_") and key[3:] in accepted:
            out[key[3:]] = False
            continue
        if key not in accepted:
            raise NoRepro(
                f"the case's tag {token!r} is neither an argument of torch.optim.{cls.__name__} nor a parameter list "
                f"this repro generator knows ({', '.join(['main', *_lists()])})"
            )
        if not sep:
            out[key] = True
        elif value == "tensor":
            raise NoRepro(f"the case's tag {token!r} names a tensor argument whose value is not in the probe's table")
        elif value.startswith("tensor(") and value.endswith(")"):
            out[key] = _TensorValue(float(value[len("tensor(") : -1]))
        elif "," in value:
            out[key] = tuple(_number(v) for v in value.split(","))
        else:
            out[key] = _number(value)
    return out


def _split_variant(variant: str, impls: tuple[str, ...]) -> tuple[str, str, str]:
    """(implementation, configuration name, parameter list) of an optimizer case's variant."""
    implementation, _, rest = variant.partition("+")
    if implementation not in impls:
        raise NoRepro(f"the failing case names implementation {implementation!r}, which this optimizer does not have here")
    tokens = rest.split("+") if rest else []
    list_name = "main"
    if tokens and tokens[-1] in _lists():
        list_name = tokens.pop()
    return implementation, "+".join(tokens) or "default", list_name


def _lists() -> dict[str, str]:
    """The parameter lists the installed probe has, by suffix, with their builders."""
    from gpuprobe.worker.probes.optim import run as optim_run

    return {suffix: builder for suffix, builder in LISTS.items() if hasattr(optim_run, builder)}


def _optimizer_class(class_name: str) -> Any:
    import torch

    cls = getattr(torch.optim, class_name, None)
    if cls is None:
        raise NoRepro(f"torch {torch.__version__} has no torch.optim.{class_name}")
    return cls


def _logged(case: Case, first: str) -> list[str] | None:
    """The fields of the worker's last ``gpuprobe optim:`` log line whose first field is
    ``first`` (the optimizer, or ``gradscaler``), or None."""
    for line in reversed(case.stderr_tail):
        found = _LOG.search(line)
        if found and found.group(1) == first and found.group(2) == case.params["dtype"]:
            return [found.group(1), found.group(2), found.group(3)]
    return None


def _first_failure(case: Case) -> dict[str, Any]:
    failures = case.measurement.get("failures")
    if not isinstance(failures, list) or not failures or not isinstance(failures[0], dict):
        errors = case.measurement.get("errors")
        if isinstance(errors, list) and errors:
            raise NoRepro("the optimizer probe failed by device errors only; the error text in the report is the repro")
        raise NoRepro("the observation lists no failing optimizer case ('failures')")
    first = failures[0]
    if not isinstance(first.get("variant"), str):
        raise NoRepro("the failing optimizer case does not name its variant")
    return first


def _seed(case: Case, tag: str) -> int:
    seed = case.metrics.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        seed = case.derive(tag) % (2**31)
    return seed


# ---------------------------------------------------------------------------------------------
# torch.optim optimizers.

#: Where gpuprobe's fault simulation meets an optimizer script (a SIMULATED result only).
_FAMILY = '''\
#: The probe family (gpuprobe's fault simulation shim finds the script's steps by it).
FAMILY = "optim"
'''

_OPTIMIZER_BODY = _FAMILY + '''\
#: The optimizer (torch.optim) and the parameters' dtype.
OPTIMIZER = @@OPTIMIZER@@
CLASS_NAME = @@CLASS_NAME@@
DTYPE_NAME = @@DTYPE_NAME@@
#: Steps per case (each judged) and the seed of the initial parameters and gradients.
STEPS = @@STEPS@@
SEED = @@SEED@@
#: Small parameters of the stress list (sizes 1 to 211: more tensors than one launch takes).
MANY = @@MANY@@
#: The implementations the optimizer offers; the constructor flags of each.
IMPLEMENTATIONS = @@IMPLEMENTATIONS@@
FLAGS = @@FLAGS@@
#: The configuration (as the probe names it) and the parameter list (``main``: the stress
#: list every probe steps).
CONFIG = @@CONFIG@@
LIST = @@LIST@@
#: The case(s): the implementation (and the step gpuprobe saw fail).
CASES = @@CASES@@
#: The configuration as the float64 reference runs it (tensor values as numbers, not
#: capturable; the for-loop implementation).
REFERENCE = @@REFERENCE@@


def configuration():
    """The configuration's keyword arguments on the device (tensors made anew each call)."""
    return @@KWARGS@@


def param_specs():
    """The probe's parameter list."""
    return @@LIST_BUILDER@@


def case_label(case):
    return (f"torch.optim.{CLASS_NAME} in {DTYPE_NAME}, {case['implementation']} implementation, configuration "
            f"{CONFIG}, parameter list {LIST}: {STEPS} steps")


def yardsticks(case, param_set):
    """The probe's half-precision yardsticks: the for-loop and foreach implementations in the
    parameters' own dtype on the CPU."""
    out = []
    for foreach in (False, True) if "foreach" in IMPLEMENTATIONS else (False,):
        kwargs = dict(REFERENCE, foreach=foreach)
        out.append(run_trajectory(torch, getattr(torch.optim, CLASS_NAME), kwargs, param_set, torch.device("cpu"), STEPS))
    return out


def build(case, device):
    # float32 is judged as float32 (the probe does not enable TF32 either).
    torch.backends.cuda.matmul.allow_tf32 = False
    cls = getattr(torch.optim, CLASS_NAME)
    param_set = make_param_set(torch, param_specs(), DTYPE_NAME, SEED, STEPS)
    reference_kwargs = dict(REFERENCE, foreach=False)
    try:
        reference = run_trajectory(torch, cls, reference_kwargs, param_set, torch.device("cpu"), STEPS, float64=True)
    except Exception as exc:
        if not any(spec.numel == 0 for spec in param_set.specs):
            raise
        # As the probe: the for-loop itself cannot step an empty parameter (a framework
        # defect on every device); the rest of the list is still judged.
        print(f"  the for-loop implementation raises on an empty parameter ({type(exc).__name__}: {exc}); "
              "empty parameters are left out, as the probe does")
        param_set = without_empty(param_set)
        reference = run_trajectory(torch, cls, reference_kwargs, param_set, torch.device("cpu"), STEPS, float64=True)
    bounds = Bounds(torch, param_set, reference)
    print(f"  {len(param_set.specs)} parameters, {param_set.offsets[-1]} elements; bound after step t: "
          f"{ROUNDING_FACTOR:g}*u*sum|R_s| + max({ROUNDING_FACTOR:g}*u, E)*sum M_s + t*tiny, u the unit roundoff of "
          f"the parameter's dtype, E = {bounds.coefficients:.3g} (float32 coefficients), R_s the float64 values, "
          "M_s the tensor's largest float64 update")
    return {"cls": cls, "param_set": param_set, "reference": reference, "bounds": bounds}


def run_case(case, inputs, device):
    """The implementation under test on the device, from the same initial values through the
    same gradients (and the device's for-loop implementation first: the probe compares
    foreach and fused with it too)."""
    out = {}
    for implementation in ("forloop", case["implementation"]) if case["implementation"] != "forloop" else ("forloop",):
        kwargs = dict(configuration(), **FLAGS[implementation])
        out[implementation] = run_trajectory(
            torch, inputs["cls"], kwargs, inputs["param_set"], torch.device(device), STEPS, sync=lambda: sync(device)
        )
    return out


def judge(case, inputs, found, forloop_params):
    """The probe's verdict: the first wrong step (against float64, then against the device's
    for-loop), else the state after the last step. In half precision a case that fails is
    judged again with the yardsticks, as the probe does."""
    param_set, reference = inputs["param_set"], inputs["reference"]
    shapes = [spec.shape for spec in param_set.specs]
    finding, step = judge_trajectory(torch, found, reference, inputs["bounds"], param_set, forloop_params, shapes)
    if finding is not None and any(d in YARDSTICK_DTYPES for d in param_set.dtypes) and not inputs["bounds"].yardsticks:
        inputs["bounds"] = Bounds(torch, param_set, reference, yardsticks=yardsticks(case, param_set))
        finding, step = judge_trajectory(torch, found, reference, inputs["bounds"], param_set, forloop_params, shapes)
    return finding, step


def show_steps(inputs, found):
    """Every step's largest difference from float64, its element and the bound there."""
    param_set, reference, bounds = inputs["param_set"], inputs["reference"], inputs["bounds"]
    for step, (values, expected) in enumerate(zip(found.params, reference.params)):
        if values.numel() == 0:
            continue
        diff = (values - expected).abs()
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)
        worst = int(diff.argmax())
        tensor, element = _locate(param_set.offsets, worst)
        spec = param_set.specs[tensor]
        print(f"  step {step + 1}: largest difference {_fmt(float(diff[worst]))} at param[{tensor}] {tuple(spec.shape)} "
              f"{param_set.dtypes[tensor]} element {element}: float64 {_fmt(float(expected[worst]))}, found "
              f"{_fmt(float(values[worst]))}, bound {_fmt(float(bounds.allowed[step][worst]))}")


def check(case, inputs, result):
    """The probe's judge on the device's trajectory."""
    forloop_params = None
    if case["implementation"] != "forloop":
        finding, step = judge(case, inputs, result["forloop"], None)
        if finding is None:
            forloop_params = result["forloop"].params
        else:
            print(f"  the device's for-loop implementation fails too (step {step}, {finding.output}: {finding.detail}); "
                  "as in the probe, it is not a yardstick then")
    found = result[case["implementation"]]
    finding, step = judge(case, inputs, found, forloop_params)
    show_steps(inputs, found)
    if finding is None:
        print(f"  every parameter within the bound after each of the {STEPS} steps; state and step counters right")
        return True
    print(f"  step {step}: {finding.output}: {finding.cls}: {finding.detail}")
    if finding.index is not None or finding.expected:
        where = f" at index {finding.index}" if finding.index is not None else ""
        allowed = f" (allowed error {finding.allowed:.3g})" if finding.allowed is not None else ""
        print(f"  first{where}: expected {finding.expected}, found {finding.found}{allowed}")
    if finding.bad_elements:
        print(f"  {finding.bad_elements} of {finding.elements} elements wrong"
              + ("; every one of them is zero" if finding.zeros else "") + ("; the whole list is zero" if finding.all_zero else ""))
    return False
'''


def _optimizer(case: Case) -> Recipe:
    from gpuprobe.worker.probes.optim import run as optim_run

    p = case.params
    class_name, dtype = p["class_name"], p["dtype"]
    dtype_name = optim_run.DTYPES[dtype]
    cls = _optimizer_class(class_name)
    impls = optim_run.implementations(cls)
    device_type = "cpu" if case.device_type == "cpu" else "cuda"
    cases: list[dict[str, Any]] = []
    failure: dict[str, Any] | None = None
    if case.crash_or_hang:
        logged = _logged(case, p["optimizer"])
        if logged is None:
            raise NoRepro("the worker's last lines do not name the optimizer configuration that crashed or hung "
                          "(no 'gpuprobe optim:' line)")
        implementation, config, list_name = _split_variant(f"forloop+{logged[2]}", impls)
        cases = [{"optimizer": p["optimizer"], "implementation": i, "config": config, "list": list_name} for i in impls]
    else:
        failure = _first_failure(case)
        implementation, config, list_name = _split_variant(failure["variant"], impls)
        cases = [{"optimizer": p["optimizer"], "implementation": implementation, "config": config, "list": list_name,
                  "failed_at": str(failure.get("direction") or "")}]
    table = _configurations(cls, class_name, device_type, list_name)
    if config in table:
        kwargs = dict(table[config].kwargs)
        reference = optim_run.reference_kwargs(kwargs)
    else:
        kwargs = _parse_config(config, cls)
        reference = {k: float(v) if isinstance(v, _TensorValue) else v for k, v in kwargs.items() if k != "capturable"}
    flags = {i: optim_run.implementation_flags(cls, i) for i in impls}
    builder = "stress_list(MANY)" if list_name == "main" else f"{_lists()[list_name]}()"
    replacements = {
        "@@OPTIMIZER@@": repr(p["optimizer"]),
        "@@CLASS_NAME@@": repr(class_name),
        "@@DTYPE_NAME@@": repr(dtype_name),
        "@@STEPS@@": repr(optim_run.STEPS),
        "@@SEED@@": repr(_seed(case, "trajectory")),
        "@@MANY@@": repr(int(p.get("many", 112))),
        "@@IMPLEMENTATIONS@@": repr(impls),
        "@@FLAGS@@": repr(flags),
        "@@CASES@@": repr(cases),
        "@@CONFIG@@": repr(config),
        "@@LIST@@": repr(list_name),
        "@@REFERENCE@@": repr(reference),
        "@@KWARGS@@": _kwargs_source(kwargs),
        "@@LIST_BUILDER@@": builder,
    }
    body = _OPTIMIZER_BODY
    for marker, value in replacements.items():
        body = body.replace(marker, value)
    roots = [*_OPTIMIZER_ROOTS, "stress_list" if list_name == "main" else _lists()[list_name]]
    helpers = copied.helpers(_HEADER, _copier().source(roots), body)
    first = cases[0]
    where = f", first wrong at {failure.get('direction')} in {failure.get('output')}" if failure else ""
    return Recipe(
        summary=(
            f"torch.optim.{class_name} with {dtype_name} parameters, the {first['implementation']} implementation in "
            f"configuration `{first['config']}` on the probe's `{first['list']}` parameter list{where}: "
            f"{optim_run.STEPS} steps on the device from the probe's seeded initial values and gradients (its own "
            "builders, copied), against the for-loop implementation in float64 on the CPU (and, for foreach and fused, "
            "against the device's for-loop), judged by the probe's own judge."
        ),
        reference="the for-loop implementation in float64 on the CPU from the same rounded values and gradients",
        tolerance=(
            f"per element after step t: {optim_run.ROUNDING_FACTOR:g}*u*sum|R_s| + max({optim_run.ROUNDING_FACTOR:g}*u, E)"
            "*sum M_s + t*tiny (u the dtype's unit roundoff, E the float32 coefficients' precision); state within "
            f"max(C*u, E)*t*max|R|; step counters exact; in bf16/fp16 also {optim_run.YARDSTICK_FACTOR:g}x the error of "
            "the same-dtype CPU for-loop or foreach"
        ),
        what=f"torch.optim.{class_name} {dtype_name} ({first['implementation']}, {first['config']}) differs from float64",
        helpers=helpers,
        body=body,
    )


# ---------------------------------------------------------------------------------------------
# GradScaler.

_SCALER_BODY = _FAMILY + '''\
DTYPE_NAME = @@DTYPE_NAME@@
#: GradScaler's schedule: which steps get finite gradients and which an infinity or a NaN;
#: the growth interval and the initial scale the probe uses.
SCALER_SCHEDULE = @@SCHEDULE@@
GROWTH_INTERVAL = @@GROWTH@@
INIT_SCALE = @@INIT@@
#: The seed of the initial parameters and the finite steps' gradients.
SEED = @@SEED@@
#: The case(s): optimizer (its id, class and arguments) and implementation.
CASES = @@CASES@@


def case_label(case):
    return (f"torch.amp.GradScaler with torch.optim.{case['class_name']}({case['kwargs']}), {case['implementation']} "
            f"implementation, {DTYPE_NAME} gradients: schedule {', '.join(SCALER_SCHEDULE)}")


def build(case, device):
    finite = sum(1 for kind in SCALER_SCHEDULE if kind == "finite")
    param_set = make_param_set(torch, scaler_param_specs(), DTYPE_NAME, SEED, finite)
    return {"cls": getattr(torch.optim, case["class_name"]), "param_set": param_set,
            "kwargs": dict(case["kwargs"], **case["flags"])}


def scaler_step(scaler, optimizer, params, step):
    """GradScaler's step and update: skipped when the gradients hold an Inf or a NaN, else
    the optimizer steps on the unscaled gradients."""
    scaler.step(optimizer)
    scaler.update()


def run_case(case, inputs, device):
    """The same optimizer without a scaler on the unscaled finite gradients, then with
    GradScaler through the schedule (the gradients scaled by the current scale, as a backward
    pass of the scaled loss leaves them)."""
    dev, param_set, cls = torch.device(device), inputs["param_set"], inputs["cls"]
    unscaled = run_trajectory(torch, cls, dict(inputs["kwargs"]), param_set, dev, len(param_set.grads),
                              sync=lambda: sync(device))
    params = make_params(torch, param_set, dev)
    optimizer = cls(params, **inputs["kwargs"])
    scaler = torch.amp.GradScaler(dev.type, init_scale=INIT_SCALE, growth_factor=2.0, backoff_factor=0.5,
                                  growth_interval=GROWTH_INTERVAL)
    steps = [{"values": _flat(torch, params), "state": _state_snapshot(torch, optimizer, params)}]
    finite_index, scale = 0, INIT_SCALE
    for position, kind in enumerate(SCALER_SCHEDULE):
        if kind == "finite":
            set_grads(torch, params, param_set, finite_index, dev, scale=scale)
        else:
            # The last step's gradients again, one element made non-finite.
            set_grads(torch, params, param_set, max(finite_index - 1, 0), dev, scale=scale)
            target = next(p for p, spec in zip(params, param_set.specs) if spec.has_grad and spec.numel > 2)
            with torch.no_grad():
                target.grad.view(-1)[1] = math.inf if kind == "inf" else math.nan
        scaler.scale(torch.ones((), device=dev))
        scaler_step(scaler, optimizer, params, position + 1)
        sync(device)
        scale = float(scaler.get_scale())
        steps.append({"values": _flat(torch, params), "state": _state_snapshot(torch, optimizer, params),
                      "scale": scale, "finite_index": finite_index})
        if kind == "finite":
            finite_index += 1
    return {"unscaled": unscaled, "steps": steps}


def check(case, inputs, result):
    """The probe's rules, step by step (the first step that breaks one is the finding)."""
    param_set, unscaled = inputs["param_set"], result["unscaled"]
    bounds = Bounds(torch, param_set, Trajectory(unscaled.params, {}, {}, []), factor=SCALER_FACTOR)
    shapes = [spec.shape for spec in param_set.specs]
    describe = lambda i: f"param[{i}] {tuple(param_set.specs[i].shape)}"  # noqa: E731
    scales = expected_scales(INIT_SCALE, SCALER_SCHEDULE, GROWTH_INTERVAL)
    for position, kind in enumerate(SCALER_SCHEDULE):
        before, now = result["steps"][position], result["steps"][position + 1]
        if kind == "finite":
            index = now["finite_index"]
            finding = compare_flat(torch, now["values"], unscaled.params[index], bounds.allowed[index], param_set.offsets,
                                   describe, shapes, "params")
            if finding is not None:
                finding.detail = "the scaled step differs from the unscaled one: " + finding.detail
            diff = (now["values"] - unscaled.params[index]).abs()
            print(f"  step {position + 1} ({kind}): scale {now['scale']:g}, largest difference from the unscaled step "
                  f"{_fmt(float(diff.max())) if diff.numel() else '0'}")
        else:
            finding = _unchanged(torch, now["values"], before["values"], param_set, describe, shapes,
                                 f"a step with {kind} gradients")
            print(f"  step {position + 1} ({kind}): scale {now['scale']:g}, "
                  f"{'parameters unchanged' if finding is None else 'parameters changed'}")
            if finding is None:
                for key in sorted(before["state"]):
                    after = now["state"].get(key)
                    if after is None or not torch.equal(before["state"][key], after):
                        finding = Finding(WRONG_VALUE, f"state.{key}", f"a step with {kind} gradients changed the optimizer state {key!r}")
                        break
        if finding is None and now["scale"] != scales[position]:
            finding = Finding(WRONG_VALUE, "scale", f"the scale after {kind} gradients is {now['scale']:g}; GradScaler's "
                              f"rule gives {scales[position]:g}", expected=_fmt(scales[position]), found=_fmt(now["scale"]))
        if finding is not None:
            print(f"  step {position + 1}: {finding.output}: {finding.cls}: {finding.detail}")
            if finding.index is not None:
                print(f"  first at index {finding.index}: expected {finding.expected}, found {finding.found}"
                      + (f" (allowed error {finding.allowed:.3g})" if finding.allowed is not None else ""))
            if finding.bad_elements:
                print(f"  {finding.bad_elements} of {finding.elements} elements wrong"
                      + ("; every one of them is zero" if finding.zeros else ""))
            return False
    print("  every step as GradScaler's rules say")
    return True
'''


def _gradscaler(case: Case) -> Recipe:
    import torch

    from gpuprobe.worker.probes.optim import run as optim_run

    dtype_name = optim_run.DTYPES[case.params["dtype"]]
    entries = {name: (index, class_name, kwargs) for index, (name, class_name, kwargs) in enumerate(optim_run.SCALER_OPTIMIZERS)}
    chosen: list[tuple[str, str]] = []
    if case.crash_or_hang:
        logged = _logged(case, "gradscaler")
        if logged is not None and "+" in logged[2]:
            implementation, _, name = logged[2].partition("+")
            chosen = [(name, implementation)]
        else:
            # The log names no case: every optimizer and implementation, as the probe ran them.
            for name, (_, class_name, _) in entries.items():
                cls = getattr(torch.optim, class_name, None)
                chosen += [(name, i) for i in (optim_run.implementations(cls) if cls is not None else ())]
    else:
        implementation, _, name = str(_first_failure(case)["variant"]).partition("+")
        chosen = [(name, implementation)]
    cases = []
    for name, implementation in chosen:
        if name not in entries:
            raise NoRepro(f"the failing GradScaler case names optimizer {name!r}, which this gpuprobe does not step")
        _, class_name, kwargs = entries[name]
        cls = _optimizer_class(class_name)
        if implementation not in optim_run.implementations(cls):
            raise NoRepro(f"torch.optim.{class_name} has no {implementation!r} implementation here")
        cases.append({"optimizer": name, "class_name": class_name, "implementation": implementation,
                      "kwargs": dict(kwargs), "flags": optim_run.implementation_flags(cls, implementation)})
    init = optim_run.SCALER_INIT.get(dtype_name, optim_run.DEFAULT_SCALER_INIT)
    replacements = {
        "@@DTYPE_NAME@@": repr(dtype_name),
        "@@SCHEDULE@@": repr(tuple(optim_run.SCALER_SCHEDULE)),
        "@@GROWTH@@": repr(optim_run.SCALER_GROWTH_INTERVAL),
        "@@INIT@@": repr(init),
        "@@SEED@@": repr(_seed(case, "scaler")),
        "@@CASES@@": repr(cases),
    }
    body = _SCALER_BODY
    for marker, value in replacements.items():
        body = body.replace(marker, value)
    helpers = copied.helpers(_HEADER, _copier().source(_SCALER_ROOTS), body)
    first = cases[0]
    return Recipe(
        summary=(
            f"torch.amp.GradScaler (growth interval {optim_run.SCALER_GROWTH_INTERVAL}, initial scale {init:g}) with "
            f"torch.optim.{first['class_name']}, {first['implementation']} implementation, {dtype_name} parameters and "
            f"gradients, over the probe's schedule ({', '.join(optim_run.SCALER_SCHEDULE)}), against the same optimizer "
            "stepping the unscaled gradients without a scaler."
        ),
        reference="the same optimizer on the device stepping the unscaled finite gradients, without a scaler",
        tolerance=(
            f"finite steps within {optim_run.SCALER_FACTOR:g}*u*sum|R_s| + max(u, E)*sum M_s + t*tiny of the unscaled "
            "step; a step with Inf/NaN gradients leaves parameters and state bit for bit; the scale halves after it and "
            "doubles after growth_interval clean steps"
        ),
        what=f"GradScaler with {first['class_name']} ({first['implementation']}, {dtype_name}) breaks its rules",
        helpers=helpers,
        body=body,
    )


_P = "gpuprobe.worker.probes.optim.run:"
RECIPES = {_P + "run_optimizer": _optimizer, _P + "run_gradscaler": _gradscaler}
