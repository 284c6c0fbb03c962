"""Sample statistics of random draws, as ``SampleStats`` (observation.rs).

The probe reports raw facts; the Rust judge turns them into a verdict with thresholds derived
from ``n`` and the probe's ``alpha``. Everything is computed on the CPU in float64 from samples
already read back from the device.

``p_zero`` is the probability that one sample is exactly 0.0 when the generator is correct.
It must not be too small (a too-small value makes a false alarm), so it is conservative:

- normal: P(|x| < half the smallest positive subnormal of the dtype) + 2^-23. The first term
  is the mass that rounds to zero; the second allows for the generator's resolution (a
  Box-Muller generator whose uniform draw u1 is exactly 1 returns an exact 0; with 24-bit
  uniforms that happens with probability 2^-24);
- uniform on [0, 1): 2^-min(d, 24) with d the dtype's significand digits (float32 24,
  float16 11, bfloat16 8, float64 53): a generator that draws d-bit (or 24-bit) grid values
  returns 0 with that probability, and one that rounds a fine draw to the dtype does less
  often;
- discrete uniform on low..high: 1/(high - low) when 0 lies in the range.

The chi-square is Pearson's over 64 equiprobable bins of the target distribution, computed for
float32/float64 samples of continuous distributions (lower precisions put their few
representable values unevenly into bins) and for integer samples whose range is a multiple of
64 (every bin then holds the same number of integers).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

CHI2_BINS = 64

#: Significand digits (including the implicit bit) by dtype name.
DIGITS = {"float32": 24, "float16": 11, "bfloat16": 8, "float64": 53}
#: Smallest positive subnormal by dtype name.
MIN_SUBNORMAL = {"float32": 2.0**-149, "float16": 2.0**-24, "bfloat16": 2.0**-133, "float64": 5e-324}
#: Generator resolution allowance added to the normal p_zero.
RESOLUTION_ALLOWANCE = 2.0**-23


def p_zero_normal(dtype_name: str, std: float = 1.0) -> float:
    """P(one normal(0, std) sample is exactly zero in ``dtype_name``), conservative."""
    half_subnormal = MIN_SUBNORMAL[dtype_name] / 2.0
    return math.erf(half_subnormal / (std * math.sqrt(2.0))) + RESOLUTION_ALLOWANCE


def p_zero_uniform(dtype_name: str) -> float:
    """P(one uniform [0, 1) sample is exactly zero in ``dtype_name``), conservative."""
    return 2.0 ** -min(DIGITS[dtype_name], 24)


def p_zero_uniform_int(low: int, high: int) -> float:
    """P(one discrete uniform sample on low..high-1 is zero)."""
    return 1.0 / (high - low) if low <= 0 < high else 0.0


def _edges(distribution: dict[str, Any]) -> list[float] | None:
    kind = distribution["kind"]
    if kind == "normal":
        dist = NormalDist(distribution["mean"], distribution["std"])
        return [dist.inv_cdf(k / CHI2_BINS) for k in range(1, CHI2_BINS)]
    if kind == "uniform":
        low, high = distribution["low"], distribution["high"]
        return [low + (high - low) * k / CHI2_BINS for k in range(1, CHI2_BINS)]
    if kind == "uniform_int":
        low, high = distribution["low"], distribution["high"]
        span = high - low
        if span % CHI2_BINS:
            return None
        width = span // CHI2_BINS
        # Integers v with (v - low) // width == b fall in bin b; right-closed edges at
        # low + b*width - 0.5 put each integer on the correct side.
        return [low + b * width - 0.5 for b in range(1, CHI2_BINS)]
    raise ValueError(f"unknown distribution {kind!r}")


def sample_stats(torch: Any, samples: Any, distribution: dict[str, Any], dtype_name: str) -> dict[str, Any]:
    """The ``SampleStats`` measurement object (``kind: stats``) for CPU ``samples``."""
    x = samples.reshape(-1).to(torch.float64)
    n = int(x.numel())
    finite = torch.isfinite(x)
    n_finite = int(finite.sum())
    xf = x[finite] if n_finite != n else x
    zeros = int((x == 0).sum())
    if n_finite:
        mean = float(xf.mean())
        var = float(xf.var(unbiased=True)) if n_finite > 1 else 0.0
        low_value, high_value = float(xf.min()), float(xf.max())
    else:
        mean = var = low_value = high_value = 0.0
    kind = distribution["kind"]
    if kind in ("uniform", "uniform_int"):
        out_of_range = int(((xf < distribution["low"]) | (xf >= distribution["high"])).sum())
    else:
        out_of_range = 0
    if kind == "normal":
        p_zero = p_zero_normal(dtype_name, distribution["std"]) if distribution["mean"] == 0 else 0.0
    elif kind == "uniform":
        p_zero = p_zero_uniform(dtype_name) if distribution["low"] == 0 else 0.0
    else:
        p_zero = p_zero_uniform_int(distribution["low"], distribution["high"])
    out: dict[str, Any] = {
        "kind": "stats",
        "distribution": dict(distribution),
        "dtype": dtype_name,
        "n": n,
        "mean": mean,
        "var": var,
        "min": low_value,
        "max": high_value,
        "zeros": zeros,
        "nonfinite": n - n_finite,
        "out_of_range": out_of_range,
        "p_zero": p_zero,
    }
    wants_chi2 = (kind == "uniform_int") or dtype_name in ("float32", "float64")
    edges = _edges(distribution) if wants_chi2 else None
    if edges is not None and n_finite > 0:
        boundaries = torch.tensor(edges, dtype=torch.float64)
        bins = torch.bucketize(xf, boundaries, right=True)
        counts = torch.bincount(bins, minlength=CHI2_BINS).to(torch.float64)
        expected = n_finite / CHI2_BINS
        chi2 = float(((counts - expected) ** 2).sum() / expected)
        out["chi2"] = chi2
        out["chi2_dof"] = CHI2_BINS - 1
    return out
