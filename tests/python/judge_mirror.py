"""A small Python mirror of the judge's classification, for these tests only.

The real judge is Rust (crate gpuprobe-doctor) and owns the thresholds; this mirror follows
the classification order given to probe authors and uses deliberately loose statistical
bounds (z = 7, plus an allowance for the dtype's grid), so that a test failure here means a
probe reports something clearly wrong, not a borderline draw.
"""

from __future__ import annotations

import math
from typing import Any

from gpuprobe.worker.tolerances import ALIASES as _ALIASES
from gpuprobe.worker.tolerances import DTYPE_TOLERANCE as _BASE_TOLERANCE

Z = 7.0
DIGITS = {"float32": 24, "float16": 11, "bfloat16": 8, "float64": 53}


def classify_compare(m: dict[str, Any]) -> str:
    """pass / nan_inf / all_zeros / partial_zeros / unchanged / mismatch."""
    if m["mismatches"] == 0:
        return "pass"
    if m.get("nonfinite_where_finite", 0) > 0:
        return "nan_inf"
    failed = m.get("failed_trials", 0)
    if failed and m.get("all_zero_trials", 0) == failed:
        return "all_zeros"
    if m.get("zeros_where_nonzero", 0) == m["mismatches"]:
        return "partial_zeros"
    if m.get("unchanged", 0) == m["mismatches"]:
        return "unchanged"
    return "mismatch"


def classify_invariant(m: dict[str, Any]) -> str:
    """pass / all_zeros (every checked item a violating zero) / partial_zeros (every violation
    a zero) / mismatch."""
    violations = m["violations"]
    if violations == 0:
        return "pass"
    if m.get("zero_violations", 0) == violations:
        return "all_zeros" if violations == m["checked"] else "partial_zeros"
    return "mismatch"


def _moments(distribution: dict[str, Any]) -> tuple[float, float]:
    kind = distribution["kind"]
    if kind == "normal":
        return distribution["mean"], distribution["std"] ** 2
    if kind == "uniform":
        low, high = distribution["low"], distribution["high"]
        return (low + high) / 2, (high - low) ** 2 / 12
    low, high = distribution["low"], distribution["high"]
    span = high - low
    return (low + high - 1) / 2, (span * span - 1) / 12


def chi2_upper(dof: int, z: float = Z) -> float:
    """Wilson-Hilferty upper quantile of the chi-square distribution."""
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


def stats_problems(m: dict[str, Any]) -> list[str]:
    """Reasons a SampleStats measurement looks wrong (empty when it looks right)."""
    problems = []
    n = m["n"]
    if m["nonfinite"]:
        problems.append(f"{m['nonfinite']} non-finite samples")
    if m.get("out_of_range", 0):
        problems.append(f"{m['out_of_range']} samples out of range")
    expected_zeros = n * m.get("p_zero", 0.0)
    if m["zeros"] > expected_zeros + Z * math.sqrt(expected_zeros + 1) + 3:
        problems.append(f"{m['zeros']} zeros, about {expected_zeros:.3g} expected")
    mean, var = _moments(m["distribution"])
    scale = math.sqrt(var) if var > 0 else 1.0
    grid = 0.0
    if m["distribution"]["kind"] == "uniform":
        grid = 2.0 ** -DIGITS.get(m["dtype"], 53) * (m["distribution"]["high"] - m["distribution"]["low"])
    if abs(m["mean"] - mean) > Z * scale / math.sqrt(n) + grid:
        problems.append(f"mean {m['mean']} far from {mean}")
    if var > 0 and abs(m["var"] / var - 1) > Z * math.sqrt(2.0 / n) + 4 * grid / scale:
        problems.append(f"variance {m['var']} far from {var}")
    if "chi2" in m and m["chi2"] > chi2_upper(m["chi2_dof"]):
        problems.append(f"chi-square {m['chi2']:.1f} with {m['chi2_dof']} dof")
    return problems


