"""The allocator stress probes (``alloc.stress.*``, module ``alloc_stress``).

On the CPU: the judging functions (word patterns and block checks, the out-of-memory rule,
thread results) catch a planted aliasing, stale or zeroed read-back and pass a clean one; the
specs are exclusive (but the standard handoff), in the documented tiers, and their parameters fit their functions; the
GPU branches run against a fake CUDA (streams, events, delays and pinning replaced) so that
their Python is exercised where no GPU exists; and the probes run in a real worker on the CPU
(their self-test), with and without the faults of the ``alloc-stream-stale`` and
``alloc-stream-oom`` presets.
"""

from __future__ import annotations

import contextlib
import inspect
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import WorkerRun, load_preset, run_plan
from gpuprobe.worker import catalog
from gpuprobe.worker.context import ProbeContext
from gpuprobe.worker.patterns import derive_seed, pattern
from gpuprobe.worker.probes.alloc import stress
from judge_mirror import classify, result_classes

torch = pytest.importorskip("torch")

STRESS = [
    "alloc.stress.handoff",
    "alloc.stress.cross_stream_free",
    "alloc.stress.oom_retry",
    "alloc.stress.handoff.large",
    "alloc.stress.threads",
]
MIB = 1 << 20


def verdicts(run: WorkerRun) -> dict[str, str]:
    return result_classes(run.results())


def notes(run: WorkerRun, probe: str) -> list[str]:
    return run.results()[probe]["observation"]["notes"]


def metrics(run: WorkerRun, probe: str) -> dict[str, Any]:
    return run.results()[probe]["observation"]["metrics"]


# -- word patterns and block checks ----------------------------------------------------------------


def written(n: int, seed: int) -> tuple[Any, tuple[int, int]]:
    key = stress.affine_key(seed)
    words = torch.empty(n, dtype=torch.int32)
    stress.write_affine(torch, words, key)
    return words, key


def counts(words: Any, key: tuple[int, int]) -> list[int]:
    return stress.affine_error_counts(torch, words, key).tolist()


def test_the_affine_pattern_is_a_bijection_and_keys_differ() -> None:
    words, key = written(1 << 16, 12345)
    assert key[0] % 2 != 0
    assert torch.unique(words).numel() == words.numel()
    other, _ = written(1 << 16, 54321)
    assert int((words == other).sum()) <= 2
    assert torch.equal(stress.affine_words(torch, 100, 200, key), words[100:200])
    assert counts(words, key) == [0, 0]
    assert stress.first_affine_error(torch, words, key) is None


