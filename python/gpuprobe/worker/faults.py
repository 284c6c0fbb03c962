"""What a failure of the device's stack looks like in an exception's text.

A probe that runs an operation on the device under test must tell two kinds of exception
apart: an argument check that refuses the input (a documented limitation: ``RuntimeError:
... must be contiguous``, ``... not supported for tensors with more than INT_MAX elements``)
and a fault of the stack (a CUDA or HIP error, an illegal address, a library status, an
internal assert). The first is reported as refused; the second is an ERROR. The sweep and
the index-width probes share this rule, and every probe that must tell an out-of-memory error
from a fault (``is_oom``). An out-of-memory error whose device had less free memory than the
allocation asked for is neither (``memory_taken_by_others``): the worker leaves that probe
unjudged.
"""

from __future__ import annotations

import re
from typing import Any

#: Lower-case markers of a fault of the device's stack inside an exception's message.
DEVICE_FAULT_MARKERS = (
    "acceleratorerror",
    "cuda error",
    "hip error",
    "cudnn_status",
    "cudnn error",
    # A cuDNN graph the library built and accepted, then failed to run (PyTorch checks
    # `mha_graph.execute(...).is_good()`): a failure of the stack, not an argument check.
    "graph.execute(",
    "cublas_status",
    "cusolver",
    "cufft_",
    "hipblas",
    "rocblas",
    "miopen",
    "illegal memory access",
    "misaligned address",
    "device-side assert",
    "out of memory",
    "internal assert failed",
    "segmentation fault",
)


def is_device_fault(message: str) -> bool:
    """Whether ``"<ExceptionType>: <message>"`` is a failure of the device's stack (ERROR)
    rather than an argument check that refused the input (reported as refused). Exception
    types other than the argument checks' own are faults whatever their text."""
    lowered = message.lower()
    if not lowered.startswith(("runtimeerror", "valueerror", "indexerror", "typeerror")):
        return True
    return any(marker in lowered for marker in DEVICE_FAULT_MARKERS)


def is_oom(torch: Any, exc: BaseException) -> bool:
    """Whether ``exc`` is an out-of-memory error (the framework's class, or the CPU
    allocator's RuntimeError)."""
    oom_class = getattr(torch, "OutOfMemoryError", None)
    if oom_class is not None and isinstance(exc, oom_class):
        return True
    text = str(exc).lower()
    return isinstance(exc, (RuntimeError, MemoryError)) and ("out of memory" in text or "can't allocate memory" in text)


#: ``Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 139.80 GiB of which 220.50 MiB
#: is free``: the sizes PyTorch's caching allocator puts in its out-of-memory message.
_OOM_SIZES = re.compile(
    r"tried to allocate ([0-9.]+) ?([kmgt]?i?b)\b.*?of which ([0-9.]+) ?([kmgt]?i?b) is free", re.IGNORECASE | re.DOTALL
)
_UNITS = {"b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def memory_taken_by_others(message: str) -> str | None:
    """For an out-of-memory message whose device had less memory free than the one
    allocation asked for (other processes held it: the lanes beside this one, another job),
    why the probe could not run; None when the message does not say so. Such a probe is not
    judged: memory another process holds says nothing about whether this stack computes
    right. An allocation that fails while enough memory is free (fragmentation, a wrong
    count of free memory) stays an error: the allocator family's business."""
    match = _OOM_SIZES.search(message)
    if match is None:
        return None
    try:
        wanted = float(match.group(1)) * _UNITS[match.group(2).lower()]
        free = float(match.group(3)) * _UNITS[match.group(4).lower()]
    except (KeyError, ValueError):
        return None
    if free >= wanted:
        return None
    return (
        f"the device had {match.group(3)} {match.group(4)} free when this probe asked for {match.group(1)} "
        f"{match.group(2)}: other processes held its memory, so nothing was judged"
    )
