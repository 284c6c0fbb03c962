"""Allocator and stream stress (``alloc.stress.*``; catalog and id grammar in ``alloc_specs``).

This module owns the cases where the framework's caching allocator meets several streams or
threads, each judged on the data it reads back, not on calls returning:

- ``cross_stream_free``: with the device filled to ~90% of its free memory, blocks written late
  by a busy side stream are freed with ``record_stream`` on the default stream and new blocks
  are allocated and written at once; the side stream's results and the new blocks must both
  hold their own data (memory handed out before the side stream finished would mix them);
- ``oom_retry``: an allocation that fits only in memory freed (``record_stream``) by side-stream
  work that has *completed* must succeed at the first attempt; one made while the side stream
  still runs is measured, not judged (see ``judge_must_fit`` / ``describe_pending``);
- ``handoff``: data written on one stream and read on another after an event or
  ``wait_stream``, both directions, many sizes, plus a non_blocking H2D from pinned memory on a
  side stream consumed on the default stream; compared bit for bit;
- ``threads``: several threads, each on its own stream, allocate, write, copy device to device
  and device to host, keep and free blocks for a second or two; every read-back must be exact
  and no call may raise (a genuine out-of-memory excepted).

The judging is done by pure functions at the top of the module (word patterns, block checks,
the out-of-memory rule, thread results), so the CPU tests exercise it. Device work goes through
``StreamKit``: on a GPU it is streams, events and delay kernels; on a CPU device under test
(no streams) the same calls run in program order, so the bookkeeping of every probe runs there
as a self-test and says so in a note.

Allocations under test go through ``ops_pipeline.alloc`` and read-backs through
``ops_pipeline.stream_readback`` (op ``alloc``, the method naming the case), so fault
simulation can plant a spurious out-of-memory or a stale read-back in exactly these probes.
"""

from __future__ import annotations

import contextlib
import math
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuprobe.worker import ops, ops_pipeline, simulate
from gpuprobe.worker.compare import CompareAccumulator
from gpuprobe.worker.context import ProbeContext, ProbeOutput, require_memory
from gpuprobe.worker.patterns import canary_value, fill_canary, pattern
from gpuprobe.worker.probes.alloc.run import (
    GIB,
    MIB,
    ROUND,
    allocator_stats,
    stream_delay,
    first_line,
    round_down,
    cpu_budget_bytes,
    device_memory,
    invariant,
    is_oom,
    margin_bytes,
    release,
    tag_errors,
    tag_for,
)

_MASK32 = 0xFFFFFFFF
#: Words compared per step on the device: bounds the temporaries of a check while the device
#: is nearly full (16 MiB of expected words plus a 4 MiB mask).
CHECK_CHUNK = 1 << 22
#: Block sizes (bytes) of the cross-stream rounds, cycled: the allocator's small pool (≤ 1 MiB)
#: and large pool, sizes that are not multiples of its 2 MiB rounding.
CROSS_SIZES = (MIB, 4 * MIB + 4096, 32 * MIB, 2 * MIB - 4096, 128 * MIB + 4096, 16 * 1024 + 4, 512 * 1024, 64 * MIB)
#: Handoff element counts above this are not run on a CPU device under test (a self-test).
CPU_HANDOFF_MAX = (1 << 20) + 1
#: The thread case's duration on a CPU device under test.
CPU_THREAD_SECONDS = 0.4
#: Every thread makes at least this many iterations, whatever the duration.
MIN_THREAD_ITERATIONS = 4
MAX_THREAD_ITERATIONS = 100_000


# -- pure judging: patterns and block checks --------------------------------------------------------


def s32(value: int) -> int:
    """``value`` modulo 2^32 as a signed 32-bit integer (what an int32 tensor holds)."""
    value &= _MASK32
    return value - (1 << 32) if value >= 1 << 31 else value


def affine_key(seed: int) -> tuple[int, int]:
    """(multiplier, offset) of an affine word pattern, as signed 32-bit ints. The multiplier
    is odd, so word i = i·a + b (mod 2^32) is a bijection of the index: a block's words are all
    distinct, and a block written with another key differs in all but a handful of words, so
    memory written by two owners cannot pass as either's."""
    return s32((seed & _MASK32) | 1), s32(seed >> 32)


def write_affine(torch: Any, words: Any, key: tuple[int, int]) -> None:
    """Writes the pattern of ``key`` into the 1-D int32 tensor ``words`` on the current stream
    (arange, multiply, add, all in place: no temporaries while memory is nearly full)."""
    a, b = key
    torch.arange(words.numel(), dtype=torch.int32, out=words)
    words.mul_(a).add_(b)


def affine_words(torch: Any, start: int, end: int, key: tuple[int, int], device: Any = None) -> Any:
    """Words ``start..end`` of the pattern of ``key`` (int32, on ``device``; the host by default)."""
    a, b = key
    out = torch.arange(start, end, dtype=torch.int32, device=device)
    return out.mul_(a).add_(b)


def affine_error_counts(torch: Any, words: Any, key: tuple[int, int]) -> Any:
    """[words not holding the pattern, of those the zeros] as an int64 tensor on ``words``'
    device, counted there in chunks; the caller reads many back at once."""
    total = torch.zeros(2, dtype=torch.int64, device=words.device)
    for start in range(0, words.numel(), CHECK_CHUNK):
        end = min(words.numel(), start + CHECK_CHUNK)
        got = words[start:end]
        wrong = got != affine_words(torch, start, end, key, words.device)
        total += torch.stack([wrong.sum(), (wrong & (got == 0)).sum()])
    return total


