"""The graph family: CUDA graphs and reduce-overhead, their judging protocol and its rules.

On the CPU no graph exists: the capture, training and pool probes run the same protocol
with an eager stand-in (every one passes, and the notes say so), the reduce-overhead probes
skip with the reason. The protocol itself is tested with replayers that misbehave the way
a broken graph does (never runs, reads the inputs it was captured with; hands its static
gradient buffers to autograd as the parameters' ``.grad``, which the next replay
overwrites), under the ``graph-stale`` preset (FAIL, ``stale_replay``), and through
``torch.compile`` with the eager backend. Each rule that keeps a benign difference from
failing has a test here that would fail without it. Tests marked ``gpu`` run the family for
real.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import load_preset, run_plan
from judge_mirror import classify

from gpuprobe.worker.context import ProbeContext
from gpuprobe.worker.probes.graph import run as graph_run
from gpuprobe.worker.probes.graph import specs as graph_specs
from gpuprobe.worker.probes.sweep import oracle as sweep_oracle

torch = pytest.importorskip("torch")

PROBES = [p.id for p in graph_specs.specs()]


def ctx_for(probe_id: str, device: str = "cpu") -> ProbeContext:
    return ProbeContext(torch, device, 20261128, probe_id, {"tier": "full"})


@pytest.fixture(autouse=True)
def one_thread() -> Any:
    """One intra-op thread, as the probes run on a CPU (``graph_run._on_device``): the
    protocol tests call it directly, and on a busy 2-core host two threads made them take
    10-30 s each instead of a second."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


# -- the catalog ---------------------------------------------------------------------------------


def test_catalog() -> None:
    specs = {p.id: p for p in graph_specs.specs()}
    assert sorted(specs) == sorted(
        [
            "graph.capture.fp32",
            "graph.capture.bf16",
            "graph.capture.fp16",
            "graph.training.fp32",
            "graph.training.bf16",
            "graph.pool.fp32",
            "graph.pool.bf16",
            "graph.reduce_overhead.fp32",
            "graph.reduce_overhead.bf16",
        ]
    )
    assert [i for i, p in specs.items() if p.tier == "standard"] == ["graph.capture.fp32"]
    for probe in specs.values():
        assert probe.rule == {"kind": "sweep"}
        assert probe.resolve() is not None
        if probe.tier == "full":
            # A fault of a captured graph can poison the context: a worker each.
            assert probe.isolated and probe.placement == "side" and probe.lane == "graph", probe.id
        else:
            assert not probe.isolated and probe.placement == "shared"
    # Every kernel kind the family promises, in the capture probes; the pool and the
    # compiled groups draw from the same workloads.
    assert set(graph_specs.KERNEL_WORKLOADS) == set(graph_run.KERNELS)
    assert set(graph_specs.POOL_WORKLOADS) <= set(graph_run.KERNELS)
    grouped = [w for names in graph_specs.COMPILE_GROUPS.values() for w in names]
    assert sorted(grouped) == sorted(graph_specs.KERNEL_WORKLOADS)
    # Every MLP training workload runs somewhere, one graphed and one compiled accumulating.
    mlps = [w for w in graph_specs.TRAINING_WORKLOADS if w.startswith("mlp_")] + list(graph_specs.COMPILED_TRAINING)
    assert sorted(mlps) == sorted(graph_run.MLP_WORKLOADS)
    assert graph_run.MLP_WORKLOADS["mlp_graphed_accumulate"] >= 2 and graph_run.MLP_WORKLOADS["mlp_compiled_accumulate"] >= 2
    assert specs["graph.reduce_overhead.fp32"].params["training"] == ["mlp_compiled_accumulate"]


# -- the judge's rules -----------------------------------------------------------------------------


def test_a_wrong_output_equal_to_the_previous_replay_is_stale() -> None:
    previous = [torch.arange(8, dtype=torch.float32)]
    expected = [torch.arange(8, dtype=torch.float32) * 2 + 1]
    name, failure = graph_run.judge_outputs(torch, [previous[0].clone()], expected, ["y"], "float32", previous=previous)
    assert (name, failure.cls) == ("y", graph_run.STALE_REPLAY)
    # Wrong but not the previous replay's values: a wrong value; NaN: invented.
    name, failure = graph_run.judge_outputs(torch, [expected[0] + 1], expected, ["y"], "float32", previous=previous)
    assert failure.cls == sweep_oracle.WRONG_VALUE
    nan = expected[0].clone()
    nan[3] = float("nan")
    _, failure = graph_run.judge_outputs(torch, [nan], expected, ["y"], "float32", previous=previous)
    assert failure.cls == sweep_oracle.NONFINITE_INVENTED


