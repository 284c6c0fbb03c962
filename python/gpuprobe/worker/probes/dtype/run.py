"""Dtype family implementation (see ``dtype_specs`` for the catalog).

Inputs are adversarial but well defined. For a floating-point source they hold: every bit
pattern (8- and 16-bit sources) or a few thousand random ones (32/64-bit), the source's own
extremes (±0, smallest subnormal, largest subnormal, smallest normal, largest finite, ±Inf,
NaN), the target's boundaries (largest finite and the values around it that round to it or
overflow, the smallest normal and subnormal and fractions of the latter that round to zero or
up), and exact midpoints between neighbouring target values (ties, which round to even) with
quarter points either side.

Excluded because the result is undefined or legitimately differs between CPU and GPU:

- float → integer outside the integer's range, and NaN/Inf → integer (C++ undefined
  behaviour; CPUs and GPUs return different values);
- float → float8 overflow and ±Inf → float8: PyTorch's CUDA kernels saturate to the largest
  finite value on recent builds (``__NV_SATFINITE``) while other builds return NaN or Inf;
- float64 → float16/bfloat16/float8 of values that are not exactly representable in float32:
  PyTorch converts through float32 (double rounding) and a direct conversion would be an
  equally valid implementation; integer → float16/bfloat16/float8 beyond 2^24 likewise.
"""

from __future__ import annotations

import math
from typing import Any

from gpuprobe.worker import ops
from gpuprobe.worker.compare import CompareAccumulator
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe
from gpuprobe.worker.patterns import hash32

FLOATS = ("float32", "float16", "bfloat16", "float64", "float8_e4m3fn", "float8_e5m2")
FP8 = ("float8_e4m3fn", "float8_e5m2")
NARROW = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
INT_BITS = {"int8": 8, "int32": 32, "int64": 64}
_VIEW = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}
RANDOM_PATTERNS = 4096
GRID_SAMPLES = 512


def _dtype(torch: Any, name: str) -> Any:
    dtype = getattr(torch, name, None)
    if dtype is None:
        raise SkipProbe(f"this torch build has no torch.{name}")
    return dtype


def _random_bits(torch: Any, width_bytes: int, count: int, seed: int) -> Any:
    """``count`` random bit patterns of the given width (every pattern for 1 and 2 bytes)."""
    # Exhaustive lists start at an ordinary normal value (0x3B / 0x3C01 in every 8- and 16-bit
    # float format here), so a report's first mismatch is a telling one, not -0.0.
    if width_bytes == 1:
        return torch.arange(0x3B, 0x3B + 256, dtype=torch.int16).to(torch.uint8)
    if width_bytes == 2:
        return torch.arange(0x3C01, 0x3C01 + (1 << 16), dtype=torch.int32).to(torch.int16)
    low = hash32(torch, 0, count, seed & 0xFFFFFFFF)
    if width_bytes == 4:
        return low
    high = hash32(torch, count, 2 * count, seed & 0xFFFFFFFF)
    return (high.to(torch.int64) << 32) | (low.to(torch.int64) & 0xFFFFFFFF)


def _float_info(torch: Any, name: str) -> dict[str, float]:
    info = torch.finfo(getattr(torch, name))
    tiny = float(info.smallest_normal)
    eps = float(info.eps)
    largest = float(info.max)
    # ulp at the largest finite value: eps times the largest power of two not above it.
    _mantissa, exponent = math.frexp(largest)
    return {"max": largest, "tiny": tiny, "min_sub": tiny * eps, "ulp_max": eps * 2.0 ** (exponent - 1)}


def _target_boundaries(torch: Any, target: str) -> list[float]:
    """Values around the target format's extremes (as float64)."""
    info = _float_info(torch, target)
    largest, tiny, sub, ulp = info["max"], info["tiny"], info["min_sub"], info["ulp_max"]
    values = [
        largest,
        largest + ulp / 4,  # rounds down to the largest finite value
        largest + ulp / 2,  # tie above the largest finite value
        largest + ulp,  # overflows
        2 * largest,
        tiny,
        tiny - sub,  # largest subnormal
        tiny + sub / 2,  # tie between the smallest normal and its neighbour
        sub,
        sub * 0.25,  # rounds to zero
        sub * 0.5,  # tie: rounds to even (zero)
        sub * 0.75,  # rounds up to the smallest subnormal
        sub * 1.5,  # tie: rounds to even (2 * smallest subnormal)
        sub * 2.5,  # tie: rounds to even (2 * smallest subnormal)
        sub * 3,
        1.0,
    ]
    return values + [-v for v in values]


