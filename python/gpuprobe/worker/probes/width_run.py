"""width family: operations on tensors past the index-width boundaries.

Kernels that compute element offsets in 32 bits go wrong, or fault, once a tensor passes
2^31 elements (a signed offset wraps negative) or 2^32 (an unsigned one wraps to the start),
or once one dimension passes 2^31. Each probe runs one family of operations (``GROUPS``) at
one boundary (``BOUNDARIES``): ``n31`` and ``n32`` use tensors just past 2^31 and 2^32
elements in total whose dimensions are all small (rows of 1031 elements, planes of 32×32);
``d31`` uses one dimension just past 2^31.

``g16`` is the launch-geometry boundary: one dimension (batch, channels or planes, heads, a
spatial size) just past 2^16 on a small tensor. Kernels that put such a dimension on the
second or third axis of their launch grid (at most 65535 blocks there on CUDA) fail to
launch or skip what lies past it, and kernels that multiply two sizes of that order in 32
bits (an adaptive pool's window bounds: output index × input size) overflow past 2^31 with
tensors of a few megabytes. These probes need little memory and run in a side lane.

Oracles (no CPU reference of the whole tensor: it would take minutes and the host's memory):

- **slice consistency**: the same operation on a small slice taken before, across and past
  each boundary (and at the end, and at a random place past the first boundary), computed
  alone in float64 on the device from the same inputs, must equal that slice of the big
  result within the tolerance of the result's dtype (``TOLERANCE``, relative to a scale that
  each case names: the value itself, the sum of magnitudes a reduction or scan adds up, or
  the row's largest value). A small operation is far from every boundary, and the rest of
  the probe set checks small operations;
- **closed forms** at sentinel indices: ``arange`` is its index, a cumulative sum of ones is
  its position, a planted maximum is found where it was planted, a gradient of ``sum`` is 1,
  a position-coded copy holds its source's code.

Memory is planned from the device's free memory (``mem_get_info``) when the probe starts:
a case whose tensors do not fit is listed as not run (with what it needs); a probe none of
whose cases fit is a SKIP that says how much memory it needs. An out-of-memory error in a
case that was planned to fit is reported the same way, never as a failure.

An exception in a case is told apart by ``faults.is_device_fault``: an argument check that
refuses the size (``... more than INT_MAX elements``) is a documented limitation, listed as
refused; a fault of the stack (an illegal address, a CUDA error) is an ERROR of the probe,
which ends it (the device context is lost; each probe has a worker of its own).

On a CPU device the same cases run with the boundaries scaled down to 2^14 and 2^15
(``CPU_BITS_BELOW``), so CI exercises every case, its oracle and the simulation that plants
the failure the oracle targets (effect ``wrap`` of op ``width``: what a kernel reads when
its offsets wrap).

This module imports no torch at import time: the catalogue and the memory table in
``docs/probes.md`` read ``REGISTRY`` without it.
"""

from __future__ import annotations

import gc
import random
import time
from dataclasses import dataclass
from typing import Any, Callable

from gpuprobe.worker import ops_math, simulate
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe, device_context_problem
from gpuprobe.worker.faults import is_device_fault, is_oom
from gpuprobe.worker.patterns import derive_seed
from gpuprobe.worker.tolerances import DTYPE_TOLERANCE

#: The boundary each probe crosses: its exponent, and whether one dimension crosses it.
BOUNDARIES = {"n31": 31, "n32": 32, "d31": 31, "g16": 16}

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
#: judged at 1%; their inputs are stepped (``width_cases.stepped``), so a misread past the
#: boundary moves the statistics by tens of percent.
LONG_STATS_TOLERANCE = 1e-2

#: A prime code period for position-coded copies: every value is exact in float16 (< 2048),
#: and no offset error of a multiple of 2^31 maps a code to itself.
CODE_PERIOD = 2039