def test_a_right_output_equal_to_the_previous_replay_is_not_stale() -> None:
    # An optimizer step can leave a low-precision parameter unchanged (the update is below
    # half an ulp): right is right, whatever the previous replay gave.
    same = [torch.ones(4, dtype=torch.bfloat16)]
    assert graph_run.judge_outputs(torch, [same[0].clone()], same, ["p"], "bfloat16", previous=same) is None


def test_eager_and_replay_are_compared_with_the_dtype_bound_not_bit_for_bit() -> None:
    # cuBLAS may pick another algorithm under capture, atomics add in another order: a replay
    # one ulp away from eager is right.
    eager = torch.linspace(1, 2, 64, dtype=torch.float32)
    one_ulp = torch.nextafter(eager, torch.full_like(eager, 3.0))
    assert not torch.equal(one_ulp, eager)
    assert graph_run.judge_outputs(torch, [one_ulp], [eager], ["y"], "float32") is None
    assert graph_run.judge_outputs(torch, [eager * 1.01], [eager], ["y"], "float32") is not None


def test_float64_comparisons_allow_the_dtypes_own_rounding() -> None:
    """Against float64, an error no larger than twice the CPU's in the same dtype is the
    dtype's rounding of intermediate results (here 384 fp16 factors near 1, each rounded,
    then multiplied up), not the graph's. Without the yardstick this case fails."""
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(32, 384, generator=gen).to(torch.float16)

    def chain(x: Any) -> Any:
        return torch.cumprod(1 + 0.01 * x, dim=1)

    exact = chain(a.double())
    in_dtype = chain(a)
    assert graph_run.judge_outputs(torch, [in_dtype], [exact], ["y"], "float16") is not None
    assert graph_run.judge_outputs(torch, [in_dtype], [exact], ["y"], "float16", same_dtype_cpu=lambda: [in_dtype]) is None


def test_compiled_results_closer_to_float64_than_eager_are_right() -> None:
    """Inductor keeps a bf16 chain's intermediates in float32 where eager rounds each step;
    the compiled result may then differ from eager beyond the bf16 bound while being closer
    to float64. Without the float64 rule this case fails."""
    exact = torch.linspace(0.5, 4.0, 256, dtype=torch.float64)
    compiled = exact.to(torch.bfloat16)  # rounded once
    eager = (exact * 1.05).to(torch.bfloat16)  # an eager chain's accumulated roundings, exaggerated
    plain = graph_run.judge_outputs(torch, [compiled], [eager], ["y"], "bfloat16")
    assert plain is not None and plain[1].cls == sweep_oracle.WRONG_VALUE
    fallback = graph_run._float64_fallback(torch, lambda: [exact], [eager], "bfloat16")
    assert graph_run.judge_outputs(torch, [compiled], [eager], ["y"], "bfloat16", fallback=fallback) is None
    # A compiled result wrong against both still fails.
    wrong = (exact * 1.3).to(torch.bfloat16)
    assert graph_run.judge_outputs(torch, [wrong], [eager], ["y"], "bfloat16", fallback=fallback) is not None


def test_bystanders_that_change_are_reported() -> None:
    pressure = graph_run.AllocatorPressure(torch, torch.device("cpu"), 1 << 10)
    pressure.churn()
    assert pressure.bystanders and pressure.check() == []
    tensor, _code = pressure.bystanders[2]
    tensor[5] = -1.0
    problems = pressure.check()
    assert [name for name, _ in problems] == ["bystander[2]"]
    assert problems[0][1].cls == sweep_oracle.WRONG_VALUE and problems[0][1].index == [5]


def test_only_the_known_benign_warnings_are_kept_out_of_the_notes() -> None:
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with graph_run._on_device(ctx_for("graph.training.fp32")):
            for message in (
                "Attempting to run cuBLAS, but there was no current CUDA context! Attempting to set the primary context",
                "The AccumulateGrad node's stream does not match the stream of the node that produced the incoming gradient.",
                "TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled.",
                "something else",
            ):
                warnings.warn(message, UserWarning)
    assert [str(w.message) for w in caught] == ["something else"]


