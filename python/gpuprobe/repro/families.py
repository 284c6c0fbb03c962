"""Per-family recipes: how a probe's one failing case becomes plain torch code.

Each recipe receives the probe's catalogue definition (its implementation's parameters), the
plan seed and the observation, and returns a ``script.Recipe``. Seeds are computed here with
the worker's own ``ProbeContext.derive_seed`` rule and written into the script as numbers;
the input builders the probe used (``patterns.pattern``, ``dtype_run.build_inputs`` and
their helpers) are copied into the script with ``inspect.getsource``, so the script builds
bit for bit the same input without importing gpuprobe.

A recipe raises ``NoRepro`` for a case it cannot rebuild exactly (the message is the reason
printed as ``no repro: WHY``).
"""

from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable

from gpuprobe.repro.script import BIT_EXACT_HELPERS, Recipe
from gpuprobe.worker import patterns
from gpuprobe.worker.catalog import ProbeDef
from gpuprobe.worker.patterns import derive_seed


class NoRepro(Exception):
    """This result cannot be turned into a script; the message says why."""


@dataclass
class Case:
    """Everything a recipe reads."""

    probe: str
    definition: ProbeDef
    seed: int
    verdict: str
    measurement: dict[str, Any]
    metrics: dict[str, Any]
    device: str = "cuda:0"

    @property
    def device_type(self) -> str:
        return self.device.split(":", 1)[0]

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.definition.params)

    def derive(self, tag: str) -> int:
        return derive_seed(self.seed, self.probe, tag)

    @property
    def crash_or_hang(self) -> bool:
        return self.verdict in ("crash", "hang")

    def failing_trial(self) -> int | None:
        """The trial of the first mismatch the probe recorded, or None."""
        first = self.measurement.get("first_mismatch")
        if isinstance(first, dict) and isinstance(first.get("trial"), int) and first["trial"] >= 0:
            return int(first["trial"])
        return None


def _sources(*functions: Callable[..., Any]) -> str:
    return "\n\n".join(inspect.getsource(f).rstrip() for f in functions)


def _constants(module: Any, *names: str) -> str:
    return "\n".join(f"{name} = {getattr(module, name)!r}" for name in names)


def pattern_helpers(largest: int) -> str:
    """The source of ``patterns.pattern`` and what it calls, for buffers of up to ``largest``
    elements (the block fill of large buffers only when one is that large)."""
    return _pattern_helpers(largest > patterns.BLOCK)


@functools.cache
def _pattern_helpers(blocks: bool) -> str:
    parts = [
        "# Copied from gpuprobe's input patterns (gpuprobe/worker/patterns.py): a murmur3 hash of",
        "# the element index, so every value is finite, non-zero and not periodic.",
        "from typing import Any",
    ]
    functions: list[Callable[..., Any]] = [patterns._s32, patterns._lsr, patterns.hash32, patterns._bits_for]
    constants = ["CHUNK", "BLOCK", "_VIEW", "_SAFE_XOR"]
    if blocks:
        parts.insert(3, "import zlib")
        constants.append("_MASK64")
        functions += [patterns.derive_seed, patterns._block_key, patterns._fill_blocks]
    functions.append(patterns.pattern)
    parts.append(_constants(patterns, *constants))
    parts.append(_sources(*functions))
    return "\n".join(parts[:4]) + "\n" + "\n\n\n".join(parts[4:])


@functools.cache
def canary_helpers() -> str:
    """``canary_value`` / ``fill_canary``: a destination prefilled with a value the pattern
    never produces, so an element the copy never wrote is seen as such."""
    return _constants(patterns, "CANARY_BITS") + "\n\n\n" + _sources(patterns.canary_value, patterns.fill_canary)


# ---------------------------------------------------------------------------------------------
# copy


