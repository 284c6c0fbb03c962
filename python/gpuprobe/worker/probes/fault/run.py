"""Fault family implementation (see ``fault_specs``): real faults, on purpose.

None of these returns an observation: each ends in the error, hang or crash it is about. If
one does return (a runtime that tolerates the fault), the probe reports a comparison that
fails, so the surprise is visible rather than a quiet pass.
"""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Any

from gpuprobe.worker import ops
from gpuprobe.worker.compare import CompareAccumulator
from gpuprobe.worker.context import ProbeContext, ProbeOutput
from gpuprobe.worker.patterns import pattern


def _survived(ctx: ProbeContext, what: str) -> ProbeOutput:
    """The fault did not happen: a failing comparison that says so."""
    torch = ctx.torch
    acc = CompareAccumulator(torch)
    acc.add(torch.zeros(1, dtype=torch.int32), torch.ones(1, dtype=torch.int32))
    return ProbeOutput(acc.stats(), {"fault_happened": False}, [f"the deliberate fault did not happen: {what}"])


def run_illegal_address(ctx: ProbeContext) -> ProbeOutput:
    """Reads index 2^40 of a 16-element device tensor, then synchronizes."""
    torch = ctx.torch
    ctx.require_gpu("an illegal device memory access")
    data = torch.arange(16, dtype=torch.float32, device=ctx.device)
    index = torch.full((1,), 1 << 40, dtype=torch.int64, device=ctx.device)
    # Indexing on the device: the bounds check (if any) runs in the kernel, so the error is
    # asynchronous and surfaces at the synchronize (or at the next call).
    out = data[index]
    torch.cuda.synchronize(ctx.device)
    value: Any = out.cpu()
    return _survived(ctx, f"index 2^40 of a 16-element tensor read {value.tolist()}")


def run_hang(ctx: ProbeContext) -> ProbeOutput:
    """A kernel that spins for 2^62 cycles (centuries), then a synchronize that waits for it."""
    torch = ctx.torch
    ctx.require_gpu("a kernel that never ends")
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is None:
        raise RuntimeError("this torch has no torch.cuda._sleep to spin a kernel with")
    sleep(1 << 62)
    torch.cuda.synchronize(ctx.device)
    return _survived(ctx, "a 2^62-cycle kernel finished")


def run_oom(ctx: ProbeContext) -> ProbeOutput:
    """Allocates far more than any device (or address space) holds; the error propagates."""
    torch = ctx.torch
    nbytes = (1 << 50) if ctx.is_gpu else (1 << 62)
    block = torch.empty(nbytes, dtype=torch.uint8, device=ctx.device)
    del block
    return _survived(ctx, f"an allocation of {nbytes} B succeeded")


def run_signal(ctx: ProbeContext) -> ProbeOutput:
    """Kills this worker with SIGKILL (nothing can catch it)."""
    os.kill(os.getpid(), signal.SIGKILL)
    return _survived(ctx, "SIGKILL did not end the process")


def _no_core_dump() -> None:
    """Lowers this worker's core-file limit to 0 before a deliberate fatal signal.

    A torch process dumps hundreds of MB of core, slowly, into the working directory or the
    system's crash collector (systemd-coredump and apport honour the limit); a fault made on
    purpose is not worth one. Best effort: without ``resource`` the fault happens anyway."""
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    except (ImportError, OSError, ValueError):
        pass


def run_segv(ctx: ProbeContext) -> ProbeOutput:
    """Reads address 8 through ctypes: a real SIGSEGV raised by the CPU in native code, not a
    signal sent with ``kill``. faulthandler (the worker runs with ``-X faulthandler``) prints
    the Python stack and re-raises it, so the worker dies of signal 11."""
    _no_core_dump()
    # Address 8, not 0: a field read through a NULL struct pointer, the usual native crash.
    # ctypes takes a pointer of 0 as NULL and allocates a fresh buffer instead of reading it;
    # the first page is never mapped (vm.mmap_min_addr), so 8 faults.
    ctypes.string_at(8, 1)
    return _survived(ctx, "reading address 8 did not fault")


def run_abort(ctx: ProbeContext) -> ProbeOutput:
    """Calls ``abort()`` (``os.abort``), as a native library does on a failed assertion: the
    worker dies of SIGABRT (signal 6) after faulthandler's Python stack."""
    _no_core_dump()
    os.abort()
    return _survived(ctx, "abort() returned")


def run_recovery(ctx: ProbeContext) -> ProbeOutput:
    """A 64 MiB + 4 B round trip and an exact matmul (small integers: every summation order
    gives the same bits), compared bit for bit."""
    torch = ctx.torch
    acc = CompareAccumulator(torch)
    numel = (16 << 20) + 1
    ref = pattern(torch, numel, "float32", ctx.derive_seed("data"))
    moved = ops.h2d(ref, ctx.device, method="to")
    back = ops.d2h(ops.d2d(moved, method="clone"), method="cpu")
    acc.add(back, ref)
    generator = torch.Generator().manual_seed(ctx.derive_seed("matmul"))
    a = torch.randint(-3, 4, (512, 512), generator=generator).float()
    b = torch.randint(-3, 4, (512, 512), generator=generator).float()
    expected = (a.double() @ b.double()).float()
    product = ops.stage(a, ctx.device) @ ops.stage(b, ctx.device)
    acc.add(ops.readback(product), expected)
    return ProbeOutput(acc.stats(), {"bytes": numel * 4, "matmul": "512x512 fp32 small integers"})