def _target_grid(torch: Any, target: str, seed: int) -> list[float]:
    """Random target values, their upper neighbours, the midpoints (ties) and quarter points."""
    dtype = getattr(torch, target)
    width = torch.empty(0, dtype=dtype).element_size()
    bits = _random_bits(torch, width, GRID_SAMPLES, seed)
    if width <= 2:
        pick = (hash32(torch, 0, GRID_SAMPLES, (seed >> 1) & 0xFFFFFFFF) & 0x7FFFFFFF) % bits.numel()
        bits = bits[pick.to(torch.int64)]
    bits = bits[:GRID_SAMPLES]
    view = getattr(torch, _VIEW[width])
    here = bits.to(view).view(dtype).to(torch.float64)
    # bits + 1 is the next value away from zero for finite values of either sign.
    nxt = (bits.to(view) + 1).view(dtype).to(torch.float64)
    keep = torch.isfinite(here) & torch.isfinite(nxt) & (here.abs() < nxt.abs())
    here, nxt = here[keep], nxt[keep]
    gap = nxt - here
    out = torch.cat([here, here + gap / 2, here + gap / 4, here + 3 * gap / 4])
    return out.tolist()


def _float_source(torch: Any, src: str, dst: str, seed: int) -> Any:
    """Adversarial inputs for a floating-point source, before target-specific filtering."""
    src_dtype = getattr(torch, src)
    width = torch.empty(0, dtype=src_dtype).element_size()
    if src == "float64" and dst in NARROW:
        # float32-exact values only (see the module docstring on double rounding).
        random_values = _random_bits(torch, 4, RANDOM_PATTERNS, seed).view(torch.float32).to(torch.float64)
    else:
        random_values = _random_bits(torch, width, RANDOM_PATTERNS, seed).view(src_dtype)
    info = _float_info(torch, src)
    own = [0.0, info["min_sub"], info["tiny"] - info["min_sub"], info["tiny"], info["max"], 1.0, 1.5]
    own = own + [-v for v in own] + [float("inf"), float("-inf"), float("nan")]
    extra = list(own)
    if dst in FLOATS:
        extra += _target_boundaries(torch, dst)
        if dst != "float64":
            extra += _target_grid(torch, dst, seed ^ 0x5A5A5A5A)
    elif dst in INT_BITS:
        half = float(2 ** (INT_BITS[dst] - 1))
        extra += [0.5, 1.5, 2.5, 0.999, 127.5, half - 1, half - 1.5, -half + 0.5, -half + 1, 300.7, 2.0**24 + 1]
        extra += [-v for v in extra]
        fractions = (hash32(torch, 0, 512, seed & 0xFFFFFFFF).to(torch.float64) / 2.0**31).tolist()
        extra += [f * half for f in fractions] + [f * 300.0 for f in fractions]
    extra_tensor = torch.tensor(extra, dtype=torch.float64)
    if src == "float64":
        return torch.cat([random_values.to(torch.float64), extra_tensor])
    return torch.cat([random_values, extra_tensor.to(src_dtype)])


