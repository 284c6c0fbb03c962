"""The attention matrix (``nn.sdpa.matrix.*``): its covering design, its cases, and its probes
on the CPU, healthy and under planted faults.

The probes run in this process (as the worker runs them: ``probe.resolve()(ctx, **params)``
with the library wrappers bypassed) on one CPU thread: their cases are small on a CPU, and
a second thread only adds wake-up latency to many small operations.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from judge_mirror import DTYPE_TOLERANCE, judge

torch = pytest.importorskip("torch")

from gpuprobe.worker import catalog, simulate  # noqa: E402
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe  # noqa: E402
from gpuprobe.worker.probes.nn import sdpa_matrix  # noqa: E402

SEED = 20261123
PREFIX = "nn.sdpa.matrix."
FUSED_GPU_ONLY = ("efficient", "cudnn")


def matrix_probes() -> dict[str, catalog.ProbeDef]:
    return {i: p for i, p in catalog.all_probes().items() if i.startswith(PREFIX)}


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def run_probe(probe_id: str, faults: list[dict[str, Any]] | None = None) -> tuple[str, ProbeOutput]:
    """Runs one probe on the CPU (under ``faults`` when given); returns the judge's verdict
    (pass or the failure class) and the output."""
    probe = catalog.lookup(probe_id)
    assert probe is not None, probe_id
    ctx = ProbeContext(torch, "cpu", SEED, probe_id)
    if faults:
        engine = simulate.FaultEngine({"source": "test", "fault": faults}, environ={})
        simulate.activate_engine(engine, torch, "cpu")
    try:
        with simulate.bypassed():
            output = probe.resolve()(ctx, **probe.params)
    finally:
        simulate.deactivate()
    return judge(output.measurement, probe.rule), output


def fault(effect: str, **when: Any) -> dict[str, Any]:
    return {"name": f"test-{effect}", "op": "sdpa", "when": when, "effect": {"kind": effect}}


# -- the covering design ---------------------------------------------------------------------------


def test_full_design_covers_every_valid_pair() -> None:
    design = sdpa_matrix.full_design()
    required = sdpa_matrix.required_pairs()
    covered = set().union(*(sdpa_matrix.pairs_of(case) for case in design))
    assert required <= covered, sorted(required - covered)[:10]
    levels = dict(sdpa_matrix.FACTORS)
    for case in design:
        assert set(case) == set(levels)
        assert all(case[name] in levels[name] for name in levels), case
        assert sdpa_matrix.valid(case), case
    # The only pairs left out are the impossible ones: fully masked rows without a mask that
    # can hold them.
    every = {
        (a, va, b, vb)
        for (a, la), (b, lb) in itertools.combinations(sdpa_matrix.FACTORS, 2)
        for va in la
        for vb in lb
    }
    assert every - required == {("mask", m, "input", "fullmask") for m in ("none", "causal")}
    # Deterministic, and close to the lower bound (6 masks x 6 lengths = 36 cases).
    assert sdpa_matrix.full_design() == design
    assert 36 <= len(design) <= 46


@pytest.mark.parametrize(
    "sizes",
    [(2, 2, 2), (3, 4, 2, 5), (6, 5, 4, 4, 2), (7, 3, 3, 3, 3, 3)],
)
def test_generator_covers_other_factor_spaces(sizes: tuple[int, ...]) -> None:
    factors = [(f"f{i}", tuple(f"l{j}" for j in range(n))) for i, n in enumerate(sizes)]

    def forbid(assignment: dict[str, str]) -> bool:
        # One impossible pair, as the matrix has.
        return not (assignment.get("f0") == "l0" and assignment.get("f1") == "l1")

    design = sdpa_matrix.pairwise(factors, forbid)
    required = sdpa_matrix.required_pairs(factors, forbid)
    covered = set().union(*(sdpa_matrix.pairs_of(case, factors) for case in design))
    assert required <= covered
    assert all(forbid(case) for case in design)
    largest = sorted(sizes)[-2:]
    assert len(design) >= largest[0] * largest[1]
    assert design == sdpa_matrix.pairwise(factors, forbid)


# -- the cases of each probe -----------------------------------------------------------------------


def test_probe_cases_are_valid_and_ids_unique() -> None:
    probes = matrix_probes()
    ids = list(probes)
    assert len(ids) == len(set(ids))
    backends = ("math", "flash", "efficient", "cudnn", "default")
    expected = {f"{PREFIX}{d}.default.core" for d in ("bf16", "fp16")}
    expected |= {f"{PREFIX}{d}.{b}{s}" for d in ("bf16", "fp16") for b in backends for s in ("", ".bwd")}
    assert set(ids) == expected
    levels = dict(sdpa_matrix.FACTORS)
    full_factors: dict[str, set[tuple[str, ...]]] = {}
    for probe_id, probe in probes.items():
        params = probe.params
        cases = sdpa_matrix.probe_cases(params["design"], params["direction"], params["backend"])
        names = [case["name"] for case in cases]
        assert len(names) == len(set(names)), probe_id
        for case in cases:
            if case.get("sampled_rows"):
                # The long case: fused backends, forward, full tier only.
                assert probe.tier == "full" and params["backend"] in sdpa_matrix.LONG_BACKENDS
                assert case["direction"] == "forward" and sdpa_matrix.lengths_of(case["length"])[1] > 1 << 16
                continue
            assert all(case[name] in levels[name] for name in levels), (probe_id, case)
            assert sdpa_matrix.valid(case) and case["head_dim"] in sdpa_matrix.HEAD_DIMS
            assert case["name"] == sdpa_matrix.case_name(case)
        if probe.tier == "standard":
            assert probe_id.endswith(".core") and probe.rule["scale"] == 2.0
            # The core subset has every level of every factor but the longest length.
            for name, values in levels.items():
                wanted = set(values) - {"704"}
                assert {case[name] for case in cases} == wanted, (probe_id, name)
        else:
            assert probe.tier == "full" and not probe.isolated and probe.placement == "shared"
            backward = probe_id.endswith(".bwd")
            assert probe.rule["scale"] == (2.0 if backward else 1.0)
            directions = {c["direction"] for c in cases}
            assert directions == ({"backward", "backward_partial"} if backward else {"forward"})
            key = (params["dtype"], params["backend"])
            full_factors.setdefault(key, set()).update(
                tuple(c[name] for name in levels) for c in cases if not c.get("sampled_rows")
            )
    # Each (dtype, backend) runs the whole pairwise design across its two probes.
    design = {tuple(c[name] for name in levels) for c in sdpa_matrix.full_design()}
    assert full_factors and all(got == design for got in full_factors.values())
    # Tolerances are the judge's bounds (as for every tolerance probe).
    for probe in probes.values():
        tol = DTYPE_TOLERANCE[probe.rule["dtype"]]
        assert probe.params["tolerance"] == pytest.approx(tol * probe.rule["scale"], rel=1e-12)


# -- on the CPU ------------------------------------------------------------------------------------


def test_healthy_matrix_passes_on_cpu() -> None:
    for probe_id, probe in matrix_probes().items():
        backend = probe.params["backend"]
        if backend in FUSED_GPU_ONLY:
            with pytest.raises(SkipProbe, match=f"the {backend} attention backend cannot run any of its"):
                run_probe(probe_id)
            continue
        verdict, output = run_probe(probe_id)
        metrics = output.metrics
        assert verdict == "pass", (probe_id, output.measurement, metrics)
        assert metrics["cases_failed"] == 0 and "failing_cases" not in metrics, probe_id
        assert metrics["cases_run"] + metrics["cases_refused"] == metrics["cases"], probe_id
        assert output.measurement["mismatches"] == output.measurement["failed_trials"] == 0, probe_id
        # CPU flash takes no float mask that requires grad; math and default run everything.
        if backend == "flash":
            refused = metrics["refused_cases"]
            assert refused and all(".additive_grad." in r["case"] for r in refused), probe_id
        else:
            assert metrics["cases_refused"] == 0, (probe_id, metrics.get("refused_cases"))
        assert metrics["scaled_down_on_cpu"] is True
        # Fully masked rows were met, described, left out of the comparison.
        assert metrics["fully_masked_rows"] > 0, probe_id
        assert set(metrics["fully_masked_rows_output"].split(", ")) <= {"NaN", "partly NaN", "zeros", "finite values"}


def test_layouts_reach_attention_as_described(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Any, Any, Any, dict[str, Any]]] = []
    original = torch.nn.functional.scaled_dot_product_attention

    def spy(q: Any, k: Any, v: Any, **kwargs: Any) -> Any:
        seen.append((q, k, v, kwargs))
        return original(q, k, v, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    verdict, _ = run_probe(f"{PREFIX}bf16.default.core")
    assert verdict == "pass"
    cases = sdpa_matrix.probe_cases("core", None, "default")
    assert len(seen) == len(cases)
    for case, (q, k, v, kwargs) in zip(cases, seen):
        layout = case["layout"]
        assert q.shape[1] == sdpa_matrix.HEADS
        if layout == "expand":
            assert k.stride(1) == 0 and v.stride(1) == 0 and k.shape[1] == q.shape[1], case["name"]
        elif layout == "gqa":
            assert kwargs.get("enable_gqa") is True and k.shape[1] == q.shape[1] // 2, case["name"]
        elif layout == "noncontig":
            assert not q.is_contiguous() and not k.is_contiguous() and not v.is_contiguous(), case["name"]
        else:
            assert q.is_contiguous() and k.is_contiguous(), case["name"]
        assert kwargs["is_causal"] == (case["mask"] == "causal")
        mask = kwargs["attn_mask"]
        if case["mask"] in ("none", "causal"):
            assert mask is None
        else:
            assert (mask.dtype == torch.bool) == (case["mask"] == "bool")
            if case["mask"] == "additive_fp32":
                assert mask.dtype == torch.float32 and q.dtype == torch.bfloat16, case["name"]
            assert mask.requires_grad == (case["mask"] == "additive_grad")
        # Exactly the inputs the case differentiates require grad.
        wanted = sdpa_matrix.differentiated(case)
        assert q.requires_grad == ("q" in wanted), case["name"]
        assert k.requires_grad == ("k" in wanted) and v.requires_grad == ("v" in wanted), case["name"]


def test_nan_in_forward_outputs_fails_and_names_cases() -> None:
    probe_id = f"{PREFIX}bf16.math"
    verdict, output = run_probe(probe_id, [fault("nan", variants=["forward"])])
    assert verdict == "nan_inf"
    metrics = output.metrics
    assert metrics["cases_failed"] == metrics["cases_run"] == metrics["cases"]
    first = sdpa_matrix.probe_cases("pairwise", "forward", "math")[0]
    failing = metrics["failing_cases"]
    assert failing[0]["case"] == first["name"] and failing[0]["failed"] == ["out"]
    assert {k: failing[0][k] for k in ("mask", "length", "layout", "input")} == {
        k: first[k] for k in ("mask", "length", "layout", "input")
    }
    assert failing[0]["max_rel_err"] >= 0 and len(failing) == 5


def test_nan_in_gradients_only_fails_the_gradients() -> None:
    verdict, output = run_probe(f"{PREFIX}bf16.math.bwd", [fault("nan", variants=["backward"])])
    assert verdict == "nan_inf"
    metrics = output.metrics
    assert metrics["cases_failed"] == metrics["cases_run"]
    by_name = {c["name"]: c for c in sdpa_matrix.probe_cases("pairwise", "backward", "math")}
    for case in metrics["failing_cases"]:
        # Only the gradients the case asked for are compared, and each of them fails.
        wanted = {f"d{name}" for name in sdpa_matrix.differentiated(by_name[case["case"]])}
        assert "out" not in case["failed"] and wanted <= {name.split("[")[0] for name in case["failed"]}, case
        assert {name.split("[")[0] for name in case["failed"]} <= wanted, case


def test_zeros_fail_as_all_zeros() -> None:
    verdict, output = run_probe(f"{PREFIX}fp16.default.core", [fault("zeros")])
    assert verdict == "all_zeros", output.measurement
    assert output.metrics["cases_failed"] == output.metrics["cases_run"] == len(sdpa_matrix.CORE_CASES)


def test_a_fault_in_one_mask_kind_names_exactly_its_cases() -> None:
    probe_id = f"{PREFIX}bf16.default.bwd"
    verdict, output = run_probe(probe_id, [fault("partial_zeros", variants=["bool"])])
    assert verdict != "pass"
    bool_cases = [c["name"] for c in sdpa_matrix.probe_cases("pairwise", "backward", "default") if c["mask"] == "bool"]
    metrics = output.metrics
    assert metrics["cases_failed"] == len(bool_cases) >= 2
    assert [c["case"] for c in metrics["failing_cases"]] == bool_cases[: len(metrics["failing_cases"])]
    # The other mask kinds still pass.
    assert metrics["cases_run"] - metrics["cases_failed"] == len(
        sdpa_matrix.probe_cases("pairwise", "backward", "default")
    ) - len(bool_cases)


def test_a_float32_mask_is_refused_only_by_an_error_that_names_the_dtype() -> None:
    from gpuprobe.worker.probes.nn import run as nn_run

    dtype_error = RuntimeError("invalid dtype for bias - should match query's dtype")
    assert nn_run._refusal(dtype_error, "additive_fp32")
    # The same words for a mask of the query's dtype are not a documented refusal.
    assert not nn_run._refusal(dtype_error, "additive")
    # A device error is a failure whatever the mask.
    assert not nn_run._refusal(RuntimeError("CUDA error: misaligned address (dtype float)"), "additive_fp32")


def test_an_exception_in_attention_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="simulated failure"):
        run_probe(f"{PREFIX}fp16.math", [fault("exception", variants=["forward"])])


def test_a_case_that_raises_does_not_hide_the_others() -> None:
    cases = sdpa_matrix.probe_cases("pairwise", "backward", "math")
    raising = [c["name"] for c in cases if c["mask"] == "additive_grad"]
    with pytest.raises(RuntimeError) as caught:
        run_probe(f"{PREFIX}bf16.math.bwd", [fault("exception", variants=["additive_grad"])])
    message = str(caught.value)
    # The error names the first case that raised, counts them, and says how the rest went.
    assert message.startswith(f"{len(raising)} of {len(cases)} cases raised on valid inputs: {raising[0]}:")
    assert "simulated failure" in message
    assert f"({len(cases) - len(raising)} other cases ran, 0 failed, 0 refused)" in message