# -- the protocol with replayers that misbehave -----------------------------------------------------


class NeverRuns(graph_run.EagerReplayer):
    """A graph whose replays do nothing: the outputs keep the capture's values."""

    def replay(self) -> list[Any]:
        return self.outputs


class ReadsCapturedInputs(graph_run.EagerReplayer):
    """A graph that recorded copies of its inputs: in-place updates never reach it."""

    def capture(self, bound: graph_run.Bound) -> None:
        super().capture(bound)
        self.frozen = [s.clone() for s in bound.static]

    def replay(self) -> list[Any]:
        updated = [s.clone() for s in self.bound.static]
        with torch.no_grad():
            for static, frozen in zip(self.bound.static, self.frozen):
                static.copy_(frozen)
            result = super().replay()
            for static, new in zip(self.bound.static, updated):
                static.copy_(new)
        return result


def protocol(replayer: Any, workload: str = "linear", dtype: str = "float32") -> graph_run.ReplayTally:
    ctx = ctx_for("graph.capture.fp32")
    bound = graph_run.KernelBound(torch, graph_run.KERNELS[workload], ctx.device, getattr(torch, dtype), ctx.cpu_generator(workload))
    tally = graph_run.ReplayTally()
    graph_run.judge_replays(ctx, bound, replayer, tally, dtype)
    return tally


def test_the_protocol_passes_a_healthy_replayer() -> None:
    tally = protocol(graph_run.EagerReplayer(torch))
    # Replays 0..4 against eager, replay 1 against float64 too.
    assert (tally.cases, tally.passed, tally.failed) == (graph_run.REPLAYS + 2, graph_run.REPLAYS + 2, {})


@pytest.mark.parametrize("replayer", [NeverRuns, ReadsCapturedInputs])
def test_the_protocol_catches_stale_replays(replayer: type) -> None:
    tally = protocol(replayer(torch))
    # Replay 0 runs on the captured inputs, so it is right; each later replay is stale,
    # against eager and (replay 1) against float64.
    assert tally.failed == {graph_run.STALE_REPLAY: graph_run.REPLAYS + 1}
    first = tally.failures[0]
    assert (first["variant"], first["direction"], first["sample"]) == ("linear.replay1", "eager", 1)
    assert first["output"] == "linear"


def graphed_like(module: Any, sample_args: tuple[Any, ...], num_warmup_iters: int = 3) -> Any:
    """``make_graphed_callables``' structure run eagerly: each backward writes the gradients
    into static buffers and hands autograd those buffers as they are (``detach()``), which
    autograd then keeps as a parameter's ``.grad`` when it has none."""
    params = tuple(module.parameters())
    static_grads = [torch.zeros_like(sample_args[0])] + [torch.zeros_like(p) for p in params]

    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, *_params: Any) -> Any:
            with torch.enable_grad():
                ctx.inner = x.detach().requires_grad_(True)
                ctx.out = type(module).forward(module, ctx.inner)
            return ctx.out.detach()

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            for buffer, value in zip(static_grads, torch.autograd.grad(ctx.out, (ctx.inner, *params), grad)):
                buffer.copy_(value)
            return tuple(b.detach() for b in static_grads)

    module.forward = lambda x: Graphed.apply(x, *params)
    return module


