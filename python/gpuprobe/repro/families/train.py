"""train family: one training probe (``train_run.run``), its model trained for the probe's
steps in its mode on the device and in float64 on the CPU, judged by the probe's judge.

A train probe is one case: a model (``transformer`` or ``convnet``) in a mode (``fp32``,
``bf16`` / ``fp16`` autocast, the GradScaler under ``fp16``, each eager or under
``torch.compile``). The script holds the probe's own code, copied from ``train_run``: the
model's definition, its seeded batches and optimizer, the training loop (``train``: zero_grad,
forward with the loss, backward, unscale, ``clip_grad_norm_``, the optimizer's step), the
float64 reference, the emulation of autocast's rounding that sets half-precision bounds, the
GradScaler's initial scale, and the judge (``judge_run``, ``compare``, ``tolerance``). The
weights and batches come from the probe's seeds (``derive_seed(seed, "train.<model>",
"weights" / "batches")``: every mode of a model starts alike). It prints every failing case
(quantity, step, tensor, its norm-wise error and bound) and, per quantity, the worst tensor
against its bound.

The model is defined once torch is imported (the script imports torch after applying the
run's settings), by ``define_models``. A crash or hang runs the same steps in a child
process.
"""

from __future__ import annotations

import functools
import textwrap

from gpuprobe.repro.families import copied
from gpuprobe.repro.families.base import Case, NoRepro
from gpuprobe.repro.families.copied import Copier
from gpuprobe.repro.script import Recipe

_HEADER = """\
# Copied from gpuprobe (gpuprobe/worker/probes/train/run.py, the sweep's oracle,
# sweep/oracle.py, and the case tally, gpuprobe/worker/tally.py): the model, its batches and
# optimizer, the training loop, the float64 reference, autocast's emulated rounding and the
# judge, unchanged."""

#: Names the script defines itself: the model classes (inside ``define_models``), the
#: read-back and the fault-simulation point.
_MODEL_CLASSES = ("TinyTransformer", "TinyConvNet")
_PROVIDED = {"torch", "nn", "F", "_host64", "_Faults", "ops", *_MODEL_CLASSES}
_ROOTS = (
    "train",
    "judge_run",
    "TrainTally",
    "ModelKind",
    "Mode",
    "initial_model",
    "grad_scaler_scale",
    "_rounding_emulator",
    "STEPS",
    "MAX_NORM",
    "BOUND_CAP",
)


@functools.cache
def _copier() -> Copier:
    from gpuprobe.worker import tally
    from gpuprobe.worker.probes.sweep import cases as sweep_cases
    from gpuprobe.worker.probes.sweep import oracle as sweep_oracle
    from gpuprobe.worker.probes.train import run as train_run

    # The tally first: the probe's tally subclasses it, and a base class must be defined first.
    return Copier(tally, train_run, sweep_oracle, sweep_cases, strip=("sweep_oracle",), provided=_PROVIDED)


