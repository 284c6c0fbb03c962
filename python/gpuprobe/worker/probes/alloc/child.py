"""Child process of the alloc family: allocator facts and small workloads in a fresh process.

Allocator settings take effect when the framework starts, so probes that test a setting run
this module in a child with the setting in its environment (``children.start``). Jobs (JSON
on the command line):

- ``{"job": "facts", "device": ...}``: imports torch, allocates once on the device, and
  reports the allocator settings string torch parsed, the backend, ``max_split_size`` from
  the memory statistics, whether the segment holding a fresh allocation is expandable, and
  every warning printed on the way (Python warnings, and the C++ warnings written to stderr);
- ``{"job": "workload", "device", "numel", "dtype", "seed", "churn", "out"}``: a bit-exact
  workload on the device (pattern data moved on, cloned, copied into a fresh buffer between
  allocations of varied sizes, moved back) whose result is saved to ``out`` for the parent
  to compare, with the first byte of every block it kept (block i holds i % 251 + 1); it also
  reports whether freed memory stayed reserved (caching) or not, and whether the segment of
  its result is expandable.

The report is one JSON line on stdout (``children.report_line``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
import warnings
from typing import Any


def _capture_stderr() -> tuple[int, str]:
    """Points file descriptor 2 at a temporary file (C++ warnings are written there, not
    through Python); returns the saved descriptor and the file's path."""
    sys.stderr.flush()
    fd, path = tempfile.mkstemp(prefix="gpuprobe-alloc-child-", suffix=".err")
    saved = os.dup(2)
    os.dup2(fd, 2)
    os.close(fd)
    return saved, path


def _restore_stderr(saved: int, path: str) -> list[str]:
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    finally:
        os.unlink(path)
    if text:
        # Keep the child's own stderr complete for the parent's logs.
        sys.stderr.write(text)
        sys.stderr.flush()
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def _segment_expandable(torch: Any, device: Any, tensor: Any) -> bool | None:
    """Whether the allocator segment that holds ``tensor`` is an expandable segment."""
    try:
        snapshot = torch.cuda.memory._snapshot(device)
    except Exception:  # noqa: BLE001 - older builds, or no snapshot support on this platform
        return None
    address = tensor.data_ptr()
    for segment in snapshot.get("segments", []):
        start = int(segment.get("address", -1))
        if start <= address < start + int(segment.get("total_size", 0)):
            value = segment.get("is_expandable")
            return None if value is None else bool(value)
    return None


def _facts(job: dict[str, Any]) -> dict[str, Any]:
    device_name = job["device"]
    saved, path = _capture_stderr()
    report: dict[str, Any] = {"pid": os.getpid()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            import torch

            report["torch"] = str(torch.__version__)
            getter = getattr(torch._C, "_accelerator_getAllocatorSettings", None)
            report["settings"] = str(getter()) if getter is not None else None
            device = torch.device(device_name)
            if device.type == "cuda":
                torch.cuda.set_device(device)
                tensor = torch.ones(1 << 18, device=device)
                torch.cuda.synchronize(device)
                stats = torch.cuda.memory_stats(device)
                report["max_split_size"] = stats.get("max_split_size")
                report["expandable"] = _segment_expandable(torch, device, tensor)
                try:
                    report["backend"] = str(torch.cuda.memory.get_allocator_backend())
                except Exception:  # noqa: BLE001
                    report["backend"] = None
                report["reserved_bytes"] = int(torch.cuda.memory_reserved(device))
                del tensor
        except Exception as exc:  # noqa: BLE001 - reported, the parent decides
            report["error"] = f"{type(exc).__name__}: {exc}"
    report["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    report["stderr"] = _restore_stderr(saved, path)
    return report


def _workload(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    from gpuprobe.worker.patterns import pattern

    device = torch.device(job["device"])
    on_gpu = device.type == "cuda"
    if on_gpu:
        torch.cuda.set_device(device)
    numel, dtype, seed, churn = int(job["numel"]), str(job["dtype"]), int(job["seed"]), int(job["churn"])
    ref = pattern(torch, numel, dtype, seed)
    moved = ref.to(device, copy=not on_gpu)
    cloned = moved.clone()
    keep = []
    for i in range(churn):
        # Allocations of varied sizes between the copies, half of them freed at once: without
        # caching each one is its own cudaMalloc/hipMalloc and free.
        block = torch.empty(((i * 7919) % 4093 + 1) * 1024, dtype=torch.uint8, device=device).fill_(i % 251 + 1)
        if i % 2:
            keep.append(block)
    destination = torch.empty_like(cloned)
    destination.copy_(cloned)
    del moved, cloned
    out = destination.cpu() if on_gpu else destination.clone()
    kept = torch.stack([b[0] for b in keep]).cpu() if keep else torch.empty(0, dtype=torch.uint8)
    report: dict[str, Any] = {"pid": os.getpid(), "kept_blocks": len(keep)}
    if on_gpu:
        report["expandable"] = _segment_expandable(torch, device, destination)
        torch.cuda.synchronize(device)
        big = torch.empty(64 << 20, dtype=torch.uint8, device=device)
        allocated_with = int(torch.cuda.memory_allocated(device))
        del big, keep, destination
        report["reserved_after_free"] = int(torch.cuda.memory_reserved(device))
        report["allocated_after_free"] = int(torch.cuda.memory_allocated(device))
        report["allocated_with_64mib"] = allocated_with
    torch.save({"out": out, "kept": kept}, job["out"])
    return report


def main(argv: list[str]) -> int:
    """Runs the job given as JSON in ``argv[0]``; prints its report; returns the exit status."""
    import json

    from gpuprobe.worker.probes.children import report_line

    job = json.loads(argv[0])
    started = time.perf_counter()
    try:
        if job.get("job") == "facts":
            report = _facts(job)
        elif job.get("job") == "workload":
            report = _workload(job)
        else:
            report = {"error": f"unknown job {job.get('job')!r}"}
    except Exception as exc:  # noqa: BLE001 - the parent reports it
        traceback.print_exc()
        report_line({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    report["seconds"] = round(time.perf_counter() - started, 3)
    report_line(report)
    return 0
