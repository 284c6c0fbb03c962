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
from gpuprobe.worker.probes import width_cases, width_run

#: Cases whose outputs a wrapped offset cannot change: constants, and results of one
#: element (a wrapped read is what ``zeros`` and the closed forms catch there).
WRAP_INVISIBLE = {
    "full.fp16",
    "full.int32",
    "sum.all.fp32",
    "argmax.all.fp16",
    "any_all.bool",
}
#: Along the one long row of ``d31`` the reductions return one value.
WRAP_INVISIBLE_D31 = {"sum.fp16", "sum.bf16", "sum.fp32", "sum.int32", "mean.bf16", "var.fp32", "amax.fp16", "argmax.fp32"}

#: Attention backends that exist only on a GPU (their cases are refused on the CPU).
GPU_ONLY = {c.name for c in width_run.REGISTRY if any(f"sdpa.{b}." in c.name for b in ("flash", "efficient", "cudnn"))}


def _run_case(case: width_run.Case, kind: str) -> width_run.Scope:
    ctx = ProbeContext(torch, "cpu", 0, f"width.{case.group}.{kind}", {})
    scope = width_run.Scope(ctx, width_run.geometry(kind, on_gpu=False), seed=7)
    scope.case = case.name
    case.run(scope)
    return scope


def _all_cases() -> list[tuple[width_run.Case, str]]:
    return [(c, k) for c in width_run.REGISTRY for k in c.kinds if c.name not in GPU_ONLY]


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
    for group in width_run.GROUPS:
        for kind in ("n31", "n32"):
            assert width_run.cases_for(group, kind), (group, kind)
            assert f"width.{group}.{kind}" in probes
    for probe in probes.values():
        assert probe.tier == "full" and probe.isolated
        assert probe.params["kind"] in width_run.BOUNDARIES
        if probe.params["kind"] in width_run.SMALL_KINDS:
            # A gigabyte at most: beside the other lanes, in a side lane of its own.
            assert probe.placement == "side" and probe.lane == "width-grid", probe.id
            assert width_run.probe_need_bytes(probe.params["group"], probe.params["kind"])[1] < 3 * 2**30
        else:
            assert probe.placement == "exclusive", probe.id
    # One dimension past 2^31 where the operations allow it: not attention.
    assert "width.attention.d31" not in probes and "width.reduce.d31" in probes


def test_geometry_crosses_the_boundaries_it_names() -> None:
    for kind, bits in width_run.BOUNDARIES.items():
        g = width_run.geometry(kind, on_gpu=True)
        assert g.total > 1 << bits
        assert g.total < (1 << bits) * 1.05
        assert g.marks[-1] == 1 << bits
        if kind == "d31":
            assert g.shape() == (g.length,) and g.length > 1 << 31
        elif kind == "g16":
            # Past the grid's 65535 blocks on its second and third axes.
            assert g.length > 65535 and g.marks == [1 << 16]
        else:
            assert max(g.shape()) < 1 << 31
        small = width_run.geometry(kind, on_gpu=False)
        below = width_run.CPU_BITS_BELOW_SMALL if kind in width_run.SMALL_KINDS else width_run.CPU_BITS_BELOW
        assert small.total > 1 << (bits - below) and small.marks


@pytest.mark.parametrize("case,kind", _all_cases(), ids=lambda v: v if isinstance(v, str) else v.name)
def test_a_healthy_stack_passes(case: width_run.Case, kind: str) -> None:
    scope = _run_case(case, kind)
    assert scope.checked > 0
    assert scope.violations == 0, scope.examples


@pytest.mark.parametrize("effect", ["wrap", "zeros"])
def test_planted_faults_are_caught_by_every_case(effect: str, fault: Any) -> None:
    fault(effect)
    missed = []
    for case, kind in _all_cases():
        if effect == "wrap" and (
            case.name in WRAP_INVISIBLE or (kind == "d31" and case.name in WRAP_INVISIBLE_D31)
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
    g = width_run.geometry("n31", on_gpu=True)
    arange = next(c for c in width_run.cases_for("create", "n31") if c.name == "arange.int64")
    assert arange.need_bytes(g) == 8 * g.total


def test_cases_are_registered_once_with_known_groups() -> None:
    names = [(c.group, c.name) for c in width_run.REGISTRY]
    assert len(names) == len(set(names))
    assert {c.group for c in width_run.REGISTRY} == set(width_run.GROUPS)
    assert width_cases.STEP > 0


def test_docs_hold_the_generated_memory_table() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "probes.md").read_text(encoding="utf-8")
    begin, end = "<!-- width-memory:begin -->\n", "<!-- width-memory:end -->"
    documented = text.split(begin, 1)[1].split(end, 1)[0]
    assert documented == width_run.memory_markdown(), (
        "docs/probes.md is out of step: regenerate with python -m gpuprobe.worker.probes.width_run"
    )


def test_a_sticky_fault_keeps_the_findings_of_the_cases_before_it() -> None:
    ran = [
        {"case": "gather.fp32", "violations": 0},
        {"case": "nll_loss_spatial.fp16.bwd", "violations": 12},
        {"case": "histc.fp32", "violations": 0},
    ]
    text = width_run._before(ran)
    assert text == (
        "cases that failed before it: nll_loss_spatial.fp16.bwd (12 violations); "
        "cases that passed before it: gather.fp32, histc.fp32"
    )
    assert width_run._before([]) == "cases that passed before it: none"
