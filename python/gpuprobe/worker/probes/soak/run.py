"""Soak family implementation (see ``soak_specs``).

The sentinels are other families' probes, run through their own implementations with a
context of their own id (so cold and after-load runs use the same inputs as each other and as
a normal run). Only probes with exact rules can be sentinels: their verdict is plain (no
mismatch, no violation), so this probe need not repeat the judge's statistics.

The load is checked too: fp32 matmuls of small-integer matrices (exact in any summation order,
with or without TF32) compared on the device with rows computed on the host, device-to-device
copies, and on a GPU pinned host-to-device copies, both compared on a strided sample. Results
are compared on the device and read back at the end, so the load never waits for the host.
"""

from __future__ import annotations

import os
import time
from typing import Any

from gpuprobe.worker import catalog
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe
from gpuprobe.worker.probes.soak.specs import MAX_SOAK_SECONDS

#: Environment variable read when the plan carries no ``soak_seconds`` option.
SOAK_SECONDS_ENV = "GPUPROBE_SOAK_SECONDS"
SAMPLE_STRIDE = 4099


def soak_seconds(ctx: ProbeContext, default: float) -> tuple[float, str]:
    """The load phase's length and where it came from (plan option, environment, default),
    clamped to [0.5, MAX_SOAK_SECONDS]."""
    raw: Any = ctx.options.get("soak_seconds")
    source = "plan option soak_seconds"
    if raw is None and os.environ.get(SOAK_SECONDS_ENV):
        raw, source = os.environ[SOAK_SECONDS_ENV], SOAK_SECONDS_ENV
    if raw is None:
        return default, "default"
    try:
        value = float(raw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{source} must be a number of seconds, not {raw!r}") from exc
    if value != value:  # NaN
        raise ValueError(f"{source} must be a number of seconds, not {raw!r}")
    clamped = min(max(value, 0.5), MAX_SOAK_SECONDS)
    if clamped != value:
        source += f" (clamped from {value} to {clamped})"
    return clamped, source


def sentinel_outcome(measurement: dict[str, Any]) -> tuple[bool, bool, str]:
    """(passed, failure was all zeros, one-line detail) of an exact-rule measurement."""
    kind = measurement.get("kind")
    if kind == "compare":
        bad = int(measurement.get("mismatches", 0))
        failed = int(measurement.get("failed_trials", 0))
        zeros = failed > 0 and int(measurement.get("all_zero_trials", 0)) == failed
        detail = f"{bad} of {measurement.get('n')} elements differ in {failed} of {measurement.get('trials')} trials"
        if zeros:
            detail += " (all zeros)"
        return bad == 0, zeros, detail
    if kind == "invariant":
        bad = int(measurement.get("violations", 0))
        zeros = bad > 0 and int(measurement.get("zero_violations", 0)) == bad
        detail = f"{bad} of {measurement.get('checked')} violate {measurement.get('property')!r}"
        return bad == 0, zeros, detail
    raise ValueError(f"a sentinel must report compare or invariant facts, not {kind!r}")


def _resolve(probe_id: str) -> catalog.ProbeDef | str:
    """The sentinel's definition, or why it cannot be one."""
    probe = catalog.all_probes().get(probe_id)
    if probe is None:
        return "no such probe"
    if probe.rule.get("kind") not in ("bit_exact", "invariant"):
        return f"rule {probe.rule.get('kind')} is not exact"
    if "explicit" in probe.needs:
        return "deliberate or long probes cannot be sentinels"
    return probe


def run_sentinel(ctx: ProbeContext, probe_id: str) -> dict[str, Any]:
    """Runs one sentinel; returns its status (pass, fail, skip, error), detail and timing."""
    probe = _resolve(probe_id)
    if isinstance(probe, str):
        return {"status": "skip", "detail": probe, "zeros": False, "seconds": 0.0}
    sub = ProbeContext(ctx.torch, ctx.device_name, ctx.seed, probe_id, ctx.options)
    started = time.perf_counter()
    try:
        output = probe.resolve()(sub, **probe.params)
    except SkipProbe as skip:
        return {"status": "skip", "detail": str(skip), "zeros": False, "seconds": 0.0}
    except Exception as exc:  # noqa: BLE001 - a sentinel's error is a finding of the soak
        detail = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
        return {"status": "error", "detail": detail, "zeros": False, "seconds": time.perf_counter() - started}
    passed, zeros, detail = sentinel_outcome(output.measurement)
    return {
        "status": "pass" if passed else "fail",
        "detail": detail,
        "zeros": zeros,
        "seconds": time.perf_counter() - started,
    }


def _device_facts(ctx: ProbeContext) -> dict[str, Any]:
    """Temperature, clock and power where this torch can read them (NVML/AMD SMI)."""
    facts: dict[str, Any] = {}
    if not ctx.is_gpu:
        return facts
    for name in ("temperature", "clock_rate", "power_draw", "utilization"):
        reader = getattr(ctx.torch.cuda, name, None)
        if reader is None:
            continue
        try:
            facts[name] = reader(ctx.device)
        except Exception:  # noqa: BLE001 - the management library may be absent
            continue
    return facts


def sustained_load(ctx: ProbeContext, seconds: float) -> dict[str, Any]:
    """Checked matmuls and copies for ``seconds``; returns counts and rates."""
    torch = ctx.torch
    device = ctx.device
    n = 8192 if ctx.is_gpu else 256
    copy_elems = (1 << 28) if ctx.is_gpu else (1 << 22)
    generator = torch.Generator().manual_seed(ctx.derive_seed("load"))
    a = torch.randint(-2, 3, (n, n), generator=generator, dtype=torch.int32).float()
    b = torch.randint(-2, 3, (n, n), generator=generator, dtype=torch.int32).float()
    rows = torch.tensor([0, n // 2 + 1, n - 1], dtype=torch.int64)
    # |row . column| <= 4n < 2^24: every summation order gives the same float32 bits.
    expected_rows = (a[rows].double() @ b.double()).float()
    a_dev, b_dev = a.to(device), b.to(device)
    rows_dev, expected_dev = rows.to(device), expected_rows.to(device)
    source = torch.arange(copy_elems, dtype=torch.int32, device=device)
    destination = torch.empty_like(source)
    checks = 2
    host_in = device_in = small = None
    if ctx.is_gpu:
        small = torch.arange(1 << 24, dtype=torch.int32)
        host_in = small.pin_memory()
        device_in = torch.empty(1 << 24, dtype=torch.int32, device=device)
        checks = 3
    failures = torch.zeros(checks, dtype=torch.int64, device=device)
    ctx.sync()
    started = time.perf_counter()
    deadline = started + seconds
    iterations = 0
    while True:
        product = torch.mm(a_dev, b_dev)
        failures[0] += (product.index_select(0, rows_dev) != expected_dev).any().long()
        destination.copy_(source)
        failures[1] += (destination[::SAMPLE_STRIDE] != source[::SAMPLE_STRIDE]).any().long()
        if device_in is not None:
            device_in.copy_(host_in, non_blocking=True)
            failures[2] += (device_in[::SAMPLE_STRIDE] != source[: 1 << 24 : SAMPLE_STRIDE]).any().long()
        del product
        iterations += 1
        if iterations % 4 == 0 or not ctx.is_gpu:
            ctx.sync()
            if time.perf_counter() >= deadline:
                break
    ctx.sync()
    elapsed = time.perf_counter() - started
    failed = [int(v) for v in failures.cpu().tolist()]
    names = ["matmul", "d2d", "h2d_pinned"][:checks]
    return {
        "iterations": iterations,
        "seconds": round(elapsed, 3),
        "checked": iterations * checks,
        "failed": dict(zip(names, failed)),
        "matmul_tflops": round(2 * n**3 * iterations / elapsed / 1e12, 3) if elapsed > 0 else None,
        "d2d_gb_per_s": round(2 * copy_elems * 4 * iterations / elapsed / 1e9, 2) if elapsed > 0 else None,
        "matmul_n": n,
    }


def _phase_of(cold: dict[str, Any], after: dict[str, Any]) -> str | None:
    bad = ("fail", "error")
    if cold["status"] in bad and after["status"] in bad:
        return "both"
    if cold["status"] in bad:
        return "cold"
    if after["status"] in bad:
        return "after_load"
    return None


def run_soak(ctx: ProbeContext, *, sentinels: list[str], default_seconds: float) -> ProbeOutput:
    """Sentinels cold, sustained load, sentinels again; per-phase facts."""
    seconds, source = soak_seconds(ctx, default_seconds)
    chosen = ctx.options.get("soak_sentinels")
    if chosen is not None:
        if not isinstance(chosen, list) or not all(isinstance(s, str) for s in chosen):
            raise ValueError("plan option soak_sentinels must be a list of probe ids")
        sentinels = list(chosen)
    metrics: dict[str, Any] = {"soak_seconds": seconds, "soak_seconds_from": source}
    notes: list[str] = []
    metrics.update({f"before.{k}": v for k, v in _device_facts(ctx).items()})
    cold = {probe_id: run_sentinel(ctx, probe_id) for probe_id in sentinels}
    load = sustained_load(ctx, seconds)
    metrics.update({f"after_load.{k}": v for k, v in _device_facts(ctx).items()})
    after = {probe_id: run_sentinel(ctx, probe_id) for probe_id in sentinels}
    checked = violations = zero_violations = 0
    example = None
    phases: set[str] = set()
    for probe_id in sentinels:
        for phase, result in (("cold", cold[probe_id]), ("after_load", after[probe_id])):
            metrics[f"{phase}.{probe_id}"] = result["status"]
            if result["status"] == "skip":
                continue
            checked += 1
            if result["status"] in ("fail", "error"):
                violations += 1
                zero_violations += int(result["zeros"])
                example = example or f"{probe_id} ({phase}): {result['detail']}"
        where = _phase_of(cold[probe_id], after[probe_id])
        if where is None:
            continue
        phases.add(where)
        if where == "after_load":
            notes.append(
                f"{probe_id} passed cold and failed after {load['seconds']:.0f} s of load "
                f"({after[probe_id]['detail']}): points to the machine's state (heat, power, a link), not a code path"
            )
        elif where == "cold":
            notes.append(f"{probe_id} failed cold ({cold[probe_id]['detail']}) and passed after the load")
        else:
            notes.append(f"{probe_id} failed cold and after load ({cold[probe_id]['detail']}): not load-dependent")
    skipped = sorted({p for p in sentinels if cold[p]["status"] == "skip" and after[p]["status"] == "skip"})
    if skipped:
        notes.append("sentinels that do not apply here: " + ", ".join(f"{p} ({cold[p]['detail']})" for p in skipped))
    checked += load["checked"]
    load_failures = sum(load["failed"].values())
    violations += load_failures
    if load_failures:
        phases.add("load")
        failing = ", ".join(f"{k} in {v} of {load['iterations']} iterations" for k, v in load["failed"].items() if v)
        example = example or f"the load's own results were wrong: {failing}"
        notes.append(f"the load's own results were wrong ({failing})")
    metrics["failed_phase"] = "+".join(sorted(phases)) if phases else "none"
    metrics["sentinels"] = len(sentinels)
    metrics.update({f"load.{k}": v for k, v in load.items() if k != "failed"})
    metrics.update({f"load.failed.{k}": v for k, v in load["failed"].items()})
    measurement: dict[str, Any] = {
        "kind": "invariant",
        "property": "every sentinel passes cold and after sustained load, and the load's results are exact",
        "checked": checked,
        "violations": violations,
        "zero_violations": zero_violations,
    }
    if example:
        measurement["example"] = example
    return ProbeOutput(measurement, metrics, notes)