_BODY = '''\
#: The probe family (gpuprobe's fault simulation shim finds the script's device runs by it).
FAMILY = "train"
MODEL = @@MODEL@@
#: The mode: precision (fp32, bf16 or fp16 autocast) and whether the model is compiled.
MODE = @@MODE@@
PRECISION = @@PRECISION@@
COMPILED = @@COMPILED@@
#: The dtype autocast computes in (float32: none).
DTYPE_NAME = @@DTYPE_NAME@@
#: Nested modes: the dtype of the inner autocast region (the vocabulary head); None: none.
INNER = @@INNER@@
#: The mode's name without ``.compile`` (what the simulation calls the eager run).
EAGER_VARIANT = @@EAGER_VARIANT@@
#: The probe's seeds of the initial weights and of the batches (the same for every mode).
WEIGHTS_SEED = @@WEIGHTS_SEED@@
BATCHES_SEED = @@BATCHES_SEED@@
CASES = [{"model": MODEL, "mode": MODE}]
#: Set by define_models(), once torch is imported.
nn = F = None


def define_models():
    """The probe's model (copied from gpuprobe/worker/probes/train/run.py), defined once
    torch is imported (the script imports it after applying the run's settings)."""
    global nn, F, @@CLASS@@
    nn, F = torch.nn, torch.nn.functional

@@MODEL_SOURCE@@


def model_kind():
    return ModelKind(@@KIND@@)


def _host64(t):
    """A float64 copy on the host."""
    return t.detach().to("cpu").to(torch.float64, copy=True)


class _Faults:
    """Where the probe's fault simulation strikes a device run: ``apply("grad", ...)`` after
    backward, ``apply("update", ...)`` after the optimizer's step. Nothing happens here on a
    real run (gpuprobe's simulation shim fills it in for a SIMULATED result)."""

    def __init__(self, model, dtype_name, variant):
        self.model, self.dtype_name, self.variant = model, dtype_name, variant

    def apply(self, direction, tensors):
        return None


class Tally(TrainTally):
    """The probe's tally, also keeping every judged case's error against its bound."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def judge(self, variant, direction, step, output, found, expected, bound, *, absolute=0.0, **kwargs):
        if bool(torch.isfinite(expected).all()):
            err = float((found - expected).norm())
            allowed = bound * float(expected.norm()) + absolute
            ratio = err / allowed if allowed > 0 and math.isfinite(err) else (0.0 if err == 0 else math.inf)
            self.seen.append((ratio, variant, direction, step, output, err, allowed))
        return super().judge(variant, direction, step, output, found, expected, bound, absolute=absolute, **kwargs)


def case_label(case):
    return f"train.{MODEL}.{MODE}: {STEPS} training steps of the {MODEL} on the device against float64 on the CPU"


def autocast_problem(device, dtype, scaler):
    """Why autocast in ``dtype`` (with ``scaler``, float16's GradScaler too) cannot run on
    ``device``, or None."""
    device_type = torch.device(device).type
    if device_type == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        return f"{torch.cuda.get_device_name(device)} does not support bfloat16"
    try:
        with torch.autocast(device_type=device_type, dtype=dtype):
            y = torch.ones(2, 2, device=device) @ torch.ones(2, 2, device=device)
    except (RuntimeError, ValueError, AssertionError) as exc:
        return f"torch.autocast({device_type}, {dtype}) is not available: {exc}"
    if y.dtype != dtype:
        return f"torch.autocast({device_type}, {dtype}) leaves matrix products in {y.dtype}"
    if scaler and dtype == torch.float16:
        try:
            torch.amp.GradScaler(device_type)
        except (RuntimeError, ValueError, AssertionError, TypeError) as exc:
            return f"torch.amp.GradScaler({device_type!r}) is not available: {exc}"
    return None


def mode_problem(device, dtype, inner=None):
    """Why the mode cannot run on ``device`` (autocast in its dtype and in the inner region's,
    the GradScaler, the compiler), or None; as the probe, which skips then."""
    device_type = torch.device(device).type
    for wanted, scaler in ((dtype, True), (inner if inner != torch.float32 else None, False)):
        problem = autocast_problem(device, wanted, scaler) if wanted is not None else None
        if problem is not None:
            return problem
    if COMPILED:
        try:
            x = torch.arange(7, dtype=torch.float32, device=device)
            y = torch.compile(lambda t: torch.sin(t) * 2.0 + 1.0)(x)
            if not bool(torch.allclose(y.cpu(), torch.sin(x.cpu()) * 2.0 + 1.0)):
                return "torch.compile computed a one-line function wrongly"
        except Exception as exc:  # noqa: BLE001 - whatever stops the toolchain
            return f"torch.compile cannot build a one-line function on {device_type}: {type(exc).__name__}: {exc}"
        torch._dynamo.reset()
    return None


def build(case, device):
    # float32 is judged as float32 (TF32 off); one intra-op thread, as the probe runs: the
    # tensors are tiny.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(1)
    define_models()
    autocast = getattr(torch, DTYPE_NAME) if PRECISION != "fp32" else None
    inner = getattr(torch, INNER) if INNER is not None else None
    problem = mode_problem(device, autocast, inner)
    if problem is not None:
        print(f"CANNOT RUN: {problem}")
        sys.exit(2)
    kind = model_kind()
    initial = initial_model(kind, WEIGHTS_SEED)
    batches = kind.batches(torch.Generator().manual_seed(BATCHES_SEED))
    reference_batches = [(x.to(torch.float64) if x.is_floating_point() else x, y) for x, y in batches]
    device_batches = [(x.to(device, copy=True), y.to(device, copy=True)) for x, y in batches]
    reference = train(copy.deepcopy(initial).to(torch.float64), kind, reference_batches, Mode(torch.device("cpu")),
                      track_peak=PRECISION == "fp16")
    if reference.error is not None:
        print(f"CANNOT RUN: the float64 reference failed at step {reference.error_step}: {reference.error}")
        sys.exit(2)
    scale = grad_scaler_scale(reference.peak_backward) if PRECISION == "fp16" else None
    noise = None
    if autocast is not None:
        # The same float64 steps with autocast's rounding emulated: the half-precision bounds.
        noise = train(copy.deepcopy(initial).to(torch.float64), kind, reference_batches,
                      Mode(torch.device("cpu"), scale=scale, emulate=autocast@@INNER_ARG@@))
        if noise.error is not None or _rounding_emulator(autocast) is None:
            print(f"  autocast's rounding could not be emulated: every case is judged with the bound {BOUND_CAP}")
            noise = None
    print(f"  {sum(p.numel() for p in initial.parameters())} parameters, {STEPS} steps, clip_grad_norm_ {MAX_NORM}"
          + (f", GradScaler initial scale {scale:g}" if scale is not None else ""))
    return {"kind": kind, "initial": initial, "batches": device_batches, "reference": reference, "noise": noise,
            "autocast": autocast, "scale": scale, "inner": inner, "targets": batches[0][1]}


def run_case(case, inputs, device):
    """The steps on the device in the probe's mode: eager, and for a compiled mode the model
    and its loss under torch.compile too."""
    dev, autocast, scale = torch.device(device), inputs["autocast"], inputs["scale"]
    eager = train(copy.deepcopy(inputs["initial"]).to(dev), inputs["kind"], inputs["batches"],
                  Mode(dev, autocast=autocast, scale=scale@@INNER_INPUT@@), faults=_Faults(MODEL, DTYPE_NAME, EAGER_VARIANT))
    subject = eager
    if COMPILED:
        subject = train(copy.deepcopy(inputs["initial"]).to(dev), inputs["kind"], inputs["batches"],
                        Mode(dev, autocast=autocast, scale=scale, compiled=True@@INNER_INPUT@@),
                        faults=_Faults(MODEL, DTYPE_NAME, MODE))
    return {"eager": eager, "subject": subject}


def check(case, inputs, result):
    """The probe's judge: every quantity against float64 (and, compiled, against eager)."""
    tally = Tally()
    subject, eager, reference = result["subject"], result["eager"], inputs["reference"]
    judge_run(tally, "float64", subject, reference, reference, inputs["noise"], DTYPE_NAME, inputs["scale"])
@@REGION@@    ok = True
    if subject.error is not None:
        if subject.compile_error:
            print(f"  torch.compile failed on the model at step {subject.error_step}: {subject.error} (the probe does not judge it)")
        else:
            print(f"  the device run raised at step {subject.error_step}: {subject.error}")
            ok = False
    if COMPILED:
        if eager.error is None:
            judge_run(tally, "eager", subject, eager, reference, inputs["noise"], DTYPE_NAME, inputs["scale"],
                      per_step_updates=False)
        else:
            print(f"  eager {PRECISION} failed at step {eager.error_step} ({eager.error}): compiled not compared with it")
    worst = {}
    for item in tally.seen:
        key = (item[1], item[2])
        if key not in worst or item[0] > worst[key][0]:
            worst[key] = item
    for (variant, direction), (ratio, _, _, step, output, err, allowed) in sorted(worst.items()):
        print(f"  worst {direction} against {variant}: {output} at step {step}: norm-wise error {err:.3g}, bound {allowed:.3g} "
              f"({ratio:.3g} of it)")
    print(f"  {tally.cases} cases: {tally.passed} passed, "
          + (", ".join(f"{v} {k}" for k, v in sorted(tally.failed.items())) or "none failed")
          + ("; not judged: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.unjudged.items())) if tally.unjudged else ""))
    for failure in tally.failures:
        print(f"  {failure['direction']} against {failure['variant']}, step {failure['sample']}, {failure['output']}: "
              f"{failure['class']}: {failure['detail']}")
        if failure.get("index") is not None:
            print(f"    worst element {failure['index']}: expected {failure['expected']}, found {failure['found']}")
    return ok and not tally.failed
'''