@pytest.mark.parametrize("chunk", [stress.CHECK_CHUNK, 1000])
def test_aliasing_stale_and_zeroed_blocks_are_caught(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    # A small chunk takes the multi-chunk path of the device-side counts.
    monkeypatch.setattr(stress, "CHECK_CHUNK", chunk)
    n = 4097
    words, key = written(n, 7)
    # Aliasing: another owner's pattern over the second half, as a block handed out twice.
    aliased = words.clone()
    intruder, _ = written(n, 8)
    aliased[2048:] = intruder[2048:]
    wrong, zeros = counts(aliased, key)
    assert wrong >= n - 2048 - 2 and zeros <= 1
    index, expected, found = stress.first_affine_error(torch, aliased, key)
    assert index >= 2048 and expected == int(words[index]) & 0xFFFFFFFF and found == int(intruder[index]) & 0xFFFFFFFF
    # Stale: bytes nobody wrote (what the simulation's stale effect writes).
    stale = torch.full((n,), 0x5A5A5A5A, dtype=torch.int32)
    assert counts(stale, key)[0] == n
    # Zeroed: every wrong word is zero.
    zeroed = torch.zeros(n, dtype=torch.int32)
    wrong, zeros = counts(zeroed, key)
    assert wrong == zeros and wrong >= n - 1


def test_judge_blocks_counts_violations_and_zero_violations() -> None:
    clean = stress.BlockCheck("clean", 100, 0, 0)
    aliased = stress.BlockCheck("round 3: the side stream's result (400 B)", 100, 40, 0, (60, 0x1234, 0x5A5A5A5A))
    zeroed = stress.BlockCheck("round 4: the new block (400 B)", 100, 100, 100)
    assert stress.judge_blocks([clean, clean]) == (2, 0, 0, None)
    checked, violations, zero_violations, example = stress.judge_blocks([clean, aliased, zeroed])
    assert (checked, violations, zero_violations) == (3, 2, 1)
    assert example == (
        "round 3: the side stream's result (400 B): 40 of 100 words wrong (0 zeros); "
        "word 60: expected 0x00001234, found 0x5a5a5a5a"
    )


def test_handoff_masks_keep_values_finite_and_make_trials_differ() -> None:
    ref = pattern(torch, 4097, "float32", 99)
    masks = {stress.handoff_mask(derive_seed(99, "alloc.stress.handoff", f"mask{trial}")) for trial in range(50)}
    assert len(masks) == 50 and 0 not in masks
    for mask in list(masks)[:5]:
        expected = stress.handoff_expected(torch, ref, 4097, mask)
        assert torch.isfinite(expected).all() and (expected != 0).all()
        assert not torch.equal(expected, ref)
        assert torch.equal(stress.handoff_expected(torch, expected, 4097, mask), ref)


# -- the out-of-memory rule -------------------------------------------------------------------------

OK = stress.AllocAttempt("ok", 0.001)
OOM = stress.AllocAttempt("oom", 0.002, "CUDA out of memory. Tried to allocate 1.00 GiB", free_before=512 * MIB)


def test_must_fit_succeeding_at_once_is_not_a_finding() -> None:
    assert stress.judge_must_fit(OK, None, request=1 << 30, judged=True, backend="native") == (False, None, [])


def test_must_fit_oom_that_a_retry_does_not_reproduce_is_a_violation() -> None:
    violation, example, notes_ = stress.judge_must_fit(OOM, OK, request=1 << 30, judged=True, backend="native")
    assert violation and not notes_
    assert "raised out-of-memory at the first attempt" in example
    assert "with 536870912 B reported free" in example
    assert "immediate retry after synchronize and empty_cache succeeded" in example


def test_must_fit_oom_twice_is_a_violation_too() -> None:
    violation, example, _ = stress.judge_must_fit(OOM, OOM, request=1 << 30, judged=True, backend="native")
    assert violation and "failed too" in example


def test_must_fit_oom_is_only_measured_with_another_backend() -> None:
    violation, example, notes_ = stress.judge_must_fit(
        OOM, OK, request=1 << 30, judged=False, backend="cudaMallocAsync"
    )
    assert not violation and example is None
    assert "Not judged with the cudaMallocAsync allocator backend" in notes_[0]


def test_an_oom_while_the_side_stream_still_runs_is_reported_not_failed() -> None:
    found, notes_ = stress.describe_pending(OOM, OK, busy_before=True, busy_after=True)
    assert found["pending_first_attempt"] == "oom" and found["pending_retry"] == "ok"
    assert "reported, not failed" in notes_[0] and "retry after the side stream finished succeeded" in notes_[0]


def test_waiting_for_the_side_stream_is_measured() -> None:
    slow = stress.AllocAttempt("ok", 0.19)
    found, notes_ = stress.describe_pending(slow, None, busy_before=True, busy_after=False)
    assert found["pending_waited_for_side"] is True and "waited" in notes_[0]
    found, notes_ = stress.describe_pending(OK, None, busy_before=False, busy_after=False)
    assert "pending_waited_for_side" not in found and "did not race" in notes_[0]
    found, notes_ = stress.describe_pending(OK, None, busy_before=None, busy_after=None)  # the CPU
    assert notes_ == []


# -- threads --------------------------------------------------------------------------------------------


def test_thread_results_pass_when_every_readback_is_exact() -> None:
    reports = [stress.ThreadReport(i, iterations=10, readbacks=20) for i in range(4)]
    measurement, notes_ = stress.judge_threads(reports, margin=MIB)
    assert measurement["checked"] == 84 and measurement["violations"] == 0 and notes_ == []
    assert classify(measurement) == "pass"


def test_thread_results_count_bad_readbacks_errors_and_spurious_ooms() -> None:
    bad = stress.BlockCheck("thread 1, iteration 3 (4096 B): device-to-host copy", 1024, 1024, 0, (0, 1, 0x5A5A5A5A))
    reports = [
        stress.ThreadReport(0, readbacks=5),
        stress.ThreadReport(1, readbacks=5, bad=[bad]),
        stress.ThreadReport(2, readbacks=1, errors=["RuntimeError: simulated failure"]),
        stress.ThreadReport(3, readbacks=1, ooms=[(4096, 1 << 30, "CUDA out of memory")]),  # memory was free
        stress.ThreadReport(4, readbacks=1, ooms=[(4096, 1000, "CUDA out of memory")]),  # genuine
        stress.ThreadReport(5, readbacks=1, ooms=[(4096, None, "CUDA out of memory")]),  # unknown: genuine
    ]
    measurement, notes_ = stress.judge_threads(reports, margin=MIB)
    assert measurement["checked"] == 14 + 6
    assert measurement["violations"] == 3 and measurement["zero_violations"] == 0
    assert measurement["example"].startswith("thread 1, iteration 3 (4096 B): device-to-host copy: 1024 of 1024")
    assert classify(measurement) == "mismatch"
    assert len(notes_) == 2 and all("out of memory allocating 4096 B" in n for n in notes_)
    only_error, _ = stress.judge_threads(reports[2:3], margin=MIB)
    assert only_error["example"] == "thread 2 raised RuntimeError: simulated failure"
    only_spurious, _ = stress.judge_threads(reports[3:4], margin=MIB)
    assert only_spurious["violations"] == 1 and "with 1073741824 B free afterwards" in only_spurious["example"]


def test_spurious_oom_needs_free_memory_beyond_the_margin() -> None:
    assert stress.spurious_oom(100, 100 + MIB, MIB)
    assert not stress.spurious_oom(100, 100 + MIB - 1, MIB)
    assert not stress.spurious_oom(100, None, MIB)


# -- the catalog ---------------------------------------------------------------------------------------


def test_stress_specs() -> None:
    probes = catalog.all_probes()  # raises on duplicate ids
    mine = {i: p for i, p in probes.items() if i.startswith("alloc.stress.")}
    assert sorted(mine) == sorted(STRESS)
    for probe in mine.values():
        # Every stress probe fills the device or budgets from its free memory, and runs alone;
        # but the standard tier's handoff, a few MiB, which runs beside the other lanes.
        expected = "side" if probe.id == "alloc.stress.handoff" else "exclusive"
        assert probe.placement == expected, probe.id
        assert probe.rule["kind"] in ("invariant", "bit_exact"), probe.id
        assert probe.timeout_s >= 120, probe.id
        assert probe.isolated == (probe.tier == "full"), probe.id
        # The parameters fit the implementation's keyword arguments.
        inspect.signature(probe.resolve()).bind(None, **probe.params)
    assert [i for i, p in mine.items() if p.tier == "standard"] == ["alloc.stress.handoff"]
    assert {p.tier for i, p in mine.items() if i != "alloc.stress.handoff"} == {"full"}
    sizes = mine["alloc.stress.handoff.large"].params["sizes"]
    assert any(n % 32 == 1 for n in sizes) and max(sizes) * 4 >= 256 * MIB


# -- the GPU branches against a fake CUDA ---------------------------------------------------------------


class FakeStream:
    """Records what it was asked to wait for; busy from the first queued dependency until
    synchronized."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.waits: list[tuple[str, str]] = []
        self.pending = False

    def wait_stream(self, other: FakeStream) -> None:
        self.waits.append(("stream", other.name))
        self.pending = True

    def wait_event(self, event: FakeEvent) -> None:
        self.waits.append(("event", event.stream.name))
        self.pending = True

    def query(self) -> bool:
        return not self.pending

    def synchronize(self) -> None:
        self.pending = False


class FakeEvent:
    def __init__(self) -> None:
        self.stream: FakeStream | None = None

    def record(self, stream: FakeStream) -> None:
        self.stream = stream


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """torch.cuda's streams, events, memory queries and delays replaced, ``record_stream`` and
    pinning recorded instead of done: the probes' GPU branches run on CPU tensors."""
    cuda = torch.cuda
    state = SimpleNamespace(default=FakeStream("default"), streams=[], recorded=[], free=128 * MIB, sleeps=0)

    def new_stream(device: Any = None) -> FakeStream:
        state.streams.append(FakeStream(f"side{len(state.streams)}"))
        return state.streams[-1]

    def sleep(cycles: int) -> None:
        state.sleeps += 1

    monkeypatch.setattr(cuda, "current_stream", lambda device=None: state.default)
    monkeypatch.setattr(cuda, "Stream", new_stream)
    monkeypatch.setattr(cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(cuda, "Event", FakeEvent)
    monkeypatch.setattr(cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(cuda, "mem_get_info", lambda device=None: (state.free, 2 * state.free))
    monkeypatch.setattr(cuda, "memory_stats", lambda device=None: {"num_alloc_retries": 0, "num_ooms": 0})
    monkeypatch.setattr(cuda, "get_allocator_backend", lambda: "native")
    monkeypatch.setattr(cuda, "_sleep", sleep)
    monkeypatch.setattr(cuda, "get_device_properties", lambda device=None: SimpleNamespace(clock_rate=1_000_000))
    monkeypatch.setattr(stress.StreamKit, "record_stream", lambda self, t, stream: state.recorded.append(stream.name))
    monkeypatch.setattr(stress.StreamKit, "pinned_empty", lambda self, n, dtype: torch.empty(n, dtype=dtype))
    return state


def gpu_context(probe_id: str) -> ProbeContext:
    ctx = ProbeContext(torch, "cpu", 5, probe_id)
    ctx.is_gpu = True
    return ctx


def test_gpu_branch_of_the_handoff(fake_gpu: SimpleNamespace) -> None:
    fake_gpu.free = 320 * MIB  # what require_memory asks for the 2^20 + 1 element trials
    params = catalog.all_probes()["alloc.stress.handoff"].params
    out = stress.run_handoff(gpu_context("alloc.stress.handoff"), **params)
    assert classify(out.measurement) == "pass"
    assert out.metrics["trials"] == 7 * 4 + 3 and out.metrics["pinned_trials"] == 3
    assert out.metrics["delay"] == "torch.cuda._sleep"
    (side,) = fake_gpu.streams
    # Each direction with each synchronization: the consumer waited for the producer.
    assert side.waits.count(("event", "default")) == 7 and side.waits.count(("stream", "default")) == 7 + 3
    assert fake_gpu.default.waits.count(("event", "side0")) == 7
    assert fake_gpu.default.waits.count(("stream", "side0")) == 7 + 3
    # Inputs read on another stream are recorded on it before they are freed.
    assert fake_gpu.recorded.count("side0") == 14 and fake_gpu.recorded.count("default") == 14 + 3


def test_gpu_branch_of_the_cross_stream_free(fake_gpu: SimpleNamespace) -> None:
    ctx = gpu_context("alloc.stress.cross_stream_free")
    out = stress.run_cross_stream_free(ctx, rounds=8, fill_fraction=0.5, delay_ms=10.0)
    assert classify(out.measurement) == "pass", out.measurement
    assert out.measurement["checked"] == 16 + 1  # results, new blocks, one 64 MiB filler block
    assert out.metrics["filled_bytes"] == 64 * MIB and out.metrics["side_busy_at_free_rounds"] == 8
    assert fake_gpu.recorded == ["side0"] * 8 and fake_gpu.sleeps == 16 + 1  # + the warm-up


def test_gpu_branch_of_the_oom_retry(fake_gpu: SimpleNamespace) -> None:
    ctx = gpu_context("alloc.stress.oom_retry")
    out = stress.run_oom_retry(ctx, **catalog.all_probes()["alloc.stress.oom_retry"].params)
    assert classify(out.measurement) == "pass", out.measurement
    found = out.metrics
    assert found["request_bytes"] == 8 * MIB and found["allocator_backend"] == "native" and found["judged"]
    assert found["must_fit_first_attempt"] == "ok" and found["pending_first_attempt"] == "ok"
    assert found["side_busy_at_free"] is True and found["side_busy_at_pending_request"] is True
    assert found["allocator_alloc_retries"] == 0
    assert fake_gpu.recorded == ["side0", "side0"]


def test_gpu_branch_of_the_oom_retry_with_another_backend(
    fake_gpu: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "get_allocator_backend", lambda: "cudaMallocAsync")
    out = stress.run_oom_retry(gpu_context("alloc.stress.oom_retry"), delay_ms=1.0, pending_delay_ms=1.0)
    assert out.metrics["judged"] is False and classify(out.measurement) == "pass"


def test_gpu_branch_of_the_threads(fake_gpu: SimpleNamespace) -> None:
    ctx = gpu_context("alloc.stress.threads")
    out = stress.run_threads(ctx, threads=4, duration_s=0.2, max_block=16 << 20, ring=3)
    assert classify(out.measurement) == "pass", out.measurement
    assert out.metrics["streams"] == 4 and len(fake_gpu.streams) == 4
    assert out.metrics["iterations_min"] >= stress.MIN_THREAD_ITERATIONS
    # 128 MiB free: a quarter shared by 4 threads, 5 live blocks each.
    assert out.metrics["max_block_bytes"] == (8 * MIB // 5) // 4 * 4


def test_a_thread_that_cannot_start_is_a_violation(fake_gpu: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    made = []

    def stream_or_fail(device: Any = None) -> FakeStream:
        made.append(device)
        if len(made) == 2:
            raise RuntimeError("CUDA error: out of streams")
        return FakeStream(f"side{len(made)}")

    monkeypatch.setattr(torch.cuda, "Stream", stream_or_fail)
    out = stress.run_threads(gpu_context("alloc.stress.threads"), threads=3, duration_s=0.05, max_block=1 << 16, ring=2)
    assert out.measurement["violations"] == 1
    assert out.measurement["example"].endswith("raised RuntimeError: CUDA error: out of streams")
    assert out.metrics["iterations_min"] == 0 and out.metrics["iterations_max"] >= stress.MIN_THREAD_ITERATIONS


def test_an_exception_in_a_thread_is_a_violation(monkeypatch: pytest.MonkeyPatch) -> None:
    real_alloc = stress.ops_pipeline.alloc
    raised: list[bool] = []

    def flaky(nbytes: int, device: Any, *, method: str, dtype: Any = None) -> Any:
        # The first thread allocation raises, whichever thread makes it: deterministic
        # whatever the threads' interleaving.
        if method == "thread" and not raised:
            raised.append(True)
            raise RuntimeError("simulated: invalid argument")
        return real_alloc(nbytes, device, method=method, dtype=dtype)

    monkeypatch.setattr(stress.ops_pipeline, "alloc", flaky)
    ctx = ProbeContext(torch, "cpu", 5, "alloc.stress.threads")
    out = stress.run_threads(ctx, threads=3, duration_s=0.1, max_block=1 << 16, ring=2)
    assert classify(out.measurement) == "mismatch"
    assert out.measurement["example"].endswith("raised RuntimeError: simulated: invalid argument")
    assert out.metrics["iterations_min"] < stress.MIN_THREAD_ITERATIONS  # the thread stopped there


# -- the probes in a worker on the CPU ---------------------------------------------------------------------


def test_stress_probes_pass_on_the_cpu_and_say_it_is_a_self_test() -> None:
    run = run_plan(STRESS, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    assert verdicts(run) == {probe: "pass" for probe in STRESS}
    for probe in STRESS:
        assert any("on cpu there are no streams" in n for n in notes(run, probe)), probe
    assert metrics(run, "alloc.stress.handoff")["trials"] == 28
    assert any("left out: [67108865]" in n for n in notes(run, "alloc.stress.handoff.large"))
    threads = metrics(run, "alloc.stress.threads")
    assert threads["iterations_min"] >= stress.MIN_THREAD_ITERATIONS and threads["out_of_memory_errors"] == 0
    oom = metrics(run, "alloc.stress.oom_retry")
    assert oom["must_fit_first_attempt"] == "ok" and oom["pending_first_attempt"] == "ok"


def test_stale_readbacks_and_a_spurious_oom_are_caught() -> None:
    spec = load_preset("alloc-stream-stale")
    spec["fault"] += load_preset("alloc-stream-oom")["fault"]
    # Out-of-memory while the side stream still runs (phase B): reported, never a violation.
    spec["fault"].append(
        {"name": "pending-oom", "op": "alloc", "when": {"methods": ["pending"]}, "effect": {"kind": "oom"}}
    )
    # oom_retry first: its two read-backs are the stale fault's first two (every second is hit).
    probes = [
        "alloc.stress.oom_retry",
        "alloc.stress.cross_stream_free",
        "alloc.stress.handoff",
        "alloc.stress.threads",
    ]
    run = run_plan(probes, simulate=spec, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.hello["simulated"] is True
    assert verdicts(run) == {probe: "mismatch" for probe in probes}
    oom = run.measurement("alloc.stress.oom_retry")
    # The spurious out-of-memory and the stale read-back of phase A; not phase B's out-of-memory.
    assert oom["violations"] == 2
    assert "raised out-of-memory at the first attempt (simulated: CUDA out of memory" in oom["example"]
    assert "immediate retry after synchronize and empty_cache succeeded" in oom["example"]
    found = metrics(run, "alloc.stress.oom_retry")
    assert found["must_fit_first_attempt"] == "oom" and found["must_fit_retry"] == "ok"
    assert found["pending_first_attempt"] == "oom" and found["pending_retry"] == "ok"
    assert any("reported, not failed" in n for n in notes(run, "alloc.stress.oom_retry"))
    cross = run.measurement("alloc.stress.cross_stream_free")
    assert cross["violations"] == 8 and "0x5a5a5a5a" in cross["example"]  # every side-stream result
    handoff = run.measurement("alloc.stress.handoff")
    assert handoff["failed_trials"] == handoff["trials"] // 2 and handoff["unchanged"] == 0
    assert any(n.startswith("wrong: ") for n in notes(run, "alloc.stress.handoff"))
    assert run.measurement("alloc.stress.threads")["violations"] > 0
