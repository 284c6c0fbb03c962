"""Output digests: the exact bits a deterministic probe computed, hashed, so that nodes of one
stack can be compared with each other (``gpuprobe fleet``, docs/fleet.md "Across nodes").

A device whose arithmetic is marginally wrong may return values that pass every tolerance
and still differ, bit for bit, from what its identical peers return from the same inputs.
Only a comparison across nodes sees it: each node records a digest of its outputs, and the
fleet view flags a node whose digest differs from the majority of its identical-stack peers.

A digest is recorded only where it means something:

- the probe is one of ``DIGESTED`` (GEMM, convolution, reduction, element-wise and attention
  forward probes of the quick tier, which fleets run; a standard or full tier run carries
  those too): its inputs are fixed by the seed and its
  outputs are expected to be bitwise reproducible on identical stacks;
- its outputs came out bitwise the same when the probe ran twice on this device. Otherwise no
  digest is recorded and a note says why: a nondeterministic kernel must never flag a node.

What is hashed is every tensor the probe reads back through ``ops.readback`` (the one place
device outputs reach the host): its dtype, its shape and its bytes, in order. The hash is a
SHA-256, shortened to 16 hex digits.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

#: Probe-id prefixes of the probes that carry a digest: tolerance-judged compute whose bits
#: identical stacks reproduce. Copies and conversions are judged bit-exactly against their
#: input already; random generators, collectives and allocator probes are not bit-stable
#: across nodes by design.
DIGESTED_PREFIXES = (
    "ops.matmul.",
    "ops.addmm.",
    "ops.bmm.",
    "ops.linear.",
    "ops.reduce.",
    "ops.sentinel.",
    "ops.elementwise.",
    "nn.conv2d.",
    "nn.conv_transpose2d.",
    "nn.sdpa.",
)
#: Tiers whose probes run twice for a digest. Only the quick tier's: on the H200 the second
#: run of the standard tier's 136 other forward probes lengthened its ops lane by 5 s (16-18 s
#: to 21-25 s for the tier), and the full tier's multi-GiB cases would double their time.
DIGESTED_TIERS = ("quick",)
#: Id components of probes left out although their prefix matches: backward passes (their
#: kernels accumulate gradients with atomics, in an order that differs from run to run) and
#: the SDPA backend matrix (it measures which backends exist, not one kernel's bits).
_EXCLUDED_PARTS = ("bwd", "matrix")
#: Hex digits kept of the SHA-256.
DIGEST_HEX = 16
#: Output bytes one run may hash: past this (a standard-tier GEMM with a 145 MiB output on a
#: GPU) the probe carries no digest and is not run a second time, so that the digest never
#: costs a probe more than a moment.
MAX_DIGEST_BYTES = 64 << 20

_local = threading.local()


def digested(probe_id: str, tier: str) -> bool:
    """Whether the probe ``probe_id`` of ``tier`` records an output digest."""
    if tier not in DIGESTED_TIERS or not probe_id.startswith(DIGESTED_PREFIXES):
        return False
    return not any(part in _EXCLUDED_PARTS for part in probe_id.split("."))


@dataclass
class Collector:
    """The outputs one run of a probe read back, hashed as they arrive."""

    hasher: Any = field(default_factory=hashlib.sha256)
    outputs: int = 0
    nbytes: int = 0

    @property
    def too_large(self) -> bool:
        """Whether the outputs exceeded ``MAX_DIGEST_BYTES`` (hashing stopped there)."""
        return self.nbytes > MAX_DIGEST_BYTES

    def add(self, torch: Any, t: Any) -> None:
        """Hashes one output tensor: dtype, shape, then its bytes in logical order."""
        self.nbytes += t.numel() * t.element_size()
        self.outputs += 1
        if self.too_large:
            return
        flat = t.detach().contiguous().reshape(-1)
        self.hasher.update(f"{flat.dtype}|{tuple(t.shape)}|".encode())
        if flat.numel():
            raw = flat.view(torch.uint8)
            try:
                self.hasher.update(memoryview(raw.numpy()))
            except (RuntimeError, TypeError):
                # A torch without numpy: slower, same bytes.
                self.hasher.update(bytes(raw.tolist()))

    def hexdigest(self) -> str:
        """The short hex digest."""
        return self.hasher.hexdigest()[:DIGEST_HEX]


@contextlib.contextmanager
def collecting() -> Iterator[Collector]:
    """Collects the outputs read back on this thread while the block runs."""
    collector = Collector()
    previous = getattr(_local, "collector", None)
    _local.collector = collector
    try:
        yield collector
    finally:
        _local.collector = previous


def record(torch: Any, t: Any) -> None:
    """Adds ``t`` (a host tensor a probe just read back) to the digest being collected on this
    thread, if any. Never raises: a digest is a bonus, never a reason for a probe to fail."""
    collector = getattr(_local, "collector", None)
    if collector is None or not isinstance(t, torch.Tensor):
        return
    try:
        collector.add(torch, t)
    except Exception:  # noqa: BLE001 - an unhashable output only costs the digest
        _local.collector = None
        collector.outputs = -1


def judged(
    first: Collector,
    second: Collector | None,
    seed: int,
    why_not: str | None = None,
    *,
    cpu_threads: int | None = None,
) -> tuple[dict[str, Any] | None, str | None]:
    """The ``OutputDigest`` object (observation.rs) of two runs of one probe, or None and the
    note saying why there is none. ``cpu_threads``: on the CPU device, the framework's thread
    count (a CPU reduction's bits depend on it)."""
    if why_not is not None:
        return None, f"no output digest: {why_not}"
    if first.outputs < 0 or (second is not None and second.outputs < 0):
        return None, "no output digest: an output could not be hashed"
    if first.outputs == 0:
        return None, "no output digest: the probe read back no output"
    if first.too_large:
        return None, f"no output digest: the outputs exceed {MAX_DIGEST_BYTES >> 20} MiB"
    if second is None:
        return None, "no output digest: the second run did not finish"
    value = first.hexdigest()
    if second.outputs != first.outputs or second.hexdigest() != value:
        return None, (
            "no output digest: the outputs differed between two runs on this device "
            "(a nondeterministic kernel), so they are not compared with other nodes"
        )
    record: dict[str, Any] = {"value": value, "seed": int(seed), "outputs": first.outputs}
    if cpu_threads is not None:
        record["cpu_threads"] = int(cpu_threads)
    return record, None
