"""Pipeline family implementation (see ``pipeline_specs`` for the catalog and id grammar).

Every probe builds its reference from the dataset itself (``pipeline_data.LatentDataset``,
computed in this process) and compares bit for bit twice per tensor: as the batch arrives on
the host (the loader stage) and after it reached the device (the move stage). The metrics say
which stage lost data, which is the question of field note 000 ("is it Accelerate or
something deeper?").

Library code (Accelerate, safetensors, ``torch.save``) runs inside ``simulate.exposed()``, so
under fault simulation the copies it makes meet the simulated copy faults too; batches as they
arrive and tensors as they are reloaded pass through ``ops_pipeline`` (ops ``dataloader`` and
``save_load``).

The save/load probes' tensors (``save_load_tensors``) are what their repro scripts
(``repro.families.pipeline``) write too: one function, which both call.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from gpuprobe.worker import ops, ops_pipeline, simulate
from gpuprobe.worker.compare import CompareAccumulator
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe, host_available_bytes
from gpuprobe.worker.patterns import pattern
from gpuprobe.worker.probes.copy.run import send_to_device
from gpuprobe.worker.probes.pipeline.data import LatentDataset

ITEMS = 64
BATCH = 16


class _Stages:
    """Mismatch counts per stage, on top of the shared ``CompareAccumulator``."""

    def __init__(self, torch: Any) -> None:
        self.acc = CompareAccumulator(torch)
        self.failed: dict[str, int] = {}

    def add(self, stage: str, out: Any, ref: Any) -> None:
        self.failed.setdefault(stage, 0)
        if self.acc.add(out, ref):
            self.failed[stage] += 1

    def metrics(self) -> dict[str, Any]:
        return {f"{stage}_failed_tensors": count for stage, count in self.failed.items()}


def _tensor_leaves(batch: dict[str, Any], torch: Any) -> list[tuple[str, Any]]:
    return [(name, value) for name, value in batch.items() if isinstance(value, torch.Tensor)]


def _check_batch(
    ctx: ProbeContext, stages: _Stages, batch: dict[str, Any], ref: dict[str, Any], stage: str, notes: list[str]
) -> None:
    torch = ctx.torch
    if sorted(batch) != sorted(ref):
        raise RuntimeError(f"batch fields {sorted(batch)} differ from the dataset's {sorted(ref)}")
    for name, value in _tensor_leaves(batch, torch):
        if value.device.type != "cpu" and value.device != ctx.device:
            notes.append(f"{stage}: {name} arrived on {value.device}, not {ctx.device}")
        stages.add(stage, ops.readback(value), ref[name])


def _batches(loader: Any, exposed: bool) -> Iterator[tuple[int, Any, float]]:
    """(batch number, batch, seconds since the iteration started)."""
    started = time.perf_counter()

    def guard() -> Any:
        return simulate.exposed() if exposed else contextlib.nullcontext()

    with guard():
        iterator = iter(loader)
    number = 0
    while True:
        with guard():
            try:
                batch = next(iterator)
            except StopIteration:
                return
        yield number, batch, time.perf_counter() - started
        number += 1


def run_dataloader(ctx: ProbeContext, *, workers: int, start_method: str, pin_memory: bool) -> ProbeOutput:
    """Dict batches from a DataLoader (0 or N worker processes, fork or spawn, pinned or not),
    compared as they arrive and after the move to the device."""
    torch = ctx.torch
    from torch.utils.data import DataLoader

    if pin_memory:
        ctx.require_gpu("pinned (page-locked) host memory")
    if workers and start_method not in multiprocessing.get_all_start_methods():
        raise SkipProbe(f"the {start_method!r} start method is not available on this platform")
    dataset = LatentDataset(ITEMS, ctx.derive_seed("dataset"))
    kwargs: dict[str, Any] = {"batch_size": BATCH, "shuffle": False, "num_workers": workers, "pin_memory": pin_memory}
    if workers:
        kwargs["multiprocessing_context"] = start_method
    loader = DataLoader(dataset, **kwargs)
    stages = _Stages(torch)
    notes: list[str] = []
    first_batch_s = None
    unpinned = 0
    nbytes = 0
    batches = 0
    for number, batch, elapsed in _batches(loader, exposed=False):
        if first_batch_s is None:
            first_batch_s = round(elapsed, 3)
        batch = ops_pipeline.dataloader_batch(batch, method=start_method, pinned=pin_memory)
        ref = dataset.batch(list(range(number * BATCH, min(ITEMS, (number + 1) * BATCH))))
        for _, value in _tensor_leaves(batch, torch):
            nbytes += value.numel() * value.element_size()
            if pin_memory and not value.is_pinned():
                unpinned += 1
        _check_batch(ctx, stages, batch, ref, "loader", notes)
        moved = send_to_device(batch, ctx.device, non_blocking=pin_memory, torch=torch)
        ctx.sync()
        _check_batch(ctx, stages, moved, ref, "device", notes)
        batches += 1
    if batches * BATCH < ITEMS:
        raise RuntimeError(f"the loader yielded {batches} batches of {BATCH}; {ITEMS} items were expected")
    if unpinned:
        notes.append(f"{unpinned} tensors of pin_memory=True batches were not pinned")
    metrics: dict[str, Any] = {
        "workers": workers,
        "start_method": start_method,
        "pin_memory": pin_memory,
        "batches": batches,
        "batch_size": BATCH,
        "bytes": nbytes,
        "first_batch_s": first_batch_s,
        "unpinned_tensors": unpinned if pin_memory else None,
        **stages.metrics(),
    }
    return ProbeOutput(stages.acc.stats(), metrics, sorted(set(notes)))


@contextlib.contextmanager
def _accelerator(ctx: ProbeContext) -> Iterator[Any]:
    """An ``Accelerator`` on the device under test (its shared state reset before and after,
    so probes do not see each other's)."""
    try:
        import accelerate
        from accelerate import Accelerator
    except ImportError as exc:
        raise SkipProbe(f"accelerate is not importable in this interpreter ({exc})") from exc
    from accelerate import state

    def reset() -> None:
        for name in ("AcceleratorState", "GradientState", "PartialState"):
            cls = getattr(state, name, None)
            resetter = getattr(cls, "_reset_state", None)
            if resetter is not None:
                resetter()

    saved = os.environ.get("ACCELERATE_TORCH_DEVICE")
    # Accelerate picks "cuda" (the current device) by default; every lane has its own device.
    os.environ["ACCELERATE_TORCH_DEVICE"] = ctx.device_name
    reset()
    try:
        accelerator = Accelerator(cpu=not ctx.is_gpu)
        accelerator.gpuprobe_version = str(getattr(accelerate, "__version__", "?"))
        yield accelerator
    finally:
        reset()
        if saved is None:
            os.environ.pop("ACCELERATE_TORCH_DEVICE", None)
        else:
            os.environ["ACCELERATE_TORCH_DEVICE"] = saved


def run_accelerate(ctx: ProbeContext, *, device_placement: bool) -> ProbeOutput:
    """An Accelerate-prepared DataLoader with ``device_placement=[True]`` or ``[False]``."""
    torch = ctx.torch
    from torch.utils.data import DataLoader

    dataset = LatentDataset(ITEMS, ctx.derive_seed("dataset"))
    stages = _Stages(torch)
    notes: list[str] = []
    misplaced = 0
    batches = 0
    with _accelerator(ctx) as accelerator:
        loader = DataLoader(dataset, batch_size=BATCH, shuffle=False, num_workers=0)
        with simulate.exposed():
            prepared = accelerator.prepare(loader, device_placement=[device_placement])
        expected_type = ctx.device.type if device_placement else "cpu"
        for number, batch, _ in _batches(prepared, exposed=True):
            batch = ops_pipeline.dataloader_batch(batch, method="accelerate", pinned=False)
            ref = dataset.batch(list(range(number * BATCH, min(ITEMS, (number + 1) * BATCH))))
            for name, value in _tensor_leaves(batch, torch):
                if value.device.type != expected_type:
                    misplaced += 1
                    notes.append(f"{name} arrived on {value.device} with device_placement={device_placement}")
            _check_batch(ctx, stages, batch, ref, "accelerate", notes)
            if not device_placement:
                batch = send_to_device(batch, ctx.device, non_blocking=False, torch=torch)
                ctx.sync()
                _check_batch(ctx, stages, batch, ref, "device", notes)
            batches += 1
        metrics: dict[str, Any] = {
            "accelerate": accelerator.gpuprobe_version,
            "accelerator_device": str(accelerator.device),
            "distributed_type": str(getattr(accelerator, "distributed_type", "")),
            "device_placement": device_placement,
            "batches": batches,
            "misplaced_tensors": misplaced,
            **stages.metrics(),
        }
    if not ctx.is_gpu:
        notes.append("on a CPU-only machine Accelerate uses the CPU device")
    return ProbeOutput(stages.acc.stats(), metrics, sorted(set(notes)))


def run_send_to_device(ctx: ProbeContext) -> ProbeOutput:
    """``accelerate.utils.send_to_device`` of a dict batch, non_blocking on a GPU."""
    torch = ctx.torch
    try:
        from accelerate.utils import send_to_device as accelerate_send
    except ImportError as exc:
        raise SkipProbe(f"accelerate is not importable in this interpreter ({exc})") from exc
    dataset = LatentDataset(BATCH, ctx.derive_seed("dataset"))
    ref = dataset.batch(list(range(BATCH)))
    source = {name: value.clone() for name, value in ref.items()}
    stages = _Stages(torch)
    notes: list[str] = []
    with simulate.exposed():
        moved = accelerate_send(source, ctx.device, non_blocking=ctx.is_gpu)
    ctx.sync()
    _check_batch(ctx, stages, moved, ref, "device", notes)
    if not ctx.is_gpu:
        notes.append("on cpu send_to_device returns the tensors themselves: no copy is made")
    metrics = {"tensors": len(ref), "non_blocking": ctx.is_gpu, **stages.metrics()}
    return ProbeOutput(stages.acc.stats(), metrics, sorted(set(notes)))


def save_load_tensors(large: bool) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The tensors a save/load probe writes, in order: name → (dtype, shape), each filled
    with the pattern seeded by its name. ``large``: one bfloat16 tensor past 2^31 bytes; else
    a latent batch, a vector and float32 scales."""
    if large:
        return {"big": ("bfloat16", ((1 << 30) + 1,))}
    return {
        "latents": ("bfloat16", (16, 1, 64, 64)),
        "vector": ("bfloat16", (4097,)),
        "scale": ("float32", (33,)),
    }


def run_save_load(ctx: ProbeContext, *, fmt: str, large: bool) -> ProbeOutput:
    """Tensors written from the device, reloaded onto the host and onto the device."""
    torch = ctx.torch
    if fmt == "safetensors":
        try:
            import safetensors
            from safetensors.torch import load_file, save_file
        except ImportError as exc:
            raise SkipProbe(f"safetensors is not importable in this interpreter ({exc})") from exc
        version = str(getattr(safetensors, "__version__", "?"))
    else:
        version = str(torch.__version__)
    shapes = save_load_tensors(large)
    nbytes = sum((2 if d == "bfloat16" else 4) * _numel(s) for d, s in shapes.values())
    if large:
        available = host_available_bytes()
        if available is not None and 4 * nbytes + (1 << 30) > available:
            raise SkipProbe(f"needs about {4 * nbytes / 2**30:.1f} GiB of free host memory")
        if ctx.is_gpu and 2 * nbytes + (1 << 30) > ctx.torch.cuda.mem_get_info(ctx.device)[0]:
            raise SkipProbe(f"needs about {2 * nbytes / 2**30:.1f} GiB of free device memory")
    refs = {
        name: pattern(torch, _numel(shape), dtype, ctx.derive_seed(name), shape)
        for name, (dtype, shape) in shapes.items()
    }
    stages = _Stages(torch)
    metrics: dict[str, Any] = {"format": fmt, "version": version, "tensors": len(refs), "bytes": nbytes}
    with tempfile.TemporaryDirectory(prefix="gpuprobe-save-") as tmp:
        path = os.path.join(tmp, "tensors." + ("safetensors" if fmt == "safetensors" else "pt"))
        on_device = {name: ops.stage(ref, ctx.device) for name, ref in refs.items()}
        ctx.sync()
        started = time.perf_counter()
        with simulate.exposed():
            if fmt == "safetensors":
                save_file(on_device, path)
            else:
                torch.save(on_device, path)
        metrics["save_seconds"] = round(time.perf_counter() - started, 3)
        metrics["file_bytes"] = os.path.getsize(path)
        del on_device
        for target in ("cpu", ctx.device_name):
            with simulate.exposed():
                if fmt == "safetensors":
                    loaded = load_file(path, device=target)
                else:
                    loaded = torch.load(path, map_location=target, weights_only=True)
            ctx.sync()
            stage = "host_load" if target == "cpu" else "device_load"
            for name, ref in refs.items():
                got = ops_pipeline.save_load(loaded[name], method=fmt, on_device=target != "cpu")
                stages.add(stage, ops.readback(got), ref)
            del loaded
            if not ctx.is_gpu:
                break
    notes = ["on cpu the reload onto the device is the reload onto the host"] if not ctx.is_gpu else []
    metrics.update(stages.metrics())
    return ProbeOutput(stages.acc.stats(), metrics, notes)


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for dim in shape:
        total *= dim
    return total
