"""The width family's case protocol: the boundaries and their geometry, the case registry
(``@case``) and the ``Scope`` a case runs in.

A case function ``fn(scope)`` (``cases``, ``grid``) gets a ``Scope``: the device, the
geometry of its boundary (``Geometry``: scaled down on a CPU device), seeded inputs, the
call that runs the operation under test (``Scope.op``: described to fault simulation as op
``width``) and the checks that count violations (``close``, ``exact``, ``truth``).
``@case(group, name, bytes_per_element, kinds)`` adds it to ``REGISTRY``; ``run`` imports
the modules that define cases (``run.CASE_MODULES``) and runs them.

This module imports no torch at import time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable

from gpuprobe.worker import ops_math, simulate
from gpuprobe.worker.context import ProbeContext
from gpuprobe.worker.tolerances import DTYPE_TOLERANCE

#: The boundary each probe crosses: its exponent, and whether one dimension crosses it.
BOUNDARIES = {"n31": 31, "n32": 32, "d31": 31, "d32": 32, "g16": 16}

#: Boundaries whose tensors are small: their probes run beside the other lanes, not alone.
SMALL_KINDS = ("g16",)

#: The families of operations, one probe per family and boundary.
GROUPS = (
    "create",
    "elementwise",
    "reduce",
    "scan",
    "norm",
    "softmax",
    "pool",
    "index",
    "sort",
    "attention",
    "copy",
)

#: On a CPU device the boundaries are 2^(31-17) and 2^(32-17): the same code and oracles
#: in milliseconds. ``g16`` runs at 2^8 there.
CPU_BITS_BELOW = 17
CPU_BITS_BELOW_SMALL = 8

#: Row length of the ``n`` shapes: odd and prime, so a boundary falls inside a row (and
#: the row-wise kernels take their general path). Cases named ``.aligned`` use rows of 1024
#: (``Geometry.aligned_cols``), where those kernels take their vectorized paths.
GPU_COLS = 1031
CPU_COLS = 31

#: Relative tolerance of a result in each dtype, in units of the case's scale: the judge's
#: base tolerances (``gpuprobe/worker/tolerances.json``), a few units of the dtype's rounding
#: (2^-24, 2^-11, 2^-8) plus the accumulation in float32 that the half-precision kernels do.
#: An index-width fault is an error of the order of the scale itself (zeros, another
#: element's value), far outside these.
TOLERANCE = DTYPE_TOLERANCE

#: Scans add thousands of partial sums in sequence (the carries between blocks): their
#: float32 tolerance is wider, relative to the running sum of magnitudes. Deliberately not
#: the judge's table: a different bound for a different comparison.
SCAN_TOLERANCE = {"float32": 2e-4, "float16": 8e-3, "bfloat16": 5e-2}

#: Statistics over 2^21 elements and more in one float32 accumulation (the mean and
#: variance of one normalization over a long row or a whole channel, the sum of exponentials
#: of a softmax over 4 million rows) carry a relative error far above the rounding of one
#: value: 9e-4 was seen on a healthy H100 for a layer norm over a 2^31 row. Those cases are
#: judged at 1%; their inputs are stepped (``cases.stepped``), so a misread past the
#: boundary moves the statistics by tens of percent.
LONG_STATS_TOLERANCE = 1e-2

#: A prime code period for position-coded copies: every value is exact in float16 (< 2048),
#: and no offset error of a multiple of 2^31 maps a code to itself.
CODE_PERIOD = 2039

#: The code period of uint8 sources: prime and below 256, so no offset error of a power of
#: two maps a code to itself either.
BYTE_CODE_PERIOD = 251

#: Elements per chunk of a chunked float64 reference (reductions over the whole tensor).
CHUNK = 1 << 24

#: Violations kept as examples.
MAX_EXAMPLES = 5


# ---------------------------------------------------------------------------------------
# Geometry: the shapes of one boundary, on a GPU or scaled down on a CPU.


@dataclass(frozen=True)
class Geometry:
    """The shapes of one boundary as run on this device."""

    kind: str
    #: The boundary's exponent as run (31 or 32 on a GPU).
    bits: int
    #: Row length of the ``n`` shapes.
    cols: int

    @property
    def long(self) -> bool:
        """One dimension crosses the boundary (``d31``, ``d32``, ``g16``), not only the
        element count."""
        return self.kind[0] in "dg"

    @property
    def bound(self) -> int:
        return 1 << self.bits

    @property
    def length(self) -> int:
        """The long dimension of ``d`` shapes, and the element count the ``n`` shapes pass:
        just past the boundary (by 1/64 of it) and odd (``d32``: 2^32 + 2^26 + 1, 4.06 Gi
        elements: 4.1 GiB in uint8 or bool, 8.1 GiB in float16)."""
        return self.bound + (self.bound >> 6) + 1

    @property
    def rows(self) -> int:
        return -(-self.length // self.cols)

    @property
    def total(self) -> int:
        """Elements of the case's main tensor."""
        return self.length if self.long else self.rows * self.cols

    @property
    def marks(self) -> list[int]:
        """The boundaries inside the tensor: 2^31 and, past it, 2^32 (scaled on a CPU)."""
        low = self.bits - (1 if self.kind.endswith("32") else 0)
        return [m for m in (1 << low, 1 << (low + 1)) if m < self.total]

    @property
    def aligned_cols(self) -> int:
        """Row length of the aligned variant (a multiple of 32: the vectorized kernels)."""
        return 1024 if self.cols == GPU_COLS else 32

    def shape(self, aligned: bool = False) -> tuple[int, ...]:
        """The main tensor's shape: ``(rows, cols)`` (``aligned``: rows of
        ``aligned_cols``), or ``(length,)`` for ``d``."""
        if self.long:
            return (self.length,)
        cols = self.aligned_cols if aligned else self.cols
        return (-(-self.length // cols), cols)


def geometry(kind: str, on_gpu: bool) -> Geometry:
    """The geometry of boundary ``kind`` (``BOUNDARIES``) on a GPU or a CPU."""
    bits = BOUNDARIES[kind]
    if on_gpu:
        return Geometry(kind, bits, GPU_COLS)
    below = CPU_BITS_BELOW_SMALL if kind in SMALL_KINDS else CPU_BITS_BELOW
    return Geometry(kind, bits - below, CPU_COLS)


# ---------------------------------------------------------------------------------------
# The case registry.


@dataclass(frozen=True)
class Case:
    """One operation × dtype × direction, run at some boundaries."""

    group: str
    name: str
    kinds: tuple[str, ...]
    #: Device bytes at the case's peak, per element of the geometry's main tensor.
    bytes_per_element: float
    run: Callable[[Scope], None]

    def need_bytes(self, g: Geometry) -> int:
        return int(self.bytes_per_element * g.total)


REGISTRY: list[Case] = []

N_KINDS = ("n31", "n32")
ALL_KINDS = ("n31", "n32", "d31")
#: One dimension past 2^31 and past 2^32.
LONG_KINDS = ("d31", "d32")
#: Every element boundary and both long dimensions: the operations that treat one dimension
#: apart (reductions and scans along it, indexing into it). The others already meet one
#: dimension past 2^32 at ``n32``: the creations, copies and sorts of every element are 1-D
#: there, and contiguous element-wise kernels see one flat dimension whatever the shape.
WIDE_KINDS = ("n31", "n32", "d31", "d32")
GRID_KINDS = ("g16",)


def case(group: str, name: str, per_element: float, kinds: tuple[str, ...] = ALL_KINDS) -> Callable[..., Any]:
    """Registers a case function ``fn(scope)`` of ``group``."""
    if group not in GROUPS:
        raise ValueError(f"unknown width group {group!r}")

    def register(fn: Callable[[Scope], None]) -> Callable[[Scope], None]:
        if any(c.group == group and c.name == name for c in REGISTRY):
            raise ValueError(f"duplicate width case {group}.{name}")
        REGISTRY.append(Case(group, name, tuple(kinds), float(per_element), fn))
        return fn

    return register


# ---------------------------------------------------------------------------------------
# The scope a case runs in: inputs, the operation under test, the checks.


class CaseRefused(Exception):
    """The case does not apply to this build (an op or backend it lacks)."""


class Scope:
    """What a case function gets: the device, the geometry, seeded inputs, the call that
    runs the operation under test, and the checks that count violations."""

    def __init__(self, ctx: ProbeContext, g: Geometry, seed: int) -> None:
        self.ctx = ctx
        self.torch = ctx.torch
        self.device = ctx.device
        self.g = g
        self.seed = seed
        self.rng = random.Random(seed)
        self.case = ""
        self.checked = 0
        self.violations = 0
        self.zero_violations = 0
        self.examples: list[str] = []
        self.case_violations = 0

    # ---- inputs

    def generator(self) -> Any:
        gen = self.torch.Generator(device=self.device)
        gen.manual_seed(self.rng.getrandbits(62))
        return gen

    def randn(self, shape: tuple[int, ...], dtype: str) -> Any:
        return self.torch.randn(shape, dtype=self._dtype(dtype), device=self.device, generator=self.generator())

    def rand(self, shape: tuple[int, ...], dtype: str) -> Any:
        return self.torch.rand(shape, dtype=self._dtype(dtype), device=self.device, generator=self.generator())

    def randint(self, low: int, high: int, shape: tuple[int, ...], dtype: str) -> Any:
        return self.torch.randint(
            low, high, shape, dtype=self._dtype(dtype), device=self.device, generator=self.generator()
        )

    def coded(self, count: int, dtype: str, start: int = 0, period: int = CODE_PERIOD) -> Any:
        """``(start + i) mod period`` for i < count, filled in chunks far below the
        boundary (so the fill itself never depends on wide offsets)."""
        torch = self.torch
        out = torch.empty(count, dtype=self._dtype(dtype), device=self.device)
        for lo in range(0, count, CHUNK):
            hi = min(count, lo + CHUNK)
            out[lo:hi].copy_(torch.arange(start + lo, start + hi, device=self.device) % period)
        return out

    def code_of(self, flat_index: Any, period: int = CODE_PERIOD) -> Any:
        """The expected code (float64) of flat positions (an int64 tensor)."""
        return (flat_index % period).double()

    def _dtype(self, name: str) -> Any:
        return getattr(self.torch, name)

    # ---- where to look

    def spans(self, length: int, unit: int = 1) -> list[tuple[int, int]]:
        """Index ranges along a dimension of ``length`` items of ``unit`` elements each: the
        start, across every boundary, a random place past the first boundary, the end."""
        halo = max(2, 96 // max(1, unit))
        out = [(0, min(length, halo))]
        marks = [m // max(1, unit) for m in self.g.marks if m // max(1, unit) < length]
        for m in marks:
            out.append((max(0, m - halo), min(length, m + halo + 1)))
        if marks and length - marks[0] > 4 * halo:
            r = self.rng.randrange(marks[0] + halo, length - halo)
            out.append((r, min(length, r + halo)))
        out.append((max(0, length - halo), length))
        merged: list[tuple[int, int]] = []
        for lo, hi in sorted(out):
            if merged and lo <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
            else:
                merged.append((lo, hi))
        return merged

    def sentinels(self, length: int, count: int = 3, unit: int = 1) -> list[int]:
        """Single positions (of ``unit`` elements each) past the boundaries, a few random
        ones past the first, and the last one: where planted values go."""
        marks = [m // max(1, unit) for m in self.g.marks if m // max(1, unit) < length]
        picks = {length - 1}
        for m in marks:
            picks.add(min(length - 1, m + 7))
        first = marks[0] if marks else 0
        while len(picks) < count + len(marks) and length - first > 16:
            picks.add(self.rng.randrange(first + 1, length - 1))
        return sorted(picks)

    # ---- the operation under test

    def op(self, method: str, dtype: str, fn: Callable[[], Any], *, direction: str = "forward") -> Any:
        """Runs the big operation (described to fault simulation as op ``width``) and waits
        for it, so an asynchronous fault is raised here."""
        out = fn()
        self.sync()
        if simulate.engine() is None:
            return out
        first = out[0] if isinstance(out, (tuple, list)) else out
        if not isinstance(first, self.torch.Tensor):
            return out
        if not first.is_contiguous():
            # An expanded result (the gradient of a sum) cannot be corrupted in place.
            first = first.contiguous()
        faulted = ops_math.finish("width", method, first, dtype=dtype, variant=self.g.kind, direction=direction)
        if isinstance(out, tuple):
            return (faulted, *out[1:])
        if isinstance(out, list):
            return [faulted, *out[1:]]
        return faulted

    def grad(self, method: str, dtype: str, output: Any, inputs: tuple[Any, ...], grad_output: Any) -> tuple[Any, ...]:
        """The backward pass of ``output`` (the operation under test, direction backward)."""
        torch = self.torch
        grads = self.op(
            method,
            dtype,
            lambda: tuple(torch.autograd.grad(output, inputs, grad_output)),
            direction="backward",
        )
        return tuple(grads)

    def sync(self) -> None:
        if self.ctx.is_gpu:
            self.torch.cuda.synchronize(self.device)

    # ---- checks

    def close(self, what: str, got: Any, ref: Any, scale: Any, dtype: str, tolerance: float | None = None) -> None:
        """``|got - ref| <= tol × scale`` element-wise (``ref``, ``scale`` in float64); equal
        infinities and NaN against NaN agree."""
        torch = self.torch
        tol = TOLERANCE[dtype] if tolerance is None else tolerance
        got64 = got.detach().to(torch.float64)
        ref64 = torch.as_tensor(ref).detach().to(device=got64.device, dtype=torch.float64)
        scale64 = torch.as_tensor(scale, dtype=torch.float64, device=got64.device).abs()
        got64, ref64 = torch.broadcast_tensors(got64, ref64)
        if dtype in ("float16", "bfloat16", "float32"):
            # A value past the dtype's largest finite value rounds to an infinity.
            largest = float(torch.finfo(getattr(torch, dtype)).max)
            ref64 = torch.where(ref64.abs() > largest, ref64.sign() * float("inf"), ref64)
        same = (got64 == ref64) | (torch.isnan(got64) & torch.isnan(ref64))
        diff = (got64 - ref64).abs()
        ok = same | (diff <= tol * scale64 + 1e-30)
        self._record(what, ok, got64, ref64)

    def exact(self, what: str, got: Any, want: Any) -> None:
        torch = self.torch
        got64 = got.detach().to(torch.float64)
        want64 = torch.as_tensor(want).detach().to(device=got64.device, dtype=torch.float64)
        got64, want64 = torch.broadcast_tensors(got64, want64)
        ok = (got64 == want64) | (torch.isnan(got64) & torch.isnan(want64))
        self._record(what, ok, got64, want64)

    def truth(self, what: str, holds: bool, detail: str) -> None:
        """One closed-form fact (a found index, a count)."""
        self.checked += 1
        if not holds:
            self.violations += 1
            self.case_violations += 1
            self._example(f"{what}: {detail}")

    def _record(self, what: str, ok: Any, got: Any, want: Any) -> None:
        torch = self.torch
        ok = ok.reshape(-1)
        got = got.reshape(-1)
        want = want.reshape(-1)
        count = int(ok.numel())
        bad = count - int(ok.sum())
        self.checked += count
        if not bad:
            return
        self.violations += bad
        self.case_violations += bad
        wrong = ~ok
        self.zero_violations += int((wrong & (got == 0) & (want != 0)).sum())
        first = int(torch.nonzero(wrong)[0, 0])
        self._example(
            f"{what}: element {first} of the slice is {float(got[first]):.6g}, expected {float(want[first]):.6g} "
            f"({bad} of {count} differ)"
        )

    def _example(self, text: str) -> None:
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(f"{self.case}: {text}")