def _transfer(case: Case) -> Recipe:
    p = case.params
    direction, memory, method, nb, dtype = p["direction"], p["memory"], p["method"], p["non_blocking"], p["dtype"]
    shapes = [tuple(s) for s in p["shapes"]]
    if case.crash_or_hang:
        chosen = list(range(len(shapes)))
    else:
        trial = case.failing_trial()
        if trial is None or trial >= len(shapes):
            raise NoRepro("the observation does not say which copy failed (no first_mismatch.trial)")
        chosen = [trial]
    cases = [{"trial": t, "shape": shapes[t], "seed": case.derive(f"trial{t}")} for t in chosen]
    largest = max(math.prod(c["shape"]) for c in cases)
    pinned = memory == "pinned"
    canary = method == "copy_"
    needs = ["torch", "numpy"] if method == "numpy" else ["torch"]
    host = "ref.pin_memory()" if pinned else "ref.clone()"
    if direction == "h2d":
        build = [f"    src = {host}  # {memory} host memory"]
        if method == "numpy":
            build = ["    src = ref.numpy().copy()  # a numpy array"]
        if canary:
            build.append(
                "    out = fill_canary(torch, torch.empty(case['shape'], dtype=DTYPE, device=device))  # destination"
            )
        call = {
            "to": "inputs['src'].to(device, non_blocking=NON_BLOCKING)",
            "cuda": "inputs['src'].cuda(device, non_blocking=NON_BLOCKING)",
            "copy_": "inputs['out'].copy_(inputs['src'], non_blocking=NON_BLOCKING)",
            "numpy": "torch.from_numpy(inputs['src']).to(device, non_blocking=NON_BLOCKING)",
        }[method]
        what = "host-to-device copy"
    else:
        build = ["    on_device = ref.to(device, copy=True)  # staged on the device"]
        if canary:
            build.append(
                "    out = fill_canary(torch, torch.empty(case['shape'], dtype=DTYPE"
                + (", pin_memory=True" if pinned else "")
                + "))  # host destination"
            )
        call = {
            "cpu": "inputs['on_device'].to('cpu', non_blocking=True)"
            if nb
            else "inputs['on_device'].cpu()",
            "to": "inputs['on_device'].to('cpu', non_blocking=NON_BLOCKING)",
            "copy_": "inputs['out'].copy_(inputs['on_device'], non_blocking=NON_BLOCKING)",
            "numpy": "torch.from_numpy(inputs['on_device'].cpu().numpy())",
        }[method]
        what = "device-to-host copy"
    build_text = "\n".join(build)
    outputs = "'out': out, " if canary else ""
    keys = "'src': src" if direction == "h2d" else "'on_device': on_device"
    body = f'''\
DTYPE_NAME = {dtype!r}
NON_BLOCKING = {nb!r}
#: The failing copy: its shape and the seed of its data (trial {chosen[0]} of the probe's {len(shapes)}).
CASES = {cases!r}


def case_label(case):
    return f"{{DTYPE_NAME}} {{'x'.join(map(str, case['shape']))}}, pattern seed {{case['seed']}}"


def build(case, device):
    global DTYPE
    DTYPE = getattr(torch, DTYPE_NAME)
    numel = 1
    for d in case["shape"]:
        numel *= d
    ref = pattern(torch, numel, DTYPE_NAME, case["seed"], tuple(case["shape"]))
{build_text}
    return {{"ref": ref, {outputs}{keys}}}


def run_case(case, inputs, device):
    """The copy under test."""
    return {call}


def check(case, inputs, result):
    """Bit for bit against the host data that was copied."""
    return compare_bits(result.cpu(), inputs["ref"])
'''
    helpers = pattern_helpers(largest) + ("\n\n\n" + canary_helpers() if canary else "") + "\n\n\n" + BIT_EXACT_HELPERS
    readable = (
        call.replace("inputs['src']", "src")
        .replace("inputs['out']", "dst")
        .replace("inputs['on_device']", "t")
        .replace("NON_BLOCKING", repr(nb))
    )
    summary = (
        f"One {'pinned' if pinned else 'pageable'} {what} of a {dtype} tensor of shape "
        f"{'x'.join(map(str, shapes[chosen[0]]))} with `{readable}`, compared bit for bit with the data that was sent."
    )
    return Recipe(
        summary=summary,
        reference="the host data that was copied (bit for bit)",
        tolerance="none: bit-exact",
        what=f"the {what} returned wrong data",
        helpers=helpers,
        body=body,
        needs=needs,
    )


def _tiny(case: Case) -> Recipe:
    p = case.params
    direction, memory, nb = p["direction"], p["memory"], p["non_blocking"]
    count = p["threads"] * p["iterations"]
    tiny_max = 15
    sizes = [(i * 7) % tiny_max + 1 for i in range(count)]
    total = sum(sizes)
    if case.crash_or_hang:
        trial = 0
    else:
        found = case.failing_trial()
        if found is None or found >= count:
            raise NoRepro("the observation does not say which tiny copy failed (no first_mismatch.trial)")
        trial = found
    offset = sum(sizes[:trial])
    pinned = memory == "pinned"
    c = {"copy": trial, "offset": offset, "elements": sizes[trial], "total": total, "seed": case.derive("data")}
    if direction == "h2d":
        build = "    src = piece.pin_memory() if PINNED else piece.clone()  # a fresh host allocation"
        call = "inputs['src'].to(device, non_blocking=NON_BLOCKING)"
        keys = "'src': src"
        what = "host-to-device copy"
    else:
        build = (
            "    src = ref.to(device, copy=True)[case['offset'] : case['offset'] + case['elements']]\n"
            "    out = fill_canary(torch, torch.empty(case['elements'], dtype=torch.float32, pin_memory=PINNED))"
            if (nb or pinned)
            else "    src = ref.to(device, copy=True)[case['offset'] : case['offset'] + case['elements']]\n    out = None"
        )
        call = (
            "inputs['out'].copy_(inputs['src'], non_blocking=NON_BLOCKING)"
            if (nb or pinned)
            else "inputs['src'].cpu()"
        )
        keys = "'src': src, 'out': out"
        what = "device-to-host copy"
    body = f'''\
PINNED = {pinned!r}
NON_BLOCKING = {nb!r}
#: The failing copy: copy number {trial} of the probe's {count} tiny copies ({c["elements"]} float32
#: elements at offset {offset} of one {total}-element pattern).
CASES = [{c!r}]


def case_label(case):
    return f"copy {{case['copy']}}: {{case['elements']}} float32 elements ({{4 * case['elements']}} bytes)"


def build(case, device):
    ref = pattern(torch, case["total"], "float32", case["seed"])
    piece = ref[case["offset"] : case["offset"] + case["elements"]]
{build}
    return {{"ref": piece.clone(), {keys}}}


def run_case(case, inputs, device):
    """The tiny copy under test."""
    return {call}


def check(case, inputs, result):
    """Bit for bit against the host data that was copied."""
    return compare_bits(result.cpu(), inputs["ref"])
'''
    helpers = pattern_helpers(total)
    if direction == "d2h" and (nb or pinned):
        helpers += "\n\n\n" + canary_helpers()
    helpers += "\n\n\n" + BIT_EXACT_HELPERS
    return Recipe(
        summary=(
            f"One tiny ({4 * c['elements']} B) {memory} {what} (non_blocking={nb}), the copy that "
            f"failed among the probe's {count}, compared bit for bit."
        ),
        reference="the host data that was copied (bit for bit)",
        tolerance="none: bit-exact",
        what=f"the tiny {what} returned wrong data",
        helpers=helpers,
        body=body,
    )


