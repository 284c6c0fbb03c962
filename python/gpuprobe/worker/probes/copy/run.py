"""Copy family implementation (see ``copy_specs`` for the catalog and id grammar).

Every probe builds its reference on the host from a deterministic pattern, moves data through
``gpuprobe.worker.ops`` with the method under test, reads the result back and compares it bit
for bit. Preallocated destinations are filled with a canary first, so an operation that did
nothing ("unchanged") is told apart from one that wrote zeros.

What a repro script restates as data (``repro.families.copy``) is decided by functions of
their own here, which both call: a trial's seed tag (``trial_tag``) and the sizes of the
tiny copies (``tiny_sizes``).
"""

from __future__ import annotations

import contextlib
import gc
import math
import threading
import time
from typing import Any, Callable

from gpuprobe.worker import ops, simulate
from gpuprobe.worker.compare import CompareAccumulator
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe, gbps, require_memory
from gpuprobe.worker.patterns import canary_value, fill_canary, pattern

#: Largest element count of one tiny copy: 15 float32 = 60 bytes (≤ 64 B, RKB-001).
TINY_MAX_ELEMS = 15


def trial_tag(trial: int) -> str:
    """The seed tag of the data of trial ``trial`` (a shape, or a reused buffer's copy)."""
    return f"trial{trial}"


def tiny_sizes(count: int) -> list[int]:
    """The element counts of a tiny-copy probe's ``count`` copies, in order: 1 to
    ``TINY_MAX_ELEMS`` cycling by 7, so neighbours differ and every size recurs. The copies
    are consecutive slices of one pattern buffer."""
    return [(i * 7) % TINY_MAX_ELEMS + 1 for i in range(count)]


def _dtype(ctx: ProbeContext, name: str) -> Any:
    return getattr(ctx.torch, name)


def _require_pinned(ctx: ProbeContext, memory: str) -> None:
    if memory == "pinned":
        ctx.require_gpu("pinned (page-locked) host memory")


def _pinned(ctx: ProbeContext, t: Any) -> Any:
    with simulate.bypassed():
        return t.pin_memory()


def _host_canary(ctx: ProbeContext, shape: Any, dtype_name: str, pinned: bool) -> Any:
    torch = ctx.torch
    buf = torch.empty(tuple(shape), dtype=_dtype(ctx, dtype_name), pin_memory=pinned)
    return fill_canary(torch, buf)


def _device_canary(ctx: ProbeContext, shape: Any, dtype_name: str) -> Any:
    torch = ctx.torch
    buf = torch.empty(tuple(shape), dtype=_dtype(ctx, dtype_name), device=ctx.device)
    return fill_canary(torch, buf)


def _release(ctx: ProbeContext) -> None:
    """Returns cached device memory after a large probe so later probes see it free."""
    gc.collect()
    if ctx.is_gpu:
        ctx.torch.cuda.empty_cache()


def _run_threads(count: int, body: Callable[[int], None]) -> None:
    """Runs ``body(t)`` for t in range(count) on separate threads; re-raises the first error."""
    errors: list[BaseException] = []

    def target(index: int) -> None:
        try:
            body(index)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,), name=f"gpuprobe-copy-{i}") for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _stream_context(ctx: ProbeContext) -> Any:
    if ctx.is_gpu:
        torch = ctx.torch
        return torch.cuda.stream(torch.cuda.Stream(device=ctx.device))
    return contextlib.nullcontext()


