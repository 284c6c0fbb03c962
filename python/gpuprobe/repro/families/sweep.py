"""sweep family: one case of the OpInfo-driven operator sweep (``sweep_run.run_op``).

A sweep case is (operator, sample index, input transform, direction) in one dtype. The
generator rebuilds the probe's samples exactly as the worker did (PyTorch's operator
database, ``sweep_cases.generate_samples`` with the probe's seed, the same
``requires_grad`` decision), takes the failing sample and writes its tensors into the script
as data: dtype, shape, strides and the exact values of the storage they view (short ones as
a list, longer ones as base64 of their zlib-compressed bytes). The script therefore needs
neither gpuprobe nor PyTorch's private test database to rebuild the input. The operator is
written as the public callable the database entry calls (``torch.add``,
``torch.nn.functional.conv2d``, ``torch.ops.aten.slice.Tensor``); an entry whose operator is
a lambda of the database (``contiguous``, ``to``, the random ops, ...) is looked up in the
database by the script, which ``repro.json``'s ``needs`` then says.

The script applies the probe's transform (``sweep_cases._transform_fn``, copied), computes
the device result and the float64 CPU reference of the same inputs (for the backward
direction the gradients of ``Σ⟨w, out⟩`` with the probe's projection weights), and judges
them with the sweep's own oracle (``sweep_oracle.compare_leaf`` and its helpers, copied),
with the probe's tolerances, the CPU in the sample's dtype as the yardstick, and for layout
transforms the contiguous second reference. Which samples, their seed, the case's oracle,
bounds and comparison rules are not decided here: the generator calls the probe's own
decisions (``sweep_run.samples_seed``, ``choose_samples``, ``entry_bounds``,
``case_judgement``, ``LAYOUT_TRANSFORMS``) and writes their answers into the script.
"""

from __future__ import annotations

import base64
import functools
import math
import re
import zlib
from typing import Any

from gpuprobe.repro.families.base import Case, NoRepro, _constants, _sources
from gpuprobe.repro.script import Recipe

#: Tensors of at most this many elements are written as a list of values.
LITERAL_LIMIT = 32
#: Largest sample written into a script (bytes of all its tensors' storage).
MAX_SAMPLE_BYTES = 4 << 20
#: The worker's log line naming the case it runs (``sweep_run.run_op``).
_LOG_LINE = re.compile(r"gpuprobe sweep: (\S+) (\S+) (\S+) (forward|backward) sample (\d+)")


@functools.cache
def oracle_helpers() -> str:
    """The sweep's oracle, copied from gpuprobe (``sweep_oracle``) with the transform and the
    projection weights of ``sweep_cases``."""
    from gpuprobe.worker.probes.sweep import cases as sweep_cases
    from gpuprobe.worker.probes.sweep import oracle as sweep_oracle

    return "\n\n\n".join(
        [
            "# Copied from gpuprobe (gpuprobe/worker/probes/sweep/oracle.py and sweep/cases.py): the\n"
            "# sweep's input transform, projection weights and oracle, unchanged.\n"
            "import math\nimport random\nfrom dataclasses import dataclass\nfrom typing import Any, Callable",
            _constants(sweep_oracle, "WRONG_VALUE", "NONFINITE_INVENTED", "NAN_LOST", "STRUCTURE"),
            _constants(sweep_cases, "FLOAT_VALUE_CLASSES"),
            _sources(
                sweep_cases.injected_value,
                sweep_cases._transform_fn,
                sweep_cases.dense_on_host,
                sweep_cases.projection_weights,
                sweep_oracle.LeafFailure,
                sweep_oracle._fmt,
                sweep_oracle._unravel,
                sweep_oracle._first,
                sweep_oracle.masked_failure,
                sweep_oracle.as_comparable,
                sweep_oracle.compare_leaf,
                sweep_oracle._complex_nonfinite_as_one,
                sweep_oracle._undefined_integers,
                sweep_oracle._plain_close,
                sweep_oracle._compare_plain,
                sweep_oracle._normalized_errors,
                sweep_oracle._compare_float,
            ),
        ]
    )