def test_accumulating_into_static_gradient_buffers_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graphed callable whose static gradient buffers become the parameters' ``.grad``:
    one micro-batch a step is right (``.grad`` starts as None each step), two accumulated
    are not (the second replay overwrites the first's gradient before autograd adds the
    second to it: 2·g2 instead of g1 + g2)."""
    monkeypatch.setattr(torch.cuda, "make_graphed_callables", graphed_like)
    ctx = ctx_for("graph.training.fp32")
    tallies = {}
    for name in ("mlp_graphed_callables", "mlp_graphed_accumulate"):
        bound = graph_run.MlpBound(torch, ctx.device, torch.float32, ctx.cpu_generator(name), name)
        tallies[name] = graph_run.ReplayTally()
        graph_run.judge_replays(ctx, bound, graph_run.CudaGraphReplayer(torch, ctx.device), tallies[name], "float32")
    assert tallies["mlp_graphed_callables"].failed == {}
    wrong = tallies["mlp_graphed_accumulate"]
    assert wrong.failed == {sweep_oracle.WRONG_VALUE: graph_run.REPLAYS + 2}
    assert {f["output"] for f in wrong.failures} == {"grad[0.weight]"}  # the first parameter's, each replay


def test_the_pool_protocol_checks_bystanders() -> None:
    ctx = ctx_for("graph.pool.fp32")
    kernel = graph_run.KERNELS["pointwise_chain"]
    bound = graph_run.ChainedBound(graph_run.KernelBound(torch, kernel, ctx.device, torch.float32, ctx.cpu_generator("p")))
    pressure = graph_run.AllocatorPressure(torch, ctx.device, 1 << 12)

    class Scribbles(graph_run.EagerPoolReplayer):
        """A replay that writes into memory the allocator handed to someone else."""

        def replay(self) -> list[Any]:
            out = super().replay()
            self.pressure.bystanders[-1][0].fill_(7.0)
            return out

    tally = graph_run.ReplayTally()
    graph_run.judge_replays(ctx, bound, Scribbles(torch, pressure), tally, "float32")
    assert tally.failed == {sweep_oracle.WRONG_VALUE: graph_run.REPLAYS + 1}
    assert {f["direction"] for f in tally.failures} == {"bystanders"}
    assert bound.output_names() == ["g1.gelu_mix", "g1.where", "g2.gelu_mix", "g2.where"]


def test_compiled_protocol_with_the_eager_backend() -> None:
    """The reduce-overhead probe's path (compiled function, calls, another shape and back)
    through torch.compile's eager backend: no Inductor, no graphs, same protocol."""
    ctx = ctx_for("graph.reduce_overhead.fp32")
    out = graph_run.run_compiled(ctx, "fp32", {"small": ["pointwise_chain", "index_scatter_gather"]}, {"backend": "eager"})
    m = out.measurement
    # 5 calls + 3 at another shape + 1 back; float64 on the first updated call and the first
    # call at the new shape.
    assert (m["cases"], m["passed"], m["failed"], m["device_errors"], m["unjudged"]) == (11, 11, {}, 0, {})
    assert out.metrics["small.earlier_output"] == "unchanged"  # no graph tree: nothing overwritten
    assert out.metrics["calls_per_group"] == 9


def test_compiled_training_protocol_with_the_eager_backend() -> None:
    """The reduce-overhead probe's training step (the MLP compiled whole, two micro-batches
    accumulated a step) through torch.compile's eager backend."""
    ctx = ctx_for("graph.reduce_overhead.bf16")
    out = graph_run.run_compiled(ctx, "bf16", {}, {"backend": "eager"}, ["mlp_compiled_accumulate"])
    m = out.measurement
    # 5 steps against eager, the first updated one against float64 too.
    assert (m["cases"], m["passed"], m["failed"], m["device_errors"], m["unjudged"]) == (6, 6, {}, 0, {})
    assert out.metrics["workloads"] == "mlp_compiled_accumulate"


def test_reduce_overhead_skips_on_the_cpu() -> None:
    with pytest.raises(graph_run.SkipProbe, match="reduce-overhead uses CUDA graphs"):
        graph_run.run_reduce_overhead(ctx_for("graph.reduce_overhead.fp32"), "fp32", {"dense": ["linear"]})


# -- through the worker ----------------------------------------------------------------------------