def first_affine_error(torch: Any, words: Any, key: tuple[int, int]) -> tuple[int, int, int] | None:
    """(index, expected, found) of the first word not holding the pattern, as unsigned 32-bit
    values, or None (only called for blocks already known to be wrong)."""
    for start in range(0, words.numel(), CHECK_CHUNK):
        end = min(words.numel(), start + CHECK_CHUNK)
        got = words[start:end]
        expected = affine_words(torch, start, end, key, words.device)
        where = (got != expected).nonzero()
        if where.numel():
            i = int(where[0, 0])
            return start + i, int(expected[i]) & _MASK32, int(got[i]) & _MASK32
    return None


@dataclass(frozen=True)
class BlockCheck:
    """One buffer's check: what it is, the words checked, the words wrong, of those the zeros,
    and the first wrong word (index, expected, found) when known."""

    what: str
    words: int
    wrong: int
    zeros: int
    first: tuple[int, int, int] | None = None

    @property
    def violated(self) -> bool:
        return self.wrong > 0

    @property
    def zero_violation(self) -> bool:
        """Every wrong word is zero (memory that was never written, or cleared)."""
        return self.wrong > 0 and self.zeros == self.wrong

    def describe(self) -> str:
        text = f"{self.what}: {self.wrong} of {self.words} words wrong ({self.zeros} zeros)"
        if self.first is not None:
            index, expected, found = self.first
            text += f"; word {index}: expected 0x{expected:08x}, found 0x{found:08x}"
        return text


def judge_blocks(checks: Sequence[BlockCheck]) -> tuple[int, int, int, str | None]:
    """(checked, violations, zero violations, example) of the invariant "every buffer holds
    exactly what its writer wrote"."""
    bad = [c for c in checks if c.violated]
    example = bad[0].describe() if bad else None
    return len(checks), len(bad), sum(1 for c in bad if c.zero_violation), example


def handoff_mask(seed: int) -> int:
    """A non-zero XOR mask on the sign and mantissa bits of float32 (signed 32-bit): a pattern
    value XOR the mask stays finite and non-zero, and every trial's data differs, so a consumer
    that reads a previous trial's leftovers is caught."""
    return s32((seed & 0x807FFFFF) | 1)


def handoff_expected(torch: Any, ref: Any, n: int, mask: int) -> Any:
    """The first ``n`` float32 of ``ref`` with ``mask`` XORed into their bits (host)."""
    out = ref[:n].clone()
    out.view(torch.int32).bitwise_xor_(mask)
    return out


# -- pure judging: the out-of-memory rule ----------------------------------------------------------


@dataclass(frozen=True)
class AllocAttempt:
    """One attempt at an allocation: ``ok`` or ``oom``, how long the call took, the error's
    first line, and the free device memory reported just before it (None on the CPU)."""

    outcome: str
    seconds: float = 0.0
    message: str = ""
    free_before: int | None = None


def judge_must_fit(
    first: AllocAttempt, retry: AllocAttempt | None, *, request: int, judged: bool, backend: str
) -> tuple[bool, str | None, list[str]]:
    """The rule of ``alloc.stress.oom_retry``, phase A: (violation, example, notes).

    The request fits in memory the allocator holds itself: a block of exactly that size, freed
    with ``record_stream`` by side-stream work that has completed (the side stream was
    synchronized before the request). ``Tensor.record_stream`` documents that the memory is not
    reused "until all work queued on stream at the time of deallocation is complete" and that
    later allocations poll the stream; once the work is complete, the poll finds it complete.
    The native CUDA/HIP caching allocator also, before it reports out-of-memory, synchronizes
    every outstanding event and frees its cached blocks (``release_cached_blocks``), so an
    out-of-memory error here is a defect whatever a retry does. Other backends (cudaMallocAsync)
    free in stream order and document no such guarantee: not judged (``judged`` False), noted.
    """
    if first.outcome == "ok":
        return False, None, []
    free = f" with {first.free_before} B reported free" if first.free_before is not None else ""
    what = (
        f"an allocation of {request} B{free}, which fits in memory freed (record_stream) by side-stream work "
        f"that had completed, raised out-of-memory at the first attempt ({first.message})"
    )
    if retry is None:
        then = "; it was not retried"
    elif retry.outcome == "ok":
        then = (
            "; an immediate retry after synchronize and empty_cache succeeded: the allocator did not reclaim "
            "memory whose stream uses had completed"
        )
    else:
        then = f"; the retry after synchronize and empty_cache failed too ({retry.message})"
    if not judged:
        return False, None, [f"{what}{then}. Not judged with the {backend} allocator backend: measured only"]
    return True, what + then, []


def describe_pending(
    first: AllocAttempt,
    retry: AllocAttempt | None,
    *,
    busy_before: bool | None,
    busy_after: bool | None,
) -> tuple[dict[str, Any], list[str]]:
    """Phase B of ``alloc.stress.oom_retry``, a measurement: (metrics, notes), never a violation.

    The request needs memory whose ``record_stream`` use is still running on the side stream.
    ``Tensor.record_stream`` warns that allocations race with side-stream work and may
    non-deterministically fail to reuse the memory, so an out-of-memory error here is allowed
    (reported in a note); waiting for the side stream (what the native allocator does before
    giving up) is reported too. Data handed out early is judged elsewhere (the block check)."""
    metrics: dict[str, Any] = {
        "pending_first_attempt": first.outcome,
        "pending_seconds": round(first.seconds, 4),
        "pending_retry": retry.outcome if retry is not None else None,
        "side_busy_at_pending_request": busy_before,
        "side_busy_after_pending_request": busy_after,
    }
    notes: list[str] = []
    if first.outcome == "oom":
        if retry is None:
            outcome = "was not made"
        else:
            outcome = "succeeded" if retry.outcome == "ok" else f"failed too ({retry.message})"
        notes.append(
            f"an allocation made while the side stream still used the memory it needed raised out-of-memory "
            f"({first.message}); the retry after the side stream finished {outcome}. record_stream's documentation "
            "allows an allocation that races with side-stream work to fail to reuse the memory: reported, not failed"
        )
    elif busy_before:
        waited = busy_after is False
        metrics["pending_waited_for_side"] = waited
        if waited:
            notes.append(
                f"the allocation made while the side stream still used the memory returned after "
                f"{first.seconds:.3f} s, once the side stream had finished: the allocator waited for the pending use "
                "instead of failing"
            )
    elif busy_before is False:
        notes.append("the side stream had finished before the pending request: phase B did not race (a fast device)")
    return metrics, notes