#: Device memory kept free beyond a case's own tensors (workspaces, the float64 references
#: of the slices, library handles), and the fraction of free memory never planned.
RESERVE_BYTES = 1 << 30
RESERVE_FRACTION = 0.04

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
        """One dimension crosses the boundary (``d31``, ``g16``), not only the element
        count."""
        return self.kind[0] in "dg"

    @property
    def bound(self) -> int:
        return 1 << self.bits

    @property
    def length(self) -> int:
        """The long dimension of ``d`` shapes, and the element count the ``n`` shapes pass:
        just past the boundary (by 1/64 of it) and odd."""
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
        low = self.bits - (1 if self.kind == "n32" else 0)
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


def cases_for(group: str, kind: str) -> list[Case]:
    """The cases a probe of ``group`` at boundary ``kind`` runs, in order."""
    return [c for c in REGISTRY if c.group == group and kind in c.kinds]


def probe_need_bytes(group: str, kind: str) -> tuple[int, int]:
    """The (smallest, largest) device memory a case of this probe needs on a GPU."""
    g = geometry(kind, True)
    needs = [c.need_bytes(g) + RESERVE_BYTES for c in cases_for(group, kind)]
    return (min(needs), max(needs)) if needs else (0, 0)


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

    def coded(self, count: int, dtype: str, start: int = 0) -> Any:
        """``(start + i) mod CODE_PERIOD`` for i < count, filled in chunks far below the
        boundary (so the fill itself never depends on wide offsets)."""
        torch = self.torch
        out = torch.empty(count, dtype=self._dtype(dtype), device=self.device)
        for lo in range(0, count, CHUNK):
            hi = min(count, lo + CHUNK)
            out[lo:hi].copy_(torch.arange(start + lo, start + hi, device=self.device) % CODE_PERIOD)
        return out

    def code_of(self, flat_index: Any) -> Any:
        """The expected code (float64) of flat positions (an int64 tensor)."""
        return (flat_index % CODE_PERIOD).double()

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


def _free(torch: Any, on_gpu: bool) -> None:
    """Returns a case's memory to the device. Never raises: after a fault the context may
    be lost, and the fault, not this cleanup, is what the probe reports."""
    gc.collect()
    if on_gpu:
        try:
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - see above
            pass


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


# ---------------------------------------------------------------------------------------
# The probe.


