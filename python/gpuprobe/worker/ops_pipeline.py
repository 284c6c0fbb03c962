"""The operations layer of the alloc, pipeline and dist families: allocations, batches that
arrive from a DataLoader, tensors reloaded from a file, and results of collectives.

Like ``gpuprobe.worker.ops`` for copies, every function here is a thin call (or no call at
all) on real hardware. Under fault simulation each one describes what happened to the fault
engine (``simulate.CallInfo``), which may corrupt the data, raise, hang or crash, so a
simulated fault shows up in exactly the probes that exercise the operation:

- ``alloc`` / ``note_allocation`` (op ``alloc``): a device allocation of ``nbytes``,
  ``method`` naming the probe's pattern (``chunk``, ``search``, ``largest``, ``cycle``,
  ``large``, ``stream``, ``past_limit``, and ``uncached`` / ``expandable`` for the allocation a
  child process is about to make). The engine is asked *before* the allocation is made, so
  ``hang``, ``crash``, ``exception`` and ``oom`` happen during the allocation; data effects do
  not apply to fresh memory.
- ``dataloader_batch`` (op ``dataloader``): every tensor of a batch as it arrives from a
  DataLoader, ``method`` the start method of its worker processes (``fork``, ``spawn``,
  ``forkserver``), ``main`` when the batch was loaded in the main process, or ``accelerate``
  for a batch from an Accelerate-prepared loader; ``pinned`` says whether the loader pins.
- ``save_load`` (op ``save_load``): a tensor read back from a file, ``method`` the format
  (``safetensors``, ``torch_save``), ``on_device`` whether it was loaded onto the device
  under test.
- ``collective`` (op ``collective``): one rank's result of a collective (``all_reduce``,
  ``all_gather``, ``reduce_scatter``, ``broadcast``) or a peer copy (``p2p``). Ranks run in
  child processes, so the hook applies where their results arrive, in this process.

Nothing here imports torch at import time.
"""

from __future__ import annotations

from typing import Any, Callable

from gpuprobe.worker import simulate
from gpuprobe.worker.simulate import CallInfo


def _torch() -> Any:
    import torch

    return torch


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _nbytes(t: Any) -> int:
    return int(t.numel()) * int(t.element_size())


def note_allocation(nbytes: int, *, method: str, dtype: str = "uint8") -> None:
    """Tells the fault engine about an allocation of ``nbytes`` that is about to be made
    (here or in a child process); a simulated ``hang``, ``crash``, ``exception`` or ``oom``
    happens now. Data effects have nothing to act on in fresh memory and are ignored."""
    engine = simulate.engine()
    if engine is None:
        return
    call = CallInfo(op="alloc", method=method, dtype=dtype, nbytes=int(nbytes), on_device=True)
    fault = engine.decide(call)
    if fault is not None:
        engine.apply(fault, call, None)


def alloc(nbytes: int, device: Any, *, method: str, dtype: Any = None) -> Any:
    """``torch.empty`` of ``nbytes`` bytes (``dtype`` elements, uint8 by default) on
    ``device``; may raise ``torch.OutOfMemoryError`` like the real call."""
    torch = _torch()
    dtype = torch.uint8 if dtype is None else dtype
    itemsize = torch.empty((), dtype=dtype).element_size()
    note_allocation(nbytes, method=method, dtype=_dtype_name(dtype))
    with simulate.bypassed():
        return torch.empty(int(nbytes) // itemsize, dtype=dtype, device=device)


def _map_leaves(obj: Any, fn: Callable[[Any], Any], torch: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map_leaves(v, fn, torch) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_leaves(v, fn, torch) for v in obj)
    return obj


def _passed_through(engine: Any, tensor: Any, *, op: str, method: str, **facts: Any) -> Any:
    """``tensor`` after the fault engine has seen it as the result of ``op`` (``facts``: the
    other ``CallInfo`` fields, e.g. ``pinned`` or ``on_device``)."""
    call = CallInfo(op=op, method=method, dtype=_dtype_name(tensor.dtype), nbytes=_nbytes(tensor), **facts)
    return engine.after_call(call, tensor, sources=(tensor,))


def dataloader_batch(batch: Any, *, method: str, pinned: bool) -> Any:
    """A batch (nested dicts/lists of tensors) as it arrived from a DataLoader."""
    engine = simulate.engine()
    if engine is None:
        return batch

    def hook(t: Any) -> Any:
        return _passed_through(engine, t, op="dataloader", method=method, pinned=pinned)

    return _map_leaves(batch, hook, _torch())


def save_load(loaded: Any, *, method: str, on_device: bool) -> Any:
    """A tensor read back from a file written with ``method``."""
    engine = simulate.engine()
    if engine is None:
        return loaded
    return _passed_through(engine, loaded, op="save_load", method=method, on_device=on_device)


def collective(result: Any, *, method: str) -> Any:
    """One rank's result of a collective (or a peer copy) as this process received it."""
    engine = simulate.engine()
    if engine is None:
        return result
    return _passed_through(engine, result, op="collective", method=method, on_device=True)


def stream_readback(t: Any, *, method: str) -> Any:
    """A buffer of the allocator stress probes (``alloc.stress.*``) as the probe reads it
    back for checking: data written on one stream (or thread) and read after the documented
    synchronization. Under simulation it is described as op ``alloc`` with ``method`` naming
    the case (``cross_stream_readback``, ``oom_retry_readback``, ``handoff_readback``,
    ``thread_readback``), so a fault can make it read what a too-early reuse of the memory
    would leave: ``stale`` (bytes 0x5A, never written by the writer), ``zeros``, ``bitflip``.
    The buffer itself is never changed: a corrupted result is a copy."""
    engine = simulate.engine()
    if engine is None:
        return t
    return _passed_through(engine, t, op="alloc", method=method, on_device=True)