# -- pure judging: threads ------------------------------------------------------------------------------


@dataclass
class ThreadReport:
    """What one thread of ``alloc.stress.threads`` did: iterations, read-backs checked, bytes
    copied, the read-backs that were wrong, the unexpected exceptions and the out-of-memory
    errors as (requested bytes, free bytes asked after the error, message)."""

    thread: int
    iterations: int = 0
    readbacks: int = 0
    bytes_copied: int = 0
    bad: list[BlockCheck] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    ooms: list[tuple[int, int | None, str]] = field(default_factory=list)


def spurious_oom(request: int, free_after: int | None, margin: int) -> bool:
    """An out-of-memory error is genuine unless free memory, asked again after it, still covered
    the request with ``margin`` to spare (the thread case budgets its sizes from a quarter of
    the free memory, so a healthy stack never runs out); unknown free memory counts as genuine."""
    return free_after is not None and free_after >= request + margin


def judge_threads(reports: Sequence[ThreadReport], *, margin: int) -> tuple[dict[str, Any], list[str]]:
    """The invariant of ``alloc.stress.threads`` and notes: every read-back bit-exact, no
    exception in any thread but a genuine out-of-memory. Checked items: every read-back, plus
    one per thread for "ran without an unexpected error"."""
    checked = sum(r.readbacks for r in reports) + len(reports)
    bad = [c for r in reports for c in r.bad]
    errors = [(r.thread, e) for r in reports for e in r.errors]
    spurious = [(r.thread, o) for r in reports for o in r.ooms if spurious_oom(o[0], o[1], margin)]
    genuine = [(r.thread, o) for r in reports for o in r.ooms if not spurious_oom(o[0], o[1], margin)]
    example = None
    if bad:
        example = bad[0].describe()
    elif errors:
        example = f"thread {errors[0][0]} raised {errors[0][1]}"
    elif spurious:
        thread, (request, free_after, message) = spurious[0]
        example = (
            f"thread {thread}: out of memory allocating {request} B with {free_after} B free afterwards ({message})"
        )
    notes = [
        f"thread {thread}: out of memory allocating {request} B ({free_after} B free afterwards): {message}"
        for thread, (request, free_after, message) in genuine
    ][:4]
    measurement = invariant(
        "every thread's device-to-device and device-to-host copies read back bit-exact, and no call raises",
        checked,
        len(bad) + len(errors) + len(spurious),
        sum(1 for c in bad if c.zero_violation),
        example,
    )
    return measurement, notes


# -- streams, or program order on the CPU ------------------------------------------------------------


class StreamKit:
    """Streams, events and delay kernels on a GPU; on a CPU device under test (no streams) every
    call is a no-op and the work runs in program order, so the probes' bookkeeping still runs."""

    def __init__(self, ctx: ProbeContext) -> None:
        self.ctx = ctx
        self.torch = ctx.torch
        self.gpu = ctx.is_gpu
        #: How the last delay was made (``torch.cuda._sleep`` or a matmul chain).
        self.delay_how = "none (no streams on cpu)"

    def current(self) -> Any:
        return self.torch.cuda.current_stream(self.ctx.device) if self.gpu else None

    def new_stream(self) -> Any:
        return self.torch.cuda.Stream(device=self.ctx.device) if self.gpu else None

    def on(self, stream: Any) -> Any:
        """Makes ``stream`` current inside the block."""
        if self.gpu and stream is not None:
            return self.torch.cuda.stream(stream)
        return contextlib.nullcontext()

    def delay(self, milliseconds: float) -> None:
        """Keeps the current stream busy for about ``milliseconds``."""
        if self.gpu:
            self.delay_how = stream_delay(self.ctx, milliseconds)

    def wait_stream(self, waiter: Any, producer: Any) -> None:
        if self.gpu:
            waiter.wait_stream(producer)

    def wait_event(self, waiter: Any, producer: Any) -> None:
        """An event recorded on ``producer`` now, waited for by ``waiter``."""
        if self.gpu:
            event = self.torch.cuda.Event()
            event.record(producer)
            waiter.wait_event(event)

    def record_stream(self, t: Any, stream: Any) -> None:
        if self.gpu:
            t.record_stream(stream)

    def busy(self, stream: Any) -> bool | None:
        """Whether ``stream`` still has work queued (None on the CPU)."""
        return (not stream.query()) if self.gpu else None

    def sync_stream(self, stream: Any) -> None:
        if self.gpu:
            stream.synchronize()

    def sync(self) -> None:
        self.ctx.sync()

    def empty_cache(self) -> None:
        if self.gpu:
            self.torch.cuda.empty_cache()

    def pinned_empty(self, numel: int, dtype: Any) -> Any:
        """A page-locked host buffer (GPU only: pinning needs the device's runtime)."""
        return self.torch.empty(numel, dtype=dtype, pin_memory=True)


