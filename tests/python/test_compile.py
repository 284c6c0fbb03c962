"""The compile family on the CPU (Inductor's C++ backend with the system compiler): a healthy
program passes, a planted wrong compiled result is caught and names its entry, a compile
error is bisected to the entry that causes it, the oracle's rules (compiled right where eager
is off; both off is not judged; one backward for all entries), the catalog and the docs."""

from __future__ import annotations

import re
import shutil
from typing import Any

import pytest
from conftest import REPO, run_plan

torch = pytest.importorskip("torch")

from gpuprobe.worker import simulate  # noqa: E402
from gpuprobe.worker.context import ProbeContext, SkipProbe  # noqa: E402
from gpuprobe.worker.probes.compile import run as compile_run  # noqa: E402
from gpuprobe.worker.probes.compile import specs as compile_specs  # noqa: E402
from gpuprobe.worker.probes.sweep import cases as sweep_cases  # noqa: E402
from gpuprobe.worker.probes.sweep import db as sweep_db  # noqa: E402
from gpuprobe.worker.probes.sweep import oracle as sweep_oracle  # noqa: E402

pytestmark = pytest.mark.skipif(
    compile_run.compiler_problem(torch, False) is not None, reason="no C++ compiler for Inductor's CPU backend"
)

#: Pointwise, reduction, scan, matrix product, softmax (a persistent reduction), index and
#: scatter kernels: one of each kind, small enough for a 2-core machine.
HEALTHY_KEYS = ["add", "sum", "cumsum", "mm", "softmax", "gather", "index_add"]


def _ctx(probe: str = "compile.test.fp32", options: dict[str, Any] | None = None) -> ProbeContext:
    return ProbeContext(torch, "cpu", 4242, probe, options or {})


@pytest.fixture(scope="module")
def healthy() -> Any:
    return compile_run.run_program(_ctx(), "fp32", keys=HEALTHY_KEYS, passes=["compiled", "dynamic", "noncontig", "inplace", "out"])


def test_a_healthy_program_passes_on_the_cpu(healthy: Any) -> None:
    m = healthy.measurement
    assert m["kind"] == "sweep" and m["dtype"] == "float32"
    assert m["failed"] == {} and m["device_errors"] == 0, (m["failures"], m["errors"])
    # Every entry forward and backward, the dynamic round on other sizes, the variants.
    assert m["cases"] >= 2 * len(HEALTHY_KEYS), m
    assert m["passed"] == m["cases"]
    assert healthy.metrics["entries"] == len(HEALTHY_KEYS)
    # One program is one graph per pass (no graph per entry): the point of amortising.
    assert healthy.metrics["graphs"] <= 12, healthy.metrics
    assert {"seconds_compiled", "seconds_dynamic"} <= set(healthy.metrics)


def _with_fault(fault: dict[str, Any], run: Any) -> Any:
    simulate.activate({"source": "test", "fault": [fault]}, torch, "cpu")
    try:
        return run()
    finally:
        simulate.deactivate()


def test_a_planted_wrong_compiled_result_is_caught_and_names_its_entry() -> None:
    fault = {"name": "compiled-cumsum", "op": "compile", "when": {"methods": ["cumsum"]}, "effect": {"kind": "zeros"}}
    out = _with_fault(fault, lambda: compile_run.run_program(_ctx(), "fp32", keys=["add", "cumsum"], passes=["compiled"]))
    m = out.measurement
    assert m["failed"].get("wrong_value", 0) >= 1, m
    assert all(f["output"].startswith("cumsum ") for f in m["failures"]), m["failures"]
    assert any(f["all_zero"] for f in m["failures"])
    assert m["passed"] >= 1  # add is right


def test_a_planted_fault_on_one_pass_leaves_the_others_alone() -> None:
    fault = {"name": "dynamic-nan", "op": "compile", "when": {"variants": ["dynamic"]}, "effect": {"kind": "nan"}}
    out = _with_fault(fault, lambda: compile_run.run_program(_ctx(), "fp32", keys=["add", "sum"], passes=["compiled", "dynamic"]))
    failures = out.measurement["failures"]
    assert failures and {f["variant"] for f in failures} == {"dynamic"}, failures
    assert out.measurement["failed"].get("nonfinite_invented", 0) >= 1