def _failing_case(case: Case, key: str, dtype_name: str) -> tuple[int, str, bool, str]:
    """(sample, transform, backward, output name) of the case to rebuild."""
    if case.crash_or_hang:
        # The worker logs each case before it runs it: the last line names the one that died.
        for line in reversed(case.stderr_tail):
            found = _LOG_LINE.search(line)
            if found and found.group(1) == key and found.group(2) in (dtype_name, case.params["dtype"]):
                return int(found.group(5)), found.group(3), found.group(4) == "backward", "the whole case"
        raise NoRepro("the worker's last lines do not name the sweep case that crashed or hung (no 'gpuprobe sweep:' line)")
    failures = case.measurement.get("failures")
    if not isinstance(failures, list) or not failures or not isinstance(failures[0], dict):
        errors = case.measurement.get("errors")
        if isinstance(errors, list) and errors:
            raise NoRepro("the sweep probe failed by device errors only; the error text in the report is the repro")
        raise NoRepro("the observation lists no failing sweep case ('failures')")
    first = failures[0]
    sample, transform, direction = first.get("sample"), first.get("variant"), first.get("direction")
    if not isinstance(sample, int) or isinstance(sample, bool) or not isinstance(transform, str):
        raise NoRepro("the failing sweep case lacks its sample index or variant")
    if direction not in ("forward", "backward"):
        raise NoRepro(f"the failing sweep case has direction {direction!r}")
    return sample, transform, direction == "backward", str(first.get("output") or "out[0]")


