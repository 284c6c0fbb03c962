"""ops family: GEMMs, elementwise kernels and reductions (``ops_run``), the case with the
largest error rebuilt from its seeds and judged against float64 on the CPU with the probe's
bound.
"""

from __future__ import annotations

from typing import Any

from gpuprobe.repro.families.base import Case, NoRepro
from gpuprobe.repro.script import Recipe


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
    from gpuprobe.worker.probes.ops import run as ops_run

    p = case.params
    method, dtype, rule_dtype, tolerance = p["method"], p["dtype"], p["rule_dtype"], float(p["tolerance"])
    shapes = ops_run.gemm_shapes(list(p["shapes"]), case.device_type != "cpu")
    chosen = case.chosen(len(shapes), "GEMM shape", by="worst")
    cases = []
    for t in chosen:
        shape = {k: int(v) for k, v in shapes[t].items() if k in ("m", "k", "n", "batch")}
        seeds = {part: case.derive(ops_run.trial_tag(t) + part) for part in ("a", "b", "bias")}
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
    """The probe's trials (``ops_run.elementwise_trials``) as data: label, operand shapes,
    seeds and views, in the probe's order and with its sizes for the device type."""
    from gpuprobe.worker.probes.ops import run as ops_run

    def spec(operand: Any) -> Any:
        if operand is None or isinstance(operand, float):
            return operand
        out: dict[str, Any] = {"shape": list(operand.shape), "seed": case.derive(operand.tag)}
        if operand.sign_tag is not None:
            out["sign_seed"] = case.derive(operand.sign_tag)
        if operand.view:
            out["view"] = operand.view
        return out

    trials = ops_run.elementwise_trials(method, case.device_type != "cpu")
    return [{"case": i, "label": t.label, "a": spec(t.a), "b": spec(t.b)} for i, t in enumerate(trials)]


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
    from gpuprobe.worker.probes.ops import run as ops_run

    p = case.params
    method, dtype, tolerance = p["method"], p["dtype"], float(p["tolerance"])
    trials = elementwise_cases(case, method)
    picked = case.chosen(len(trials), "elementwise case", by="worst")
    labels = case.metrics.get("cases")
    if not case.crash_or_hang and isinstance(labels, str) and labels.split(", ")[picked[0]] != trials[picked[0]]["label"]:
        raise NoRepro(f"the probe's case {picked[0]} is {labels.split(', ')[picked[0]]!r}, not what this generator rebuilds")
    chosen = [trials[i] for i in picked]
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
    from gpuprobe.worker.probes.ops import run as ops_run

    p = case.params
    method, dtype, variant, tolerance = p["method"], p["dtype"], p["variant"], float(p["tolerance"])

    class _Device:
        is_gpu = case.device_type != "cpu"

    shapes = ops_run._reduce_cases(_Device(), variant)  # type: ignore[arg-type]
    chosen = case.chosen(len(shapes), "reduction", by="worst")
    cases = []
    for t in chosen:
        shape, dim, transposed = shapes[t]
        cases.append(
            {
                "case": t,
                "shape": shape,
                "dim": dim,
                "transposed": transposed,
                "range": ops_run.reduce_range(shape, dim, dtype),
                "seed": case.derive(ops_run.trial_tag(t)),
            }
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
