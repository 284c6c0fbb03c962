"""What a failure of the device's stack looks like in an exception's text.

A probe that runs an operation on the device under test must tell two kinds of exception
apart: an argument check that refuses the input (a documented limitation: ``RuntimeError:
... must be contiguous``, ``... not supported for tensors with more than INT_MAX elements``)
and a fault of the stack (a CUDA or HIP error, an illegal address, a library status, an
internal assert). The first is reported as refused; the second is an ERROR. The sweep and
the index-width probes share this rule.
"""

from __future__ import annotations

#: Lower-case markers of a fault of the device's stack inside an exception's message.
DEVICE_FAULT_MARKERS = (
    "acceleratorerror",
    "cuda error",
    "hip error",
    "cudnn_status",
    "cudnn error",
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