def _d2d(case: Case) -> Recipe:
    p = case.params
    method, dtype = p["method"], p["dtype"]
    shapes = [tuple(s) for s in p["shapes"]]
    if case.crash_or_hang:
        chosen = list(range(len(shapes)))
    else:
        trial = case.failing_trial()
        if trial is None or trial >= len(shapes):
            raise NoRepro("the observation does not say which copy failed (no first_mismatch.trial)")
        chosen = [trial]
    cases = [{"trial": t, "shape": shapes[t], "seed": case.derive(f"trial{t}")} for t in chosen]
    largest = max(math.prod(c["shape"]) for c in cases)
    call = "inputs['on_device'].clone()" if method == "clone" else "inputs['out'].copy_(inputs['on_device'])"
    out_line = (
        "    out = fill_canary(torch, torch.empty(case['shape'], dtype=getattr(torch, DTYPE_NAME), device=device))"
        if method == "copy_"
        else "    out = None"
    )
    body = f'''\
DTYPE_NAME = {dtype!r}
CASES = {cases!r}


def case_label(case):
    return f"{{DTYPE_NAME}} {{'x'.join(map(str, case['shape']))}}, pattern seed {{case['seed']}}"


def build(case, device):
    numel = 1
    for d in case["shape"]:
        numel *= d
    ref = pattern(torch, numel, DTYPE_NAME, case["seed"], tuple(case["shape"]))
    on_device = ref.to(device, copy=True)
{out_line}
    return {{"ref": ref, "on_device": on_device, "out": out}}


def run_case(case, inputs, device):
    """The device-to-device copy under test."""
    return {call}


def check(case, inputs, result):
    """Bit for bit against the data that was on the device."""
    return compare_bits(result.cpu(), inputs["ref"])
'''
    helpers = pattern_helpers(largest)
    if method == "copy_":
        helpers += "\n\n\n" + canary_helpers()
    helpers += "\n\n\n" + BIT_EXACT_HELPERS
    return Recipe(
        summary=f"One device-to-device copy ({method}) of a {dtype} tensor, compared bit for bit.",
        reference="the data that was on the device (bit for bit)",
        tolerance="none: bit-exact",
        what="the device-to-device copy returned wrong data",
        helpers=helpers,
        body=body,
    )


def _roundtrip(case: Case) -> Recipe:
    p = case.params
    memory, numel, dtype, nb = p["memory"], p["numel"], p["dtype"], p["non_blocking"]
    pinned = memory == "pinned"
    c = {"elements": numel, "seed": case.derive("data")}
    body = f'''\
DTYPE_NAME = {dtype!r}
PINNED = {pinned!r}
NON_BLOCKING = {nb!r}
CASES = [{c!r}]


def case_label(case):
    return f"{{case['elements']}} {{DTYPE_NAME}} elements, {{'pinned' if PINNED else 'pageable'}}, pattern seed {{case['seed']}}"


def build(case, device):
    src = pattern(torch, case["elements"], DTYPE_NAME, case["seed"])
    if PINNED:
        src = src.pin_memory()
    back = fill_canary(torch, torch.empty(case["elements"], dtype=src.dtype, pin_memory=PINNED))
    return {{"src": src, "back": back}}


def run_case(case, inputs, device):
    """Host to device, then device to host into a prefilled host buffer, with no
    synchronization in between."""
    moved = inputs["src"].to(device, non_blocking=NON_BLOCKING)
    return inputs["back"].copy_(moved, non_blocking=NON_BLOCKING)


def check(case, inputs, result):
    """Bit for bit against the data that was sent."""
    return compare_bits(result, inputs["src"])
'''
    return Recipe(
        summary=(
            f"A {memory} round trip of {numel} {dtype} elements: t.to(device) then host.copy_(t) "
            f"(non_blocking={nb}), compared bit for bit with what was sent."
        ),
        reference="the host data that was sent (bit for bit)",
        tolerance="none: bit-exact",
        what="the round trip returned wrong data",
        helpers=pattern_helpers(numel) + "\n\n\n" + canary_helpers() + "\n\n\n" + BIT_EXACT_HELPERS,
        body=body,
    )


# ---------------------------------------------------------------------------------------------
# dtype


@functools.cache
def dtype_helpers() -> str:
    """The source of ``dtype_run.build_inputs`` and its helpers."""
    from gpuprobe.worker.probes import dtype_run

    return "\n\n\n".join(
        [
            "# Copied from gpuprobe (gpuprobe/worker/probes/dtype_run.py and patterns.py): the\n"
            "# adversarial inputs of a conversion probe (every bit pattern or random ones, the\n"
            "# format's extremes, the target's boundaries, ties).\nimport math\nfrom typing import Any",
            _constants(patterns, "CHUNK"),
            _sources(patterns._s32, patterns._lsr, patterns.hash32),
            _constants(dtype_run, "FLOATS", "FP8", "NARROW", "INT_BITS", "_VIEW", "RANDOM_PATTERNS", "GRID_SAMPLES"),
            _sources(
                dtype_run._random_bits,
                dtype_run._float_info,
                dtype_run._target_boundaries,
                dtype_run._target_grid,
                dtype_run._float_source,
                dtype_run._int_source,
                dtype_run.build_inputs,
            ),
        ]
    )


