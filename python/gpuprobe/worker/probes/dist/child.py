"""One rank of the dist family's collectives, run in its own process, and the rank-tagged
data both sides agree on.

The probe starts one child per rank (``children.start``) with a job such as::

    {"rank": 0, "world": 2, "backend": "nccl", "devices": ["cuda:0", "cuda:1"],
     "store": "/tmp/.../store", "timeout_s": 60, "seed": 123, "sizes": [7, 65537, 1048576],
     "out": "/tmp/.../rank0.pt"}

The ranks meet through a file store (no network port to collide with), run every collective
in ``COLLECTIVES`` on every case of ``cases(sizes)``, and save what they received (copied to the
host) for the parent, which rebuilds every expected result from the same seed with
``expected()``. Reductions use small integers (as int64, and as exactly representable fp32 and
bf16 values), so every summation order gives the same bits; gathers and broadcasts carry
arbitrary bit patterns.
"""

from __future__ import annotations

import os
import time
import traceback
from datetime import timedelta
from typing import Any

from gpuprobe.worker.patterns import derive_seed, hash32, pattern

#: Collectives in the order every rank runs them.
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")

#: Element counts per rank on GPUs: tiny, just past 2^16, and 2^20 (4 MiB of fp32).
GPU_SIZES = (7, (1 << 16) + 1, 1 << 20)
#: Element counts per rank of the CPU self-test (gloo): enough to exercise the logic.
CPU_SIZES = (7, (1 << 12) + 1)


def cases(sizes: tuple[int, ...] | list[int] = GPU_SIZES) -> list[tuple[str, str, str, int]]:
    """(collective, operation, dtype, elements) for every case, in the order ranks run them."""
    out = []
    for size in sizes:
        for dtype in ("int64", "float32", "bfloat16"):
            out.append(("all_reduce", "sum", dtype, size))
        out.append(("all_reduce", "max", "int64", size))
        for dtype in ("float32", "bfloat16"):
            out.append(("all_gather", "list", dtype, size))
        out.append(("all_gather", "into_tensor", "float32", size))
        for dtype in ("int64", "float32"):
            out.append(("reduce_scatter", "sum", dtype, size))
        for dtype in ("float32", "bfloat16"):
            out.append(("broadcast", "from_last", dtype, size))
    return out


def case_key(case: tuple[str, str, str, int]) -> str:
    """The key of a case in a rank's saved results."""
    collective, operation, dtype, size = case
    return f"{collective}.{operation}.{dtype}.{size}"


def _small_integers(torch: Any, numel: int, seed: int, rank: int, span: int, dtype: str) -> Any:
    """Integers in [-span, span] from a hash of (seed, rank, index), as ``dtype``."""
    h = hash32(torch, 0, numel, derive_seed(seed, f"rank{rank}", "ints") & 0x7FFFFFFF)
    values = (h.to(torch.int64) & 0x7FFFFFFF) % (2 * span + 1) - span
    return values.to(getattr(torch, dtype))


def rank_input(torch: Any, case: tuple[str, str, str, int], rank: int, world: int, seed: int) -> Any:
    """What ``rank`` contributes to ``case`` (a CPU tensor)."""
    collective, operation, dtype, size = case
    case_seed = derive_seed(seed, case_key(case), "")
    if collective == "all_reduce" or collective == "reduce_scatter":
        numel = size * (world if collective == "reduce_scatter" else 1)
        # Tagged by rank: rank r's values are offset by r * 10^6 (int64), or drawn from the
        # rank's own hash (floats: |x| <= 16, so sums over 8 ranks stay exact in bf16).
        if dtype == "int64":
            return _small_integers(torch, numel, case_seed, rank, 1000, "int64") + (rank + 1) * 1_000_003
        return _small_integers(torch, numel, case_seed, rank, 16, dtype)
    return pattern(torch, size, dtype, derive_seed(case_seed, f"rank{rank}", "data"))


def expected(torch: Any, case: tuple[str, str, str, int], world: int, seed: int) -> list[Any]:
    """What every rank must receive in ``case`` (CPU tensors, flattened), by rank."""
    collective, operation, dtype, size = case
    inputs = [rank_input(torch, case, r, world, seed) for r in range(world)]
    if collective in ("all_reduce", "reduce_scatter"):
        stacked = torch.stack([t.to(torch.int64) for t in inputs])
        reduced = stacked.max(0).values if operation == "max" else stacked.sum(0)
        reduced = reduced.to(getattr(torch, dtype))
        if collective == "all_reduce":
            return [reduced] * world
        return [reduced[r * size : (r + 1) * size] for r in range(world)]
    if collective == "all_gather":
        return [torch.cat(inputs)] * world
    return [inputs[world - 1]] * world


def _run_case(torch: Any, dist: Any, case: tuple[str, str, str, int], rank: int, world: int, seed: int, device: Any):
    collective, operation, dtype, size = case
    local = rank_input(torch, case, rank, world, seed).to(device)
    if collective == "all_reduce":
        op = dist.ReduceOp.SUM if operation == "sum" else dist.ReduceOp.MAX
        dist.all_reduce(local, op=op)
        return local
    if collective == "reduce_scatter":
        out = torch.empty(size, dtype=local.dtype, device=device)
        dist.reduce_scatter_tensor(out, local, op=dist.ReduceOp.SUM)
        return out
    if collective == "all_gather":
        if operation == "into_tensor":
            out = torch.empty(size * world, dtype=local.dtype, device=device)
            dist.all_gather_into_tensor(out, local)
            return out
        parts = [torch.empty_like(local) for _ in range(world)]
        dist.all_gather(parts, local)
        return torch.cat(parts)
    if rank != world - 1:
        local.zero_()
    dist.broadcast(local, src=world - 1)
    return local


def main(argv: list[str]) -> int:
    """Runs one rank (job JSON in ``argv[0]``); prints its report; returns the exit status."""
    import json

    from gpuprobe.worker.probes.children import report_line

    job = json.loads(argv[0])
    started = time.perf_counter()
    report: dict[str, Any] = {"rank": job.get("rank"), "pid": os.getpid()}
    try:
        import torch
        import torch.distributed as dist

        rank, world = int(job["rank"]), int(job["world"])
        device = torch.device(job["devices"][rank])
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(
            job["backend"],
            init_method=f"file://{job['store']}",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=float(job["timeout_s"])),
        )
        report["init_seconds"] = round(time.perf_counter() - started, 3)
        if job["backend"] == "nccl":
            version = getattr(torch.cuda, "nccl", None)
            try:
                report["nccl_version"] = ".".join(str(v) for v in version.version()) if version else None
            except Exception:  # noqa: BLE001
                report["nccl_version"] = None
        results: dict[str, Any] = {}
        for case in cases(job["sizes"]):
            out = _run_case(torch, dist, case, rank, world, int(job["seed"]), device)
            results[case_key(case)] = out.cpu() if device.type != "cpu" else out.clone()
        dist.barrier()
        dist.destroy_process_group()
        torch.save(results, job["out"])
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        traceback.print_exc()
        report["error"] = f"{type(exc).__name__}: {exc}"
        report_line(report)
        return 1
    report["seconds"] = round(time.perf_counter() - started, 3)
    report_line(report)
    return 0