def _int_source(torch: Any, src: str, seed: int) -> Any:
    bits = INT_BITS[src]
    dtype = getattr(torch, src)
    if bits == 8:
        return torch.arange(-128, 128, dtype=torch.int16).to(torch.int8)
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    values = {0, 1, -1, 2, -2, low, low + 1, high, high - 1}
    for k in range(1, bits - 1):
        for v in ((1 << k) - 1, 1 << k, (1 << k) + 1):
            values.update((v, -v))
    for v in (2049, 2051, 257, 259, 65504, 65520, 70000, (1 << 24) + 1, (1 << 24) + 3, (1 << 53) + 1):
        if v <= high:
            values.update((v, -v))
    random_values = _random_bits(torch, bits // 8, RANDOM_PATTERNS, seed).to(dtype)
    # Small magnitudes too, so narrow float targets get many in-range inputs.
    h = hash32(torch, 0, 1024, (seed >> 3) & 0xFFFFFFFF).to(torch.int64)
    small = torch.cat([h % 1001 - 500, h % (1 << 25) - (1 << 24)]).to(dtype)
    return torch.cat([torch.tensor(sorted(values), dtype=dtype), random_values, small])


def build_inputs(torch: Any, src: str, dst: str, seed: int) -> Any:
    """The CPU input tensor (dtype ``src``) for a ``src`` → ``dst`` conversion probe."""
    src_dtype = getattr(torch, src)
    if src == "bool":
        flags = (hash32(torch, 0, 256, seed & 0xFFFFFFFF) & 1).to(torch.bool)
        flags[:2] = torch.tensor([False, True])
        return flags
    if src in INT_BITS:
        inputs = _int_source(torch, src, seed)
        as_float = inputs.to(torch.float64)
        keep = torch.ones_like(as_float, dtype=torch.bool)
        if dst in NARROW:
            keep &= as_float.abs() <= 2.0**24
        if dst in FP8:
            keep &= as_float.abs() <= float(torch.finfo(getattr(torch, dst)).max)
        return inputs[keep]
    inputs = _float_source(torch, src, dst, seed)
    values = inputs.to(torch.float64)
    keep = torch.ones_like(values, dtype=torch.bool)
    if dst in FP8:
        keep &= ~torch.isinf(values) & ~(values.abs() > float(torch.finfo(getattr(torch, dst)).max))
    elif dst in INT_BITS:
        half = float(2 ** (INT_BITS[dst] - 1))
        keep &= torch.isfinite(values) & (values > -half - 1) & (values < half)
    return inputs[keep].to(src_dtype)


def _input_metrics(torch: Any, inputs: Any) -> dict[str, int]:
    if inputs.dtype == torch.bool or str(inputs.dtype).replace("torch.", "") in INT_BITS:
        return {"zero_inputs": int((inputs == 0).sum())}
    values = inputs.to(torch.float64)
    tiny = float(torch.finfo(inputs.dtype).smallest_normal)
    finite = torch.isfinite(values)
    return {
        "nan_inputs": int(torch.isnan(values).sum()),
        "inf_inputs": int(torch.isinf(values).sum()),
        "zero_inputs": int((values == 0).sum()),
        "subnormal_inputs": int((finite & (values != 0) & (values.abs() < tiny)).sum()),
    }


def _unsupported(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "not implemented for" in text or "not supported" in text or "unsupported" in text


def run_convert(ctx: ProbeContext, *, src: str, dst: str, method: str, where: str) -> ProbeOutput:
    """Converts adversarial inputs on the device (or on the host after a device round trip)
    and compares bit for bit with the CPU conversion."""
    torch = ctx.torch
    src_dtype, dst_dtype = _dtype(torch, src), _dtype(torch, dst)
    inputs = build_inputs(torch, src, dst, ctx.derive_seed("inputs"))
    try:
        reference = inputs.to(dst_dtype)
    except (RuntimeError, TypeError, NotImplementedError) as exc:
        if _unsupported(exc):
            raise SkipProbe(f"the CPU cannot convert {src} to {dst} in this torch build: {exc}") from exc
        raise
    try:
        on_device = ops.stage(inputs, ctx.device)
        if where == "device":
            converted = ops.readback(ops.convert(on_device, dst_dtype, method=method, on_device=True))
        else:
            back = ops.readback(on_device)
            converted = ops.convert(back, dst_dtype, method=method, on_device=False)
    except (RuntimeError, TypeError, NotImplementedError) as exc:
        if _unsupported(exc):
            raise SkipProbe(f"{src} -> {dst} via {method} is not supported on {ctx.device}: {exc}") from exc
        raise
    if converted.dtype != dst_dtype:
        raise RuntimeError(f"{method} returned {converted.dtype}, expected {dst_dtype}")
    acc = CompareAccumulator(torch)
    acc.add(converted, reference, nan_equal=True)
    metrics: dict[str, Any] = {
        "from": src,
        "to": dst,
        "method": method,
        "where": where,
        "elements": int(inputs.numel()),
    }
    metrics.update(_input_metrics(torch, inputs))
    if inputs.dtype != src_dtype:
        raise RuntimeError(f"inputs were built as {inputs.dtype}, expected {src_dtype}")
    return ProbeOutput(acc.stats(), metrics)
