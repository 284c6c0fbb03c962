"""Dist family implementation (see ``dist_specs`` for the catalog and id grammar).

Peer copies run in the worker itself. Collectives run in one child process per rank
(``dist_child``), all started at once, meeting through a file store in a temporary
directory, with ``NCCL_NVLS_ENABLE=0`` in their environment (NVLink multicast stays off). One
run of the process group serves the four collective probes: its results are kept for the
worker's lifetime, keyed by backend, devices and seed. A rank that fails ends the run at once
(the others are killed rather than left waiting for it); ranks that do not finish in time are
killed and the probe hangs, so the supervisor records HANG (``children.collect_all``).
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from gpuprobe.worker import ops, ops_pipeline, simulate
from gpuprobe.worker.compare import CompareAccumulator
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe, gbps
from gpuprobe.worker.patterns import canary_value, derive_seed, fill_canary, pattern
from gpuprobe.worker.probes import children
from gpuprobe.worker.probes.dist import child as dist_child

CHILD = "gpuprobe.worker.probes.dist.child"
#: Seconds a rank may wait in one collective (torch.distributed's own timeout).
COLLECTIVE_TIMEOUT_S = 60.0
#: Seconds the whole process group run may take before it counts as a hang.
RUN_TIMEOUT_S = 150.0

#: Results of process-group runs in this worker: key → (per-rank results, reports, seconds)
#: or the failure message.
_RUNS: dict[tuple[Any, ...], Any] = {}


def _group(ctx: ProbeContext) -> tuple[str, list[str]]:
    """The backend and the devices of the ranks, or a skip."""
    torch = ctx.torch
    if not ctx.is_gpu:
        return "gloo", ["cpu", "cpu"]
    count = torch.cuda.device_count()
    if count < 2:
        raise SkipProbe(f"needs at least 2 GPUs; {count} visible to torch")
    if (ctx.device.index or 0) != 0:
        raise SkipProbe(f"the collectives run once across all {count} GPUs, from the lane of cuda:0")
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_nccl_available():
        raise SkipProbe("this torch build has no NCCL/RCCL backend for torch.distributed")
    return "nccl", [f"cuda:{i}" for i in range(count)]


def _sizes(backend: str) -> tuple[int, ...]:
    return dist_child.CPU_SIZES if backend == "gloo" else dist_child.GPU_SIZES


def _process_group_run(ctx: ProbeContext, backend: str, devices: list[str], seed: int) -> tuple[Any, bool]:
    """Runs (or reuses) the ranks; returns ((results by rank, reports, seconds), reused)."""
    torch = ctx.torch
    key = (backend, tuple(devices), seed)
    if key in _RUNS:
        cached = _RUNS[key]
        if isinstance(cached, str):
            raise RuntimeError(f"{cached} (the shared run of the collectives)")
        return cached, True
    world = len(devices)
    env = dict(os.environ)
    env["NCCL_NVLS_ENABLE"] = "0"
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpuprobe-dist-") as tmp:
        kids = []
        for rank in range(world):
            job = {
                "rank": rank,
                "world": world,
                "backend": backend,
                "devices": devices,
                "store": os.path.join(tmp, "store"),
                "timeout_s": COLLECTIVE_TIMEOUT_S,
                "seed": seed,
                "sizes": list(_sizes(backend)),
                "out": os.path.join(tmp, f"rank{rank}.pt"),
            }
            kids.append(children.start(CHILD, job, env=env, what=f"rank {rank} of {world} ({backend})"))
        try:
            reports = children.collect_all(kids, timeout_s=RUN_TIMEOUT_S)
        except children.ChildFailed as exc:
            _RUNS[key] = str(exc)
            raise
        finally:
            for kid in kids:
                children.kill(kid)
                children.cleanup(kid)
        with simulate.bypassed():
            results = [torch.load(os.path.join(tmp, f"rank{r}.pt"), weights_only=True) for r in range(world)]
    run = (results, reports, round(time.perf_counter() - started, 3))
    _RUNS[key] = run
    return run, False


def run_collective(ctx: ProbeContext, *, collective: str) -> ProbeOutput:
    """One collective's results on every rank, compared with what the rank-tagged inputs
    give."""
    torch = ctx.torch
    backend, devices = _group(ctx)
    seed = derive_seed(ctx.seed, "dist.collectives", "data")
    (results, reports, seconds), reused = _process_group_run(ctx, backend, devices, seed)
    world = len(devices)
    acc = CompareAccumulator(torch)
    failed: list[str] = []
    cases = [case for case in dist_child.cases(_sizes(backend)) if case[0] == collective]
    for case in cases:
        key = dist_child.case_key(case)
        wanted = dist_child.expected(torch, case, world, seed)
        for rank in range(world):
            got = ops_pipeline.collective(results[rank][key].clone().reshape(-1), method=collective)
            if acc.add(got, wanted[rank]):
                failed.append(f"{key} on rank {rank}")
    metrics: dict[str, Any] = {
        "backend": backend,
        "world_size": world,
        "devices": ",".join(devices),
        "cases": len(cases),
        "group_run_seconds": seconds,
        "init_seconds_max": max((r.get("init_seconds") or 0.0) for r in reports),
        "nccl_version": reports[0].get("nccl_version"),
        "shared_run": reused,
    }
    notes = []
    if failed:
        notes.append("failed: " + ", ".join(failed[:8]) + (" ..." if len(failed) > 8 else ""))
    if backend == "gloo":
        notes.append("cpu device under test: a 2-process gloo run checks the probe, not a GPU")
    if reused:
        notes.append("results of the process-group run shared by the dist collective probes of this worker")
    return ProbeOutput(acc.stats(), metrics, notes)


def run_p2p(ctx: ProbeContext, *, sizes: list[int]) -> ProbeOutput:
    """Peer copies from the device under test to every other GPU, three ways, each compared
    with ``x.cpu()``."""
    torch = ctx.torch
    ctx.require_gpu("peer-to-peer copies")
    count = torch.cuda.device_count()
    if count < 2:
        raise SkipProbe(f"needs at least 2 GPUs; {count} visible to torch")
    here = ctx.device.index or 0
    acc = CompareAccumulator(torch)
    canary = canary_value("float32")
    failed: list[str] = []
    access: list[str] = []
    bandwidth: dict[str, Any] = {}
    for other in range(count):
        if other == here:
            continue
        target = torch.device("cuda", other)
        access.append(f"{here}->{other}:{'yes' if torch.cuda.can_device_access_peer(here, other) else 'no'}")
        for numel in sizes:
            source = ops.stage(pattern(torch, numel, "float32", ctx.derive_seed(f"{other}.{numel}")), ctx.device)
            ctx.sync()
            reference = ops.readback(source)  # x.cpu(): what the device really holds
            for method in ("to", "to_nonblocking", "copy_"):
                with ctx.timer() as timer:
                    if method == "copy_":
                        out = fill_canary(torch, torch.empty(numel, dtype=torch.float32, device=target))
                        torch.cuda.synchronize(target)
                        moved = ops.d2d(source, method="copy_", out=out)
                    elif method == "to":
                        moved = ops.d2d(source, method="to", device=target)
                    else:
                        with simulate.bypassed():
                            raw = source.to(target, non_blocking=True)
                        moved = ops_pipeline.collective(raw, method="p2p")
                    torch.cuda.synchronize(target)
                    torch.cuda.synchronize(ctx.device)
                if acc.add(ops.readback(moved), reference, canary=canary if method == "copy_" else None):
                    failed.append(f"{here}->{other} {numel} elements by {method}")
                if numel * 4 >= 64 << 20 and method == "to":
                    bandwidth[f"gb_per_s.{here}->{other}"] = gbps(numel * 4, timer.seconds)
                del moved
    metrics: dict[str, Any] = {
        "peers": count - 1,
        "peer_access": ",".join(access),
        "sizes": ",".join(str(n) for n in sizes),
        **bandwidth,
    }
    notes = ["failed: " + ", ".join(failed[:8])] if failed else []
    return ProbeOutput(acc.stats(), metrics, notes)