def _convert(case: Case) -> Recipe:
    p = case.params
    src, dst, method, where = p["src"], p["dst"], p["method"], p["where"]
    if method == "to":
        call = "x.to(TO)"
    elif method == "type":
        call = "x.type(TO)"
    else:
        call = f"x.{method}()"
    c = {"from": src, "to": dst, "seed": case.derive("inputs")}
    if where == "device":
        build = "    x = inputs.to(device, copy=True)  # the inputs, on the device"
        what = f"{src} -> {dst} conversion on the device"
    else:
        build = "    x = inputs.to(device, copy=True).cpu()  # a round trip through the device, then the host converts"
        what = f"{src} -> {dst} conversion on the host after a device round trip"
    body = f'''\
CASES = [{c!r}]


def case_label(case):
    return f"{{case['from']}} -> {{case['to']}} with {call.replace('TO', f'torch.{dst}')!r}, inputs seed {{case['seed']}}"


def build(case, device):
    global TO
    TO = getattr(torch, case["to"])
    inputs = build_inputs(torch, case["from"], case["to"], case["seed"])
    expected = inputs.to(TO)  # the CPU's conversion of the same inputs
{build}
    return {{"inputs": inputs, "expected": expected, "x": x}}


def run_case(case, inputs, device):
    """The conversion under test."""
    x = inputs["x"]
    return {call}


def check(case, inputs, result):
    """Bit for bit against the CPU's conversion (NaN equals NaN, whatever its payload)."""
    if result.dtype != TO:
        print(f"  {{result.dtype}} returned, {{TO}} expected")
        return False
    return compare_bits(result.cpu(), inputs["expected"], nan_equal=True)
'''
    return Recipe(
        summary=(
            f"The {what} with `{call.replace('TO', f'torch.{dst}')}` of the probe's adversarial inputs "
            "(every bit pattern or random ones, the formats' extremes and boundaries, ties), compared bit "
            "for bit with the CPU."
        ),
        reference="the CPU's conversion of the same inputs (bit for bit, NaN equal to NaN)",
        tolerance="none: bit-exact",
        what=f"the {what} differs from the CPU's",
        helpers=dtype_helpers() + "\n\n\n" + BIT_EXACT_HELPERS,
        body=body,
    )


# ---------------------------------------------------------------------------------------------
# ops: GEMMs


TOLERANCE_HELPERS = '''\
#: An element is grossly wrong when off by more than GROSS x tolerance x max(|ref|, rms(ref)).
GROSS = 4.0


def compare_tolerance(actual, expected, tolerance):
    """Normwise relative error ||actual - expected|| / ||expected|| over the elements where
    both are finite (float64); a NaN or Inf where the reference is finite makes it at least
    1. True when it is within ``tolerance``. Prints the worst elements."""
    out = actual.detach().cpu().to(torch.float64).reshape(-1)
    ref = expected.detach().cpu().to(torch.float64).reshape(-1)
    if out.numel() != ref.numel():
        print(f"  expected {ref.numel()} elements, got {out.numel()}")
        return False
    both = torch.isfinite(out) & torch.isfinite(ref)
    diff = (out - ref).abs()
    norm = float(ref[both].norm())
    error = float(diff[both].norm()) / norm if norm > 0 else (0.0 if bool(torch.equal(out, ref)) else 1.0)
    special = ~torch.isfinite(out) & torch.isfinite(ref)
    if bool(special.any()):
        error = max(error, 1.0)
    rms = float(ref[torch.isfinite(ref)].pow(2).mean().sqrt()) if bool(torch.isfinite(ref).any()) else 0.0
    bound = torch.maximum(ref.abs(), torch.full_like(ref, rms)) * (GROSS * tolerance)
    gross = special | (both & (diff > bound))
    print(f"  relative error {error:.3e} (tolerance {tolerance:.3e}); {int(gross.sum())} of {ref.numel()} elements grossly wrong")
    if bool(gross.any()):
        print(f"  {'index':>10}  {'expected':>24}  {'actual':>24}")
        for i in gross.nonzero().reshape(-1)[:SHOW].tolist():
            print(f"  {i:>10}  {float(ref[i]):>24.10g}  {float(out[i]):>24.10g}")
    return error <= tolerance
'''