def _run(case: Case) -> Recipe:
    from gpuprobe.worker.patterns import derive_seed
    from gpuprobe.worker.probes.train import run as train_run
    from gpuprobe.worker.probes.train import specs as train_specs

    model, mode = case.params["model"], case.params["mode"]
    if model not in train_run.MODELS:
        raise NoRepro(f"the probe's model {model!r} is not one this gpuprobe defines")
    parse_nested = getattr(train_run, "parse_nested", None)
    if parse_nested is not None:
        precision, inner_name, compiled = parse_nested(mode)
    else:
        (precision, compiled), inner_name = train_run.parse_mode(mode), None
    dtype_name = dict(train_specs.PRECISIONS)[precision] or "float32"
    if not case.crash_or_hang:
        failures = case.measurement.get("failures")
        if not isinstance(failures, list) or not failures:
            if case.measurement.get("errors"):
                raise NoRepro("the training probe failed by device errors only; the error text in the report is the repro")
            raise NoRepro("the observation lists no failing training case ('failures')")
    kind = train_run.MODELS[model]
    class_name = kind.build.__name__
    copier = _copier()
    if class_name not in copier.defs:
        raise NoRepro(f"the probe's model class {class_name} is not defined in train_run")
    model_source = copier.stripped(copier.defs[class_name].text)
    # A nested mode also checks its inner region's gradients (``judge_region``).
    region = ["judge_region"] if inner_name is not None else []
    roots = [*_ROOTS, *region, kind.batches.__name__, kind.optimizer.__name__]
    replacements = {
        "@@MODEL@@": repr(model),
        "@@MODE@@": repr(mode),
        "@@PRECISION@@": repr(precision),
        "@@COMPILED@@": repr(compiled),
        "@@DTYPE_NAME@@": repr(dtype_name),
        "@@WEIGHTS_SEED@@": repr(derive_seed(case.seed, f"train.{model}", "weights")),
        "@@BATCHES_SEED@@": repr(derive_seed(case.seed, f"train.{model}", "batches")),
        "@@CLASS@@": class_name,
        "@@MODEL_SOURCE@@": textwrap.indent(model_source, "    "),
        "@@KIND@@": f"{class_name}, {kind.batches.__name__}, {kind.optimizer.__name__}, {kind.optimizer_name!r}",
        "@@INNER@@": repr(inner_name),
        "@@EAGER_VARIANT@@": repr(mode.removesuffix(train_specs.COMPILE_SUFFIX)),
        "@@INNER_ARG@@": ", inner=inner" if inner_name is not None else "",
        "@@INNER_INPUT@@": ', inner=inputs["inner"]' if inner_name is not None else "",
        "@@REGION@@": '    judge_region(tally, subject, inputs["targets"], inputs["inner"])\n' if inner_name is not None else "",
    }
    body = _BODY
    for marker, value in replacements.items():
        body = body.replace(marker, value)
    helpers = copied.helpers(_HEADER, copier.source(roots, extra_text=model_source), body)
    first = ""
    failures = case.measurement.get("failures")
    if isinstance(failures, list) and failures and isinstance(failures[0], dict):
        f = failures[0]
        first = f"; gpuprobe saw {f.get('direction')} of {f.get('output')} at step {f.get('sample')} differ from {f.get('variant')} ({f.get('class')})"
    how = {"fp32": "in float32 (TF32 off)", "bf16": "under torch.autocast(bfloat16)",
           "fp16": "under torch.autocast(float16) with torch.amp.GradScaler"}[precision]
    return Recipe(
        summary=(
            f"{train_run.STEPS} training steps of gpuprobe's tiny {model} ({kind.optimizer_name}, clip_grad_norm_) {how}"
            f"{', the model and its loss under torch.compile' if compiled else ''} on the device, from the probe's seeded "
            f"weights and batches, against the same steps in float64 on the CPU{' and eager on the device' if compiled else ''}"
            f"{first}. The model, the loop and the judge are the probe's own, copied."
        ),
        reference="the same steps in float64 on the CPU, eager, no autocast" + (" (and eager on the device)" if compiled else ""),
        tolerance=(
            "norm-wise ||found - expected|| <= bound * ||expected|| (+ the float32 rounding of stored parameters), the "
            f"bound a multiple of the mode's unit roundoff ({dtype_name})"
            + (", at least 8x the error autocast's rounding makes (emulated in float64), cases past 0.5 not judged"
               if precision != "fp32" else "")
        ),
        what=f"train.{model}.{mode} differs from float64",
        helpers=helpers,
        body=body,
    )


RECIPES = {"gpuprobe.worker.probes.train.run:run": _run, "gpuprobe.worker.probes.train.run:run_nested": _run}
