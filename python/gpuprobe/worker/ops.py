"""The operations layer: every data movement, conversion and random draw a probe makes.

Probes never call ``x.to(dev)`` or ``torch.randn`` directly for the operation they test; they
call ``ops.h2d(x, dev, method=..., non_blocking=...)`` or ``ops.randn(...)``. On real
hardware these are thin calls into torch. Under fault simulation they describe the call
(direction, method, dtype, size, pinned, non_blocking, on the device under test or not) to
the fault engine, which may corrupt the result, so a simulated fault appears in exactly the
probes that exercise it.

``stage`` and ``readback`` move data for a probe's own bookkeeping (putting inputs on the
device, fetching outputs for comparison); they are never faulted, so a simulated D2H fault
does not show up in an H2D probe. On real hardware they are ordinary copies: a real D2H
defect shows up in every probe that reads results back, and the copy family tells them apart.

On a CPU-only machine the device under test is ``cpu``: ``h2d`` is a move onto the device
under test and ``.to('cpu')`` is called with ``copy=True`` so that a real copy happens (plain
``.to('cpu')`` of a CPU tensor returns the tensor itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuprobe.worker import digest, simulate
from gpuprobe.worker.simulate import CallInfo


def _torch() -> Any:
    import torch

    return torch


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _is_pinned(t: Any) -> bool:
    try:
        return bool(t.device.type == "cpu" and t.is_pinned())
    except RuntimeError:
        return False


def _snapshot_for_stale(engine: Any, op: str, out: Any) -> Any:
    if engine is not None and out is not None and engine.wants(op, "stale"):
        with simulate.bypassed():
            return out.clone()
    return None


def _finish(call: CallInfo, result: Any, sources: tuple[Any, ...], snapshot: Any = None) -> Any:
    engine = simulate.engine()
    if engine is None:
        return result
    in_place = call.method == "copy_"
    return engine.after_call(call, result, sources=sources, snapshot=snapshot, in_place=in_place)


def h2d(src: Any, device: Any, *, method: str = "to", non_blocking: bool = False, out: Any = None) -> Any:
    """Moves host data onto ``device``.

    ``method``: ``to`` (``src.to(device)``), ``cuda`` (``src.cuda(device)``), ``copy_``
    (``out.copy_(src)``, ``out`` preallocated on the device) or ``numpy`` (``src`` is a numpy
    array; ``torch.from_numpy(src).to(device)``).
    """
    torch = _torch()
    if not isinstance(device, torch.device):
        device = torch.device(device)
    on_cpu = device.type == "cpu"
    engine = simulate.engine()
    if engine is None and method == "to":
        # The fast path of the tiny-copy loops: no simulation, nothing to describe.
        return src.to(device, non_blocking=non_blocking, copy=on_cpu)
    snapshot = _snapshot_for_stale(engine, "h2d", out) if method == "copy_" else None
    with simulate.bypassed():
        if method == "to":
            result = src.to(device, non_blocking=non_blocking, copy=on_cpu)
        elif method == "cuda":
            if on_cpu:
                raise ValueError(".cuda() needs a GPU device under test")
            result = src.cuda(device, non_blocking=non_blocking)
        elif method == "copy_":
            if out is None:
                raise ValueError("copy_ needs a preallocated destination")
            result = out.copy_(src, non_blocking=non_blocking)
        elif method == "numpy":
            host = torch.from_numpy(src)
            result = host.to(device, non_blocking=non_blocking, copy=on_cpu)
        else:
            raise ValueError(f"unknown h2d method {method!r}")
    if engine is None:
        return result
    call = CallInfo(
        op="h2d",
        method=method,
        dtype=_dtype_name(result.dtype),
        nbytes=int(result.numel()) * int(result.element_size()),
        pinned=False if method == "numpy" else _is_pinned(src),
        non_blocking=non_blocking,
        on_device=True,
    )
    return _finish(call, result, (src,) if method != "numpy" else (), snapshot)


def d2h(src: Any, *, method: str = "cpu", non_blocking: bool = False, out: Any = None) -> Any:
    """Moves device data to the host.

    ``method``: ``cpu`` (``src.cpu()``; with ``non_blocking`` it is ``src.to('cpu',
    non_blocking=True)``, as ``.cpu()`` takes no such argument), ``to`` (``src.to('cpu')``),
    ``copy_`` (``out.copy_(src)``, ``out`` a host buffer, pinned or not) or ``numpy``
    (``src.cpu().numpy()``, returned as a tensor over the array for comparison).
    """
    torch = _torch()
    on_cpu = src.device.type == "cpu"
    engine = simulate.engine()
    snapshot = _snapshot_for_stale(engine, "d2h", out) if method == "copy_" else None
    with simulate.bypassed():
        if method == "cpu":
            result = src.to("cpu", non_blocking=True) if non_blocking else src.cpu()
        elif method == "to":
            result = src.to("cpu", non_blocking=non_blocking, copy=on_cpu)
        elif method == "copy_":
            if out is None:
                raise ValueError("copy_ needs a preallocated destination")
            result = out.copy_(src, non_blocking=non_blocking)
        elif method == "numpy":
            result = torch.from_numpy(src.cpu().numpy())
        else:
            raise ValueError(f"unknown d2h method {method!r}")
    if engine is None:
        return result
    call = CallInfo(
        op="d2h",
        method=method,
        dtype=_dtype_name(src.dtype),
        nbytes=int(src.numel()) * int(src.element_size()),
        pinned=_is_pinned(result),
        non_blocking=non_blocking,
        on_device=True,
    )
    return _finish(call, result, (src,), snapshot)


def d2d(src: Any, *, method: str = "clone", out: Any = None, device: Any = None) -> Any:
    """Copies device data on the device (``clone``, ``copy_`` into ``out``) or to another
    device (``to``: ``src.to(device)``)."""
    torch = _torch()
    engine = simulate.engine()
    snapshot = _snapshot_for_stale(engine, "d2d", out) if method == "copy_" else None
    with simulate.bypassed():
        if method == "clone":
            result = src.clone()
        elif method == "copy_":
            if out is None:
                raise ValueError("copy_ needs a preallocated destination")
            result = out.copy_(src)
        elif method == "to":
            result = src.to(torch.device(device), copy=True)
        else:
            raise ValueError(f"unknown d2d method {method!r}")
    if engine is None:
        return result
    call = CallInfo(
        op="d2d",
        method=method,
        dtype=_dtype_name(src.dtype),
        nbytes=int(src.numel()) * int(src.element_size()),
        on_device=True,
    )
    return _finish(call, result, (src,), snapshot)


#: Shortcut methods by target dtype name.
SHORTCUTS = {
    "float32": "float",
    "float16": "half",
    "bfloat16": "bfloat16",
    "float64": "double",
    "int8": "char",
    "int32": "int",
    "int64": "long",
    "bool": "bool",
}


def convert(src: Any, dtype: Any, *, method: str = "to", on_device: bool = True) -> Any:
    """Converts ``src`` to ``dtype`` where it is.

    ``method``: ``to`` (``src.to(dtype)``), ``type`` (``src.type(dtype)``) or the shortcut
    named in ``SHORTCUTS`` (``float``, ``half``, ...). ``on_device`` says whether this
    conversion stands for the device side (True) or the host side (False) of the probe.
    """
    with simulate.bypassed():
        if method == "to":
            result = src.to(dtype)
        elif method == "type":
            result = src.type(dtype)
        elif method in SHORTCUTS.values():
            if SHORTCUTS.get(_dtype_name(dtype)) != method:
                raise ValueError(f".{method}() does not convert to {dtype}")
            result = getattr(src, method)()
        else:
            raise ValueError(f"unknown conversion method {method!r}")
    if simulate.engine() is None:
        return result
    call = CallInfo(
        op="convert",
        method=method,
        dtype=_dtype_name(src.dtype),
        to_dtype=_dtype_name(result.dtype),
        nbytes=int(src.numel()) * int(src.element_size()),
        on_device=on_device,
    )
    return _finish(call, result, (src,))


def _generated(op: str, method: str, result: Any, sources: tuple[Any, ...] = ()) -> Any:
    if simulate.engine() is None:
        return result
    call = CallInfo(
        op=op,
        method=method,
        dtype=_dtype_name(result.dtype),
        nbytes=int(result.numel()) * int(result.element_size()),
        on_device=True,
    )
    return _finish(call, result, sources)


def randn(size: Sequence[int], *, dtype: Any, device: Any, generator: Any) -> Any:
    """``torch.randn`` on the device under test."""
    torch = _torch()
    with simulate.bypassed():
        result = torch.randn(*size, dtype=dtype, device=device, generator=generator)
    return _generated("randn", "randn", result)


def randn_like(like: Any) -> Any:
    """``torch.randn_like(like)`` (drawn from the device's default generator)."""
    torch = _torch()
    with simulate.bypassed():
        result = torch.randn_like(like)
    return _generated("randn_like", "randn_like", result, (like,))


def rand(size: Sequence[int], *, dtype: Any, device: Any, generator: Any) -> Any:
    """``torch.rand`` on the device under test."""
    torch = _torch()
    with simulate.bypassed():
        result = torch.rand(*size, dtype=dtype, device=device, generator=generator)
    return _generated("rand", "rand", result)


def randint(low: int, high: int, size: Sequence[int], *, dtype: Any, device: Any, generator: Any) -> Any:
    """``torch.randint`` on the device under test."""
    torch = _torch()
    with simulate.bypassed():
        result = torch.randint(low, high, tuple(size), dtype=dtype, device=device, generator=generator)
    return _generated("randint", "randint", result)


def randperm(n: int, *, device: Any, generator: Any) -> Any:
    """``torch.randperm`` on the device under test."""
    torch = _torch()
    with simulate.bypassed():
        result = torch.randperm(n, device=device, generator=generator)
    return _generated("randperm", "randperm", result)


def multinomial(probs: Any, num_samples: int, *, replacement: bool, generator: Any) -> Any:
    """``torch.multinomial`` of device probabilities."""
    torch = _torch()
    with simulate.bypassed():
        result = torch.multinomial(probs, num_samples, replacement=replacement, generator=generator)
    call = CallInfo(
        op="multinomial",
        method="multinomial",
        dtype=_dtype_name(probs.dtype),
        nbytes=int(result.numel()) * int(result.element_size()),
        on_device=True,
    )
    return _finish(call, result, (probs,))


def stage(src: Any, device: Any) -> Any:
    """Puts a probe's input on ``device`` (blocking; never faulted)."""
    torch = _torch()
    device = torch.device(device)
    with simulate.bypassed():
        return src.to(device, copy=device.type == "cpu")


def readback(t: Any) -> Any:
    """Fetches a probe's output to the host for comparison (blocking; never faulted). A CPU
    tensor comes back as itself. The one place a probe's outputs reach the host, so the one
    place their output digest is taken (``gpuprobe.worker.digest``)."""
    with simulate.bypassed():
        host = t.cpu()
    digest.record(_torch(), host)
    return host