def _matmul(case: Case) -> Recipe:
    p = case.params
    method, dtype, rule_dtype, tolerance = p["method"], p["dtype"], p["rule_dtype"], float(p["tolerance"])
    shapes = list(p["shapes"])
    if case.device_type == "cpu":
        shapes = [s for s in shapes if not s.get("gpu_only")]
    if case.crash_or_hang:
        chosen = list(range(len(shapes)))
    else:
        worst = case.metrics.get("worst_case")
        if not isinstance(worst, int) or isinstance(worst, bool) or not 0 <= worst < len(shapes):
            raise NoRepro("the observation does not say which GEMM shape failed (no worst_case metric; rerun with this gpuprobe)")
        chosen = [worst]
    cases = []
    for t in chosen:
        shape = {k: int(v) for k, v in shapes[t].items() if k in ("m", "k", "n", "batch")}
        seeds = {part: case.derive(f"case{t}{part}") for part in ("a", "b", "bias")}
        cases.append({"case": t, "shape": shape, "seeds": seeds})
    if method == "bmm":
        operands = "a = randn([batch, m, k], s['a']); b = randn([batch, k, n], s['b']); bias = None"
        reference = "torch.bmm(a.double(), b.double())"
        call = "torch.bmm(a, b)"
    elif method == "linear":
        operands = "a = randn([batch, m, k], s['a']); b = randn([n, k], s['b']); bias = randn([n], s['bias'])"
        reference = "torch.nn.functional.linear(a.double(), b.double(), bias.double())"
        call = "torch.nn.functional.linear(a, b, bias)"
    elif method == "addmm":
        operands = "a = randn([m, k], s['a']); b = randn([k, n], s['b']); bias = randn([n], s['bias'])"
        reference = "0.5 * bias.double() + 2.0 * (a.double() @ b.double())"
        call = "torch.addmm(bias, a, b, beta=0.5, alpha=2.0)"
    else:
        operands = "a = randn([m, k], s['a']); b = randn([k, n], s['b']); bias = None"
        reference = "a.double() @ b.double()"
        call = f"torch.{method}(a, b)"
    operand_lines = "\n".join("    " + part.strip() for part in operands.split(";"))
    tf32 = rule_dtype == "tf32"
    body = f'''\
DTYPE_NAME = {dtype!r}
#: TF32 tensor cores allowed for float32 (the probe's {rule_dtype} rule), as the probe set it.
ALLOW_TF32 = {tf32!r}
#: The judge's bound for this probe (relative error).
TOLERANCE = {tolerance!r}
#: The failing GEMM: shape and the seeds of its operands.
CASES = {cases!r}


def case_label(case):
    sh = case["shape"]
    return f"{method} {{DTYPE_NAME}} batch={{sh.get('batch', 1)}} m={{sh['m']}} k={{sh['k']}} n={{sh['n']}}, TF32 {{'on' if ALLOW_TF32 else 'off'}}"


def randn(shape, seed):
    """Seeded normal values on the host (float32), rounded to the probe's dtype."""
    values = torch.randn(tuple(shape), generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
    return values.to(getattr(torch, DTYPE_NAME))


def build(case, device):
    sh, s = case["shape"], case["seeds"]
    batch, m, k, n = sh.get("batch", 1), sh["m"], sh["k"], sh["n"]
{operand_lines}
    expected = {reference}  # float64 on the CPU
    torch.backends.cuda.matmul.allow_tf32 = ALLOW_TF32
    torch.backends.cudnn.allow_tf32 = ALLOW_TF32
    on = lambda t: None if t is None else t.to(device, copy=True)
    return {{"a": on(a), "b": on(b), "bias": on(bias), "expected": expected}}


def run_case(case, inputs, device):
    """The GEMM under test."""
    a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
    return {call}


def check(case, inputs, result):
    """Against float64 on the CPU, within the probe's tolerance."""
    return compare_tolerance(result, inputs["expected"], TOLERANCE)
'''
    return Recipe(
        summary=(
            f"One {dtype} GEMM `{call}` (TF32 {'on' if tf32 else 'off'}) of seeded normal operands, the "
            "shape with the largest error, against float64 on the CPU."
        ),
        reference="float64 on the CPU from the same (rounded) operands",
        tolerance=f"normwise relative error <= {tolerance:.3g} (the judge's bound for {rule_dtype})",
        what="the GEMM result is wrong",
        helpers=TOLERANCE_HELPERS,
        body=body,
    )


# ---------------------------------------------------------------------------------------------
# ops: elementwise


def elementwise_cases(case: Case, method: str) -> list[dict[str, Any]]:
    """The probe's trials (``ops_run._elementwise_trials``) as data: label, operand shapes,
    seeds and views, in the probe's order and with its sizes for the device type."""
    if case.device_type == "cpu":
        n1, n2, rows, cols = (1 << 16) + 1, (1 << 12) + 64, 257, 65
    else:
        n1, n2, rows, cols = (1 << 20) + 1, (1 << 16) + 64, 1025, 257

    def a(shape: list[int], tag: str, view: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"shape": shape, "seed": case.derive("a" + tag)}
        if view:
            spec["view"] = view
        return spec

    def b(shape: list[int], tag: str, view: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"shape": shape, "seed": case.derive("b" + tag)}
        if method == "div":
            spec["sign_seed"] = case.derive("s" + tag)
        if view:
            spec["view"] = view
        return spec

    unary = method == "exp"
    trials: list[tuple[str, Any, Any]] = [
        (f"{n1} elements", a([n1], "0"), None if unary else b([n1], "0")),
        (f"{n2} elements", a([n2], "1"), None if unary else b([n2], "1")),
        (f"transposed {cols}x{rows}", a([cols, rows], "2", "t"), None if unary else b([cols, rows], "2", "t")),
    ]
    if not unary:
        trials += [
            (f"{rows}x{cols} with a broadcast row (stride 0)", a([rows, cols], "3"), b([1, cols], "3")),
            (f"{rows}x{cols} with a broadcast column", a([rows, cols], "4"), b([rows, 1], "4")),
            ("scalar operand 3.0" if method != "div" else "scalar divisor 3.0", a([4097], "5"), 3.0),
        ]
    else:
        trials.append(("every third element (strided view)", a([3 * 4097], "3", "every_third"), None))
    return [{"case": i, "label": label, "a": x, "b": y} for i, (label, x, y) in enumerate(trials)]