def _resolve_op(torch: Any, info: Any) -> str | None:
    """A public expression that evaluates to the entry's operator, or None."""
    import importlib

    op = info.op
    name = str(info.name)
    candidates = [f"torch.{name}", f"torch.Tensor.{name}", f"torch.ops.aten.{name}", f"torch.ops.aten.{name}.default"]
    module, qualname = getattr(op, "__module__", None), getattr(op, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname and module.startswith("torch"):
        candidates.append(f"{module}.{qualname}")
    overload = getattr(op, "_overloadname", None)
    packet = getattr(getattr(op, "overloadpacket", None), "__name__", None)
    if isinstance(overload, str) and isinstance(packet, str):
        candidates.append(f"torch.ops.aten.{packet}.{overload}")
    for expression in candidates:
        parts = expression.split(".")
        obj: Any = None
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except Exception:  # noqa: BLE001 - not a module at this depth
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except Exception:  # noqa: BLE001
                obj = None
            break
        if obj is not None and obj is op:
            return expression
    return None


class _Writer:
    """Writes a sample's call as Python source, its tensors as ``T[i]`` records."""

    def __init__(self, torch: Any, sample_dtype: Any, targets: set[int]) -> None:
        self.torch = torch
        self.sample_dtype = sample_dtype
        self.targets = targets
        self.records: list[dict[str, Any]] = []
        self.nbytes = 0

    def tensor(self, t: Any) -> str:
        torch = self.torch
        if t.layout != torch.strided:
            raise NoRepro(f"the sample holds a {t.layout} tensor; the script writes strided tensors only")
        data = t.detach()
        if any(s < 0 for s in data.stride()):
            raise NoRepro("the sample holds a tensor with negative strides")
        span = 0 if data.numel() == 0 else 1 + sum((n - 1) * s for n, s in zip(data.shape, data.stride()))
        storage = data.as_strided((span,), (1,), data.storage_offset()).clone()
        record: dict[str, Any] = {
            "dtype": str(data.dtype).replace("torch.", ""),
            "shape": list(data.shape),
            "stride": list(data.stride()),
            "grad": bool(t.requires_grad),
            "target": id(t) in self.targets,
        }
        self.nbytes += span * data.element_size()
        if self.nbytes > MAX_SAMPLE_BYTES:
            raise NoRepro(f"the sample's tensors exceed {MAX_SAMPLE_BYTES >> 20} MiB; too large to write into a script")
        if span <= LITERAL_LIMIT and not data.is_complex():
            record["values"] = [_number(v) for v in storage.tolist()]
        else:
            raw = storage.contiguous()
            if raw.is_complex():
                raw = torch.view_as_real(raw.resolve_conj()).contiguous()
            view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[raw.element_size()]
            payload = raw.view(view).numpy().tobytes() if raw.dtype != torch.bool else raw.to(torch.uint8).numpy().tobytes()
            record["data"] = base64.b64encode(zlib.compress(payload, 9)).decode("ascii")
        self.records.append(record)
        return f"T[{len(self.records) - 1}]"

    def value(self, value: Any) -> str:
        torch = self.torch
        if isinstance(value, torch.Tensor):
            return self.tensor(value)
        if isinstance(value, torch.dtype):
            name = f"torch.{str(value).replace('torch.', '')}"
            if self.sample_dtype is not None and value == self.sample_dtype and value.is_floating_point:
                return f"(torch.float64 if wide else {name})"
            return name
        if isinstance(value, torch.device):
            return "torch.device(device)"
        if isinstance(value, (torch.memory_format, torch.layout)):
            return str(value)
        if isinstance(value, torch.Size):
            return f"torch.Size({list(value)!r})"
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if isinstance(value, float):
            return _float(value)
        if isinstance(value, complex):
            return f"complex({_float(value.real)}, {_float(value.imag)})"
        if value is Ellipsis:
            return "..."
        if isinstance(value, slice):
            return f"slice({self.value(value.start)}, {self.value(value.stop)}, {self.value(value.step)})"
        if type(value) is list:
            return "[" + ", ".join(self.value(v) for v in value) + "]"
        if type(value) is tuple:
            inner = ", ".join(self.value(v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if type(value) is dict and all(isinstance(k, (str, int)) for k in value):
            return "{" + ", ".join(f"{k!r}: {self.value(v)}" for k, v in value.items()) + "}"
        raise NoRepro(f"the sample holds a {type(value).__name__} that the script cannot write out")

    def kwarg(self, key: str, value: Any) -> str:
        """A keyword argument as ``materialize`` moves it (``device`` names the device under
        test)."""
        if key == "device" and isinstance(value, (str, self.torch.device)):
            return "torch.device(device)" if isinstance(value, self.torch.device) else "str(device)"
        return self.value(value)


def _float(value: float) -> str:
    if math.isnan(value):
        return "float('nan')"
    if math.isinf(value):
        return "float('inf')" if value > 0 else "float('-inf')"
    return repr(value)


def _number(value: Any) -> Any:
    """A list element as it is written: floats exactly, NaN and infinities by name."""
    if isinstance(value, float) and not math.isfinite(value):
        return _Named(_float(value))
    return value


class _Named:
    """A value whose repr is a Python expression (``float('nan')``)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _records_literal(records: list[dict[str, Any]]) -> str:
    """The records, one per line, their base64 data wrapped at 96 characters."""
    lines = ["["]
    for record in records:
        head = {k: v for k, v in record.items() if k != "data"}
        text = repr(head)[:-1]
        if "data" not in record:
            lines.append(f"    {text}}},")
            continue
        data = record["data"]
        chunks = [data[i : i + 96] for i in range(0, len(data), 96)] or [""]
        lines.append(f"    {text}, 'data': (")
        lines.extend(f"        {chunk!r}" for chunk in chunks)
        lines.append("    )},")
    lines.append("]")
    return "\n".join(lines)


def _is_identity(fn: Any) -> bool:
    sentinel = object()
    try:
        return fn(sentinel) is sentinel
    except Exception:  # noqa: BLE001 - not the identity
        return False


def _run_op(case: Case) -> Recipe:
    import torch

    from gpuprobe.worker.probes.sweep import cases as sweep_cases
    from gpuprobe.worker.probes.sweep import db as sweep_db
    from gpuprobe.worker.probes.sweep import run as sweep_run

    key, short = case.params["key"], case.params["dtype"]
    dtype_name = sweep_db.DTYPES[short]
    sample_index, transform, backward, output = _failing_case(case, key, dtype_name)
    if transform == "error_input":
        raise NoRepro(
            "the probe stopped on one of the database's error inputs (inputs every device must reject), which the "
            "script does not write out: the worker's log in the report names the entry"
        )
    if transform not in sweep_cases.TRANSFORMS:
        raise NoRepro(f"the failing sweep case names transform {transform!r}, which this gpuprobe does not know")
    if transform in sweep_cases.CALL_VARIANTS:
        raise NoRepro(
            f"the failing case is the {transform!r} call variant: the script writes out a functional call and its "
            "float64 reference, not an out=, in-place or method call (run the probe again with --only to see it)"
        )
    if transform in getattr(sweep_cases, "TARGETED_TRANSFORMS", ()):
        raise NoRepro(
            f"the failing case is the {transform!r} transform of one tensor argument, which the report names in the "
            "failure's detail but the script does not rebuild (run the probe again with --only to see it)"
        )
    if sweep_db.is_exact_dtype(dtype_name):
        raise NoRepro(
            f"{dtype_name} is judged exactly against the CPU in the same dtype, which the script's float64 "
            "reference does not do (run the probe again with --only to see it)"
        )
    try:
        database = sweep_db.load(torch)
    except sweep_db.DatabaseUnavailable as exc:
        raise NoRepro(f"the samples are rebuilt from PyTorch's operator database, which is unavailable here: {exc}") from None
    info = database.entry(key)
    if info is None:
        raise NoRepro(f"torch {database.torch_version}'s operator database has no entry {key!r}")
    dev_type = sweep_db.device_type(case.device)
    seed = case.metrics.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        seed = sweep_run.samples_seed(case.derive)
    # The probe's own decision (sweep_run.choose_samples): which samples, with grad, and
    # whether the entry's reference inputs were among them (the observation says).
    wider = isinstance(case.metrics.get("reference_samples"), int) and case.metrics["reference_samples"] > 0
    try:
        _, chosen = sweep_run.choose_samples(torch, info, dtype_name, dev_type, seed, reference=wider)
    except sweep_cases.CaseError:
        raise NoRepro("the database's sample generator fails here") from None
    samples = chosen.samples
    if sample_index >= len(samples):
        raise NoRepro(f"the database generated {len(samples)} samples here, not the probe's sample {sample_index}")
    sample = samples[sample_index]
    if backward and not _is_identity(getattr(sample, "output_process_fn_grad", lambda x: x)):
        raise NoRepro("the sample post-processes its output before the gradient (output_process_fn_grad), "
                      "which the script cannot write out")
    # The oracle, bounds and comparison rules of this case, as the probe judged it.
    judgement = sweep_run.case_judgement(
        torch, info, dtype_name, sample, sample_index, transform, backward, *sweep_run.entry_bounds(torch, info, dtype_name), chosen.plain
    )
    oracle, atol, rtol, rules = judgement.oracle, judgement.atol, judgement.rtol, judgement.rules
    # The call, its tensors as data.
    first = sweep_cases.primary(torch, sample)
    sample_dtype = first.dtype if first is not None else None
    writer = _Writer(torch, sample_dtype, sweep_cases.transform_targets(torch, sample, transform))
    call_input = writer.value(sample.input)
    call_args = writer.value(list(sample.args))
    call_kwargs = "{" + ", ".join(f"{k!r}: {writer.kwarg(k, v)}" for k, v in sample.kwargs.items()) + "}"
    variant = str(getattr(info, "variant_test_name", "") or "")
    expression = _resolve_op(torch, info)
    needs = ["torch"]
    if expression is None:
        needs.append("PyTorch's internal operator database (torch.testing._internal.common_methods_invocations)")
        op_source = f'''\
def resolve_op():
    """The database's operator: a function of PyTorch's test suite, not public API."""
    import sys
    import types

    try:
        import expecttest  # noqa: F401 - the database imports it
    except ImportError:
        import unittest

        sys.modules["expecttest"] = types.SimpleNamespace(TestCase=unittest.TestCase)
    from torch.testing._internal.common_methods_invocations import op_db

    for info in op_db:
        if info.name == {info.name!r} and (info.variant_test_name or "") == {variant!r}:
            return info.op
    raise RuntimeError("torch's operator database has no entry {info.name!r}")'''
    else:
        op_source = f'''\
def resolve_op():
    return {expression}'''
    sample_dtype_name = str(sample_dtype).replace("torch.", "") if sample_dtype is not None else None
    direction = "backward" if backward else "forward"
    label = f"{info.name}{'.' + variant if variant else ''} {dtype_name}, sample {sample_index}, {transform}, {direction}"
    body = f'''\
#: The database entry (its name is how gpuprobe's sweep and PyTorch's OpInfo name it).
OP_NAME = {info.name!r}
DTYPE_NAME = {dtype_name!r}
#: The input transform (sweep_cases.TRANSFORMS) and the direction of the failing case.
TRANSFORM = {transform!r}
BACKWARD = {backward!r}
#: The probe's seed: the sample's generation, the injected element, the projection weights.
SEED = {seed!r}
#: The oracle of this case and its bounds: |found - ref| <= ATOL + RTOL * |ref| per element.
ORACLE = {oracle!r}
ATOL = {atol!r}
RTOL = {rtol!r}
COMPARE_INTEGERS = {rules.compare_integers!r}
NONFINITE_PATTERN = {not rules.mixing!r}
INF_INPUT = {rules.inf_input!r}
NONFINITE_INPUT = {rules.nonfinite_input!r}
LAYOUT_TRANSFORM = {transform in sweep_run.LAYOUT_TRANSFORMS!r}
#: The dtype of the sample's first floating tensor (the projection weights are rounded to it).
SAMPLE_DTYPE = {sample_dtype_name!r}
#: Sample {sample_index} of the database's samples for this seed: each tensor's dtype, shape,
#: strides, whether its gradient is taken (grad), whether the transform applies (target),
#: and the storage it views, exactly ("values", or base64 of the zlib-compressed bytes).
TENSORS = {_records_literal(writer.records)}
CASES = [{{"label": {label!r}}}]


{op_source}


def sample_call(T, wide, device):
    """The operator's input, positional and keyword arguments (T: the sample's tensors)."""
    return {call_input}, {call_args}, {call_kwargs}


def host_tensor(record):
    dtype = getattr(torch, record["dtype"])
    if "values" in record:
        storage = torch.tensor(record["values"], dtype=dtype)
    elif not record["data"] or not zlib.decompress(base64.b64decode(record["data"])):
        storage = torch.empty(0, dtype=dtype)
    else:
        raw = zlib.decompress(base64.b64decode(record["data"]))
        width = {{1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}}
        if dtype.is_complex:
            real = torch.empty(0, dtype=dtype).real.dtype
            size = torch.empty(0, dtype=real).element_size()
            storage = torch.view_as_complex(torch.frombuffer(bytearray(raw), dtype=width[size]).view(real).reshape(-1, 2).clone())
        elif dtype == torch.bool:
            storage = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(torch.bool)
        else:
            size = torch.empty(0, dtype=dtype).element_size()
            storage = torch.frombuffer(bytearray(raw), dtype=width[size]).view(dtype).clone()
    return storage.as_strided(record["shape"], record["stride"])


def materialize(device, upcast, contiguous=False):
    """The sample's tensors on ``device`` as the sweep moves them: float64 for the reference
    (``upcast``), the gradient's leaves, then the transform on its targets."""
    transform = _transform_fn(torch, TRANSFORM, SEED, getattr(torch, SAMPLE_DTYPE) if SAMPLE_DTYPE else None)
    tensors, leaves = [], []
    for record in TENSORS:
        data = host_tensor(record)
        if upcast and data.is_floating_point():
            data = data.double()
        elif upcast and data.is_complex():
            data = data.to(torch.complex128)
        data = data.to(device).clone()
        if BACKWARD and record["grad"]:
            data.requires_grad_(True)
            leaves.append(data)
        if record["target"]:
            data = transform(data)
            if contiguous:
                data = data.contiguous()
        tensors.append(data)
    return tensors, leaves


def compute(op, tensors, leaves, wide, device):
    """The case: the operator's outputs, or the gradients of sum(<w, out>) for its leaves."""
    from torch.utils._pytree import tree_leaves

    call_input, args, kwargs = sample_call(tensors, wide, device)
    if not BACKWARD:
        with torch.no_grad():
            return list(tree_leaves(op(call_input, *args, **kwargs)))
    outs = [t for t in tree_leaves(op(call_input, *args, **kwargs))
            if isinstance(t, torch.Tensor) and t.requires_grad and (t.is_floating_point() or t.is_complex())]
    if not outs or not leaves:
        raise RuntimeError("no differentiable output or input for this sample")
    loss = None
    for out, weight in zip(outs, projection_weights(torch, outs, SEED)):
        real = torch.view_as_real(out) if out.is_complex() else out
        if SAMPLE_DTYPE is not None and getattr(torch, SAMPLE_DTYPE).is_floating_point:
            weight = weight.to(getattr(torch, SAMPLE_DTYPE))
        term = (real * weight.to(device=real.device, dtype=real.dtype)).sum()
        loss = term if loss is None else loss + term
    return list(torch.autograd.grad(loss, leaves, allow_unused=True))


def reference(wide=True, contiguous=False):
    """The case on the CPU: float64 (the reference), or in the sample's own dtype (the
    oracle's yardstick), from the same values."""
    tensors, leaves = materialize("cpu", wide, contiguous)
    return [dense_on_host(torch, v) for v in compute(resolve_op(), tensors, leaves, wide, "cpu")]


def case_label(case):
    return case["label"]


def build(case, device):
    # float32 is judged as float32, as the sweep runs it: no TF32 (cuDNN enables it by default).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    tensors, leaves = materialize(device, False)
    for i, t in enumerate(tensors):
        print(f"  T[{{i}}]: {{t.dtype}} shape {{tuple(t.shape)}} stride {{t.stride()}}")
    return {{"op": resolve_op(), "tensors": tensors, "leaves": leaves, "expected": reference()}}


def run_case(case, inputs, device):
    """The operator under test on the device."""
    return compute(inputs["op"], inputs["tensors"], inputs["leaves"], False, device)


def judge(found_values, expected, yardstick):
    """The first wrong output as (index, failure), or None (sweep_run._judge_outputs)."""
    if len(expected) != len(found_values):
        return 0, LeafFailure(STRUCTURE, f"{{len(found_values)}} outputs where the reference has {{len(expected)}}")
    for index, (found, wanted) in enumerate(zip(found_values, expected)):
        if found is None and wanted is None:
            continue
        if BACKWARD and (found is None or wanted is None):
            other = found if found is not None else wanted
            if isinstance(other, torch.Tensor) and not bool((other.double() == 0).all()):
                return index, LeafFailure(STRUCTURE, "a gradient is missing on one side and non-zero on the other")
            continue
        failure = compare_leaf(
            torch, found, wanted, dtype_name=DTYPE_NAME, atol=ATOL, rtol=RTOL, oracle=ORACLE,
            compare_integers=COMPARE_INTEGERS,
            same_dtype_cpu=(lambda i=index: yardstick()[i]) if yardstick is not None else None,
            nonfinite_pattern=NONFINITE_PATTERN, inf_input=INF_INPUT, nonfinite_input=NONFINITE_INPUT,
        )
        if failure is not None:
            return index, failure
    return None


def check(case, inputs, result):
    """Every output (or gradient) against the float64 reference, by the sweep's oracle."""
    found_values = [dense_on_host(torch, v) for v in result]
    cache = []

    def yardstick():
        if not cache:
            cache.append(reference(wide=False))
        return cache[0]

    verdict = judge(found_values, inputs["expected"], yardstick)
    name = "grad" if BACKWARD else "out"
    if verdict is None:
        print(f"  all {{len(found_values)}} {{'gradients' if BACKWARD else 'outputs'}} within the bounds (atol {{ATOL:g}}, rtol {{RTOL:g}})")
        return True
    index, failure = verdict
    if LAYOUT_TRANSFORM and judge(found_values, reference(contiguous=True), None) is None:
        print("  the device agrees with the reference made from contiguous copies: the CPU's strided kernel differs, not the device")
        return True
    print(f"  {{name}}[{{index}}]: {{failure.cls}}: {{failure.detail}}")
    if failure.index is not None:
        print(f"  first at index {{failure.index}}: expected {{failure.expected}}, found {{failure.found}}"
              + (f" (allowed error {{failure.allowed:.3g}})" if failure.allowed is not None else ""))
    if failure.elements:
        print(f"  {{failure.bad_elements}} of {{failure.elements}} elements wrong"
              + ("; every one of them is zero" if failure.zeros else "") + ("; the whole output is zero" if failure.all_zero else ""))
    return False
'''
    helpers = "import base64\nimport zlib\n\n" + oracle_helpers()
    what_op = f"{info.name}{'.' + variant if variant else ''}"
    return Recipe(
        summary=(
            f"`{expression or info.name}` in {dtype_name}, {direction}, on sample {sample_index} of PyTorch's operator "
            f"database (seed {seed}) with the `{transform}` input transform; the failing output was {output}. The sample's "
            "tensors are written into the script exactly; the result is judged against float64 on the CPU by the sweep's "
            "own oracle."
        ),
        reference="float64 on the CPU from the same inputs (the gradients of the same projection for backward)",
        tolerance=f"per element |found - ref| <= {atol:g} + {rtol:g} * |ref|, or norm-wise, or within twice the CPU's "
        f"error in {dtype_name} (the sweep's {oracle} oracle)",
        what=f"{what_op} {dtype_name} ({transform}, {direction}) differs from float64",
        helpers=helpers,
        body=body,
        needs=needs,
    )


RECIPES = {"gpuprobe.worker.probes.sweep.run:run_op": _run_op}