def test_every_probe_passes_or_skips_on_the_cpu() -> None:
    run = run_plan(PROBES, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    results = run.results()
    for probe in PROBES:
        result = results[probe]
        if ".reduce_overhead." in probe:
            assert result["outcome"] == "skip" and "reduce-overhead uses CUDA graphs" in result["reason"], result
            continue
        assert result["outcome"] == "observed", result
        measurement = result["observation"]["measurement"]
        assert classify(measurement) == "pass", (probe, measurement["failures"][:1])
        assert measurement["cases"] > 0 and measurement["unjudged"] == {}, (probe, measurement)
        assert graph_run.CPU_NOTE in result["observation"]["notes"]
    capture = results["graph.capture.fp32"]["observation"]
    # 8 workloads × (5 replays against eager + 1 against float64).
    assert capture["measurement"]["cases"] == 8 * (graph_run.REPLAYS + 2)
    assert capture["metrics"]["bitwise_equal_to_eager"] == 8 * (graph_run.REPLAYS + 1)


def test_graph_stale_preset_fails_with_stale_replays() -> None:
    probes = ["graph.capture.fp32", "graph.training.fp32", "graph.pool.bf16"]
    run = run_plan(probes, simulate=load_preset("graph-stale"), timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.hello["simulated"] is True
    for probe in probes:
        result = run.results()[probe]
        assert result["outcome"] == "observed", result
        assert any(n.startswith("SIMULATED") for n in result["observation"]["notes"])
        measurement = result["observation"]["measurement"]
        assert classify(measurement) == "mismatch", probe
        assert measurement["failed"].get(graph_run.STALE_REPLAY, 0) > 0, (probe, measurement["failed"])
    capture = run.measurement("graph.capture.fp32")
    # Replay 0 keeps what the capture computed from the same inputs: right. Every later replay
    # is stale, against eager and (replay 1) against float64: 5 wrong cases per workload.
    assert capture["failed"] == {graph_run.STALE_REPLAY: 8 * (graph_run.REPLAYS + 1)}
    assert capture["failures"][0]["class"] == graph_run.STALE_REPLAY
    assert capture["failures"][0]["variant"] == "pointwise_chain.replay1"
    # Every training workload, the accumulating one included: 5 stale cases each.
    training = run.measurement("graph.training.fp32")
    assert training["failed"] == {graph_run.STALE_REPLAY: len(graph_specs.TRAINING_WORKLOADS) * (graph_run.REPLAYS + 1)}


# -- on a GPU --------------------------------------------------------------------------------------


def _gpu() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs 1 GPU(s) visible to torch; 0 here")


def _graphed_accumulation_overwrites() -> bool:
    """Whether this torch's ``make_graphed_callables`` hands its static gradient buffers to
    autograd as ``.grad``, so that a second backward without ``zero_grad`` gives 2·g2
    instead of g1 + g2 (a single linear layer, against the plain module)."""
    import copy

    gen = torch.Generator().manual_seed(0)
    model = torch.nn.Linear(16, 16).cuda()
    plain = copy.deepcopy(model)
    graphed = torch.cuda.make_graphed_callables(model, (torch.randn(4, 16, device="cuda"),))
    model.zero_grad(set_to_none=True)
    for x in (torch.randn(4, 16, generator=gen).cuda(), torch.randn(4, 16, generator=gen).cuda()):
        graphed(x).pow(2).sum().backward()
        plain(x).pow(2).sum().backward()
    torch.cuda.synchronize()
    want = plain.weight.grad
    return float((model.weight.grad - want).abs().max() / want.abs().max()) > 1e-3


@pytest.mark.gpu
def test_the_family_passes_on_a_gpu() -> None:
    """Every probe passes, but for the accumulating graphed workload where this torch's
    ``make_graphed_callables`` loses accumulated gradients (torch 2.11 does): a real
    finding, which must then be that workload's and only its."""
    _gpu()
    overwrites = _graphed_accumulation_overwrites()
    run = run_plan(PROBES, device="cuda:0", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    for probe, result in run.results().items():
        if result["outcome"] == "skip":
            assert ".reduce_overhead." in probe and "Triton" in result["reason"], result
            continue
        assert result["outcome"] == "observed", result
        measurement = result["observation"]["measurement"]
        assert graph_run.CPU_NOTE not in result["observation"]["notes"]
        if overwrites and ".training." in probe:
            assert {f["variant"].split(".")[0] for f in measurement["failures"]} == {"mlp_graphed_accumulate"}, probe
            assert measurement["errors"] == [], probe
            continue
        assert classify(measurement) == "pass", (probe, measurement["failures"][:1], measurement["errors"][:1])


@pytest.mark.gpu
def test_graph_stale_preset_on_a_gpu() -> None:
    _gpu()
    run = run_plan(["graph.capture.fp32"], device="cuda:0", simulate=load_preset("graph-stale"), timeout=300)
    measurement = run.measurement("graph.capture.fp32")
    assert measurement["failed"].get(graph_run.STALE_REPLAY, 0) > 0