def run_tiny(
    ctx: ProbeContext, *, direction: str, memory: str, non_blocking: bool, threads: int, iterations: int
) -> ProbeOutput:
    """Thousands of 4-60 B copies from several threads, each thread on its own stream (RKB-001)."""
    torch = ctx.torch
    _require_pinned(ctx, memory)
    pinned = memory == "pinned"
    count = threads * iterations
    sizes = torch.tensor(tiny_sizes(count), dtype=torch.int64)
    offsets = (torch.cumsum(sizes, 0) - sizes).tolist()
    size_list = sizes.tolist()
    total = int(sizes.sum())
    ref = pattern(torch, total, "float32", ctx.derive_seed("data"))
    outputs: list[Any] = [None] * count
    canary: int | None = None

    if direction == "h2d":
        host = _pinned(ctx, ref) if pinned else ref

        def body(thread: int) -> None:
            with simulate.bypassed(), _stream_context(ctx):
                for i in range(thread, count, threads):
                    start = offsets[i]
                    piece = host[start : start + size_list[i]]
                    # Pageable sources are fresh allocations, as in the recipe
                    # (x = torch.randn(k); x.to(dev, non_blocking=True)).
                    src = piece if pinned else piece.clone()
                    outputs[i] = ops.h2d(src, ctx.device, method="to", non_blocking=non_blocking)

        method = "t.to(dev)"
    else:
        device_data = ops.stage(ref, ctx.device)
        ctx.sync()
        if non_blocking or pinned:
            # A pageable or pinned host destination, written with copy_: .to('cpu',
            # non_blocking=True) would allocate pinned memory whatever we asked for.
            host_out = _host_canary(ctx, (total,), "float32", pinned)
            canary = canary_value("float32")
            method = "host.copy_(t)"
        else:
            host_out = None
            method = "t.cpu()"

        def body(thread: int) -> None:
            with simulate.bypassed(), _stream_context(ctx):
                for i in range(thread, count, threads):
                    start = offsets[i]
                    src = device_data[start : start + size_list[i]]
                    if host_out is None:
                        outputs[i] = ops.d2h(src, method="cpu")
                    else:
                        outputs[i] = ops.d2h(
                            src, method="copy_", non_blocking=non_blocking, out=host_out[start : start + size_list[i]]
                        )

    ctx.sync()
    began = time.perf_counter()
    _run_threads(threads, body)
    ctx.sync()
    seconds = time.perf_counter() - began
    if direction == "h2d":
        out = ops.readback(torch.cat(outputs))
    else:
        out = torch.cat(outputs)
    acc = CompareAccumulator(torch)
    acc.add_segmented(out, ref, sizes, canary=canary)
    metrics = {
        "copies": count,
        "threads": threads,
        "iterations": iterations,
        "streams": threads if ctx.is_gpu else 0,
        "bytes_per_copy_min": 4,
        "bytes_per_copy_max": 4 * TINY_MAX_ELEMS,
        "bytes": total * 4,
        "method": method,
        "pinned": pinned,
        "non_blocking": non_blocking,
        "copies_per_s": round(count / seconds) if seconds > 0 else None,
    }
    return ProbeOutput(acc.stats(), metrics)


def run_transfer(
    ctx: ProbeContext,
    *,
    direction: str,
    memory: str,
    method: str,
    non_blocking: bool,
    dtype: str,
    shapes: list[list[int]],
) -> ProbeOutput:
    """One H2D or D2H copy per shape with the given method, compared bit for bit."""
    torch = ctx.torch
    _require_pinned(ctx, memory)
    pinned = memory == "pinned"
    if method == "cuda":
        ctx.require_gpu("t.cuda()")
    acc = CompareAccumulator(torch)
    canary = canary_value(dtype) if method == "copy_" else None
    total_bytes = 0
    seconds = 0.0
    notes: list[str] = []
    for trial, shape in enumerate(shapes):
        numel = math.prod(shape)
        ref = pattern(torch, numel, dtype, ctx.derive_seed(trial_tag(trial)), tuple(shape))
        if direction == "h2d":
            out = _device_canary(ctx, shape, dtype) if method == "copy_" else None
            if method == "numpy":
                src = ref.numpy().copy()
            else:
                src = _pinned(ctx, ref) if pinned else ref.clone()
            with ctx.timer() as timer:
                moved = ops.h2d(src, ctx.device, method=method, non_blocking=non_blocking, out=out)
            result = ops.readback(moved)
        else:
            device_data = ops.stage(ref, ctx.device)
            out = _host_canary(ctx, shape, dtype, pinned) if method == "copy_" else None
            with ctx.timer() as timer:
                result = ops.d2h(device_data, method=method, non_blocking=non_blocking, out=out)
            if not ctx.is_gpu and method == "cpu":
                notes.append("on cpu, t.cpu() returns the tensor itself: no copy is made")
        if tuple(result.shape) != tuple(shape):
            notes.append(f"trial {trial}: shape {tuple(result.shape)} where {tuple(shape)} was expected")
        seconds += timer.seconds
        total_bytes += numel * ref.element_size()
        acc.add(result, ref, canary=canary)
    metrics: dict[str, Any] = {
        "direction": direction,
        "method": method,
        "dtype": dtype,
        "pinned": pinned,
        "non_blocking": non_blocking,
        "bytes": total_bytes,
        "trials": len(shapes),
    }
    if len(shapes) == 1:
        metrics["shape"] = "x".join(str(d) for d in shapes[0])
    else:
        metrics["sizes"] = ",".join(str(math.prod(s)) for s in shapes)
    if total_bytes >= 1 << 20:
        metrics["gb_per_s"] = gbps(total_bytes, seconds)
    return ProbeOutput(acc.stats(), metrics, sorted(set(notes)))