def classify(measurement: dict[str, Any]) -> str:
    """The class of any measurement: pass or how it failed."""
    kind = measurement["kind"]
    if kind == "compare":
        return classify_compare(measurement)
    if kind == "invariant":
        return classify_invariant(measurement)
    if kind == "stats":
        problems = stats_problems(measurement)
        if not problems:
            return "pass"
        if measurement["n"] and measurement["zeros"] == measurement["n"]:
            return "all_zeros"
        if measurement["nonfinite"]:
            return "nan_inf"
        return "mismatch"
    if kind == "sweep":
        # judge.rs judge_sweep: the first failure's class, else a device error, else pass.
        if sum(measurement["failed"].values()):
            first = measurement["failures"][0]
            if first["class"] == "nonfinite_invented":
                return "nan_inf"
            if first.get("all_zero"):
                return "all_zeros"
            return "partial_zeros" if first.get("zeros") else "mismatch"
        return "error" if measurement["device_errors"] else "pass"
    raise ValueError(f"unknown measurement kind {kind}")


# -- the tolerance rule (docs/probes.md, "Judging" / "tolerance"; judge.rs judge_tolerance) ------

#: The judge's base tolerance by rule dtype or alias (normwise relative error against
#: float64), from the table the judge itself embeds (gpuprobe/worker/tolerances.json).
DTYPE_TOLERANCE = {**_BASE_TOLERANCE, **{alias: _BASE_TOLERANCE[name] for alias, name in _ALIASES.items()}}


def result_classes(results: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Per probe of a worker's results (``WorkerRun.results()``): the class of its
    measurement when observed, otherwise its outcome (skip, error)."""
    return {
        probe: classify(result["observation"]["measurement"]) if result["outcome"] == "observed" else result["outcome"]
        for probe, result in results.items()
    }


def _failure_class(m: dict[str, Any]) -> str:
    """The judge's classification order for a comparison that failed."""
    if m.get("nonfinite_where_finite", 0) > 0:
        return "nan_inf"
    failed = m.get("failed_trials", 0)
    if failed > 0 and m.get("all_zero_trials", 0) == failed:
        return "all_zeros"
    if m["mismatches"] > 0 and m.get("zeros_where_nonzero", 0) == m["mismatches"]:
        return "partial_zeros"
    if m["mismatches"] > 0 and m.get("unchanged", 0) == m["mismatches"]:
        return "unchanged"
    return "mismatch"


def judge_tolerance(m: dict[str, Any], rule: dict[str, Any]) -> str:
    """pass, or the failure class, for a ``compare`` measurement under the tolerance rule:
    the normwise relative error ``max_rel_err`` must not exceed the dtype's tolerance times
    the rule's ``scale``; NaN/Inf where the reference is finite always fails, and so does an
    output still holding its canary (``unchanged``), as judge.rs does."""
    tolerance = DTYPE_TOLERANCE[rule["dtype"]] * rule.get("scale", 1.0)
    rel = m.get("max_rel_err")
    within = rel is not None and rel <= tolerance
    if m.get("nonfinite_where_finite", 0) == 0 and within and m.get("unchanged", 0) == 0:
        return "pass"
    failed = m.get("failed_trials", 0)
    if m.get("nonfinite_where_finite", 0) > 0 or (failed > 0 and m.get("all_zero_trials", 0) == failed):
        return _failure_class(m)
    mismatches = m["mismatches"]
    if mismatches > 0 and (m.get("zeros_where_nonzero", 0) == mismatches or m.get("unchanged", 0) == mismatches):
        return _failure_class(m)
    return "mismatch"


def judge(measurement: dict[str, Any], rule: dict[str, Any]) -> str:
    """pass or the failure class of a measurement under the probe's declared rule."""
    kind = rule["kind"]
    if kind == "measure":
        return "pass"
    if kind == "tolerance":
        if measurement["kind"] != "compare":
            raise ValueError(f"tolerance rule with a {measurement['kind']} measurement")
        return judge_tolerance(measurement, rule)
    return classify(measurement)
