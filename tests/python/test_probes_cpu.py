"""With no fault, every quick and standard probe passes on the CPU (the CI self-test)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from conftest import WorkerRun
from judge_mirror import judge, stats_problems

# Probes that need what a CPU device under test cannot offer, and say so.
SKIP_REASONS = (
    "needs a GPU device under test",
    "needs at least 2 GPUs",
    "cannot run this case on cpu",
    "needs a GPU",
)


def _gpu_only(probe: str) -> bool:
    """Probes whose subject exists only on a GPU: pinned host memory, `.cuda()`, peer
    copies, the fused attention backends, allocator streams."""
    return (
        ".pinned." in probe
        or probe.endswith((".pinned", ".cuda"))
        or probe == "copy.p2p.medium"
        or probe.startswith("dist.p2p.")
        or probe == "alloc.stream.free_reuse"
        or (probe.startswith("nn.sdpa.") and probe.split(".")[3] in ("efficient", "flash", "cudnn"))
    )


def test_every_probe_reports(quick_and_standard: tuple[WorkerRun, list[dict]]) -> None:
    run, specs = quick_and_standard
    results = run.results()
    assert set(results) == {s["id"] for s in specs}
    assert run.events[-1]["event"] == "done"
    for probe, result in results.items():
        if result["outcome"] == "skip":
            assert any(reason in result["reason"] for reason in SKIP_REASONS), (probe, result["reason"])
        else:
            assert result["outcome"] == "observed", (probe, result.get("message"), result.get("traceback"))


def test_every_observation_passes(quick_and_standard: tuple[WorkerRun, list[dict]]) -> None:
    run, specs = quick_and_standard
    rule_of = {s["id"]: s["rule"] for s in specs}
    failures: list[tuple[str, str, Any]] = []
    for probe, result in run.results().items():
        if result["outcome"] != "observed":
            continue
        measurement = result["observation"]["measurement"]
        verdict = judge(measurement, rule_of[probe])
        if verdict != "pass":
            detail = stats_problems(measurement) if measurement["kind"] == "stats" else measurement
            failures.append((probe, verdict, detail))
    assert not failures, failures


def test_rules_match_measurements(quick_and_standard: tuple[WorkerRun, list[dict]]) -> None:
    run, specs = quick_and_standard
    rule_of = {s["id"]: s["rule"]["kind"] for s in specs}
    expected = {
        "bit_exact": {"compare"},
        "tolerance": {"compare"},
        "statistical": {"stats", "invariant"},
        "invariant": {"invariant", "compare"},
        "measure": {"metrics", "compare", "stats", "invariant"},
        "sweep": {"sweep"},
    }
    for probe, result in run.results().items():
        if result["outcome"] == "observed":
            assert result["observation"]["measurement"]["kind"] in expected[rule_of[probe]], probe


def test_only_gpu_only_probes_skip_on_cpu(quick_and_standard: tuple[WorkerRun, list[dict]]) -> None:
    run, _ = quick_and_standard
    skipped = {p for p, r in run.results().items() if r["outcome"] == "skip"}
    for probe in skipped:
        assert _gpu_only(probe), probe
    assert "copy.h2d.pageable.tiny.nonblocking" not in skipped


def test_tiny_copy_probe_follows_the_rkb001_recipe(quick_and_standard: tuple[WorkerRun, list[dict]]) -> None:
    run, _ = quick_and_standard
    result = run.results()["copy.h2d.pageable.tiny.nonblocking"]
    metrics = result["observation"]["metrics"]
    measurement = result["observation"]["measurement"]
    assert metrics["copies"] == measurement["trials"] == 20000
    assert 2 <= metrics["threads"] <= 4
    assert metrics["bytes_per_copy_max"] <= 64 and metrics["non_blocking"] is True and metrics["pinned"] is False


def test_dtype_inputs_are_adversarial(quick_and_standard: tuple[WorkerRun, list[dict]]) -> None:
    run, _ = quick_and_standard
    metrics = run.results()["dtype.fp32.fp16.to.device"]["observation"]["metrics"]
    assert metrics["nan_inputs"] > 0 and metrics["inf_inputs"] > 0 and metrics["subnormal_inputs"] > 0
    assert metrics["zero_inputs"] >= 2
    to_int = run.results()["dtype.fp32.int8.to.device"]["observation"]["metrics"]
    assert to_int["nan_inputs"] == 0 and to_int["inf_inputs"] == 0  # undefined for integers
    to_fp8 = run.results()["dtype.fp32.fp8e4m3.to.device"]["observation"]["metrics"]
    assert to_fp8["inf_inputs"] == 0 and to_fp8["nan_inputs"] > 0


def test_rng_statistics_are_complete(quick_and_standard: tuple[WorkerRun, list[dict]]) -> None:
    run, _ = quick_and_standard
    fp32 = run.measurement("rng.randn.fp32")
    assert fp32["n"] == 1 << 20 and fp32["chi2_dof"] == 63 and fp32["distribution"]["kind"] == "normal"
    assert fp32["p_zero"] == pytest.approx(2.0**-23)
    assert "chi2" not in run.measurement("rng.randn.bf16")  # too few distinct values for equal bins
    uniform = run.measurement("rng.rand.fp16")
    assert uniform["p_zero"] == 2.0**-11 and uniform["distribution"] == {"kind": "uniform", "low": 0.0, "high": 1.0}
    ints = run.measurement("rng.randint.int64")
    assert ints["distribution"]["kind"] == "uniform_int" and "chi2" in ints


def test_every_quick_probe_reports_its_time(
    quick_and_standard: tuple[WorkerRun, list[dict]], capsys: pytest.CaptureFixture
) -> None:
    """Every quick probe answers with the seconds it took (what ``--timings`` and the lane
    sizing read). The seconds are printed, never judged: a timing is no test; the budgets
    are measured by ``bench/budgets.sh`` on a GPU host."""
    run, specs = quick_and_standard
    quick = {s["id"] for s in specs if s["tier"] == "quick"}
    times = {p: r["elapsed_s"] for p, r in run.results().items() if p in quick}
    assert set(times) == quick
    assert all(isinstance(t, float) and math.isfinite(t) and t >= 0.0 for t in times.values())
    total = sum(times.values())
    with capsys.disabled():
        print(f"\nquick tier on cpu: {len(times)} probes, {total:.2f} s of probe time")
        for probe, seconds in sorted(times.items(), key=lambda item: -item[1])[:8]:
            print(f"  {seconds:7.3f} s  {probe}")