def run_d2d(ctx: ProbeContext, *, method: str, shapes: list[list[int]], dtype: str) -> ProbeOutput:
    """Device-to-device ``clone()`` or ``copy_`` into a canary-filled device buffer."""
    torch = ctx.torch
    acc = CompareAccumulator(torch)
    canary = canary_value(dtype) if method == "copy_" else None
    total_bytes = 0
    seconds = 0.0
    for trial, shape in enumerate(shapes):
        numel = math.prod(shape)
        require_memory(ctx, 2 * numel * 4, 2 * numel * 4)
        ref = pattern(torch, numel, dtype, ctx.derive_seed(trial_tag(trial)), tuple(shape))
        device_data = ops.stage(ref, ctx.device)
        out = _device_canary(ctx, shape, dtype) if method == "copy_" else None
        with ctx.timer() as timer:
            copied = ops.d2d(device_data, method=method, out=out)
        del device_data
        seconds += timer.seconds
        total_bytes += numel * ref.element_size()
        acc.add(ops.readback(copied), ref, canary=canary)
        del copied, out
    if total_bytes >= 64 << 20:
        _release(ctx)
    metrics: dict[str, Any] = {"method": method, "dtype": dtype, "bytes": total_bytes, "trials": len(shapes)}
    if total_bytes >= 1 << 20:
        metrics["gb_per_s"] = gbps(2 * total_bytes, seconds)  # read + write
    return ProbeOutput(acc.stats(), metrics)


def run_roundtrip(
    ctx: ProbeContext, *, memory: str, numel: int, dtype: str, non_blocking: bool, timed: bool
) -> ProbeOutput:
    """H2D then D2H into a canary-filled host buffer; timed per direction, or back to back
    with no synchronization in between (the RKB-002 pattern)."""
    torch = ctx.torch
    _require_pinned(ctx, memory)
    pinned = memory == "pinned"
    itemsize = 4 if dtype == "float32" else 2
    nbytes = numel * itemsize
    require_memory(ctx, 2 * nbytes, nbytes)
    seed = ctx.derive_seed("data")
    if pinned:
        src = torch.empty(numel, dtype=_dtype(ctx, dtype), pin_memory=True)
        pattern(torch, numel, dtype, seed, out=src)
    else:
        src = pattern(torch, numel, dtype, seed)
    back = _host_canary(ctx, (numel,), dtype, pinned)
    metrics: dict[str, Any] = {
        "bytes": nbytes,
        "elements": numel,
        "dtype": dtype,
        "pinned": pinned,
        "non_blocking": non_blocking,
        "method": "t.to(dev) then host.copy_(t)",
    }
    if timed:
        with ctx.timer() as up:
            moved = ops.h2d(src, ctx.device, method="to", non_blocking=non_blocking)
        with ctx.timer() as down:
            ops.d2h(moved, method="copy_", non_blocking=non_blocking, out=back)
        metrics["h2d_gb_per_s"] = gbps(nbytes, up.seconds)
        metrics["d2h_gb_per_s"] = gbps(nbytes, down.seconds)
    else:
        moved = ops.h2d(src, ctx.device, method="to", non_blocking=non_blocking)
        ops.d2h(moved, method="copy_", non_blocking=non_blocking, out=back)
        ctx.sync()
        metrics["sync_between"] = False
    del moved
    acc = CompareAccumulator(torch)
    acc.add(back, src, canary=canary_value(dtype))
    del back, src
    if nbytes >= 64 << 20:
        _release(ctx)
    return ProbeOutput(acc.stats(), metrics)


def run_reuse(ctx: ProbeContext, *, memory: str, non_blocking: bool, trials: int, numel: int) -> ProbeOutput:
    """Successive copies of new data into one device buffer: each must replace the last."""
    torch = ctx.torch
    _require_pinned(ctx, memory)
    pinned = memory == "pinned"
    destination = _device_canary(ctx, (numel,), "float32")
    acc = CompareAccumulator(torch)
    previous = None
    for trial in range(trials):
        ref = pattern(torch, numel, "float32", ctx.derive_seed(trial_tag(trial)))
        src = _pinned(ctx, ref) if pinned else ref.clone()
        ops.h2d(src, ctx.device, method="copy_", non_blocking=non_blocking, out=destination)
        ctx.sync()
        result = ops.readback(destination).clone()
        if previous is None:
            acc.add(result, ref, canary=canary_value("float32"))
        else:
            acc.add(result, ref, previous=previous)
        previous = ref
    metrics = {
        "trials": trials,
        "bytes_per_copy": numel * 4,
        "pinned": pinned,
        "non_blocking": non_blocking,
        "method": "dst.copy_(t) into the same buffer",
    }
    return ProbeOutput(acc.stats(), metrics)


