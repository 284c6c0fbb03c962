"""Alloc family implementation (see ``alloc_specs`` for the catalog and id grammar).

Every allocation under test goes through ``ops_pipeline.alloc`` (so fault simulation can
make it hang, crash or run out of memory). Blocks are filled with a per-block 32-bit tag and
read back (all of a small block, a strided sample of a large one), so memory handed out
twice, or lost, shows up as a violation rather than a crash.

Probes that fill the device leave a margin (``margin_bytes``) for other processes and for the
framework's own temporaries: on a GPU shared with another job, reported free memory changes
under the probe, and an allocation is only counted as failed when free memory, asked again
after the failure, still covers it.

On a CPU device under test the same code runs with a small budget (``cpu_budget_bytes``):
the point there is to exercise the probe, not to fill the host's memory.
"""

from __future__ import annotations

import gc
import math
import os
import random
import tempfile
import time
from typing import Any

from gpuprobe.worker import catalog, envinfo, ops, ops_pipeline, simulate
from gpuprobe.worker.compare import CompareAccumulator
from gpuprobe.worker.faults import is_oom
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe, host_available_bytes
from gpuprobe.worker.patterns import derive_seed, pattern
from gpuprobe.worker.probes import children

MIB = 1 << 20
GIB = 1 << 30
#: Every this many 32-bit words of a large block are read back.
SAMPLE_STRIDE = 4099
#: Allocation granularity of the CUDA/HIP caching allocator for large blocks.
ROUND = 2 * MIB
#: max_split_size_mb values that tell the three allocator-config variables apart.
PRECEDENCE_PROBE_VALUES = {"PYTORCH_ALLOC_CONF": 201, "PYTORCH_CUDA_ALLOC_CONF": 202, "PYTORCH_HIP_ALLOC_CONF": 203}
CHILD = "gpuprobe.worker.probes.alloc.child"


# -- shared helpers ------------------------------------------------------------------------------