BLOCK_HELPERS = '''\
def compare_blocks(actual, expected, tolerance, block):
    """The probe's comparison: the output in blocks of ``block`` elements, each judged by its
    normwise relative error against float64 (finite elements; a NaN or Inf where the
    reference is finite makes its block's error at least 1). True when every block is within
    ``tolerance``. Prints the worst block and the first grossly wrong elements."""
    out = actual.detach().cpu().to(torch.float64).reshape(-1)
    ref = expected.detach().cpu().to(torch.float64).reshape(-1)
    if out.numel() != ref.numel():
        print(f"  expected {ref.numel()} elements, got {out.numel()}")
        return False
    pad = (-ref.numel()) % block
    o = torch.cat([out, out.new_zeros(pad)]).reshape(-1, block)
    r = torch.cat([ref, ref.new_zeros(pad)]).reshape(-1, block)
    both = torch.isfinite(o) & torch.isfinite(r)
    d2 = torch.where(both, (o - r) ** 2, torch.zeros_like(o)).sum(1)
    r2 = torch.where(both, r**2, torch.zeros_like(r)).sum(1)
    error = torch.where(r2 > 0, d2.sqrt() / r2.sqrt().clamp_min(1e-300), (d2 > 0).to(torch.float64))
    special = (~torch.isfinite(o) & torch.isfinite(r)).any(1)
    error = torch.where(special, error.clamp_min(1.0), error)
    worst = int(error.argmax())
    print(f"  worst block {worst} (elements {worst * block}..{min(ref.numel(), (worst + 1) * block) - 1}): "
          f"relative error {float(error[worst]):.3e} (tolerance {tolerance:.3e}); "
          f"{int((error > tolerance).sum())} of {error.numel()} blocks over")
    rms = (r2 / block).sqrt().repeat_interleave(block)[: ref.numel()]
    diff = (out - ref).abs()
    gross = (~torch.isfinite(out) & torch.isfinite(ref)) | (
        torch.isfinite(out) & torch.isfinite(ref) & (diff > torch.maximum(ref.abs(), rms) * (GROSS * tolerance))
    )
    if bool(gross.any()):
        print(f"  {int(gross.sum())} element(s) grossly wrong; the first:")
        print(f"  {'index':>10}  {'expected':>24}  {'actual':>24}")
        for i in gross.nonzero().reshape(-1)[:SHOW].tolist():
            print(f"  {i:>10}  {float(ref[i]):>24.10g}  {float(out[i]):>24.10g}")
    return bool((error <= tolerance).all())
'''


def _elementwise(case: Case) -> Recipe:
    from gpuprobe.worker.probes import ops_run

    p = case.params
    method, dtype, tolerance = p["method"], p["dtype"], float(p["tolerance"])
    trials = elementwise_cases(case, method)
    if case.crash_or_hang:
        chosen = trials
    else:
        worst = case.metrics.get("worst_case")
        if not isinstance(worst, int) or isinstance(worst, bool) or not 0 <= worst < len(trials):
            raise NoRepro("the observation does not say which elementwise case failed (no worst_case metric)")
        labels = case.metrics.get("cases")
        if isinstance(labels, str) and labels.split(", ")[worst] != trials[worst]["label"]:
            raise NoRepro(f"the probe's case {worst} is {labels.split(', ')[worst]!r}, not what this generator rebuilds")
        chosen = [trials[worst]]
    (alo, ahi), (blo, bhi) = ops_run._operand_ranges(method)
    call = f"torch.{method}(a)" if method == "exp" else f"torch.{method}(a, b)"
    body = f'''\
METHOD = {method!r}
DTYPE_NAME = {dtype!r}
#: The judge's bound for this probe (relative error per block).
TOLERANCE = {tolerance!r}
BLOCK = {ops_run.BLOCK!r}
A_RANGE = {(alo, ahi)!r}
B_RANGE = {(blo, bhi)!r}
#: The failing case: operand shapes, the seeds of their values, and their layout.
CASES = {chosen!r}


def case_label(case):
    return f"torch.{{METHOD}} {{DTYPE_NAME}}: {{case['label']}}"


def uniform(shape, low, high, seed, dtype_name):
    """Seeded uniform values on [low, high) on the host (float32), rounded to dtype_name."""
    values = torch.rand(tuple(shape), generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
    values.mul_(high - low).add_(low)
    return values.to(getattr(torch, dtype_name))


def operand(spec, low, high):
    if spec is None or isinstance(spec, float):
        return spec
    x = uniform(spec["shape"], low, high, spec["seed"], DTYPE_NAME)
    if "sign_seed" in spec:  # random signs on the divisors
        signs = uniform(spec["shape"], -1.0, 1.0, spec["sign_seed"], "float32") < 0
        x = torch.where(signs, -x, x)
    if spec.get("view") == "t":
        x = x.t()
    elif spec.get("view") == "every_third":
        x = x[::3]
    return x


def on_device(x, device):
    """The operand on the device with the same layout (transposed, strided)."""
    if not isinstance(x, torch.Tensor):
        return x
    if x.is_contiguous():
        return x.to(device, copy=True)
    if x.dim() == 2 and x.t().is_contiguous():
        return x.t().contiguous().to(device).t()
    base = (x._base if x._base is not None else x.contiguous()).to(device, copy=True)
    return base.as_strided(x.shape, x.stride(), x.storage_offset())


def build(case, device):
    a = operand(case["a"], *A_RANGE)
    b = operand(case["b"], *B_RANGE)
    fn = getattr(torch, METHOD)
    wide_b = b.to(torch.float64) if isinstance(b, torch.Tensor) else b
    expected = fn(a.to(torch.float64)) if b is None else fn(a.to(torch.float64), wide_b)  # float64 on the CPU
    print(f"  a: shape {{tuple(a.shape)}} stride {{a.stride()}}" + (f"; b: shape {{tuple(b.shape)}} stride {{b.stride()}}" if isinstance(b, torch.Tensor) else f"; b: {{b!r}}"))
    return {{"a": on_device(a, device), "b": on_device(b, device), "expected": expected}}


def run_case(case, inputs, device):
    """The elementwise kernel under test."""
    a, b = inputs["a"], inputs["b"]
    return {call}


def check(case, inputs, result):
    """Against float64 on the CPU, in blocks of BLOCK elements, within the probe's tolerance."""
    return compare_blocks(result, inputs["expected"], TOLERANCE, BLOCK)
'''
    return Recipe(
        summary=(
            f"`{call}` in {dtype} on the failing operand layout (seeded uniform operands), against "
            "float64 on the CPU in blocks of 1024 elements."
        ),
        reference="float64 on the CPU from the same (rounded) operands",
        tolerance=f"normwise relative error per block of {ops_run.BLOCK} elements <= {tolerance:.3g} (the judge's bound)",
        what="the elementwise result is wrong",
        helpers=TOLERANCE_HELPERS + "\n\n" + BLOCK_HELPERS,
        body=body,
    )