def _make_batch(ctx: ProbeContext) -> dict[str, Any]:
    torch = ctx.torch

    def make(name: str, dtype: str, shape: tuple[int, ...]) -> Any:
        return pattern(torch, max(1, math.prod(shape)), dtype, ctx.derive_seed(name), shape)

    return {
        "latents": make("latents", "bfloat16", (16, 1, 64, 64)),
        "text_embeds": make("text_embeds", "float16", (1, 77, 768)),
        "pixel_values": make("pixel_values", "float32", (2, 3, 64, 64)),
        "timesteps": make("timesteps", "int64", (16,)),
        "attention_mask": make("attention_mask", "bool", (16, 77)),
        "guidance_scale": make("guidance_scale", "float32", ()),
        "extra": {"ids": [make("ids0", "int64", (8,)), make("ids1", "int64", (3,))], "caption": "a photo"},
    }


def send_to_device(obj: Any, device: Any, *, non_blocking: bool, torch: Any) -> Any:
    """Moves every tensor in nested dicts/lists/tuples to ``device``, leaving other objects as
    they are (what Accelerate's ``send_to_device`` does for a batch)."""
    if isinstance(obj, torch.Tensor):
        return ops.h2d(obj, device, method="to", non_blocking=non_blocking)
    if isinstance(obj, dict):
        return {k: send_to_device(v, device, non_blocking=non_blocking, torch=torch) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        moved = [send_to_device(v, device, non_blocking=non_blocking, torch=torch) for v in obj]
        return type(obj)(moved)
    return obj


def _leaves(obj: Any, torch: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(obj, torch.Tensor):
        return [(path, obj)]
    if isinstance(obj, dict):
        out: list[tuple[str, Any]] = []
        for k, v in obj.items():
            out += _leaves(v, torch, f"{path}.{k}" if path else str(k))
        return out
    if isinstance(obj, (list, tuple)):
        out = []
        for i, v in enumerate(obj):
            out += _leaves(v, torch, f"{path}[{i}]")
        return out
    return [(path, obj)]


def run_batch(ctx: ProbeContext, *, memory: str, non_blocking: bool) -> ProbeOutput:
    """A dict batch moved recursively, every tensor compared (one trial per tensor)."""
    torch = ctx.torch
    _require_pinned(ctx, memory)
    batch = _make_batch(ctx)
    source = batch
    if memory == "pinned":
        source = _map_tensors(batch, lambda t: _pinned(ctx, t), torch)
    moved = send_to_device(source, ctx.device, non_blocking=non_blocking, torch=torch)
    ctx.sync()
    expected, found = _leaves(batch, torch), _leaves(moved, torch)
    if [p for p, _ in expected] != [p for p, _ in found]:
        raise RuntimeError(f"batch structure changed: {[p for p, _ in found]}")
    acc = CompareAccumulator(torch)
    notes: list[str] = []
    nbytes = 0
    for (path, ref), (_, got) in zip(expected, found):
        if not isinstance(ref, torch.Tensor):
            if ref != got:
                notes.append(f"{path}: non-tensor value changed")
            continue
        nbytes += ref.numel() * ref.element_size()
        if got.device != ctx.device and ctx.is_gpu:
            notes.append(f"{path}: on {got.device}, not {ctx.device}")
        acc.add(ops.readback(got), ref)
    metrics = {
        "tensors": sum(1 for _, v in expected if isinstance(v, torch.Tensor)),
        "bytes": nbytes,
        "pinned": memory == "pinned",
        "non_blocking": non_blocking,
        "method": "recursive t.to(dev) over a dict batch",
    }
    return ProbeOutput(acc.stats(), metrics, notes)


def _map_tensors(obj: Any, fn: Callable[[Any], Any], torch: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn, torch) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensors(v, fn, torch) for v in obj)
    return obj


def run_p2p(ctx: ProbeContext, *, numel: int) -> ProbeOutput:
    """The device under test to every other GPU and back, each hop compared with the host data."""
    torch = ctx.torch
    ctx.require_gpu("peer-to-peer copies")
    count = torch.cuda.device_count()
    if count < 2:
        raise SkipProbe(f"needs at least 2 GPUs; {count} visible")
    ref = pattern(torch, numel, "float32", ctx.derive_seed("data"))
    device_data = ops.stage(ref, ctx.device)
    ctx.sync()
    acc = CompareAccumulator(torch)
    peers = []
    access = []
    here = ctx.device.index or 0
    for other in range(count):
        if other == here:
            continue
        target = torch.device("cuda", other)
        there = ops.d2d(device_data, method="to", device=target)
        torch.cuda.synchronize(target)
        acc.add(ops.readback(there), ref)
        back = ops.d2d(there, method="to", device=ctx.device)
        ctx.sync()
        acc.add(ops.readback(back), ref)
        peers.append(other)
        access.append(bool(torch.cuda.can_device_access_peer(here, other)))
    metrics = {
        "peers": ",".join(str(p) for p in peers),
        "peer_access": ",".join("yes" if a else "no" for a in access),
        "bytes": numel * 4,
    }
    return ProbeOutput(acc.stats(), metrics)
