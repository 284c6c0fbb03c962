"""What a probe implementation receives and returns.

A probe function has the signature ``run(ctx: ProbeContext, **params) -> ProbeOutput`` and
raises ``SkipProbe`` when it does not apply (no GPU for pinned memory, no fp8 in this build,
a single GPU for peer copies). Any other exception becomes an ``error`` outcome.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from gpuprobe.worker import simulate
from gpuprobe.worker.patterns import derive_seed


class SkipProbe(Exception):
    """The probe does not apply here; the message is the reason shown to the user."""


@dataclass
class ProbeOutput:
    """A probe's measurement plus report-only metrics and notes."""

    measurement: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class ProbeContext:
    """The device under test, the seed and the utilities every probe shares."""

    def __init__(
        self, torch: Any, device: str, seed: int, probe_id: str, options: dict[str, Any] | None = None
    ) -> None:
        self.torch = torch
        self.device_name = device
        self.device = torch.device(device)
        self.is_gpu = self.device.type != "cpu"
        self.seed = int(seed)
        self.probe_id = probe_id
        self.options = dict(options or {})
        self.notes: list[str] = []
        #: Set by a probe whose device context is unusable although its result stands (a
        #: device-side assert on an input the CPU rejects too): the worker reports the
        #: result, then exits so that a fresh worker runs the remaining probes.
        self.restart_worker: str | None = None

    def derive_seed(self, tag: str = "") -> int:
        """A seed derived from the plan seed, this probe's id and ``tag``."""
        return derive_seed(self.seed, self.probe_id, tag)

    def cpu_generator(self, tag: str = "") -> Any:
        """A seeded CPU ``torch.Generator``."""
        return self.torch.Generator().manual_seed(self.derive_seed(tag))

    def device_generator(self, seed: int) -> Any:
        """A ``torch.Generator`` on the device under test, seeded with ``seed``."""
        return self.torch.Generator(device=self.device).manual_seed(seed)

    def sync(self) -> None:
        """Waits for all work on the device under test."""
        if self.is_gpu:
            self.torch.cuda.synchronize(self.device)

    def require_gpu(self, what: str) -> None:
        """Skips the probe on a CPU device under test."""
        if not self.is_gpu:
            raise SkipProbe(f"{what} needs a GPU device under test (device is cpu)")

    def timer(self) -> Timer:
        """A wall-clock timer that synchronizes the device at start and stop."""
        return Timer(self)


def device_context_problem(torch: Any, device: Any) -> str | None:
    """Whether the GPU context survived an error: None, or what is wrong with it.

    Some CUDA/HIP errors are sticky ("an illegal memory access was encountered"): they poison
    the context, and every later call in this process fails with the same error. Running the
    remaining probes here would blame them all for one fault, so the worker exits with
    ``EXIT_CONTEXT_LOST`` instead and the supervisor starts a fresh worker for the rest.
    """
    try:
        with simulate.bypassed():
            torch.cuda.synchronize(device)
            value = (torch.ones(1, device=device) + 1).item()
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    if value != 2.0:
        return f"1 + 1 returned {value} on {device}"
    return None


class Timer:
    """Times device work: ``with ctx.timer() as t: ...; t.seconds``."""

    def __init__(self, ctx: ProbeContext) -> None:
        self.ctx = ctx
        self.seconds = 0.0
        self._start = 0.0

    def __enter__(self) -> Timer:
        self.ctx.sync()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.ctx.sync()
        self.seconds = time.perf_counter() - self._start


def gbps(nbytes: int, seconds: float) -> float | None:
    """Throughput in GB/s (10^9 bytes), or None when the time is too short to mean anything."""
    if seconds <= 1e-6:
        return None
    return round(nbytes / seconds / 1e9, 3)


def host_available_bytes() -> int | None:
    """``MemAvailable`` from /proc/meminfo (what the host can give without swapping), or None
    where it cannot be read; probes that would not fit skip instead of pushing into swap."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def require_memory(ctx: ProbeContext, host_bytes: int, device_bytes: int) -> None:
    """Skips the probe when the host or the device lacks the memory it needs (with a margin)."""
    if not ctx.is_gpu:
        host_bytes += device_bytes
    available = host_available_bytes()
    if available is not None and host_bytes * 1.1 + (1 << 30) > available:
        raise SkipProbe(
            f"needs about {host_bytes / 2**30:.1f} GiB of free host memory; {available / 2**30:.1f} GiB available"
        )
    if ctx.is_gpu:
        free, _total = ctx.torch.cuda.mem_get_info(ctx.device)
        if device_bytes * 1.05 + (256 << 20) > free:
            raise SkipProbe(
                f"needs about {device_bytes / 2**30:.1f} GiB of free device memory; {free / 2**30:.1f} GiB free"
            )