def _warm_up(ctx: ProbeContext, kit: StreamKit, side: Any) -> None:
    """Runs the kernels a probe uses once before memory is filled: with lazy module loading
    (CUDA_MODULE_LOADING=LAZY, the default) a kernel's first launch needs device memory."""
    if not ctx.is_gpu:
        return
    torch = ctx.torch
    block = torch.empty(4096, dtype=torch.uint8, device=ctx.device)
    words = block.view(torch.int32)
    with kit.on(side):
        kit.delay(0.05)
        write_affine(torch, words, (1, 0))
        block.clone().copy_(block)
    kit.sync()
    affine_error_counts(torch, words, (3, 0)).tolist()
    first_affine_error(torch, words, (3, 0))
    words.fill_(7)
    tag_errors(ctx, [(block, 7)], full=True)
    kit.sync()


def _fill_to(ctx: ProbeContext, target: int, chunk: int, method: str) -> tuple[list[tuple[Any, int]], int, str | None]:
    """Holds ``target`` bytes in blocks of ``chunk`` bytes and one of the remainder (rounded down
    to the allocator's 2 MiB granularity on a GPU), each filled with its tag. Stops at the first
    out-of-memory error: the fill only sets the stage, what it reached is in the metrics.
    Returns the blocks, the bytes held and why it stopped early (or None)."""
    unit = ROUND if ctx.is_gpu else 4096
    blocks: list[tuple[Any, int]] = []
    held = 0
    while held < target:
        size = chunk if held + chunk <= target else round_down(target - held, unit)
        if size <= 0:
            break
        try:
            block = ops_pipeline.alloc(size, ctx.device, method=method)
        except Exception as exc:  # noqa: BLE001 - only out-of-memory ends the fill
            if not is_oom(ctx.torch, exc):
                raise
            return blocks, held, f"the fill stopped at {held} B of {target} B: {first_line(exc)}"
        tag = tag_for(ctx, 10_000 + len(blocks))
        block.view(ctx.torch.int32).fill_(tag)
        blocks.append((block, tag))
        held += size
    return blocks, held, None


def _check_affine(ctx: ProbeContext, blocks: list[tuple[Any, tuple[int, int], str]], method: str) -> list[BlockCheck]:
    """Checks every word of each (block, key, what) after the device has synchronized, counted
    on the device and read back at once; the read-back goes through ``stream_readback``."""
    torch = ctx.torch
    if not blocks:
        return []
    seen = []
    counts = []
    for block, key, _ in blocks:
        words = ops_pipeline.stream_readback(block.view(torch.int32), method=method)
        seen.append(words)
        counts.append(affine_error_counts(torch, words, key))
    table = ops.readback(torch.stack(counts)).tolist()
    out = []
    for (_, key, what), words, (wrong, zeros) in zip(blocks, seen, table):
        first = first_affine_error(torch, words, key) if wrong else None
        out.append(BlockCheck(what, int(words.numel()), int(wrong), int(zeros), first))
    return out


def _check_fills(ctx: ProbeContext, fills: list[tuple[Any, int]]) -> list[BlockCheck]:
    """The filler blocks' tags, sampled (every 4099th word and the last)."""
    results = tag_errors(ctx, fills, full=False)
    return [BlockCheck(f"filler block {i} (sampled)", w, wrong, z) for i, (w, wrong, z) in enumerate(results)]