# ---------------------------------------------------------------------------------------------
# ops: reductions


def _reduce(case: Case) -> Recipe:
    from gpuprobe.worker.probes import ops_run

    p = case.params
    method, dtype, variant, tolerance = p["method"], p["dtype"], p["variant"], float(p["tolerance"])

    class _Device:
        is_gpu = case.device_type != "cpu"

    shapes = ops_run._reduce_cases(_Device(), variant)  # type: ignore[arg-type]
    if case.crash_or_hang:
        chosen = list(range(len(shapes)))
    else:
        worst = case.metrics.get("worst_case")
        if not isinstance(worst, int) or isinstance(worst, bool) or not 0 <= worst < len(shapes):
            raise NoRepro("the observation does not say which reduction failed (no worst_case metric)")
        chosen = [worst]
    cases = []
    for t in chosen:
        shape, dim, transposed = shapes[t]
        terms = math.prod(shape) if dim is None else math.prod(shape[d] for d in (dim if isinstance(dim, tuple) else (dim,)))
        scale = min(1.0, 4096.0 / (0.5 * terms)) if dtype == "float16" else 1.0
        cases.append(
            {"case": t, "shape": shape, "dim": dim, "transposed": transposed, "range": (-scale, 2.0 * scale), "seed": case.derive(f"case{t}")}
        )
    call = f"torch.{method}(x)" if all(c["dim"] is None for c in cases) else f"torch.{method}(x, dim=case['dim'])"
    body = f'''\
METHOD = {method!r}
DTYPE_NAME = {dtype!r}
#: The judge's bound for this probe (relative error).
TOLERANCE = {tolerance!r}
#: The failing reduction: input shape, dimensions reduced, layout, value range and seed.
CASES = {cases!r}


def case_label(case):
    layout = ", transposed (non-contiguous)" if case["transposed"] else ""
    return f"torch.{{METHOD}} {{DTYPE_NAME}} of shape {{tuple(case['shape'])}} over dim {{case['dim']}}{{layout}}"


def build(case, device):
    low, high = case["range"]
    values = torch.rand(tuple(case["shape"]), generator=torch.Generator().manual_seed(case["seed"]), dtype=torch.float32)
    host = values.mul_(high - low).add_(low).to(getattr(torch, DTYPE_NAME))
    source = host.t() if case["transposed"] else host
    wide = source.to(torch.float64)
    expected = getattr(wide, METHOD)() if case["dim"] is None else getattr(wide, METHOD)(dim=case["dim"])
    x = host.to(device, copy=True)
    return {{"x": x.t() if case["transposed"] else x, "expected": expected}}


def run_case(case, inputs, device):
    """The reduction under test."""
    x = inputs["x"]
    return {call}


def check(case, inputs, result):
    """Against float64 on the CPU, within the probe's tolerance."""
    return compare_tolerance(result, inputs["expected"], TOLERANCE)
'''
    return Recipe(
        summary=f"`{call}` in {dtype} on the shape with the largest error (seeded uniform input), against float64 on the CPU.",
        reference="float64 on the CPU from the same (rounded) input",
        tolerance=f"normwise relative error <= {tolerance:.3g} (the judge's bound)",
        what="the reduction is wrong",
        helpers=TOLERANCE_HELPERS,
        body=body,
    )


# ---------------------------------------------------------------------------------------------
# pipeline: DataLoader