def test_a_compile_error_is_bisected_to_its_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry whose compiled code raises (eager runs it) is a ``compile_error`` of that
    entry alone; the program's other entries are compiled again without it and judged."""
    original = compile_run._compiled

    def compiled(ctx: Any, program: Any, calls: list[Any], seed: int, dtype_name: str) -> Any:
        # What Inductor does with a lowering it cannot generate: the whole program raises.
        if any(c.info.name == "cumsum" for c in calls):
            raise compile_run._CompileError("LoweringException: planted: this entry does not compile")
        return original(ctx, program, calls, seed, dtype_name)

    monkeypatch.setattr(compile_run, "_compiled", compiled)
    out = compile_run.run_program(_ctx(), "fp32", keys=["add", "cumsum", "sum"], passes=["compiled"])
    m = out.measurement
    # Its own class, loud rather than wrong: counted and listed, the probe not failed.
    assert m["unjudged"] == {"compile_error": 1} and m["device_errors"] == 0, m
    assert out.metrics["compile_errors"] == 1
    listed = [n for n in out.notes if "compile error" in n]
    assert listed and "cumsum (compiled, backward" in listed[0] and "planted" in listed[0], out.notes
    assert m["failed"] == {} and m["passed"] == 2, m


def test_an_entry_eager_rejects_is_not_a_program() -> None:
    """A call eager raises on is dropped (not judged), never blamed on the compiler."""
    ctx = _ctx()
    database = sweep_db.load(torch)
    info = database.ops["add"]
    prepared = compile_run._prepare_entries(torch, [("add", info)], "float32", "cpu", 7, compile_run.ProgramTally())
    call = compile_run._make_call(torch, prepared[0], 0, "base", False, "float32")
    assert call is not None
    call.sample = type(call.sample)(torch.ones(2, 3), args=(torch.ones(4, 5),))
    tally = compile_run.ProgramTally()
    compile_run._run_pass(ctx, "compiled", [[call]], "float32", 7, tally)
    assert tally.unjudged == {"eager_rejects": 1} and tally.cases == 0


def _judged(found: Any, eager: Any, reference: Any, monkeypatch: pytest.MonkeyPatch) -> compile_run.ProgramTally:
    database = sweep_db.load(torch)
    prepared = compile_run._prepare_entries(torch, [("exp", database.ops["exp"])], "float32", "cpu", 7, compile_run.ProgramTally())
    call = compile_run._make_call(torch, prepared[0], 0, "base", False, "float32")
    monkeypatch.setattr(compile_run, "_reference", lambda *a, **k: [reference])
    tally = compile_run.ProgramTally()
    compile_run._judge_call(_ctx(), "compiled", call, [eager], [found], 7, "float32", tally)
    return tally


def test_compiled_right_where_eager_is_off_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    truth = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    tally = _judged(truth.float(), torch.tensor([1.0, 2.5, 3.0]), truth, monkeypatch)
    assert tally.passed == 1 and not tally.failed


def test_compiled_wrong_where_eager_is_right_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    truth = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    tally = _judged(torch.tensor([1.0, 2.5, 3.0]), truth.float(), truth, monkeypatch)
    assert tally.failed == {sweep_oracle.WRONG_VALUE: 1}
    assert tally.failures[0]["output"] == "exp out[0]"


def test_both_off_the_reference_is_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eager and compiled both beyond the bound of float64: the bound or the reference is
    not to be trusted there (and eager's own error is the sweep's to report)."""
    truth = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    tally = _judged(torch.tensor([1.0, 3.0, 3.0]), torch.tensor([1.0, 2.25, 3.0]), truth, monkeypatch)
    assert tally.unjudged == {"eager_off_too": 1} and not tally.failed and tally.passed == 0


def test_within_twice_eagers_own_error_is_right(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eager's error against float64 is the yardstick of what the dtype forces on a correct
    implementation (the sweep's rule): compiled within twice that passes."""
    truth = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    tally = _judged(torch.tensor([1.0, 2.5, 3.0]), torch.tensor([1.0, 2.25, 3.0]), truth, monkeypatch)
    assert tally.passed == 1 and not tally.failed and not tally.unjudged


