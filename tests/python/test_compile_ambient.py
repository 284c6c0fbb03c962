"""compile.ambient: a training step compiled under each process-wide setting in turn on the
same caches, judged against eager under the same setting (``compile_ambient``). The CPU runs
it with ``aot_eager`` (no code generation: seconds, not minutes), which exercises every
setting, the judging and the simulation; the caches' keys are the GPU host's to test."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from gpuprobe.worker import simulate  # noqa: E402
from gpuprobe.worker.context import ProbeContext  # noqa: E402
from gpuprobe.worker.probes.compile import ambient as compile_ambient  # noqa: E402
from gpuprobe.worker.probes.compile import specs as compile_specs  # noqa: E402


@pytest.fixture(autouse=True)
def _no_code_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(compile_ambient.COMPILE_OPTIONS, "backend", "aot_eager")


def _run() -> Any:
    return compile_ambient.run(ProbeContext(torch, "cpu", 4242, "compile.ambient", {}))


def test_a_healthy_step_passes_under_every_setting_the_cpu_has() -> None:
    out = _run()
    m = out.measurement
    assert m["failed"] == {} and m["device_errors"] == 0, m["failures"]
    states = out.metrics["states"]
    # TF32 is a GPU setting: left out with its reason, everything else compiled and judged.
    assert "tf32" not in states and any("tf32 left out: TF32 is a GPU setting" in n for n in out.notes)
    assert {"autocast_bfloat16", "autocast_float16", "float32_no_grad", "default_float64"} <= set(states)
    # logits, loss and 8 gradients per training state; logits and loss per no_grad state.
    assert m["cases"] == m["passed"] >= 8 * 2 + 2 * 2
    assert 0.0 < out.metrics["bound_used"] <= 1.0


def test_a_planted_wrong_step_under_one_setting_is_caught_and_names_it() -> None:
    fault = {"name": "ambient-f16", "op": "compile", "when": {"methods": ["ambient"], "variants": ["autocast_float16"]}, "effect": {"kind": "zeros"}}
    simulate.activate({"source": "test", "fault": [fault]}, torch, "cpu")
    try:
        out = _run()
    finally:
        simulate.deactivate()
    m = out.measurement
    assert m["failed"].get("wrong_value", 0) >= 1, m
    assert {f["variant"] for f in m["failures"]} == {"autocast_float16"}, m["failures"]
    assert m["passed"] >= 30  # every other setting is right


def _result(values: dict[str, Any], dtype: Any = None) -> compile_ambient.StepResult:
    return compile_ambient.StepResult(
        {k: torch.tensor(v, dtype=torch.float64) for k, v in values.items()},
        {k: dtype or torch.float16 for k in values},
    )


FP16 = next(s for s in compile_ambient.STATES if s.name == "autocast_float16")


def test_code_compiled_for_another_autocast_dtype_is_caught_by_its_dtype() -> None:
    """What a cache keyed on too little serves: the logits come back in bfloat16 under
    float16 autocast, however close the values."""
    reference = _result({"logits": [1.0, 2.0, 3.0]})
    eager = _result({"logits": [1.0, 2.0, 3.001]})
    compiled = _result({"logits": [1.0, 2.0, 3.001]}, torch.bfloat16)
    tally = compile_ambient.StateTally()
    compile_ambient.judge_state(tally, FP16, compiled, eager, reference)
    assert tally.failed == {"wrong_value": 1}
    assert "dtype torch.bfloat16 where eager under the same settings returns torch.float16" in tally.failures[0]["detail"]


def test_a_compiled_error_within_noise_times_eagers_passes_and_beyond_it_fails() -> None:
    """The benign-difference rule: compiled and eager round at other places, so the compiled
    error may be ``NOISE_FACTOR`` times eager's; code compiled at a coarser precision errs by
    its own unit and fails."""
    reference = _result({"loss": [1.0, 1.0, 1.0, 1.0]})
    eager_error = 0.01  # far above the float16 floor: the factor decides
    eager = _result({"loss": [1.0 + eager_error * 2, 1.0, 1.0, 1.0]})
    within = _result({"loss": [1.0, 1.0 + compile_ambient.NOISE_FACTOR * eager_error * 2 * 0.9, 1.0, 1.0]})
    beyond = _result({"loss": [1.0, 1.0 + compile_ambient.NOISE_FACTOR * eager_error * 2 * 1.2, 1.0, 1.0]})
    passed, failed = compile_ambient.StateTally(), compile_ambient.StateTally()
    compile_ambient.judge_state(passed, FP16, within, eager, reference)
    compile_ambient.judge_state(failed, FP16, beyond, eager, reference)
    assert passed.passed == 1 and not passed.failed
    assert failed.failed == {"wrong_value": 1} and "where eager's is" in failed.failures[0]["detail"]


def test_where_eager_is_exact_the_floor_allows_a_few_units_of_the_setting() -> None:
    reference = _result({"loss": [1.0, 1.0]})
    eager = _result({"loss": [1.0, 1.0]})
    unit = compile_ambient.UNIT_ROUNDOFF["float16"]
    near = _result({"loss": [1.0 + 8 * unit, 1.0]})
    far = _result({"loss": [1.0 + 64 * unit, 1.0]})
    ok, bad = compile_ambient.StateTally(), compile_ambient.StateTally()
    compile_ambient.judge_state(ok, FP16, near, eager, reference)
    compile_ambient.judge_state(bad, FP16, far, eager, reference)
    assert ok.passed == 1 and bad.failed == {"wrong_value": 1}


def test_the_probe_is_cataloged_in_the_full_tier_on_a_lane_of_its_own() -> None:
    probe = next(p for p in compile_specs.specs() if p.id == "compile.ambient")
    assert probe.tier == "full" and probe.placement == "side" and probe.lane == "compile-ambient"
    assert probe.impl == "gpuprobe.worker.probes.compile.ambient:run"
    # Every autocast dtype is compiled after the other one, float32 after TF32.
    names = [s.name for s in compile_ambient.STATES]
    assert names.index("autocast_float16") > names.index("autocast_bfloat16")
    assert names.index("autocast_bfloat16_again") > names.index("autocast_float16")
    assert names.index("float32_again") > names.index("tf32")