def _scaled(sizes: Sequence[int], budget: int) -> list[int]:
    """``sizes`` scaled down (never up) so that they add up to at most ``budget`` bytes, each a
    multiple of 4 bytes and at least 4 KiB."""
    factor = min(1.0, budget / max(1, sum(sizes)))
    return [max(4096, int(s * factor) // 4 * 4) for s in sizes]


def _allocator_backend(ctx: ProbeContext) -> str:
    if not ctx.is_gpu:
        return "cpu"
    getter = getattr(ctx.torch.cuda, "get_allocator_backend", None)
    if getter is None:
        return "native"
    try:
        return str(getter())
    except Exception:  # noqa: BLE001 - reported, and then not judged
        return "unknown"


def _attempt(ctx: ProbeContext, nbytes: int, method: str) -> tuple[AllocAttempt, Any]:
    """One allocation attempt: (what happened, the block or None). Only out-of-memory is caught."""
    free_before = device_memory(ctx)[0] if ctx.is_gpu else None
    started = time.perf_counter()
    try:
        block = ops_pipeline.alloc(nbytes, ctx.device, method=method)
    except Exception as exc:  # noqa: BLE001 - anything but out-of-memory is the probe's error
        if not is_oom(ctx.torch, exc):
            raise
        return AllocAttempt("oom", time.perf_counter() - started, first_line(exc), free_before), None
    return AllocAttempt("ok", time.perf_counter() - started, "", free_before), block


def _cpu_note(ctx: ProbeContext, what: str) -> None:
    ctx.notes.append(f"on cpu there are no streams: {what} run in program order, a self-test of the probe")


# -- alloc.stress.cross_stream_free ------------------------------------------------------------------


def run_cross_stream_free(ctx: ProbeContext, *, rounds: int, fill_fraction: float, delay_ms: float) -> ProbeOutput:
    """Blocks written late by a busy side stream, freed with ``record_stream`` while the device is
    nearly full, then new blocks allocated and written at once on the default stream: the side
    stream's results and the new blocks must both keep their own data."""
    torch = ctx.torch
    kit = StreamKit(ctx)
    release(ctx)
    free0, total = device_memory(ctx)
    if ctx.is_gpu:
        fill_target = round_down(int(free0 * fill_fraction), ROUND)
        chunk = GIB if fill_target >= 16 * GIB else max(64 * MIB, round_down(fill_target // 16, ROUND))
        room = free0 - fill_target
    else:
        budget = cpu_budget_bytes()
        fill_target, chunk, room = budget // 2, 16 * MIB, budget // 2
        _cpu_note(ctx, f"the side stream's work, the frees and the new allocations (fill {fill_target} B)")
    # Kept results, kept new blocks and blocks still pending: three times the sizes, in half the room.
    sizes = _scaled(CROSS_SIZES, room // 6)
    side = kit.new_stream()
    default = kit.current()
    _warm_up(ctx, kit, side)
    started = time.perf_counter()
    fills, filled, stopped = _fill_to(ctx, fill_target, chunk, "pressure_fill")
    if stopped:
        ctx.notes.append(stopped)
    free_after_fill = device_memory(ctx)[0] if ctx.is_gpu else None
    kept: list[tuple[Any, tuple[int, int], str]] = []
    reused = busy_rounds = 0
    for r in range(rounds):
        nbytes = sizes[r % len(sizes)]
        side_key = affine_key(ctx.derive_seed(f"side{r}"))
        new_key = affine_key(ctx.derive_seed(f"new{r}"))
        result = ops_pipeline.alloc(nbytes, ctx.device, method="cross_stream")
        block = ops_pipeline.alloc(nbytes, ctx.device, method="cross_stream")
        kit.wait_stream(side, default)
        with kit.on(side):
            # Written late, then copied out late: a block handed out again before the side
            # stream is done either overwrites the new block or lands in the result.
            kit.delay(delay_ms)
            write_affine(torch, block.view(torch.int32), side_key)
            kit.delay(delay_ms)
            ops.d2d(block, method="copy_", out=result)
        kit.record_stream(block, side)
        address = block.data_ptr()
        del block
        busy_rounds += int(kit.busy(side) is True)
        fresh = ops_pipeline.alloc(nbytes, ctx.device, method="cross_stream")
        reused += int(fresh.data_ptr() == address)
        write_affine(torch, fresh.view(torch.int32), new_key)
        kept.append((result, side_key, f"round {r}: the side stream's result ({nbytes} B)"))
        kept.append((fresh, new_key, f"round {r}: the block allocated right after the free ({nbytes} B)"))
        del result, fresh
    kit.sync()
    seconds = time.perf_counter() - started
    checks = _check_affine(ctx, kept, "cross_stream_readback") + _check_fills(ctx, fills)
    del kept, fills
    release(ctx)
    checked, violations, zero_violations, example = judge_blocks(checks)
    metrics: dict[str, Any] = {
        "free_bytes": free0,
        "total_bytes": total,
        "fill_target_bytes": fill_target,
        "filled_bytes": filled,
        "free_after_fill_bytes": free_after_fill,
        "rounds": rounds,
        "block_bytes": ",".join(str(s) for s in sizes[:rounds]),
        "delay": kit.delay_how,
        "delay_ms": delay_ms,
        "seconds": round(seconds, 3),
    }
    notes: list[str] = []
    if ctx.is_gpu:
        metrics.update(address_reused=reused, side_busy_at_free_rounds=busy_rounds)
        if busy_rounds == 0:
            notes.append("the side stream had finished before every free: the race was not exercised")
    measurement = invariant(
        "memory freed (record_stream) while a side stream still uses it, with the device nearly full, is not "
        "handed out before that use ends: the side stream's results and the new blocks keep their own data",
        checked,
        violations,
        zero_violations,
        example,
    )
    return ProbeOutput(measurement, metrics, notes)


# -- alloc.stress.oom_retry ------------------------------------------------------------------------


def _write_late_on_side(
    ctx: ProbeContext, kit: StreamKit, side: Any, default: Any, block: Any, delay_ms: float, seed_name: str
) -> None:
    """Queues on ``side``, after the default stream's work, a delay and then a write over
    ``block``, and records the block's use there: the caller's ``del`` then frees memory that
    side-stream work has still to write."""
    torch = ctx.torch
    kit.wait_stream(side, default)
    with kit.on(side):
        kit.delay(delay_ms)
        write_affine(torch, block.view(torch.int32), affine_key(ctx.derive_seed(seed_name)))
    kit.record_stream(block, side)


def run_oom_retry(ctx: ProbeContext, *, delay_ms: float, pending_delay_ms: float) -> ProbeOutput:
    """With the device filled until less than the request is free, a block of the request's size
    is freed (``record_stream``) by side-stream work. Phase A: after that work has completed, the
    request must succeed at the first attempt (``judge_must_fit``). Phase B: the same while the
    side stream still runs, measured (``describe_pending``); in both phases the block handed
    out must keep its own data."""
    torch = ctx.torch
    kit = StreamKit(ctx)
    release(ctx)
    free0, total = device_memory(ctx)
    backend = _allocator_backend(ctx)
    judged = backend in ("native", "cpu")
    if ctx.is_gpu:
        request = GIB if free0 >= 16 * GIB else max(4 * ROUND, round_down(free0 // 16, ROUND))
        chunk = GIB if free0 >= 16 * GIB else max(64 * MIB, round_down(free0 // 16, ROUND))
    else:
        request, chunk = 8 * MIB, 16 * MIB
        _cpu_note(ctx, "the side stream's work, the frees and the requests")
    side = kit.new_stream()
    default = kit.current()
    _warm_up(ctx, kit, side)
    stats_before = allocator_stats(ctx)
    started = time.perf_counter()
    victim = ops_pipeline.alloc(request, ctx.device, method="oom_retry")
    victim.view(torch.int32).fill_(tag_for(ctx, 1))
    if ctx.is_gpu:
        # Half the request stays free: the requests below can only be served by the freed block.
        fill_target = max(0, device_memory(ctx)[0] - request // 2)
    else:
        fill_target = cpu_budget_bytes() // 2
    fills, filled, stopped = _fill_to(ctx, fill_target, chunk, "pressure_fill")
    if stopped:
        ctx.notes.append(stopped)
    free_after_fill = device_memory(ctx)[0] if ctx.is_gpu else None
    metrics: dict[str, Any] = {
        "free_bytes": free0,
        "total_bytes": total,
        "request_bytes": request,
        "filled_bytes": filled,
        "free_after_fill_bytes": free_after_fill,
        "allocator_backend": backend,
        "judged": judged,
    }
    notes: list[str] = []
    if free_after_fill is not None:
        metrics["needs_reclaim"] = free_after_fill < request
        if free_after_fill >= request:
            notes.append(
                f"{free_after_fill} B stayed free after the fill, more than the {request} B request: the requests "
                "did not depend on reclaiming the freed block"
            )

    # Phase A: the side stream's use of the freed block has completed before the request.
    _write_late_on_side(ctx, kit, side, default, victim, delay_ms, "victim")
    del victim
    metrics["side_busy_at_free"] = kit.busy(side)
    kit.sync_stream(side)
    first, block = _attempt(ctx, request, "must_fit")
    retry = None
    if block is None:
        kit.sync()
        kit.empty_cache()
        retry, block = _attempt(ctx, request, "must_fit_retry")
    violation, example, must_fit_notes = judge_must_fit(first, retry, request=request, judged=judged, backend=backend)
    notes.extend(must_fit_notes)
    metrics.update(
        must_fit_first_attempt=first.outcome,
        must_fit_seconds=round(first.seconds, 4),
        must_fit_retry=retry.outcome if retry is not None else None,
    )
    checks: list[BlockCheck] = []
    phase_a_block = block is not None
    if block is not None:
        key = affine_key(ctx.derive_seed("must_fit"))
        write_affine(torch, block.view(torch.int32), key)
        kit.sync()
        checks += _check_affine(ctx, [(block, key, "phase A: the block that had to fit")], "oom_retry_readback")
        # Back to the cache: the only free block of this size, handed out again just below.
        del block

    # Phase B: the same memory under a side-stream use that is still running.
    again = None
    if not phase_a_block:
        notes.append("phase B did not run: phase A got no block")
    else:
        try:
            again = ops_pipeline.alloc(request, ctx.device, method="oom_retry")
        except Exception as exc:  # noqa: BLE001 - phase B needs the block; say why it did not run
            if not is_oom(torch, exc):
                raise
            notes.append(f"phase B did not run: the block could not be allocated again ({first_line(exc)})")
    if again is not None:
        _write_late_on_side(ctx, kit, side, default, again, pending_delay_ms, "pending_victim")
        del again
        busy_before = kit.busy(side)
        pending, block = _attempt(ctx, request, "pending")
        busy_after = kit.busy(side)
        pending_retry = None
        if block is None:
            kit.sync_stream(side)
            kit.empty_cache()
            pending_retry, block = _attempt(ctx, request, "pending_retry")
        pending_metrics, pending_notes = describe_pending(
            pending, pending_retry, busy_before=busy_before, busy_after=busy_after
        )
        metrics.update(pending_metrics)
        notes.extend(pending_notes)
        if block is not None:
            # Written at once on the default stream: if the allocator handed out the block
            # while the side stream still had its write queued, that write lands on this.
            key = affine_key(ctx.derive_seed("pending"))
            write_affine(torch, block.view(torch.int32), key)
            kit.sync()
            checks += _check_affine(
                ctx, [(block, key, "phase B: the block allocated during the side stream's use")], "oom_retry_readback"
            )
            del block
    kit.sync()
    checks += _check_fills(ctx, fills)
    metrics["seconds"] = round(time.perf_counter() - started, 3)
    metrics["delay"] = kit.delay_how
    stats_after = allocator_stats(ctx)
    for key_name in ("alloc_retries", "ooms"):
        if key_name in stats_before and key_name in stats_after:
            metrics[f"allocator_{key_name}"] = int(stats_after[key_name]) - int(stats_before[key_name])
    del fills
    release(ctx)
    checked, violations, zero_violations, block_example = judge_blocks(checks)
    measurement = invariant(
        "an allocation that fits in memory freed by completed side-stream work succeeds at the first attempt, and "
        "memory with a pending side-stream use is not handed out before that use ends",
        checked + 1,
        violations + int(violation),
        zero_violations,
        example or block_example,
    )
    return ProbeOutput(measurement, metrics, notes)


# -- alloc.stress.handoff ----------------------------------------------------------------------------

HANDOFF_DIRECTIONS = ("default_to_side", "side_to_default")
HANDOFF_SYNCS = ("event", "wait_stream")


def _handoff_size(
    ctx: ProbeContext,
    kit: StreamKit,
    acc: CompareAccumulator,
    *,
    n: int,
    ref: Any,
    src_words: Any,
    streams: tuple[Any, Any],
    delay_ms: float,
    pinned: bool,
    first_trial: int,
) -> tuple[int, list[str]]:
    """The trials of one size: four stream handoffs (two directions, event or ``wait_stream``)
    and, when ``pinned``, the non_blocking H2D; each compared after the device has synchronized.
    Returns the trials run and the labels of the wrong ones."""
    torch = ctx.torch
    default, side = streams
    trial = first_trial
    batch: list[tuple[Any, int, str]] = []
    hosts: list[Any] = []
    for direction in HANDOFF_DIRECTIONS:
        producer, consumer = (default, side) if direction == "default_to_side" else (side, default)
        for how in HANDOFF_SYNCS:
            mask = handoff_mask(ctx.derive_seed(f"mask{trial}"))
            trial += 1
            with kit.on(producer):
                x = ops_pipeline.alloc(4 * n, ctx.device, method="handoff", dtype=torch.float32)
                # The canary first, the data late: a consumer that does not wait reads the canary.
                fill_canary(torch, x)
                kit.delay(delay_ms)
                torch.bitwise_xor(src_words[:n], mask, out=x.view(torch.int32))
            if how == "event":
                kit.wait_event(consumer, producer)
            else:
                kit.wait_stream(consumer, producer)
            with kit.on(consumer):
                y = ops.d2d(x, method="clone")
            # x was used on the consumer stream: its memory must outlive that use.
            kit.record_stream(x, consumer)
            del x
            batch.append((y, mask, f"{n} elements, {direction.replace('_', ' ')}, {how}"))
            del y
    if pinned:
        mask = handoff_mask(ctx.derive_seed(f"mask{trial}"))
        trial += 1
        host = kit.pinned_empty(n, torch.float32)
        host.copy_(handoff_expected(torch, ref, n, mask))
        # The source must stay untouched and alive until the copy has landed.
        hosts.append(host)
        kit.wait_stream(side, default)
        with kit.on(side):
            kit.delay(delay_ms)
            d = ops.h2d(host, ctx.device, method="to", non_blocking=True)
        kit.wait_stream(default, side)
        y = ops.d2d(d, method="clone")
        kit.record_stream(d, default)
        del d
        batch.append((y, mask, f"{n} elements, non_blocking pinned H2D on the side stream, read on the default"))
        del y
    kit.sync()
    failed: list[str] = []
    canary = canary_value("float32")
    for y, mask, label in batch:
        out = ops.readback(ops_pipeline.stream_readback(y, method="handoff_readback"))
        if acc.add(out, handoff_expected(torch, ref, n, mask), canary=canary):
            failed.append(label)
    return trial - first_trial, failed


def run_handoff(
    ctx: ProbeContext, *, sizes: Sequence[int], pinned_sizes: Sequence[int], delay_ms: float
) -> ProbeOutput:
    """float32 data written by a delayed producer stream and read by a consumer stream after an
    event or ``wait_stream``, both directions and every size; then a non_blocking H2D from pinned
    memory on a side stream consumed on the default stream after ``wait_stream``. Every byte is
    compared; a consumer that read too early finds the canary the producer wrote first."""
    torch = ctx.torch
    kit = StreamKit(ctx)
    sizes = list(sizes)
    pinned_sizes = list(pinned_sizes)
    if not ctx.is_gpu:
        dropped = [n for n in sizes if n > CPU_HANDOFF_MAX]
        sizes = [n for n in sizes if n <= CPU_HANDOFF_MAX]
        pinned_sizes = []
        _cpu_note(ctx, "producers and consumers")
        if dropped:
            ctx.notes.append(f"on cpu the sizes above {CPU_HANDOFF_MAX} elements are left out: {dropped}")
        ctx.notes.append("on cpu the non_blocking H2D from pinned memory is left out: pinned memory needs a GPU")
    largest = max(sizes)
    # Memory earlier probes left in the framework's cache counts as free here.
    release(ctx)
    # Host: reference, expected, read-back, pinned source and a margin; device: the source, one
    # size's outputs and its inputs still pending.
    require_memory(ctx, 5 * 4 * largest, 10 * 4 * largest)
    ref = pattern(torch, largest, "float32", ctx.derive_seed("data"))
    source = ops.stage(ref, ctx.device)
    streams = (kit.current(), kit.new_stream())
    acc = CompareAccumulator(torch)
    failed: list[str] = []
    trials = 0
    kit.sync()
    started = time.perf_counter()
    for n in sizes:
        ran, wrong = _handoff_size(
            ctx,
            kit,
            acc,
            n=n,
            ref=ref,
            src_words=source.view(torch.int32),
            streams=streams,
            delay_ms=delay_ms,
            pinned=n in pinned_sizes,
            first_trial=trials,
        )
        trials += ran
        failed += wrong
    seconds = time.perf_counter() - started
    del source
    release(ctx)
    metrics: dict[str, Any] = {
        "trials": trials,
        "elements": ",".join(str(n) for n in sizes),
        "pinned_trials": sum(1 for n in sizes if n in pinned_sizes),
        "bytes_checked": 4 * acc.n,
        "directions": ",".join(HANDOFF_DIRECTIONS),
        "synchronization": ",".join(HANDOFF_SYNCS),
        "delay": kit.delay_how,
        "delay_ms": delay_ms,
        "seconds": round(seconds, 3),
    }
    notes = [f"wrong: {label}" for label in failed[:8]]
    return ProbeOutput(acc.stats(), metrics, notes)


# -- alloc.stress.threads ------------------------------------------------------------------------------


def _draw_words(rng: random.Random, max_words: int) -> int:
    """A log-uniform element count in [64, max_words]; half of them ≡ 1 mod 32."""
    low = min(64, max_words)
    words = int(math.exp(rng.uniform(math.log(low), math.log(max_words))))
    if rng.random() < 0.5 and words > 32:
        words = words - words % 32 + 1
    return max(1, min(words, max_words))


def _verify_host(torch: Any, report: ThreadReport, host: Any, key: tuple[int, int], what: str) -> None:
    """Checks a read-back on the host against the pattern of ``key``."""
    words = ops_pipeline.stream_readback(host, method="thread_readback").view(torch.int32)
    wrong, zeros = (int(v) for v in affine_error_counts(torch, words, key).tolist())
    report.readbacks += 1
    if wrong:
        report.bad.append(BlockCheck(what, int(words.numel()), wrong, zeros, first_affine_error(torch, words, key)))


def _thread_loop(ctx: ProbeContext, report: ThreadReport, *, deadline: float, max_block: int, ring: int) -> None:
    """One thread's work on its own (current) stream: allocate, write, copy device to device and
    to the host, check; keep the last ``ring`` copies alive and check them again before they
    are freed (another thread's allocation must not land on them)."""
    torch = ctx.torch
    rng = random.Random(ctx.derive_seed(f"thread{report.thread}"))
    live: list[tuple[Any, tuple[int, int], str]] = []
    iteration = 0
    nbytes = 0
    try:
        while iteration < MIN_THREAD_ITERATIONS or time.perf_counter() < deadline:
            if iteration >= MAX_THREAD_ITERATIONS:
                break
            nbytes = 4 * _draw_words(rng, max_block // 4)
            key = affine_key(ctx.derive_seed(f"t{report.thread}i{iteration}"))
            what = f"thread {report.thread}, iteration {iteration} ({nbytes} B)"
            first = ops_pipeline.alloc(nbytes, ctx.device, method="thread")
            write_affine(torch, first.view(torch.int32), key)
            copy = ops.d2d(first, method="clone")
            del first
            _verify_host(torch, report, ops.d2h(copy, method="to"), key, f"{what}: device-to-host copy")
            report.bytes_copied += 2 * nbytes
            live.append((copy, key, f"{what}: copy kept alive for {ring} iterations"))
            del copy
            if len(live) > ring:
                kept, kept_key, kept_what = live.pop(0)
                _verify_host(torch, report, ops.d2h(kept, method="to"), kept_key, kept_what)
                del kept
            iteration += 1
        while live:
            kept, kept_key, kept_what = live.pop(0)
            _verify_host(torch, report, ops.d2h(kept, method="to"), kept_key, kept_what)
            del kept
    except Exception as exc:  # noqa: BLE001 - every exception of a thread is reported
        if is_oom(torch, exc):
            free_after = device_memory(ctx)[0]
            report.ooms.append((nbytes, free_after, first_line(exc)))
        else:
            report.errors.append(f"{type(exc).__name__}: {first_line(exc)}")
    report.iterations = iteration


def run_threads(ctx: ProbeContext, *, threads: int, duration_s: float, max_block: int, ring: int) -> ProbeOutput:
    """``threads`` threads, each on its own stream, allocating varied sizes, writing a pattern of
    their own, copying device to device and device to host, and freeing, for ``duration_s``."""
    kit = StreamKit(ctx)
    release(ctx)
    free0, total = device_memory(ctx)
    if ctx.is_gpu:
        per_thread = min(free0 // 4, 8 * GIB) // threads
        margin = margin_bytes(total)
        duration = duration_s
    else:
        per_thread = cpu_budget_bytes() // 4 // threads
        margin = 64 * MIB
        max_block = min(max_block, MIB)
        duration = min(duration_s, CPU_THREAD_SECONDS)
        ctx.notes.append(
            f"on cpu there are no streams: the threads copy host memory (blocks up to {max_block} B, for "
            f"{duration} s), a self-test of the probe"
        )
    # Live per thread: the ring, the block being written, its copy.
    max_block = max(4096, min(max_block, per_thread // (ring + 2)) // 4 * 4)
    reports = [ThreadReport(i) for i in range(threads)]
    # The clock starts when every thread has its stream (set once, by the barrier's action).
    deadline = [time.perf_counter() + duration]
    barrier = threading.Barrier(threads, action=lambda: deadline.__setitem__(0, time.perf_counter() + duration))

    def body(index: int) -> None:
        try:
            # Threads started here are exposed to the library wrappers by default: the probe's
            # own bookkeeping must not be faulted, only the calls through the ops layer.
            with simulate.bypassed(), kit.on(kit.new_stream()):
                try:
                    barrier.wait(timeout=60)
                except threading.BrokenBarrierError:
                    pass
                _thread_loop(ctx, reports[index], deadline=deadline[0], max_block=max_block, ring=ring)
        except Exception as exc:  # noqa: BLE001 - a thread that could not even start is reported too
            reports[index].errors.append(f"{type(exc).__name__}: {first_line(exc)}")
            barrier.abort()

    started = time.perf_counter()
    workers = [
        threading.Thread(target=body, args=(i,), name=f"gpuprobe-alloc-stress-{i}", daemon=True) for i in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    kit.sync()
    seconds = time.perf_counter() - started
    release(ctx)
    measurement, notes = judge_threads(reports, margin=margin)
    iterations = [r.iterations for r in reports]
    metrics: dict[str, Any] = {
        "threads": threads,
        "streams": threads if ctx.is_gpu else 0,
        "duration_s": duration,
        "seconds": round(seconds, 3),
        "iterations": sum(iterations),
        "iterations_min": min(iterations),
        "iterations_max": max(iterations),
        "readbacks": sum(r.readbacks for r in reports),
        "bytes_copied": sum(r.bytes_copied for r in reports),
        "max_block_bytes": max_block,
        "ring": ring,
        "free_bytes": free0,
        "out_of_memory_errors": sum(len(r.ooms) for r in reports),
    }
    return ProbeOutput(measurement, metrics, notes)