def test_a_rounding_difference_from_eager_is_right(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1-ulp difference between compiled and eager (another order of operations) passes
    without asking for the reference."""
    eager = torch.tensor([1.0, 2.0, 3.0])
    found = eager.clone()
    found[1] = torch.nextafter(found[1], torch.tensor(10.0))
    monkeypatch.setattr(compile_run, "_reference", lambda *a, **k: pytest.fail("no reference needed"))
    database = sweep_db.load(torch)
    prepared = compile_run._prepare_entries(torch, [("exp", database.ops["exp"])], "float32", "cpu", 7, compile_run.ProgramTally())
    call = compile_run._make_call(torch, prepared[0], 0, "base", False, "float32")
    tally = compile_run.ProgramTally()
    compile_run._judge_call(_ctx(), "compiled", call, [eager], [found], 7, "float32", tally)
    assert tally.passed == 1


def test_one_backward_serves_every_entry() -> None:
    """The gradients of a program's entries come from one backward over the sum of their
    losses and equal each entry's own backward (entries share no inputs)."""
    a = torch.randn(3, requires_grad=True)
    b = torch.randn(4, requires_grad=True)
    database = sweep_db.load(torch)
    prepared = compile_run._prepare_entries(
        torch, [("exp", database.ops["exp"]), ("sin", database.ops["sin"])], "float32", "cpu", 7, compile_run.ProgramTally()
    )
    calls = [compile_run._make_call(torch, p, 0, "base", True, "float32") for p in prepared]
    given = [compile_run._Inputs((a, [], {}), [a]), compile_run._Inputs((b, [], {}), [b])]
    together = compile_run._results(torch, calls, [a.exp(), b.sin()], given, 7)
    alone = [compile_run._results(torch, [calls[0]], [a.exp()], given[:1], 7)[0], compile_run._results(torch, [calls[1]], [b.sin()], given[1:], 7)[0]]
    for joint, single in zip(together, alone):
        assert len(joint) == len(single) == 2
        for x, y in zip(joint, single):
            torch.testing.assert_close(x, y)


def test_no_compiler_is_a_skip_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert "C++ compiler" in (compile_run.compiler_problem(torch, False) or "")
    with pytest.raises(SkipProbe, match="C\\+\\+ compiler"):
        compile_run.run_program(_ctx(), "fp32", keys=["add"])


def test_the_inductor_cache_lives_under_gpuprobes_cache_per_torch_version(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    ctx = _ctx(options={"bytecode_cache": str(tmp_path / "gpuprobe" / "bytecode")})
    directory = compile_run.use_cache(ctx)
    assert directory == str(tmp_path / "gpuprobe" / "inductor" / torch.__version__)
    import os

    assert os.path.isdir(directory)
    # A cache the user chose is kept.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    assert compile_run.use_cache(ctx) == str(tmp_path / "mine")


def test_the_chunks_hold_every_entry_once_and_stay_put() -> None:
    database = sweep_db.load(torch)
    chunks = [compile_specs.chunk_of(key) for key in database.ops]
    assert set(chunks) == set(range(compile_specs.CHUNKS))
    # By a hash of the key: an entry's program does not depend on what else the database holds.
    assert compile_specs.chunk_of("add") == compile_specs.chunk_of("add")
    assert all(key in database.ops for key in compile_specs.STANDARD_KEYS), [
        k for k in compile_specs.STANDARD_KEYS if k not in database.ops
    ]


def test_random_and_complex_entries_are_excluded_with_a_reason() -> None:
    database = sweep_db.load(torch)
    assert "streams" in (compile_specs.exclusion(database.ops["bernoulli"], "float32") or "")
    assert "complex" in (compile_specs.exclusion(database.ops["add"], "complex64") or "")
    assert compile_specs.exclusion(database.ops["add"], "float32") is None


def test_the_catalog_has_the_standard_program_and_every_chunk_of_every_dtype() -> None:
    ids = {p.id: p for p in compile_specs.specs()}
    assert ids["compile.standard.fp32"].tier == "standard"
    for dtype in compile_specs.FULL_DTYPES:
        for chunk in range(compile_specs.CHUNKS):
            probe = ids[f"compile.p{chunk:02d}.{dtype}"]
            assert probe.tier == "full" and probe.placement == "side" and probe.lane.startswith("compile-")


@pytest.mark.parametrize(("cores", "lanes"), [(2, 1), (6, 3), (16, 8)])
def test_lanes_hold_whole_chunks_balanced_by_weight_and_run_dtype_by_dtype(
    monkeypatch: pytest.MonkeyPatch, cores: int, lanes: int
) -> None:
    """The full tier's placement on 1, 3 and 8 lanes: the same probes as ever, every dtype
    of a chunk in one lane, the lanes' weights within one chunk of each other, and each
    lane's probes float32 first, booleans last, heaviest chunk first within a dtype."""
    import os

    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert compile_specs.lane_count() == lanes
    probes = compile_specs.specs()
    expected = {"compile.standard.fp32", "compile.ambient"} | {
        f"compile.p{chunk:02d}.{dtype}" for dtype in compile_specs.FULL_DTYPES for chunk in range(compile_specs.CHUNKS)
    }
    assert len(probes) == len(expected) and {p.id for p in probes} == expected
    assert next(p for p in probes if p.id == "compile.standard.fp32").lane == "compile-1"

    assert next(p for p in probes if p.id == "compile.ambient").lane == "compile-ambient"

    full = [p for p in probes if p.tier == "full" and "chunk" in p.params]
    lanes_of_chunk: dict[int, set[str]] = {}
    for p in full:
        lanes_of_chunk.setdefault(p.params["chunk"], set()).add(p.lane)
    assert all(len(names) == 1 for names in lanes_of_chunk.values()), lanes_of_chunk
    lane_of_chunk = {chunk: next(iter(names)) for chunk, names in lanes_of_chunk.items()}
    assert set(lane_of_chunk.values()) == {f"compile-{n}" for n in range(1, lanes + 1)}

    totals = {name: 0.0 for name in set(lane_of_chunk.values())}
    for chunk, name in lane_of_chunk.items():
        totals[name] += compile_specs.chunk_weight(chunk)
    heaviest_chunk = max(compile_specs.chunk_weight(c) for c in range(compile_specs.CHUNKS))
    assert max(totals.values()) - min(totals.values()) <= heaviest_chunk, totals
    # Longest processing time first guarantees more: the heaviest lane exceeds the lightest
    # by at most the lightest chunk it holds (the last it took, when it was the lightest).
    heaviest_lane = max(totals, key=lambda name: totals[name])
    lightest_on_it = min(compile_specs.chunk_weight(c) for c, name in lane_of_chunk.items() if name == heaviest_lane)
    assert max(totals.values()) - min(totals.values()) <= lightest_on_it, totals

    dtype_rank = {dtype: i for i, dtype in enumerate(compile_specs.FULL_DTYPES)}
    for name in totals:
        order = [
            (dtype_rank[p.params["dtype"]], -compile_specs.chunk_weight(p.params["chunk"]), p.params["chunk"])
            for p in full
            if p.lane == name
        ]
        assert order == sorted(order), name
        assert [rank for rank, _, _ in order][0] == 0 and [rank for rank, _, _ in order][-1] == len(dtype_rank) - 1


def test_lane_plan_is_longest_first_deterministic_and_counts_a_missing_chunk_as_the_median(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = compile_specs.lane_plan(8)
    assert plan == compile_specs.lane_plan(8)
    # The eight heaviest chunks open the eight lanes in order; the ninth joins the lightest.
    heaviest = compile_specs.heaviest_first()
    assert [plan[chunk] for chunk in heaviest[:8]] == list(range(1, 9))
    assert plan[heaviest[8]] == plan[heaviest[7]]
    assert set(compile_specs.lane_plan(1).values()) == {1}

    weights = dict(compile_specs.CHUNK_WEIGHTS)
    dropped = heaviest[0]
    del weights[dropped]
    monkeypatch.setattr(compile_specs, "CHUNK_WEIGHTS", weights)
    median = sorted(weights.values())[len(weights) // 2]  # 23 weights: the middle one
    assert compile_specs.chunk_weight(dropped) == median
    assert sorted(compile_specs.lane_plan(8)) == list(range(compile_specs.CHUNKS))


def test_docs_name_every_pass_dtype_and_exclusion() -> None:
    text = (REPO / "docs" / "probes.md").read_text(encoding="utf-8")
    section = text[text.index("### compile:") :]
    section = section[: section.index("\n### ", 5)] if "\n### " in section[5:] else section
    for name in compile_run.PASS_NAMES:
        assert f"`{name}`" in section, name
    for dtype in compile_specs.FULL_DTYPES:
        assert f"`{dtype}`" in section, dtype
    assert re.search(rf"\b{compile_specs.CHUNKS}\b programs", section)
    for words in ("random", "complex", "sparse", "graph break", "compile_error", "eager_off_too", "eager_rejects"):
        assert words in section, words


def test_the_worker_runs_the_standard_program_under_simulation_and_labels_it() -> None:
    """The real path: the worker runs the cataloged probe; a planted fault on one entry
    fails it, and the output says SIMULATED."""
    fault = {"name": "compiled-add", "op": "compile", "when": {"methods": ["add"], "variants": ["compiled"]}, "effect": {"kind": "zeros"}}
    run = run_plan(["compile.standard.fp32"], seed=4242, simulate={"source": "test", "fault": [fault]}, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    result = run.results()["compile.standard.fp32"]
    assert result["outcome"] == "observed", result
    m = result["observation"]["measurement"]
    assert m["failed"], m
    assert all(f["output"].startswith("add ") and f["variant"] == "compiled" for f in m["failures"]), m["failures"]
    assert any("SIMULATED" in n for n in result["observation"]["notes"])


def test_an_integer_program_is_judged_exactly_and_its_promoted_floats_by_their_dtype() -> None:
    """i64 programs: integer outputs exact; a floating result (``sqrt`` of int64 is float32)
    is judged with float32's bound, never by an integer dtype's (no finfo of an integer)."""
    out = compile_run.run_program(_ctx("compile.test.i64"), "i64", keys=["add", "sqrt", "cumsum"], passes=["compiled"])
    m = out.measurement
    assert m["dtype"] == "int64" and m["failed"] == {} and "harness" not in m["unjudged"], (m, out.notes)
    assert m["passed"] == m["cases"] == 3
    fault = {"name": "i64-cumsum", "op": "compile", "when": {"methods": ["cumsum"]}, "effect": {"kind": "zeros"}}
    planted = _with_fault(fault, lambda: compile_run.run_program(_ctx("compile.test.i64"), "i64", keys=["add", "cumsum"], passes=["compiled"]))
    assert planted.measurement["failed"] == {"wrong_value": 1}, planted.measurement
    assert "integer" in planted.measurement["failures"][0]["detail"]


def test_docs_hold_the_generated_coverage_table() -> None:
    from gpuprobe.worker.probes.compile import coverage as compile_coverage

    text = (REPO / "docs" / "probes.md").read_text(encoding="utf-8")
    begin, end = "<!-- compile-coverage:begin -->\n", "<!-- compile-coverage:end -->"
    assert begin in text and end in text
    documented = text.split(begin, 1)[1].split(end, 1)[0]
    assert documented == compile_coverage.markdown(torch), (
        "docs/probes.md is out of step: regenerate with python -m gpuprobe.worker.probes.compile.coverage"
    )


# -- the gradient seed, value classes and views with gaps ----------------------------------------


@pytest.fixture(scope="module")
def new_axes() -> Any:
    """The passes that add axes, on a healthy program: the gapped ``unfold`` view is left
    out here because torch releases with pytorch/pytorch#198102 open get it wrong for real
    (Inductor zeroes the elements between the windows); ``test_a_write_into_the_gaps...``
    covers that kind with a planted fault."""
    kinds = compile_run.VIEW_KINDS
    compile_run.VIEW_KINDS = ("slice",)
    try:
        return compile_run.run_program(
            _ctx(),
            "fp32",
            keys=["add", "mul", "cumsum", "clamp", "lerp"],
            passes=["sum_grad", "fused", "values", "out_noncontig", "inplace_view", "inplace_alias"],
        )
    finally:
        compile_run.VIEW_KINDS = kinds


def test_the_new_passes_pass_on_a_healthy_program(new_axes: Any) -> None:
    m = new_axes.measurement
    assert m["failed"] == {} and "harness" not in m["unjudged"], (m, new_axes.notes)
    for name in ("sum_grad", "fused", "values", "out_noncontig", "inplace_view", "inplace_alias"):
        assert f"seconds_{name}" in new_axes.metrics, new_axes.metrics
    # five entries with backward (sum_grad), five value classes, out= entries, and the
    # in-place entries twice (view made inside and outside the program)
    assert m["cases"] >= 15, m


def test_a_value_class_case_names_its_class() -> None:
    fault = {"name": "values-nan", "op": "compile", "when": {"variants": ["values"], "methods": ["mul"]}, "effect": {"kind": "zeros"}}
    out = _with_fault(fault, lambda: compile_run.run_program(_ctx(), "fp32", keys=["mul", "add"], passes=["values"]))
    failures = out.measurement["failures"]
    assert failures and all(f["output"].startswith("mul ") for f in failures), failures
    assert re.fullmatch(r"values\[[a-z_]+\]", failures[0]["variant"]), failures


def test_a_wrong_gradient_under_a_sum_loss_is_caught() -> None:
    fault = {"name": "sum-grad", "op": "compile", "when": {"variants": ["sum_grad"], "methods": ["cumsum"]}, "effect": {"kind": "zeros"}}
    out = _with_fault(fault, lambda: compile_run.run_program(_ctx(), "fp32", keys=["cumsum"], passes=["sum_grad"]))
    m = out.measurement
    assert m["failed"], m
    assert {f["variant"] for f in m["failures"]} == {"sum_grad"}


def test_a_write_into_the_gaps_between_a_views_elements_is_caught() -> None:
    """A planted fault that corrupts what the view pass reads back (the elements between
    the view's included) fails the case with the gap rule's wording."""
    fault = {"name": "gaps", "op": "compile", "when": {"variants": ["inplace_alias"]}, "effect": {"kind": "zeros"}}
    out = _with_fault(fault, lambda: compile_run.run_program(_ctx(), "fp32", keys=["mul"], passes=["inplace_alias"]))
    failures = out.measurement["failures"]
    assert failures and failures[0]["output"] == "mul gaps", failures
    assert "the view does not cover" in failures[0]["detail"]


def test_gap_values_are_reproducible_and_the_gap_rule_is_bitwise() -> None:
    a = compile_run.gap_values(torch, (3, 4), torch.float32, 7)
    assert torch.equal(a, compile_run.gap_values(torch, (3, 4), torch.float32, 7))
    call = compile_run._Call("mul", None, 0, None, None, "value", 0.0, 0.0, None, view_place="outside", view_kind="slice")
    assert compile_run._gaps_changed(torch, call, 7, a.clone(), a.clone()) is None
    moved = a.clone()
    moved[0, 0] = torch.nextafter(moved[0, 0], torch.tensor(9.0))  # one ulp is a change here
    failure = compile_run._gaps_changed(torch, call, 7, moved, a.clone())
    assert failure is not None and failure.bad_elements == 1
    assert compile_run._gaps_changed(torch, call, 7, moved, moved.clone()) == "eager"


def test_a_scalar_argument_is_replaced_in_a_copy() -> None:
    from torch.testing._internal.opinfo.core import SampleInput

    sample = SampleInput(torch.ones(2), args=(0.5, 3), kwargs={"alpha": 2.0, "flag": True})
    slots = compile_run._float_scalar_slots(sample)
    assert slots == [("arg", 0), ("kwarg", "alpha")]
    changed = compile_run.with_scalar(sample, slots[1], -0.0)
    assert str(changed.kwargs["alpha"]) == "-0.0" and sample.kwargs["alpha"] == 2.0


def test_every_dtypes_passes_are_passes_of_the_family() -> None:
    for passes in compile_specs.FULL_PASSES.values():
        assert set(passes) <= set(compile_run.PASS_NAMES), passes
    assert "sum_grad" not in compile_specs.FULL_PASSES["i64"]  # no gradients in an integer dtype


def test_the_fused_pass_composes_prologue_entry_and_epilogue() -> None:
    database = sweep_db.load(torch)
    composed = compile_run.Composed(torch, database.ops["exp"])
    x = torch.tensor([0.0, 1.0])
    want = torch.exp(x * compile_run.PROLOGUE[0] + compile_run.PROLOGUE[1]) * compile_run.EPILOGUE[0] + compile_run.EPILOGUE[1]
    assert torch.allclose(composed(x), want) and torch.allclose(composed.op(x), want)
    assert composed.name == "exp"  # read like the entry: labels, rules and simulation


def test_tied_gradients_are_judged_for_invented_nan_only() -> None:
    """Half-precision ``max``: a gradient that moved among ties is right, a NaN is not."""
    assert compile_run.tied_gradients("max", "float16") and not compile_run.tied_gradients("max", "float32")
    eager = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float16)
    assert compile_run._invented_nonfinite(torch, torch.tensor([0.0, 1.0, 0.0], dtype=torch.float16), eager) is None
    failure = compile_run._invented_nonfinite(torch, torch.tensor([float("nan"), 0.0, 0.0], dtype=torch.float16), eager)
    assert failure is not None and failure.cls == sweep_oracle.NONFINITE_INVENTED and failure.bad_elements == 1
    # A planted zeros fault (values and gradients): the forward values are judged in full
    # and fail; no gradient of the tied entry is ever the failing output.
    fault = {"name": "max-zeros", "op": "compile", "when": {"methods": ["max"], "variants": ["compiled"]}, "effect": {"kind": "zeros"}}
    out = _with_fault(fault, lambda: compile_run.run_program(_ctx("compile.test.fp16"), "fp16", keys=["max.reduction_with_dim"], passes=["compiled"]))
    assert all("grad[" not in f["output"] for f in out.measurement["failures"]), out.measurement["failures"]


def test_the_full_tier_covers_every_pass_in_one_dtype_a_program() -> None:
    """The covering: per program, ``compiled`` in every dtype and each other pass in
    exactly one dtype that may run it; per dtype, over the programs, every pass it may run;
    the placement moves with the seed."""
    for rotation in range(compile_run.COVERING_ROTATIONS):
        per_dtype: dict[str, set[str]] = {d: set() for d in compile_specs.FULL_DTYPES}
        for chunk in range(compile_specs.CHUNKS):
            runs: dict[str, int] = {}
            for dtype in compile_specs.FULL_DTYPES:
                chosen = compile_run.covering_passes(chunk, dtype, rotation)
                assert "compiled" in chosen and set(chosen) <= set(compile_run.dtype_passes(dtype))
                per_dtype[dtype].update(chosen)
                for name in chosen:
                    runs[name] = runs.get(name, 0) + 1
            assert runs == {name: (len(compile_specs.FULL_DTYPES) if name == "compiled" else 1) for name in compile_run.PASS_NAMES}
        assert all(per_dtype[d] == set(compile_run.dtype_passes(d)) for d in compile_specs.FULL_DTYPES)
    placements = {tuple(compile_run.covering_passes(0, "fp32", compile_run.covering_rotation(seed))) for seed in range(40)}
    assert len(placements) > 1
    full = [p for p in compile_specs.specs() if p.tier == "full" and p.id != "compile.ambient"]
    assert full and all(p.params.get("covering") is True and "passes" not in p.params for p in full)


def test_an_output_in_a_coarser_dtype_is_judged_by_its_own_bound() -> None:
    """A ``bfloat16`` result in a float32 program: 1 bfloat16 ulp apart is right."""
    assert compile_run._less_precise(torch, "bfloat16", "float32") and not compile_run._less_precise(torch, "float64", "float32")
    database = sweep_db.load(torch)
    call = compile_run._Call(
        key="bfloat16",
        info=database.ops["bfloat16"],
        sample_index=0,
        sample=None,
        case=sweep_cases.Case(0, "base", False),
        oracle="value",
        atol=1e-5,
        rtol=1.3e-6,
        judging=sweep_cases.judging("bfloat16", "float32", "base"),
    )
    eager = torch.tensor([-9.5625], dtype=torch.bfloat16)
    found = torch.tensor([-9.625], dtype=torch.bfloat16)
    assert compile_run._compare(torch, call, found, eager, "float32") is None
    assert compile_run._compare(torch, call, torch.tensor([-12.0], dtype=torch.bfloat16), eager, "float32") is not None


def test_a_binary_entrys_second_operand_takes_a_python_scalar_in_the_values_pass() -> None:
    """``copysign(x, -0.0)``: the second operand as a Python number, where the database says
    the entry takes one; an entry that does not (``atan2``) keeps its tensors."""
    database = sweep_db.load(torch)
    sample = next(iter(database.ops["copysign"].sample_inputs("cpu", torch.float32)))
    slots = compile_run._scalar_operand_slots(torch, database.ops["copysign"], sample)
    assert slots == [("arg", 0)]
    changed = compile_run.with_scalar(sample, slots[0], -0.0)
    assert str(changed.args[0]) == "-0.0" and isinstance(sample.args[0], torch.Tensor)
    other = next(iter(database.ops["atan2"].sample_inputs("cpu", torch.float32)))
    assert compile_run._scalar_operand_slots(torch, database.ops["atan2"], other) == []
    out = compile_run.run_program(_ctx(), "fp32", keys=["copysign", "mul"], passes=["values"])
    assert out.measurement["failed"] == {} and out.measurement["cases"] >= 2, out.measurement


def test_a_healthy_boolean_program_passes_and_a_planted_fault_is_caught() -> None:
    """Boolean inputs compiled: exact against eager; a planted wrong result is caught."""
    out = compile_run.run_program(_ctx("compile.test.bool"), "bool", keys=["logical_and", "sum", "ne"], passes=["compiled"])
    assert out.measurement["failed"] == {} and out.measurement["cases"] == 3, out.measurement
    fault = {"name": "bool-zeros", "op": "compile", "when": {"methods": ["sum"], "variants": ["compiled"]}, "effect": {"kind": "zeros"}}
    planted = _with_fault(fault, lambda: compile_run.run_program(_ctx("compile.test.bool"), "bool", keys=["logical_and", "sum"], passes=["compiled"]))
    assert planted.measurement["failed"] == {"wrong_value": 1}, planted.measurement
    assert planted.measurement["failures"][0]["output"].startswith("sum ")


def test_writes_into_outputs_reach_an_aliased_input_and_a_healthy_program_passes() -> None:
    """``inplace_output``: eager's write into an output that is a view of the input changes
    the input; a program of such entries compiled gives the same outputs and input."""
    database = sweep_db.load(torch)
    x = torch.ones(2, 1, 3)
    returned = compile_run.WritesOutputs(torch, database.ops["squeeze"])(x)
    assert torch.equal(x, torch.full((2, 1, 3), 1.25))  # 1.5 * 1 - 0.25 reached the input
    assert returned[1] is x  # and the input is judged
    # View or copy is unspecified for reshape: its input is not returned, so not judged.
    assert isinstance(compile_run.WritesOutputs(torch, database.ops["reshape"])(torch.ones(2, 3), (3, 2)), torch.Tensor)
    keys = ["reshape", "contiguous", "squeeze", "add"]
    out = compile_run.run_program(_ctx(), "fp32", keys=keys, passes=["inplace_output"])
    m = out.measurement
    assert m["failed"] == {} and m["cases"] >= 3, (m, out.notes)
    fault = {"name": "alias-lost", "op": "compile", "when": {"methods": ["reshape"], "variants": ["inplace_output"]}, "effect": {"kind": "zeros"}}
    planted = _with_fault(fault, lambda: compile_run.run_program(_ctx(), "fp32", keys=["reshape", "add"], passes=["inplace_output"]))
    assert [f["output"].split()[0] for f in planted.measurement["failures"]] == ["reshape"], planted.measurement


def test_a_special_functions_limit_at_infinity_is_not_judged() -> None:
    """``special.bessel_j1(+Inf)``: compiled 0 (the limit) where eager and float64 give NaN
    is not a failure; the same NaN lost in a function that is not special still is."""
    database = sweep_db.load(torch)
    lost = sweep_oracle.LeafFailure(sweep_oracle.NAN_LOST, "1 NaN of the reference came back as numbers")

    def call(key: str, value_class: str) -> Any:
        return compile_run._Call(
            key=key,
            info=database.ops[key],
            sample_index=0,
            sample=None,
            case=sweep_cases.Case(0, value_class, False),
            oracle="value",
            atol=1e-5,
            rtol=1.3e-6,
            judging=sweep_cases.judging(key, "float32", value_class),
            value_class=value_class,
        )

    assert compile_run._limit_at_infinity(call("special.bessel_j1", "posinf"), lost)
    assert not compile_run._limit_at_infinity(call("special.bessel_j1", "nan"), lost)
    assert not compile_run._limit_at_infinity(call("exp", "posinf"), lost)