def cpu_budget_bytes() -> int:
    """What the alloc probes allocate at most on a CPU device under test."""
    available = host_available_bytes() or (2 * GIB)
    return max(32 * MIB, min(256 * MIB, available // 8))


def margin_bytes(total: int) -> int:
    """Memory the filling probes leave free: 5% of the device, between 256 MiB and 4 GiB
    (enough for the native probes of a concurrent lane on the same GPU)."""
    return min(4 * GIB, max(256 * MIB, total // 20))


def release(ctx: ProbeContext) -> None:
    """Returns cached device memory, so later probes (and other processes) see it free."""
    gc.collect()
    if ctx.is_gpu:
        ctx.torch.cuda.synchronize(ctx.device)
        ctx.torch.cuda.empty_cache()


def device_memory(ctx: ProbeContext) -> tuple[int, int]:
    """(free, total) device memory as the runtime reports it (host memory on the CPU)."""
    if ctx.is_gpu:
        free, total = ctx.torch.cuda.mem_get_info(ctx.device)
        return int(free), int(total)
    available = host_available_bytes() or 0
    return available, available


def tag_for(ctx: ProbeContext, index: int) -> int:
    """A non-zero positive 32-bit tag for block ``index`` of this probe."""
    return (ctx.derive_seed(f"tag{index}") & 0x7FFFFFFF) | 1


def round_down(value: int, unit: int) -> int:
    """``value`` rounded down to a multiple of ``unit`` (never below 0)."""
    return max(0, value // unit * unit)


def tag_errors(ctx: ProbeContext, blocks: list[tuple[Any, int]], *, full: bool) -> list[tuple[int, int, int]]:
    """For each (block, tag): (words checked, words not holding the tag, of those the zeros),
    counted on the device and read back at once. ``full`` checks every word, otherwise a
    strided sample plus the last word."""
    torch = ctx.torch
    if not blocks:
        return []
    sizes: list[int] = []
    counts = []
    for block, tag in blocks:
        words = block.view(torch.int32)
        if not full and words.numel() > SAMPLE_STRIDE:
            words = torch.cat([words[::SAMPLE_STRIDE], words[-1:]])
        wrong = words != tag
        sizes.append(int(words.numel()))
        counts.append(torch.stack([wrong.sum(), (wrong & (words == 0)).sum()]))
    table = ops.readback(torch.stack(counts)).tolist()
    return [(size, int(w), int(z)) for size, (w, z) in zip(sizes, table)]


def invariant(property_text: str, checked: int, violations: int, zero_violations: int, example: str | None) -> dict:
    """An ``InvariantCheck`` measurement."""
    out: dict[str, Any] = {
        "kind": "invariant",
        "property": property_text,
        "checked": int(checked),
        "violations": int(violations),
        "zero_violations": int(zero_violations),
    }
    if example:
        out["example"] = example
    return out


def _pci_name(props: Any) -> str | None:
    bus = getattr(props, "pci_bus_id", None)
    dev = getattr(props, "pci_device_id", None)
    domain = getattr(props, "pci_domain_id", None)
    if isinstance(bus, int) and isinstance(dev, int):
        return f"{domain if isinstance(domain, int) else 0:04x}:{bus:02x}:{dev:02x}.0"
    return None


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def amdgpu_memory_facts(
    props: Any, sysfs: str = "/sys/class/drm", ttm_limit: str = "/sys/module/ttm/parameters/pages_limit"
) -> dict[str, Any]:
    """VRAM and GTT sizes of the amdgpu device behind ``props`` (matched by PCI address, or
    the only amdgpu card), and the TTM page limit: what an APU can really use (RKB-021)."""
    facts: dict[str, Any] = {}
    limit = _read_int(ttm_limit)
    if limit is not None:
        facts["ttm_pages_limit_bytes"] = limit * 4096
    try:
        cards = sorted(c for c in os.listdir(sysfs) if c.startswith("card") and "-" not in c)
    except OSError:
        return facts
    candidates = []
    for card in cards:
        device_dir = os.path.join(sysfs, card, "device")
        if os.path.exists(os.path.join(device_dir, "mem_info_gtt_total")):
            candidates.append((os.path.basename(os.path.realpath(device_dir)), device_dir))
    wanted = _pci_name(props) if props is not None else None
    chosen = next((d for name, d in candidates if wanted and name == wanted), None)
    if chosen is None and len(candidates) == 1:
        chosen = candidates[0][1]
    if chosen is None:
        return facts
    for key in ("vram_total", "vram_used", "vis_vram_total", "gtt_total", "gtt_used"):
        value = _read_int(os.path.join(chosen, f"mem_info_{key}"))
        if value is not None:
            facts[f"sysfs_{key}_bytes"] = value
    facts["sysfs_device"] = os.path.basename(os.path.realpath(chosen))
    return facts


def first_line(exc: BaseException, limit: int = 240) -> str:
    """The first line of an exception's message (its type's name when it has none), cut at ``limit``."""
    text = (str(exc) or type(exc).__name__).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:limit]


# -- usable memory ---------------------------------------------------------------------------------


def _fill_chunks(
    ctx: ProbeContext, target: int, chunk: int, margin: int, method: str
) -> tuple[list[tuple[Any, int]], list[str], int]:
    """Allocates ``chunk``-byte blocks until ``target`` bytes are held, each filled with its
    tag. Returns the blocks, the failures that count (an allocation that failed while free
    memory still covered it), and the bytes held."""
    blocks: list[tuple[Any, int]] = []
    failures: list[str] = []
    held = 0
    while chunk > 0 and held + chunk <= target:
        try:
            block = ops_pipeline.alloc(chunk, ctx.device, method=method)
        except Exception as exc:  # noqa: BLE001 - only out-of-memory is expected here
            if not is_oom(ctx.torch, exc):
                raise
            free_now, _ = device_memory(ctx)
            if ctx.is_gpu and free_now >= chunk + margin // 2:
                failures.append(
                    f"allocation {len(blocks)} of {chunk} B failed with {free_now} B reported free: {first_line(exc)}"
                )
            else:
                ctx.notes.append(f"free memory shrank to {free_now} B while filling (another process?)")
            break
        tag = tag_for(ctx, len(blocks))
        block.view(ctx.torch.int32).fill_(tag)
        blocks.append((block, tag))
        held += chunk
    return blocks, failures, held


def run_usable(ctx: ProbeContext) -> ProbeOutput:
    """The reported free memory, less a margin, allocated in chunks that keep their data."""
    torch = ctx.torch
    # Memory earlier probes left in the framework's cache counts as free here.
    release(ctx)
    free0, total = device_memory(ctx)
    metrics: dict[str, Any] = {"free_bytes": free0, "total_bytes": total}
    if ctx.is_gpu:
        props = torch.cuda.get_device_properties(ctx.device)
        metrics["total_memory_property_bytes"] = int(props.total_memory)
        integrated = getattr(props, "is_integrated", None)
        if integrated is not None:
            metrics["is_integrated"] = bool(integrated)
        if getattr(torch.version, "hip", None):
            metrics.update(amdgpu_memory_facts(props))
        margin = margin_bytes(total)
        target = max(0, free0 - margin)
        chunk = GIB if target >= 16 * GIB else max(64 * MIB, round_down(target // 16, ROUND))
    else:
        margin = 0
        target = cpu_budget_bytes()
        chunk = 32 * MIB
        ctx.notes.append(f"on cpu the probe allocates only {target} B (a self-test of the probe, not of host memory)")
    metrics.update(margin_bytes=margin, target_bytes=target, chunk_bytes=chunk)
    started = time.perf_counter()
    blocks, failures, held = _fill_chunks(ctx, target, chunk, margin, "chunk")
    metrics["fill_seconds"] = round(time.perf_counter() - started, 3)
    results = tag_errors(ctx, blocks, full=False)
    del blocks
    release(ctx)
    bad = [(i, r) for i, r in enumerate(results) if r[1]]
    example = None
    if failures:
        example = failures[0]
    elif bad:
        index, (checked, wrong, zeros) = bad[0]
        example = f"chunk {index}: {wrong} of {checked} sampled words lost their tag ({zeros} zeros)"
    metrics.update(
        allocated_bytes=held,
        chunks=len(results),
        usable_fraction_of_free=round(held / free0, 4) if free0 else None,
        usable_fraction_of_total=round(held / total, 4) if total else None,
    )
    measurement = invariant(
        "every chunk of the reported free memory can be allocated and keeps its own data",
        len(results) + len(failures),
        len(bad) + len(failures),
        sum(1 for _, r in bad if r[2] == r[0]),
        example,
    )
    return ProbeOutput(measurement, metrics)


# -- largest single allocation ---------------------------------------------------------------------


def _offsets(nbytes: int) -> list[int]:
    wanted = {0, (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32, nbytes - 1, nbytes // 2}
    return sorted(o for o in wanted if 0 <= o < nbytes)


def _write_and_read(ctx: ProbeContext, block: Any, offsets: list[int]) -> tuple[list[int], list[int]]:
    """Writes a distinct non-zero byte at each offset of a uint8 ``block`` and reads them
    back: (written, read)."""
    torch = ctx.torch
    index = torch.tensor(offsets, dtype=torch.int64, device=ctx.device)
    values = torch.tensor([(37 * i + 11) % 255 + 1 for i in range(len(offsets))], dtype=torch.uint8)
    block[index] = ops.stage(values, ctx.device)
    found = ops.readback(block[index])
    return values.tolist(), found.tolist()


def run_largest(ctx: ProbeContext, *, time_bound_s: float) -> ProbeOutput:
    """Binary search for the largest single allocation, then writes and reads it at byte
    offsets on both sides of 2^31 and 2^32."""
    torch = ctx.torch
    # The kernels that write and read the block back are launched once on a small block
    # first, while memory is free: CUDA loads a kernel's module at its first launch (lazy
    # loading), which takes device memory, and with all but 64 MiB of the device held that
    # launch raised out of memory when this probe had a fresh worker of its own (the H200,
    # full tier: a false alarm, bench/RESULTS.md "The device filled first").
    _write_and_read(ctx, torch.zeros(4096, dtype=torch.uint8, device=ctx.device), [0, 1, 4095])
    # Memory earlier probes left in the framework's cache counts as free here.
    release(ctx)
    free0, total = device_memory(ctx)
    if ctx.is_gpu:
        high = round_down(free0 - 64 * MIB, ROUND)
        resolution = max(64 * MIB, round_down(high // 256, ROUND))
    else:
        high = min(GIB, (host_available_bytes() or 2 * GIB) // 4)
        resolution = 16 * MIB
        ctx.notes.append(f"on cpu the search is capped at {high} B (a self-test of the probe)")
    metrics: dict[str, Any] = {"free_bytes": free0, "total_bytes": total, "resolution_bytes": resolution}

    def attempt(nbytes: int) -> Any | None:
        try:
            return ops_pipeline.alloc(nbytes, ctx.device, method="search")
        except Exception as exc:  # noqa: BLE001
            if not is_oom(torch, exc):
                raise
            release(ctx)
            return None

    def fits(nbytes: int) -> bool:
        block = attempt(nbytes)
        if block is None:
            return False
        del block
        release(ctx)
        return True

    started = time.perf_counter()
    steps = 1
    bounded_by = "found"
    # The first attempt, nearly all that is free, usually fits: its block is the one
    # written and read below (on the H200 each allocation and release of 140 GB took
    # about 0.3 s, and this probe runs while every other lane waits).
    block = attempt(high) if high > 0 else None
    if block is not None:
        best = high
    else:
        low, best, top = 0, 0, high
        while top - low > resolution:
            if steps >= 40:
                bounded_by = "steps"
                break
            if time.perf_counter() - started > time_bound_s:
                bounded_by = "time"
                break
            middle = round_down((low + top) // 2, ROUND) or (low + top) // 2
            steps += 1
            if fits(middle):
                low = best = middle
            else:
                top = middle
    metrics.update(
        largest_bytes=best,
        largest_fraction_of_free=round(best / free0, 4) if free0 else None,
        search_steps=steps,
        search_seconds=round(time.perf_counter() - started, 3),
        bounded_by=bounded_by,
    )
    if best == 0:
        measurement = invariant(
            "a single allocation of the reported free memory succeeds", 1, 1, 0, f"nothing fit in {free0} B free"
        )
        return ProbeOutput(measurement, metrics)
    if block is None:
        block = ops_pipeline.alloc(best, ctx.device, method="largest")
    offsets = _offsets(best)
    written, found = _write_and_read(ctx, block, offsets)
    del block
    release(ctx)
    wrong = [(o, int(v), int(f)) for o, v, f in zip(offsets, written, found) if v != f]
    metrics["offsets_checked"] = ",".join(str(o) for o in offsets)
    example = None
    if wrong:
        offset, expected, got = wrong[0]
        example = f"byte {offset} of a {best} B block: wrote {expected}, read {got}"
    measurement = invariant(
        "the largest single allocation holds what was written at offsets past 2^31 and 2^32",
        len(offsets),
        len(wrong),
        sum(1 for _, _, got in wrong if got == 0),
        example,
    )
    return ProbeOutput(measurement, metrics)


# -- fragmentation ----------------------------------------------------------------------------------


def allocator_stats(ctx: ProbeContext) -> dict[str, Any]:
    """The caching allocator's counters the probes report (reserved and allocated bytes,
    segments, retries, out-of-memory errors); empty on a CPU device under test."""
    if not ctx.is_gpu:
        return {}
    stats = ctx.torch.cuda.memory_stats(ctx.device)
    wanted = {
        "reserved_bytes.all.current": "reserved_bytes",
        "allocated_bytes.all.current": "allocated_bytes",
        "inactive_split_bytes.all.current": "inactive_split_bytes",
        "segment.all.current": "segments",
        "num_alloc_retries": "alloc_retries",
        "num_ooms": "ooms",
    }
    return {name: stats.get(key) for key, name in wanted.items() if key in stats}


def run_fragmentation(ctx: ProbeContext, *, rounds: int, per_round: int, max_block: int) -> ProbeOutput:
    """Alloc/free cycles of log-uniform sizes; live blocks must keep their tags, then a large
    allocation must succeed and hold its data."""
    torch = ctx.torch
    # Memory earlier probes left in the framework's cache counts as free here.
    release(ctx)
    rng = random.Random(ctx.derive_seed("sizes"))
    free0, total = device_memory(ctx)
    if ctx.is_gpu:
        live_cap = max(64 * MIB, min(free0 // 4, 4 * GIB))
        large = round_down(free0 // 2, ROUND)
    else:
        budget = cpu_budget_bytes()
        max_block = min(max_block, 4 * MIB)
        live_cap = budget // 2
        large = budget // 2
        ctx.notes.append(f"on cpu blocks are at most {max_block} B and the large allocation {large} B")
    live: list[tuple[Any, int, int]] = []
    live_bytes = 0
    allocations = 0
    low, high = math.log(512), math.log(max_block)
    for _ in range(rounds):
        for _ in range(per_round):
            size = int(math.exp(rng.uniform(low, high))) // 4 * 4 or 4
            while live and live_bytes + size > live_cap:
                _, _, freed = live.pop(rng.randrange(len(live)))
                live_bytes -= freed
            block = ops_pipeline.alloc(size, ctx.device, method="cycle")
            tag = tag_for(ctx, allocations)
            block.view(torch.int32).fill_(tag)
            live.append((block, tag, size))
            live_bytes += size
            allocations += 1
        # Free about 60% of the live blocks, in random order.
        rng.shuffle(live)
        keep = len(live) * 2 // 5
        for _, _, freed in live[keep:]:
            live_bytes -= freed
        del live[keep:]
    results = tag_errors(ctx, [(b, t) for b, t, _ in live], full=True)
    metrics: dict[str, Any] = {
        "allocations": allocations,
        "rounds": rounds,
        "live_blocks": len(live),
        "live_bytes": live_bytes,
        "max_block_bytes": max_block,
        "large_bytes": large,
        "free_bytes": free0,
    }
    metrics.update({f"before_large_{k}": v for k, v in allocator_stats(ctx).items()})
    violations, zero_violations, checked = 0, 0, len(results)
    example = None
    for index, (words, wrong, zeros) in enumerate(results):
        if wrong:
            violations += 1
            zero_violations += 1 if zeros == words else 0
            example = example or f"live block {index}: {wrong} of {words} words lost their tag ({zeros} zeros)"
    checked += 1
    try:
        big = ops_pipeline.alloc(large, ctx.device, method="large")
    except Exception as exc:  # noqa: BLE001
        if not is_oom(torch, exc):
            raise
        violations += 1
        example = example or f"the large allocation of {large} B failed after the cycles: {first_line(exc)}"
    else:
        tag = tag_for(ctx, allocations)
        big.view(torch.int32).fill_(tag)
        ((words, wrong, zeros),) = tag_errors(ctx, [(big, tag)], full=False)
        if wrong:
            violations += 1
            zero_violations += 1 if zeros == words else 0
            example = example or f"the large block: {wrong} of {words} sampled words lost their tag"
        del big
    del live
    metrics.update({f"after_large_{k}": v for k, v in allocator_stats(ctx).items()})
    release(ctx)
    measurement = invariant(
        "blocks keep their data through alloc/free cycles, and a large allocation still succeeds",
        checked,
        violations,
        zero_violations,
        example,
    )
    return ProbeOutput(measurement, metrics)


# -- frees recorded on a side stream ---------------------------------------------------------------


def stream_delay(ctx: ProbeContext, milliseconds: float) -> str:
    """Keeps the current stream busy for about ``milliseconds``; returns how."""
    torch = ctx.torch
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None:
        props = torch.cuda.get_device_properties(ctx.device)
        khz = getattr(props, "clock_rate", 0) or 2_000_000
        sleep(int(khz * milliseconds))
        return "torch.cuda._sleep"
    a = torch.ones(2048, 2048, device=ctx.device)
    for _ in range(max(1, int(milliseconds))):
        a = a @ a / 2048.0
    return "matmul chain"


def run_stream_reuse(ctx: ProbeContext, *, rounds: int) -> ProbeOutput:
    """A buffer written late by a side stream is freed with ``record_stream``; the next
    allocation of that size on the default stream must not receive it while the write is
    pending."""
    torch = ctx.torch
    ctx.require_gpu("a side stream")
    side = torch.cuda.Stream(device=ctx.device)
    current = torch.cuda.current_stream(ctx.device)
    sizes = [MIB, 4 * MIB + 4096, 32 * MIB, 2 * MIB - 4096]
    held: list[tuple[Any, int]] = []
    reused = 0
    how = ""
    for r in range(rounds):
        nbytes = sizes[r % len(sizes)]
        late = ops_pipeline.alloc(nbytes, ctx.device, method="stream")
        late_address = late.data_ptr()
        side.wait_stream(current)
        with torch.cuda.stream(side):
            how = stream_delay(ctx, 20.0)
            late.view(torch.int32).fill_(tag_for(ctx, 2 * r))
        late.record_stream(side)
        del late
        fresh = ops_pipeline.alloc(nbytes, ctx.device, method="stream")
        reused += int(fresh.data_ptr() == late_address)
        tag = tag_for(ctx, 2 * r + 1)
        fresh.view(torch.int32).fill_(tag)
        held.append((fresh, tag))
    torch.cuda.synchronize(ctx.device)
    results = tag_errors(ctx, held, full=True)
    del held
    release(ctx)
    bad = [(i, r) for i, r in enumerate(results) if r[1]]
    example = None
    if bad:
        index, (words, wrong, _) = bad[0]
        example = f"round {index}: {wrong} of {words} words of the new buffer were overwritten by the side stream"
    metrics = {"rounds": rounds, "delay": how, "delay_ms": 20.0, "address_reused": reused}
    measurement = invariant(
        "memory freed with a pending side-stream write is not handed out before that write ends",
        len(results),
        len(bad),
        sum(1 for _, r in bad if r[2] == r[0]),
        example,
    )
    return ProbeOutput(measurement, metrics)


# -- out-of-memory recovery -------------------------------------------------------------------------


def _copy_check(ctx: ProbeContext, acc: CompareAccumulator) -> None:
    """A 1 MiB + 4 B host-device-host copy, compared bit for bit (two trials)."""
    numel = MIB // 4 + 1
    ref = pattern(ctx.torch, numel, "float32", ctx.derive_seed("copy"))
    moved = ops.h2d(ref.clone(), ctx.device, method="to")
    acc.add(ops.readback(moved), ref)
    back = ops.d2h(ops.d2d(moved, method="clone"), method="cpu")
    acc.add(back, ref)


def run_oom_recovery(ctx: ProbeContext, *, fill: bool) -> ProbeOutput:
    """An allocation past what is left raises out-of-memory; after freeing, copies still work."""
    torch = ctx.torch
    # Memory earlier probes left in the framework's cache counts as free here.
    release(ctx)
    free0, total = device_memory(ctx)
    metrics: dict[str, Any] = {"free_before_bytes": free0, "total_bytes": total}
    held: list[tuple[Any, int]] = []
    if fill:
        if ctx.is_gpu:
            margin = margin_bytes(total)
            target = max(0, free0 - margin)
            chunk = GIB if target >= 16 * GIB else max(64 * MIB, round_down(target // 16, ROUND))
        else:
            margin, target, chunk = 0, cpu_budget_bytes(), 32 * MIB
        held, _failures, held_bytes = _fill_chunks(ctx, target, chunk, margin, "chunk")
        metrics["held_bytes"] = held_bytes
    if ctx.is_gpu:
        left, _ = device_memory(ctx)
        request = max(2 * left + GIB, 4 * total) if fill else max(4 * total, 1 << 40)
    else:
        request = 1 << 62
        ctx.notes.append("on cpu the request is 2^62 B, beyond any address space")
    metrics["requested_bytes"] = request
    try:
        block = ops_pipeline.alloc(request, ctx.device, method="past_limit")
    except Exception as exc:  # noqa: BLE001
        if not is_oom(torch, exc):
            raise
        metrics.update(oom_raised=True, oom_type=type(exc).__name__, oom_message=first_line(exc))
    else:
        metrics["oom_raised"] = False
        ctx.notes.append(f"an allocation of {request} B succeeded: there was no out-of-memory error to recover from")
        del block
    del held
    release(ctx)
    if ctx.is_gpu:
        metrics["free_after_bytes"] = device_memory(ctx)[0]
    acc = CompareAccumulator(torch)
    _copy_check(ctx, acc)
    return ProbeOutput(acc.stats(), metrics)


# -- child processes: allocator config, caching off, expandable segments -------------------------


def split_conf(value: str) -> dict[str, str]:
    """``key:value`` pairs of an allocator config string, commas inside brackets kept
    (``roundup_power2_divisions:[256:1,512:2]``)."""
    parts, depth, current = [], 0, ""
    for char in value:
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    out: dict[str, str] = {}
    for part in parts:
        key, sep, val = part.strip().partition(":")
        if key:
            out[key.strip()] = val.strip() if sep else ""
    return out


def _read_variable(report: dict[str, Any]) -> str | None:
    """Which variable the precedence child's torch read, from its settings string (or, on a
    GPU, from the max_split_size it reports)."""
    settings = report.get("settings")
    if isinstance(settings, str) and settings:
        size = split_conf(settings).get("max_split_size_mb")
        for name, value in PRECEDENCE_PROBE_VALUES.items():
            if size == str(value):
                return name
    max_split = report.get("max_split_size")
    if isinstance(max_split, int):
        for name, value in PRECEDENCE_PROBE_VALUES.items():
            if max_split == value * MIB:
                return name
    return None


def _child_notes(report: dict[str, Any], prefix: str) -> list[str]:
    lines = list(report.get("warnings") or []) + list(report.get("stderr") or [])
    return [f"{prefix}: {line[:300]}" for line in dict.fromkeys(lines)][:12]


def run_config(ctx: ProbeContext) -> ProbeOutput:
    """The allocator-config variable this torch reads (measured), the user's settings and the
    warnings the framework prints for them."""
    torch = ctx.torch
    is_rocm = bool(getattr(torch.version, "hip", None))
    environ = dict(os.environ)
    precedence_env = _precedence_env(environ)
    reports = _child_reports(ctx, "alloc.config.effective", None)
    ordering_report, user_report = reports["precedence"], reports["facts"]
    metrics: dict[str, Any] = {
        "torch": str(torch.__version__),
        "rocm": is_rocm,
        "children_started_by": user_report.get("_started_by"),
    }
    notes: list[str] = []
    measured = _read_variable(ordering_report)
    rule = envinfo.allocator_conf(str(torch.__version__), is_rocm, precedence_env) or {}
    metrics["first_variable_read"] = measured or "undetermined"
    metrics["first_variable_by_version_rule"] = rule.get("variable")
    if measured and rule.get("variable") and measured != rule.get("variable"):
        notes.append(f"this torch reads {measured} first, not {rule.get('variable')} as the version rule says")
    if ordering_report.get("settings") is not None:
        metrics["precedence_settings_seen"] = ordering_report["settings"]
    set_vars = [name for name in envinfo.ALLOC_VARS if name in environ]
    metrics["variables_set"] = ",".join(set_vars) if set_vars else "none"
    order = _precedence(measured, rule, is_rocm)
    in_effect = next((name for name in order if name in environ), None)
    if in_effect is not None:
        metrics["variable_in_effect"] = in_effect
        metrics["value_in_effect"] = environ[in_effect]
        for key, value in split_conf(environ[in_effect]).items():
            metrics[f"conf.{key}"] = value
        for name in set_vars:
            if name != in_effect and environ[name] != environ[in_effect]:
                notes.append(f"{name}={environ[name]} is set but ignored: this torch reads {in_effect} first")
            elif name != in_effect:
                notes.append(f"{name} is set to the same value as {in_effect}; only {in_effect} is read")
        unread = [n for n in set_vars if n not in order]
        if unread:
            notes.append(f"{', '.join(unread)} is not read by this torch build")
    if user_report.get("error"):
        notes.append(f"the framework failed to start with these settings: {user_report['error']}")
        metrics["start_error"] = user_report["error"]
    for key in ("settings", "backend", "max_split_size", "expandable", "reserved_bytes"):
        if user_report.get(key) is not None:
            metrics[f"in_effect.{key}"] = user_report[key]
    requested = split_conf(environ[in_effect]).get("expandable_segments") if in_effect else None
    if requested == "True" and ctx.is_gpu and user_report.get("expandable") is False:
        notes.append("expandable_segments:True is requested but the allocator's segments are not expandable")
    user_notes = _child_notes(user_report, "allocator warning")
    metrics["warnings"] = len(user_notes)
    notes.extend(user_notes)
    return ProbeOutput({"kind": "metrics"}, metrics, notes)


def _precedence(measured: str | None, rule: dict[str, Any], is_rocm: bool) -> list[str]:
    """The order in which this torch looks for the variables: measured first-read variable,
    then the rest in the version rule's order."""
    base = ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"]
    if measured == "PYTORCH_CUDA_ALLOC_CONF":
        return ["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF"]
    if measured == "PYTORCH_HIP_ALLOC_CONF":
        return ["PYTORCH_HIP_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"]
    if measured == "PYTORCH_ALLOC_CONF":
        return base
    first = rule.get("variable")
    if first in base:
        return [first] + [name for name in base if name != first]
    return base if is_rocm else base[:2]


def _precedence_env(environ: dict[str, str]) -> dict[str, str]:
    env = dict(environ)
    for name, value in PRECEDENCE_PROBE_VALUES.items():
        env[name] = f"max_split_size_mb:{value}"
    return env


def _uncached_env(environ: dict[str, str]) -> dict[str, str]:
    env = dict(environ)
    env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    env["PYTORCH_NO_HIP_MEMORY_CACHING"] = "1"
    return env


def _expandable_env(environ: dict[str, str]) -> dict[str, str]:
    env = dict(environ)
    for name in envinfo.ALLOC_VARS:
        env[name] = "expandable_segments:True"
    return env


#: Probes whose child processes start together, whichever of them runs first: each child
#: pays the framework's start-up (seconds), so three probes cost about one start-up. The
#: results wait in ``_CHILD_RESULTS`` for their probe (full-tier variants run alone).
SHARED_CHILD_PROBES = ("alloc.config.effective", "alloc.caching.disabled", "alloc.expandable.h2d")
#: (device, plan seed, probe id) → child name → report, or the exception its probe raises.
_CHILD_RESULTS: dict[tuple[str, int, str], dict[str, Any]] = {}
CHILD_TIMEOUT_S = 90.0


def _child_jobs(ctx: ProbeContext, probe_id: str, params: dict[str, Any] | None) -> list[tuple[str, dict, dict, str]]:
    """(name, job, environment, description) of every child ``probe_id`` needs."""
    environ = dict(os.environ)
    if probe_id == "alloc.config.effective":
        facts = {"job": "facts", "device": ctx.device_name}
        return [
            ("precedence", facts, _precedence_env(environ), "allocator precedence check"),
            ("facts", facts, environ, "allocator facts"),
        ]
    if params is None:
        params = catalog.all_probes()[probe_id].params
    uncached = probe_id.startswith("alloc.caching.")
    job = {
        "job": "workload",
        "device": ctx.device_name,
        "numel": int(params["numel"]),
        "dtype": "float32" if uncached else "float16",
        "seed": derive_seed(ctx.seed, probe_id, "data"),
        "churn": int(params["churn"]),
    }
    env = _uncached_env(environ) if uncached else _expandable_env(environ)
    what = "uncached workload" if uncached else "expandable-segments workload"
    return [("workload", job, env, what)]


def _run_children(ctx: ProbeContext, wanted: list[tuple[str, dict[str, Any] | None]]) -> None:
    """Starts the children of every (probe id, params) in ``wanted`` at once, waits for all,
    and files each result (or failure) under its probe in ``_CHILD_RESULTS``."""
    torch = ctx.torch
    with tempfile.TemporaryDirectory(prefix="gpuprobe-alloc-") as tmp:
        started: list[tuple[str, str, children.Child, dict]] = []
        try:
            for probe_id, params in wanted:
                slot = _CHILD_RESULTS.setdefault((ctx.device_name, ctx.seed, probe_id), {})
                for name, job, env, what in _child_jobs(ctx, probe_id, params):
                    if job["job"] == "workload":
                        itemsize = 4 if job["dtype"] == "float32" else 2
                        available = host_available_bytes()
                        needed = 4 * job["numel"] * itemsize + GIB
                        if available is not None and needed > available:
                            slot[name] = SkipProbe(f"needs about {needed / GIB:.1f} GiB of free host memory")
                            continue
                        job = dict(job, out=os.path.join(tmp, f"{len(started)}.pt"))
                    started.append((probe_id, name, children.start(CHILD, job, env=env, what=what), job))
            for probe_id, name, child, job in started:
                slot = _CHILD_RESULTS[(ctx.device_name, ctx.seed, probe_id)]
                try:
                    report = children.collect(child, timeout_s=CHILD_TIMEOUT_S, hang=False)
                    if "out" in job:
                        try:
                            with simulate.bypassed():
                                report["_saved"] = torch.load(job["out"], weights_only=True)
                        except Exception as exc:  # noqa: BLE001 - a fault of that child's probe
                            raise children.ChildFailed(f"{child.what}: its output is unreadable: {exc}") from exc
                    report["_started_by"] = wanted[0][0]
                    slot[name] = report
                except (children.ChildFailed, children.ChildHung) as exc:
                    slot[name] = exc
        except BaseException:
            # Nothing half-filed: a later probe of the batch starts its children again.
            for probe_id, _ in wanted:
                _CHILD_RESULTS.pop((ctx.device_name, ctx.seed, probe_id), None)
            raise
        finally:
            for _, _, child, _ in started:
                children.kill(child)
                children.cleanup(child)


def _child_reports(ctx: ProbeContext, probe_id: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """The reports of ``probe_id``'s children, running them (with the other shared probes'
    children, when ``probe_id`` is one of them) unless an earlier probe did. A child that
    failed raises here; one that hung makes this probe hang."""
    key = (ctx.device_name, ctx.seed, probe_id)
    if key not in _CHILD_RESULTS:
        wanted: list[tuple[str, dict[str, Any] | None]] = [(probe_id, params)]
        if probe_id in SHARED_CHILD_PROBES:
            wanted += [
                (other, None)
                for other in SHARED_CHILD_PROBES
                if other != probe_id and (ctx.device_name, ctx.seed, other) not in _CHILD_RESULTS
            ]
        _run_children(ctx, wanted)
    results = _CHILD_RESULTS.pop(key)
    for outcome in results.values():
        if isinstance(outcome, children.ChildHung):
            children.hang_forever(str(outcome))
        if isinstance(outcome, Exception):
            raise outcome
    return results


def _child_workload(ctx: ProbeContext, *, numel: int, dtype: str, churn: int, method: str) -> tuple[Any, dict]:
    """The workload child of this probe; compares its output (and the blocks it kept) with
    the references."""
    torch = ctx.torch
    # The fault simulation sees the allocation the child makes.
    ops_pipeline.note_allocation(numel * (4 if dtype == "float32" else 2), method=method, dtype=dtype)
    report = _child_reports(ctx, ctx.probe_id, {"numel": numel, "churn": churn})["workload"]
    saved = report.pop("_saved")
    acc = CompareAccumulator(torch)
    acc.add(saved["out"], pattern(torch, numel, dtype, ctx.derive_seed("data")))
    kept = saved["kept"]
    expected = torch.tensor([(2 * k + 1) % 251 + 1 for k in range(kept.numel())], dtype=torch.uint8)
    if kept.numel():
        acc.add(kept, expected)
    return acc, report


def run_caching_disabled(ctx: ProbeContext, *, numel: int, churn: int) -> ProbeOutput:
    """A bit-exact workload in a child started with the caching allocator disabled."""
    acc, report = _child_workload(ctx, numel=numel, dtype="float32", churn=churn, method="uncached")
    metrics: dict[str, Any] = {
        "elements": numel,
        "churn_allocations": churn,
        "child_seconds": report.get("seconds"),
        "child_started_by": report.get("_started_by"),
    }
    notes = [f"child stderr: {line[:300]}" for line in report.get("_stderr_tail", [])[-5:]]
    if ctx.is_gpu:
        reserved, allocated = report.get("reserved_after_free"), report.get("allocated_after_free")
        metrics["reserved_after_free_bytes"] = reserved
        metrics["allocated_after_free_bytes"] = allocated
        if isinstance(reserved, int) and isinstance(allocated, int):
            metrics["caching_off_in_effect"] = reserved <= allocated
            if reserved > allocated:
                notes.append("freed memory stayed reserved: the caching allocator was still on in the child")
    else:
        notes.append("on cpu the variables have no effect; the workload runs as a self-test")
    return ProbeOutput(acc.stats(), metrics, notes)


def run_expandable(ctx: ProbeContext, *, numel: int, churn: int) -> ProbeOutput:
    """A host-to-device copy in a child started with ``expandable_segments:True`` (set in all
    three config variables, so it is read whatever the precedence)."""
    acc, report = _child_workload(ctx, numel=numel, dtype="float16", churn=churn, method="expandable")
    metrics: dict[str, Any] = {
        "elements": numel,
        "bytes": numel * 2,
        "dtype": "float16",
        "child_seconds": report.get("seconds"),
        "child_started_by": report.get("_started_by"),
    }
    notes = [f"child stderr: {line[:300]}" for line in report.get("_stderr_tail", [])[-5:]]
    if ctx.is_gpu:
        expandable = report.get("expandable")
        if expandable is not None:
            metrics["expandable_in_effect"] = bool(expandable)
            if not expandable:
                notes.append("expandable segments were not in effect in the child (ignored or unsupported here)")
    else:
        notes.append("on cpu expandable_segments has no effect; the workload runs as a self-test")
    return ProbeOutput(acc.stats(), metrics, notes)