def run_width(ctx: ProbeContext, *, group: str, kind: str) -> ProbeOutput:
    """Runs every case of ``group`` at boundary ``kind`` that fits in the device's memory."""
    torch = ctx.torch
    g = geometry(kind, ctx.is_gpu)
    cases = cases_for(group, kind)
    if not cases:
        raise SkipProbe(f"no {group} operation has a {kind} case")
    if ctx.is_gpu:
        free, _total = torch.cuda.mem_get_info(ctx.device)
        budget = int(free * (1 - RESERVE_FRACTION)) - RESERVE_BYTES
    else:
        free = budget = 1 << 62
    seed = derive_seed(ctx.seed, ctx.probe_id, "width")
    scope = Scope(ctx, g, seed)
    not_run: list[str] = []
    refused: list[str] = []
    ran: list[dict[str, Any]] = []
    for c in cases:
        need = c.need_bytes(g)
        if need > budget:
            not_run.append(f"{c.name}: needs {_gib(need + RESERVE_BYTES)} of device memory, {_gib(free)} free")
            continue
        scope.case = c.name
        scope.case_violations = 0
        # Each case draws from a generator of its own, so it can be rerun alone (``gpuprobe
        # repro`` writes one case into a script).
        scope.rng = random.Random(derive_seed(ctx.seed, ctx.probe_id, f"width.{c.name}"))
        started = time.perf_counter()
        try:
            c.run(scope)
        except CaseRefused as exc:
            refused.append(f"{c.name}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - sorted into refusals, memory and faults below
            message = f"{type(exc).__name__}: {str(exc).strip()}"
            first_line = message.splitlines()[0][:300]
            if is_oom(torch, exc):
                not_run.append(f"{c.name}: out of memory although planned to fit ({_gib(need)} planned): {first_line}")
                _free(torch, ctx.is_gpu)
                continue
            if not is_device_fault(message) or type(exc).__name__ == "NotImplementedError":
                refused.append(f"{c.name}: {first_line}")
                _free(torch, ctx.is_gpu)
                continue
            lost = device_context_problem(torch, ctx.device) if ctx.is_gpu else None
            if lost is not None:
                # A sticky fault (an illegal address): nothing more can run in this process.
                ctx.restart_worker = f"{c.name} faulted"
                raise RuntimeError(f"{c.name} on {_describe(g)} faulted: {first_line} ({_before(ran)})") from exc
            # A fault the context survived (an internal assert, a launch the driver refused):
            # a finding of this case; the other cases still run.
            scope.truth("the operation runs", False, f"faulted: {first_line}")
        finally:
            _free(torch, ctx.is_gpu)
        ran.append(
            {
                "case": c.name,
                "violations": scope.case_violations,
                "seconds": round(time.perf_counter() - started, 3),
                "planned_gib": round(need / 2**30, 2),
            }
        )
    if not ran:
        reasons = not_run + refused
        if not_run and not refused:
            smallest = min(c.need_bytes(g) for c in cases) + RESERVE_BYTES
            raise SkipProbe(
                f"needs at least {_gib(smallest)} of free device memory for its smallest case; {_gib(free)} free"
            )
        raise SkipProbe("no case could run: " + "; ".join(reasons[:4]))
    notes = [f"not run: {text}" for text in not_run] + [f"refused: {text}" for text in refused]
    measurement: dict[str, Any] = {
        "kind": "invariant",
        "property": (
            f"{group} operations on {_describe(g)} equal the same operations on slices across and past the "
            "boundary, and closed-form values at sentinel indices"
        ),
        "checked": scope.checked,
        "violations": scope.violations,
        "zero_violations": scope.zero_violations,
    }
    if scope.examples:
        measurement["example"] = " | ".join(scope.examples)
    metrics: dict[str, Any] = {
        "boundary": kind,
        "elements": g.total,
        "cases_run": len(ran),
        "cases_not_run": len(not_run),
        "cases_refused": len(refused),
        "free_device_gib": round(free / 2**30, 1) if ctx.is_gpu else None,
        "cases": ran,
    }
    return ProbeOutput(measurement=measurement, metrics=metrics, notes=notes)


def _before(ran: list[dict[str, Any]]) -> str:
    """What the cases that ran before a fault found: the failing ones first (their findings
    would be lost with the probe's measurement otherwise), then the passing ones."""
    failed = [f"{r['case']} ({r['violations']} violations)" for r in ran if r["violations"]]
    passed = [r["case"] for r in ran if not r["violations"]]
    parts = []
    if failed:
        parts.append("cases that failed before it: " + ", ".join(failed))
    parts.append("cases that passed before it: " + (", ".join(passed) or "none"))
    return "; ".join(parts)


def _describe(g: Geometry) -> str:
    if g.kind in SMALL_KINDS:
        return f"one dimension of {g.length} (past 2^{g.bits}) in small tensors"
    if g.long:
        return f"one dimension of {g.length} elements (past 2^{g.bits})"
    return f"{g.total} elements in rows of {g.cols} (past 2^{g.bits})"


# The case functions register themselves when their modules are imported (``width_cases``,
# which imports ``width_grid`` at its end; both import this one for ``case`` and ``Scope``;
# nothing in them needs torch at import time).
from gpuprobe.worker.probes import width_cases  # noqa: E402,F401


def memory_markdown() -> str:
    """The table of docs/probes.md ("width"): per probe, its cases and the device memory
    its smallest and largest case need on a GPU (a test keeps the page in step; regenerate
    with ``python -m gpuprobe.worker.probes.width_run``)."""
    lines = [
        "| probe | cases | smallest case needs | largest case needs | cases over 76 GiB (not run on an 80 GB GPU) |",
        "|---|---|---|---|---|",
    ]
    for group in GROUPS:
        for kind in BOUNDARIES:
            cases = cases_for(group, kind)
            if not cases:
                continue
            g = geometry(kind, True)
            low, high = probe_need_bytes(group, kind)
            over = [c.name for c in cases if c.need_bytes(g) + RESERVE_BYTES > 76 * 2**30]
            lines.append(
                f"| `width.{group}.{kind}` | {len(cases)} | {low / 2**30:.1f} GiB | {high / 2**30:.1f} GiB | "
                f"{', '.join(f'`{name}`' for name in over) or '-'} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(memory_markdown(), end="")
