"""The width family (index-width boundaries) on the CPU, with its boundaries scaled down to
2^14 and 2^15: every case passes on a healthy stack, every case catches the failures its
oracle targets when simulation plants them, and the harness sorts refusals, memory and
faults the way docs/probes.md ("width") says."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from gpuprobe.worker import catalog, simulate
from gpuprobe.worker.context import ProbeContext, SkipProbe
from gpuprobe.worker.probes.width import cases as width_cases
from gpuprobe.worker.probes.width import run as width_run
from gpuprobe.worker.probes.width import scope as width_scope

#: Cases whose outputs a wrapped offset cannot change: constants, and results of one
#: element (a wrapped read is what ``zeros`` and the closed forms catch there).
WRAP_INVISIBLE = {
    "full.fp16",
    "full.int32",
    "sum.all.fp32",
    "argmax.all.fp16",
    "any_all.bool",
}
#: Along the one long row of ``d31`` and ``d32`` the reductions return one value.
WRAP_INVISIBLE_LONG = {"sum.fp16", "sum.bf16", "sum.fp32", "sum.int32", "mean.bf16", "var.fp32", "amax.fp16", "argmax.fp32"}

#: Attention backends that exist only on a GPU (their cases are refused on the CPU).
GPU_ONLY = {c.name for c in width_scope.REGISTRY if any(f"sdpa.{b}." in c.name for b in ("flash", "efficient", "cudnn"))}


def _run_case(case: width_scope.Case, kind: str) -> width_scope.Scope:
    ctx = ProbeContext(torch, "cpu", 0, f"width.{case.group}.{kind}", {})
    scope = width_scope.Scope(ctx, width_scope.geometry(kind, on_gpu=False), seed=7)
    scope.case = case.name
    case.run(scope)
    return scope


def _all_cases() -> list[tuple[width_scope.Case, str]]:
    return [(c, k) for c in width_scope.REGISTRY for k in c.kinds if c.name not in GPU_ONLY]


@pytest.fixture
def fault() -> Any:
    engines: list[Any] = []

    def plant(effect: str, methods: list[str] | None = None, **extra: Any) -> None:
        raw: dict[str, Any] = {"name": f"width-{effect}", "op": "width", "effect": {"kind": effect, **extra}}
        if methods:
            raw["when"] = {"methods": methods}
        spec = {"fault": [raw]}
        engines.append(simulate.activate(spec, torch, "cpu"))

    yield plant
    simulate.deactivate()


def test_every_group_has_cases_at_both_element_boundaries_and_probes_are_isolated() -> None:
    probes = {p.id: p for p in catalog.all_probes().values() if p.id.startswith("width.")}
    for group in width_scope.GROUPS:
        for kind in ("n31", "n32"):
            assert width_run.cases_for(group, kind), (group, kind)
            assert f"width.{group}.{kind}" in probes
    for probe in probes.values():
        assert probe.tier == "full" and probe.isolated
        assert probe.params["kind"] in width_scope.BOUNDARIES
        if probe.params["kind"] in width_scope.SMALL_KINDS:
            # A gigabyte at most: beside the other lanes, in a side lane of its own.
            assert probe.placement == "side" and probe.lane == "width-grid", probe.id
            assert width_run.probe_need_bytes(probe.params["group"], probe.params["kind"])[1] < 3 * 2**30
        else:
            assert probe.placement == "exclusive", probe.id
    # One dimension past 2^31 where the operations allow it: not attention.
    assert "width.attention.d31" not in probes and "width.reduce.d31" in probes
    # Past 2^32: the groups that treat one dimension apart (the others are 1-D at n32).
    assert {p for p in probes if p.endswith(".d32")} == {"width.reduce.d32", "width.scan.d32", "width.index.d32"}
    # Index values past int32 into one dimension past 2^31 and 2^32, by int64 indices.
    long_index = {c.name for c in width_run.cases_for("index", "d32")}
    long_index &= {c.name for c in width_run.cases_for("index", "d31")}
    assert {"index_select.long.uint8", "gather.long.bool", "embedding.long.fp16.bwd", "index_add.long.fp16",
            "scatter.long.uint8", "index_fill.long.bool", "bincount.values.int64", "histc.bins.fp64"} <= long_index


def test_geometry_crosses_the_boundaries_it_names() -> None:
    for kind, bits in width_scope.BOUNDARIES.items():
        g = width_scope.geometry(kind, on_gpu=True)
        assert g.total > 1 << bits
        assert g.total < (1 << bits) * 1.05
        assert g.marks[-1] == 1 << bits
        if kind in width_scope.LONG_KINDS:
            # One dimension past the boundary, and past 2^31 as well at d32.
            assert g.shape() == (g.length,) and g.length > 1 << bits
            assert g.marks == [1 << b for b in range(31, bits + 1)]
        elif kind == "g16":
            # Past the grid's 65535 blocks on its second and third axes.
            assert g.length > 65535 and g.marks == [1 << 16]
        else:
            assert max(g.shape()) < 1 << 31
        small = width_scope.geometry(kind, on_gpu=False)
        below = width_scope.CPU_BITS_BELOW_SMALL if kind in width_scope.SMALL_KINDS else width_scope.CPU_BITS_BELOW
        assert small.total > 1 << (bits - below) and small.marks


@pytest.mark.parametrize("case,kind", _all_cases(), ids=lambda v: v if isinstance(v, str) else v.name)
def test_a_healthy_stack_passes(case: width_scope.Case, kind: str) -> None:
    scope = _run_case(case, kind)
    assert scope.checked > 0
    assert scope.violations == 0, scope.examples


@pytest.mark.parametrize("effect", ["wrap", "zeros"])
def test_planted_faults_are_caught_by_every_case(effect: str, fault: Any) -> None:
    fault(effect)
    missed = []
    for case, kind in _all_cases():
        if effect == "wrap" and (
            case.name in WRAP_INVISIBLE or (kind in width_scope.LONG_KINDS and case.name in WRAP_INVISIBLE_LONG)
        ):
            continue
        if _run_case(case, kind).violations == 0:
            missed.append(f"{case.name} at {kind}")
    assert not missed


def test_wrap_reads_across_the_largest_power_of_two() -> None:
    t = torch.arange(11, dtype=torch.float32)
    simulate.corrupt(torch, t, "wrap", 1)
    assert t.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2]


def _probe(group: str, kind: str) -> Any:
    probe = catalog.lookup(f"width.{group}.{kind}")
    assert probe is not None
    ctx = ProbeContext(torch, "cpu", 0, probe.id, {})
    return probe.resolve()(ctx, **probe.params), ctx


def test_a_refusal_is_a_note_and_a_device_fault_is_a_finding(fault: Any) -> None:
    fault("exception", methods=["clone"], message="input tensor must have fewer than INT_MAX elements")
    output, _ = _probe("copy", "n31")
    assert output.measurement["violations"] == 0
    assert output.metrics["cases_refused"] == 2 and output.metrics["cases_run"] > 0
    assert any(note.startswith("refused: clone.fp16") for note in output.notes)
    # Every case refused: nothing was tested, a SKIP that says why.
    simulate.deactivate()
    fault("exception", message="input tensor must have fewer than INT_MAX elements")
    with pytest.raises(SkipProbe, match="no case could run"):
        _probe("copy", "n31")


def test_a_fault_the_context_survives_fails_the_case_and_the_rest_still_run(fault: Any) -> None:
    fault("exception", methods=["clone"], message="CUDA error: invalid argument")
    output, _ = _probe("copy", "n31")
    assert output.measurement["violations"] == 2 and output.metrics["cases_run"] > 2
    assert "faulted: RuntimeError: CUDA error: invalid argument" in output.measurement["example"]


def test_an_out_of_memory_error_is_never_a_failure(fault: Any) -> None:
    fault("oom")
    with pytest.raises(SkipProbe):
        _probe("copy", "n31")


def test_memory_is_planned_per_case() -> None:
    low, high = width_run.probe_need_bytes("sort", "n32")
    assert low < high
    # The 80 GB class of GPU runs most cases; the largest sort does not fit and is listed.
    assert high > 80 * 2**30
    g = width_scope.geometry("n31", on_gpu=True)
    arange = next(c for c in width_run.cases_for("create", "n31") if c.name == "arange.int64")
    assert arange.need_bytes(g) == 8 * g.total


def test_cases_are_registered_once_with_known_groups() -> None:
    names = [(c.group, c.name) for c in width_scope.REGISTRY]
    assert len(names) == len(set(names))
    assert {c.group for c in width_scope.REGISTRY} == set(width_scope.GROUPS)
    assert width_cases.STEP > 0


def test_docs_hold_the_generated_memory_table() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "probes.md").read_text(encoding="utf-8")
    begin, end = "<!-- width-memory:begin -->\n", "<!-- width-memory:end -->"
    documented = text.split(begin, 1)[1].split(end, 1)[0]
    assert documented == width_run.memory_markdown(), (
        "docs/probes.md is out of step: regenerate with python -m gpuprobe.worker.probes.width.run"
    )


def _sticky(method: str, message: str = "CUDA error: an illegal memory access was encountered") -> dict[str, Any]:
    """A fault that raises a sticky device error in the width operation ``method``."""
    return {"name": f"sticky-{method}", "op": "width", "when": {"methods": [method]},
            "effect": {"kind": "exception", "message": message}}


def _simulate(*faults: dict[str, Any]) -> None:
    simulate.activate({"fault": list(faults)}, torch, "cpu")


def _copy_probe() -> tuple[Any, ProbeContext]:
    """``width.copy.n31`` as the worker runs it. Its cases, in order, and the method each
    runs: clone.fp16 (clone), transpose_contiguous.fp16 (contiguous), cat.fp16 (cat),
    flip.fp16 (flip), roll.fp16 (roll), repeat.fp16 (repeat), pad.fp16 (constant_pad_nd),
    strided_clone.fp16 (clone), copy_to_fp32.fp16 (copy_)."""
    probe = catalog.lookup("width.copy.n31")
    assert probe is not None
    ctx = ProbeContext(torch, "cpu", 0, probe.id, {})
    with simulate.bypassed():
        return probe.resolve()(ctx, **probe.params), ctx


def test_a_sticky_fault_ends_the_case_and_the_rest_run_in_a_fresh_process(fault: Any) -> None:
    # cat.fp16 loses the device context of the worker; roll.fp16, which now runs in a fresh
    # process, returns zeros: judged there, it fails the probe, and the fault is listed.
    _simulate(_sticky("cat"), {"name": "roll-zeros", "op": "width", "when": {"methods": ["roll"]},
                               "effect": {"kind": "zeros"}})
    output, ctx = _copy_probe()
    assert ctx.restart_worker and ctx.restart_worker.startswith("cat.fp16 faulted")
    ran = {r["case"]: r for r in output.metrics["cases"]}
    assert list(ran) == [c.name for c in width_run.cases_for("copy", "n31") if c.name != "cat.fp16"]
    assert ran["clone.fp16"].get("process") is None and ran["flip.fp16"]["process"] == 1
    assert ran["roll.fp16"]["violations"] > 0 and output.measurement["violations"] == ran["roll.fp16"]["violations"]
    assert output.metrics["cases_faulted"] == 1 and output.metrics["fresh_processes"] == 1
    assert output.metrics["faulted"] == [
        {"case": "cat.fp16", "error": "RuntimeError: CUDA error: an illegal memory access was encountered",
         "process": 0}
    ]
    assert "faulted: cat.fp16: RuntimeError: CUDA error: an illegal memory access was encountered" in output.notes


def test_a_crash_a_fault_or_a_hang_in_a_fresh_process_ends_only_its_case(fault: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(width_run, "CASE_TIMEOUT_S", 4.0)
    _simulate(
        _sticky("cat"),
        {"name": "crash", "op": "width", "when": {"methods": ["roll"]},
         "effect": {"kind": "crash", "signal": "SIGSEGV"}},
        _sticky("constant_pad_nd", "CUDA error: misaligned address"),
        {"name": "hang", "op": "width", "when": {"methods": ["copy_"]}, "effect": {"kind": "hang"}},
    )
    with pytest.raises(width_run.CaseFaults) as raised:
        _copy_probe()
    outcomes = {r.case: (r.outcome, r.process) for r in raised.value.results}
    assert outcomes == {
        "clone.fp16": ("ran", 0),
        "transpose_contiguous.fp16": ("ran", 0),
        "cat.fp16": ("fault", 0),
        "flip.fp16": ("ran", 1),
        "roll.fp16": ("fault", 1),
        "repeat.fp16": ("ran", 2),
        "pad.fp16": ("fault", 2),
        "strided_clone.fp16": ("ran", 3),
        "copy_to_fp32.fp16": ("fault", 3),
    }
    assert all(r.checked > 0 and r.violations == 0 for r in raised.value.results if r.outcome == "ran")
    text = str(raised.value)
    # Every faulting case, with its error, and what ran after the faults.
    assert text.startswith("4 of 9 cases on 16647 elements in rows of 31 (past 2^14) faulted: ")
    assert "cat.fp16: RuntimeError: CUDA error: an illegal memory access was encountered;" in text
    assert (
        "roll.fp16: fresh process 1 died with SIGSEGV during it: simulated crash (crash) during width | "
        "Fatal Python error: Segmentation fault;"
    ) in text
    assert "pad.fp16: RuntimeError: CUDA error: misaligned address (in fresh process 2);" in text
    assert "copy_to_fp32.fp16: did not finish within 4 s in fresh process 3; it was killed." in text
    assert text.endswith(
        "Cases that passed in the probe's process: clone.fp16, transpose_contiguous.fp16; "
        "cases that passed in fresh processes after a fault: flip.fp16, repeat.fp16, strided_clone.fp16"
    )


def _result(
    case: str, outcome: str = "ran", violations: int = 0, process: int = 0, text: str = ""
) -> width_run.CaseResult:
    return width_run.CaseResult(case, outcome, text, checked=10, violations=violations, process=process)


def test_a_fault_is_an_error_unless_a_judged_case_is_wrong() -> None:
    ctx = ProbeContext(torch, "cpu", 0, "width.index.n31", {})
    g = width_scope.geometry("n31", on_gpu=False)
    cases = width_run.cases_for("index", "n31")
    fault = _result("nll_loss_spatial.fp16.bwd", "fault", text="AcceleratorError: CUDA error: an illegal memory access")
    passed = [_result("gather.fp32"), _result("histc.fp32", process=1)]
    with pytest.raises(width_run.CaseFaults, match="1 of 3 cases .* faulted: nll_loss_spatial.fp16.bwd: Accelerator"):
        width_run._output(ctx, g, "index", "n31", cases, [passed[0], fault, passed[1]], 0, 1, [])
    # A wrong case is a FAIL; the fault stays in the notes and the metrics.
    wrong = _result("take.fp32", violations=3, process=1)
    output = width_run._output(ctx, g, "index", "n31", cases, [passed[0], fault, wrong], 0, 1, [])
    assert output.measurement["violations"] == 3
    assert "faulted: nll_loss_spatial.fp16.bwd: AcceleratorError: CUDA error: an illegal memory access" in output.notes
    assert output.metrics["faulted"][0]["case"] == "nll_loss_spatial.fp16.bwd"
    assert output.metrics["cases"][1] == {"case": "take.fp32", "violations": 3, "seconds": 0.0, "planned_gib": 0.0,
                                          "process": 1}


def test_a_crashed_childs_last_words_skip_the_stack_dump() -> None:
    stderr = (
        "gpuprobe width: width.scan.n31 cummax.fp16\n"
        "terminate called after throwing an instance of 'c10::Error'\n"
        "Fatal Python error: Aborted\n\nCurrent thread 0x1 (most recent call first):\n  File \"x.py\", line 3\n"
        "Extension modules: numpy, torch._C\n"
    )
    assert width_run._last_words(stderr) == (
        "terminate called after throwing an instance of 'c10::Error' | Fatal Python error: Aborted"
    )
    assert width_run._last_words("one\ntwo\nthree\n") == "two | three"
    assert width_run._last_words("") == "no output"


def test_a_simulated_sticky_error_loses_the_context_until_simulation_is_reset(fault: Any) -> None:
    assert simulate.is_sticky_error("CUDA error: an illegal memory access was encountered")
    assert not simulate.is_sticky_error("CUDA error: invalid argument")
    _simulate(_sticky("flip"))
    ctx = ProbeContext(torch, "cpu", 0, "width.copy.n31", {})
    assert width_run.context_lost(ctx) is None
    with pytest.raises(RuntimeError), simulate.bypassed():
        width_cases.flip_fp16(width_scope.Scope(ctx, width_scope.geometry("n31", on_gpu=False), seed=1))
    assert width_run.context_lost(ctx) == "CUDA error: an illegal memory access was encountered"
    # A fresh simulation (a fresh process activates one) starts with a usable context.
    _simulate()
    assert width_run.context_lost(ctx) is None