def _dataloader(case: Case) -> Recipe:
    from gpuprobe.worker.probes import pipeline_data, pipeline_run

    p = case.params
    workers, start_method, pin_memory = int(p["workers"]), p["start_method"], bool(p["pin_memory"])
    c = {"dataset_seed": case.derive("dataset"), "items": pipeline_run.ITEMS, "batch": pipeline_run.BATCH}
    loader_args = f"batch_size=case['batch'], shuffle=False, num_workers={workers}, pin_memory={pin_memory!r}"
    if workers:
        loader_args += f", multiprocessing_context={start_method!r}"
    body = f'''\
#: The probe's dataset: latent-cache items computed from a seed and the item index alone.
FIELDS = {pipeline_data.FIELDS!r}
CASES = [{c!r}]


class LatentDataset:
    """``length`` items, each a dict of tensors derived from ``seed`` and the item index
    (gpuprobe's pipeline dataset). Defined here, so DataLoader workers can unpickle it."""

    def __init__(self, length, seed):
        self.length = int(length)
        self.seed = int(seed)

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        import torch  # a spawned worker imports this file without running main()

        if not 0 <= index < self.length:
            raise IndexError(index)
        item = {{}}
        for name, (dtype, shape) in FIELDS.items():
            numel = 1
            for dim in shape:
                numel *= dim
            item[name] = pattern(torch, numel, dtype, derive_seed(self.seed, f"item{{index}}", name), shape)
        item["index"] = torch.tensor(index, dtype=torch.int64)
        return item


def case_label(case):
    return "DataLoader({loader_args.replace("case['batch']", str(pipeline_run.BATCH))})"


def build(case, device):
    from torch.utils.data import DataLoader

    dataset = LatentDataset(case["items"], case["dataset_seed"])
    loader = DataLoader(dataset, {loader_args})
    return {{"dataset": dataset, "loader": loader}}


def run_case(case, inputs, device):
    """The pipeline under test: iterate the loader and move every batch to the device, as a
    training loop does."""
    arrived = []
    for batch in inputs["loader"]:
        moved = {{name: value.to(device, non_blocking={pin_memory!r}) for name, value in batch.items()}}
        arrived.append((batch, moved))
    return arrived


def check(case, inputs, result):
    """Every tensor of every batch, bit for bit against the dataset itself, as it arrived
    from the loader and after the move to the device."""
    dataset, ok = inputs["dataset"], True
    if len(result) * case["batch"] < case["items"]:
        print(f"  the loader yielded {{len(result)}} batches of {{case['batch']}}; {{case['items']}} items were expected")
        return False
    for number, (batch, moved) in enumerate(result):
        items = [dataset[i] for i in range(number * case["batch"], min(case["items"], (number + 1) * case["batch"]))]
        expected = {{name: torch.stack([item[name] for item in items]) for name in items[0]}}
        for stage, tensors in (("as it arrived from the loader", batch), ("after the move to the device", moved)):
            for name, value in tensors.items():
                if not bool(torch.equal(bits(value.cpu()), bits(expected[name]))):
                    print(f"  batch {{number}}, {{name}} {{stage}}:")
                    compare_bits(value.cpu(), expected[name])
                    ok = False
    if ok:
        print(f"  all {{len(result)}} batches identical to the dataset, on the host and on the device")
    return ok
'''
    helpers = pattern_helpers(patterns.BLOCK + 1) + "\n\n\n" + BIT_EXACT_HELPERS
    where = "in the main process" if not workers else f"in {workers} {start_method} worker processes"
    return Recipe(
        summary=(
            f"A DataLoader over the probe's latent-cache dataset (64 items, batches of 16, loaded {where}, "
            f"pin_memory={pin_memory}); every batch is moved to the device and compared bit for bit "
            "with the dataset, as it arrived and after the move."
        ),
        reference="the dataset itself, rebuilt from its seed (bit for bit)",
        tolerance="none: bit-exact",
        what="DataLoader batches differ from the dataset",
        helpers=helpers,
        body=body,
    )


#: Implementation function (``module:function``) → recipe.
RECIPES: dict[str, Callable[[Case], Recipe]] = {
    "gpuprobe.worker.probes.copy_run:run_transfer": _transfer,
    "gpuprobe.worker.probes.copy_run:run_tiny": _tiny,
    "gpuprobe.worker.probes.copy_run:run_d2d": _d2d,
    "gpuprobe.worker.probes.copy_run:run_roundtrip": _roundtrip,
    "gpuprobe.worker.probes.dtype_run:run_convert": _convert,
    "gpuprobe.worker.probes.ops_run:run_matmul": _matmul,
    "gpuprobe.worker.probes.ops_run:run_elementwise": _elementwise,
    "gpuprobe.worker.probes.pipeline_run:run_dataloader": _dataloader,
    "gpuprobe.worker.probes.ops_run:run_reduce": _reduce,
}

#: Families with no recipe, and why (``no repro: WHY``).
UNCOVERED: dict[str, str] = {
    "rng": "random-generator probes are judged statistically over many samples; no single case fails",
    "alloc": "allocator probes measure the caching allocator's behaviour over a sequence of allocations, "
    "not one computed case",
    "soak": "soak probes fail over minutes of load; one case cannot stand for them",
    "fault": "fault probes trigger deliberate faults (run only when named); the fault is the repro",
    "dist": "multi-GPU collectives need a process group per GPU; not rebuilt as one script yet",
    "native": "native probes call the CUDA/HIP runtime from gpuprobe's own binary; no Python repro",
}
