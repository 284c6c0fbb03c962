"""What a failure of the device's stack looks like in an exception's text.

A probe that runs an operation on the device under test must tell two kinds of exception
apart: an argument check that refuses the input (a documented limitation: ``RuntimeError:
... must be contiguous``, ``... not supported for tensors with more than INT_MAX elements``)
and a fault of the stack (a CUDA or HIP error, an illegal address, a library status, an
internal assert). The first is reported as refused; the second is an ERROR. The sweep and
the index-width probes share this rule, and every probe that must tell an out-of-memory error
from a fault (``is_oom``).
"""

from __future__ import annotations

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
