"""Fault family implementation (see ``fault_specs``): real faults, on purpose.

None of these returns an observation: each ends in the error, hang or crash it is about. If
one does return (a runtime that tolerates the fault), the probe reports a comparison that
fails, so the surprise is visible rather than a quiet pass.
"""

from __future__ import annotations

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
