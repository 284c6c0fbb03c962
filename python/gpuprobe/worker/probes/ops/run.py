"""Ops family implementation (see ``ops_specs`` for the catalog and id grammar).

Every probe builds its inputs on the host from the plan seed, stages them on the device under
test, runs the operation under test through ``gpuprobe.worker.ops_math`` (so fault simulation
can break it), reads the result back and compares on the host:

- math (reductions, elementwise arithmetic, GEMMs) against a float64 reference computed on the
  CPU from the very same (already rounded) inputs, as ``CompareStats`` for the ``tolerance``
  rule: ``max_rel_err`` is the normwise relative error ‖out − ref‖₂ / ‖ref‖₂ in float64
  (the largest over the probe's trials), ``mismatches`` counts elements off by more than
  ``GROSS`` times the tolerance times max(|ref|, rms(ref)) (what the report calls grossly
  wrong), and the counts of zeros, NaN/Inf and untouched canaries among them let the judge
  classify a failure;
- pure data movement and selection (reshapes, ``where``, ``amax``, boolean reductions) bit for
  bit (``bit_exact``).

``ToleranceAccumulator`` is shared with the nn family.

What a repro script restates as data (``repro.families.ops``) is decided by functions of
their own here, which both call: the seed tag of a trial (``trial_tag``), the GEMM shapes run
on a device (``gemm_shapes``), a reduction's value range (``reduce_range``) and the
elementwise trials' operands (``elementwise_trials``).
"""

from __future__ import annotations

import contextlib
import gc
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpuprobe.worker import ops, ops_math
from gpuprobe.worker.compare import CompareAccumulator, CompareCounts, bits_of, format_value
from gpuprobe.worker.context import ProbeContext, ProbeOutput, require_memory
from gpuprobe.worker.patterns import canary_value, fill_canary, pattern
from gpuprobe.worker.probes.precision import tf32_mode

# The judge's base tolerances (which the probes' ``tolerance`` parameters are computed from)
# live in ``gpuprobe/worker/tolerances.json``, read through ``gpuprobe.worker.tolerances``.

#: Significand digits (implicit bit included) and the exponent of the smallest subnormal.
_DIGITS = {"float32": 24, "float16": 11, "bfloat16": 8, "float64": 53}
_MIN_SUB_EXP = {"float32": -149, "float16": -24, "bfloat16": -133, "float64": -1074}

#: Elements compared per step (bounds the float64 temporaries).
CHUNK = 1 << 22

#: An element is grossly wrong (a ``mismatch``) when its error exceeds this many times the
#: tolerance, relative to max(|ref|, rms(ref)). The judge's bound is normwise; single elements
#: of honest results spread around it, and over 10^6-10^8 elements their tails cross 1x the
#: bound (a healthy H100 had 1-5 such elements in causal attention and TF32 GEMMs), so the
#: line sits 4x further out. Zeros still count wherever |ref| > 4 x bound x rms: every bound
#: in the catalog is below 0.25, so 4 x bound < 1.
GROSS = 4.0


def dtype_of(torch: Any, name: str) -> Any:
    """The torch dtype called ``name`` (``float32``, ...)."""
    return getattr(torch, name)


# ---------------------------------------------------------------------------------------------
# Tolerance comparison.


class ToleranceAccumulator(CompareCounts):
    """``CompareStats`` for the ``tolerance`` rule, accumulated over trials.

    ``tolerance`` is the bound the judge applies (the dtype's tolerance times the probe's
    scale). Per trial it records the normwise relative error ‖out − ref‖₂ / ‖ref‖₂ over the
    elements where both are finite (float64 arithmetic); ``max_rel_err`` is the largest over
    trials. A reference of norm zero gives 0 when the output matches it and 1 otherwise. An
    element whose reference is NaN or ±Inf must hold the same special value: one that does not
    counts as a mismatch and makes its trial's error at least 1 (100 %).

    Per element, for the judge's classification:

    - ``mismatches``: finite outputs off by more than ``GROSS`` × ``tolerance`` ×
      max(|ref|, rms(ref)) (rms over the chunk or block the element is compared in), NaN/Inf
      where the reference is finite, and wrong special values;
    - ``zeros_where_nonzero``, ``nonfinite_where_finite``, ``unchanged`` (still the ``canary``
      bit pattern) among them; ``all_zero_trials``: failed trials whose output is all zero.

    With ``ulp_dtype`` set, ``max_ulp`` reports the largest distance in units in the last place
    of that dtype (report only; the judge does not use it)."""

    def __init__(self, torch: Any, tolerance: float, *, ulp_dtype: str | None = None) -> None:
        super().__init__(torch)
        self.tolerance = float(tolerance)
        self.ulp_dtype = ulp_dtype
        self.max_abs_err = 0.0
        self.max_rel_err = 0.0
        self.max_ulp: int | None = None

    # -- one trial, possibly in chunks ---------------------------------------------------------

    def add(self, out: Any, ref: Any, *, canary: int | None = None, valid: Any = None) -> float:
        """Compares one trial (``out`` any float dtype on the CPU, ``ref`` float64, same element
        count); ``valid`` selects the elements to compare. Returns the trial's relative error."""
        out_flat, ref_flat = out.reshape(-1), ref.reshape(-1)
        if out_flat.numel() != ref_flat.numel():
            return self._wrong_shape(out_flat.numel(), ref_flat.numel())
        valid_flat = None if valid is None else valid.reshape(-1)
        trial = _TrialSums(self.torch, 1)
        total = ref_flat.numel()
        for start in range(0, total, CHUNK):
            end = min(total, start + CHUNK)
            part = None if valid_flat is None else valid_flat[start:end]
            self._update(trial, out_flat[start:end], ref_flat[start:end], canary, part, start, None)
        return self._close(trial)

    def add_chunks(self, pairs: Iterator[tuple[Any, Any, int]], *, canary: int | None = None) -> float:
        """One trial given as ``(out_chunk, ref_chunk, flat_offset)`` pieces (outputs too large
        for one float64 reference)."""
        trial = _TrialSums(self.torch, 1)
        for out_chunk, ref_chunk, offset in pairs:
            o, r = out_chunk.reshape(-1), ref_chunk.reshape(-1)
            for start in range(0, o.numel(), CHUNK):
                end = min(o.numel(), start + CHUNK)
                self._update(trial, o[start:end], r[start:end], canary, None, offset + start, None)
        return self._close(trial)

    # -- many small trials (blocks) ------------------------------------------------------------

    def add_blocks(self, out: Any, ref: Any, block: int, *, canary: int | None = None) -> float:
        """Compares ``out`` with ``ref`` in blocks of ``block`` elements, each its own trial, so
        that one wrong element weighs against its block's norm rather than the whole output's
        (elementwise probes). Returns the largest block error."""
        out_flat, ref_flat = out.reshape(-1), ref.reshape(-1)
        if out_flat.numel() != ref_flat.numel():
            return self._wrong_shape(out_flat.numel(), ref_flat.numel())
        total = ref_flat.numel()
        worst = 0.0
        # Whole blocks per step, so a block never straddles two steps.
        step = max(block, (CHUNK // block) * block)
        for start in range(0, total, step):
            end = min(total, start + step)
            nseg = (end - start + block - 1) // block
            trial = _TrialSums(self.torch, nseg)
            self._update(trial, out_flat[start:end], ref_flat[start:end], canary, None, start, block)
            worst = max(worst, self._close(trial))
        return worst

    # -- internals -----------------------------------------------------------------------------

    def _wrong_shape(self, found: int, expected: int) -> float:
        self.trials += 1
        self.failed_trials += 1
        self.n += expected
        self.mismatches += expected
        self.max_rel_err = max(self.max_rel_err, 1.0)
        if self.first_mismatch is None:
            self.first_mismatch = {
                "index": 0,
                "trial": self.trials - 1,
                "expected": f"{expected} elements",
                "found": f"{found} elements",
            }
        return 1.0

    def _update(
        self, trial: _TrialSums, out: Any, ref: Any, canary: int | None, valid: Any, offset: int, block: int | None
    ) -> None:
        """Adds one chunk to ``trial``: one segment (``block`` None) or segments of ``block``
        elements. Works on a (segments × length) float64 view, zero-padded at the end (padding
        adds nothing to any sum)."""
        torch = self.torch
        f64 = torch.float64
        if valid is not None:
            out, ref = out[valid], ref[valid]
        count = out.numel()
        if count == 0:
            return
        nseg, length = (1, count) if block is None else ((count + block - 1) // block, block)
        pad = nseg * length - count
        o = out.to(f64)
        r = ref.to(f64)
        if pad:
            o = torch.cat([o, torch.zeros(pad, dtype=f64)])
            r = torch.cat([r, torch.zeros(pad, dtype=f64)])
        o2, r2 = o.view(nseg, length), r.view(nseg, length)
        sizes = torch.full((nseg,), float(length), dtype=f64)
        sizes[-1] -= pad
        diff = o2 - r2
        err2 = (diff * diff).sum(1)
        ref2 = (r2 * r2).sum(1)
        nonfinite = special = None
        if bool(torch.isfinite(err2).all()) and bool(torch.isfinite(ref2).all()):
            # The common case: every element finite (a NaN/Inf anywhere would make a sum
            # non-finite; so would squares past 1e154, which take the careful path below).
            ref_values = r2
            finite_count = sizes
        else:
            r_finite, o_finite = torch.isfinite(r2), torch.isfinite(o2)
            both = r_finite & o_finite
            diff = torch.where(both, diff, torch.zeros_like(diff))
            ref_values = torch.where(r_finite, r2, torch.zeros_like(r2))
            err2 = (diff * diff).sum(1)
            ref2 = (ref_values * ref_values).sum(1)
            finite_count = r_finite.sum(1).to(f64)
            nonfinite = r_finite & ~o_finite
            special = ~r_finite & ~((torch.isnan(o2) & torch.isnan(r2)) | (o2 == r2))
        abs_diff = diff.abs_()
        rms = torch.sqrt(ref2 / finite_count.clamp(min=1.0))
        bound = torch.maximum(ref_values.abs(), rms.unsqueeze(1)).mul_(GROSS * self.tolerance)
        wrong = abs_diff > bound
        del bound
        wrong_finite = wrong
        if nonfinite is not None:
            wrong = wrong | nonfinite | special
            trial.nonfinite += nonfinite.sum(1).to(f64)
            trial.special += special.sum(1).to(f64)
        trial.n += sizes
        trial.err2 += err2
        trial.ref2 += ref2
        self.max_abs_err = max(self.max_abs_err, float(abs_diff.max()))
        if self.ulp_dtype is not None:
            self._track_ulps(abs_diff, ref_values)
        if not bool(wrong.any()):
            # Nothing wrong here: the chunk does not make its trial an all-zero one (an
            # all-zero output against a non-zero reference always has wrong elements).
            trial.out_nonzero += sizes
            trial.ref_nonzero += sizes
            return
        trial.out_nonzero += (o2 != 0).sum(1).to(f64)
        trial.ref_nonzero += (r2 != 0).sum(1).to(f64)
        trial.mismatches += wrong.sum(1).to(f64)
        trial.zeros += (wrong_finite & (o2 == 0) & (r2 != 0)).sum(1).to(f64)
        if canary is not None:
            bits = bits_of(torch, out.contiguous()).to(torch.int64)
            if pad:
                bits = torch.cat([bits, torch.zeros(pad, dtype=torch.int64)])
            held = wrong_finite & (bits.view(nseg, length) == canary)
            if pad:
                held.view(-1)[count:] = False
            trial.unchanged += held.sum(1).to(f64)
        if self.first_mismatch is None:
            at = int(wrong.reshape(-1).nonzero()[0, 0])
            local = at if valid is None else int(valid.nonzero()[at, 0])
            self.first_mismatch = {
                "index": offset + local,
                "trial": self.trials + (at // length),
                "expected": f"{float(r[at])!r}",
                "found": format_value(torch, out, at),
            }

    def _track_ulps(self, abs_diff: Any, ref_values: Any) -> None:
        torch = self.torch
        name = self.ulp_dtype or "float64"
        _mantissa, exponent = torch.frexp(ref_values)
        ulp_exp = torch.clamp(exponent - _DIGITS[name], min=_MIN_SUB_EXP[name]).to(torch.float64)
        worst = float((abs_diff / torch.exp2(ulp_exp)).max())
        worst_int = math.ceil(worst) if math.isfinite(worst) else 0
        self.max_ulp = worst_int if self.max_ulp is None else max(self.max_ulp, worst_int)

    def _close(self, t: _TrialSums) -> float:
        """Folds finished trials (one per segment) into the totals; returns the largest
        relative error among them."""
        torch = self.torch
        present = t.n > 0
        if not bool(present.any()):
            return 0.0
        safe_ref2 = torch.where(t.ref2 > 0, t.ref2, torch.ones_like(t.ref2))
        rel = torch.where(t.ref2 > 0, torch.sqrt(t.err2 / safe_ref2), (t.err2 != 0).to(torch.float64))
        rel = torch.where(t.special > 0, rel.clamp(min=1.0), rel)
        rel = torch.where(present, rel, torch.zeros_like(rel))
        # Errors too large for float64 squares still have to fail, in representable JSON.
        rel = torch.nan_to_num(rel, nan=1e300, posinf=1e300)
        failed = present & ((t.mismatches > 0) | (rel > self.tolerance))
        self.trials += int(present.sum())
        self.n += int(t.n.sum())
        self.mismatches += int(t.mismatches.sum())
        self.zeros_where_nonzero += int(t.zeros.sum())
        self.nonfinite_where_finite += int(t.nonfinite.sum())
        self.unchanged += int(t.unchanged.sum())
        self.failed_trials += int(failed.sum())
        self.all_zero_trials += int((failed & (t.out_nonzero == 0) & (t.ref_nonzero > 0)).sum())
        worst = float(rel.max())
        self.max_rel_err = max(self.max_rel_err, worst)
        return worst

    def extra_stats(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"max_abs_err": self.max_abs_err, "max_rel_err": self.max_rel_err}
        if self.max_ulp is not None:
            extra["max_ulp"] = self.max_ulp
        return extra


class _TrialSums:
    """Running sums of one trial, or of ``nseg`` block trials at once."""

    FIELDS = (
        "n",
        "err2",
        "ref2",
        "mismatches",
        "zeros",
        "nonfinite",
        "special",
        "unchanged",
        "out_nonzero",
        "ref_nonzero",
    )

    def __init__(self, torch: Any, nseg: int) -> None:
        for name in self.FIELDS:
            setattr(self, name, torch.zeros(nseg, dtype=torch.float64))


# ---------------------------------------------------------------------------------------------
# Shared helpers.


def gemm_scale(k: int) -> float:
    """Tolerance scale for a sum of ``k`` products (GEMM, convolution, attention): the
    float32 accumulation error of a k-term sum grows like √k·u₃₂/2 (random rounding); the base
    tolerances keep a margin of 10× or more over it up to k = 256, and the scale grows with √k
    beyond."""
    return max(1.0, math.sqrt(k / 256.0))


def precision_context(torch: Any, rule_dtype: str, compute_dtype: str) -> Any:
    """TF32 on for probes judged as ``tf32``, off for the other float32 probes."""
    if compute_dtype != "float32":
        return contextlib.nullcontext()
    return tf32_mode(torch, rule_dtype == "tf32")


def tf32_notes(ctx: ProbeContext, rule_dtype: str) -> list[str]:
    """Notes for TF32 probes on devices where TF32 does not apply."""
    if rule_dtype != "tf32" or ctx.is_gpu:
        return []
    return [
        "TF32 applies to GPU tensor cores only: on cpu this computed plain float32 (judged with the tf32 tolerance)"
    ]


def randn(ctx: ProbeContext, shape: Any, dtype: str, tag: str, std: float = 1.0) -> Any:
    """Seeded normal values on the host, rounded to ``dtype``."""
    torch = ctx.torch
    values = torch.randn(tuple(shape), generator=ctx.cpu_generator(tag), dtype=torch.float32)
    if std != 1.0:
        values.mul_(std)
    return values.to(dtype_of(torch, dtype))


def uniform(ctx: ProbeContext, shape: Any, low: float, high: float, dtype: str, tag: str) -> Any:
    """Seeded uniform values on [low, high) on the host, rounded to ``dtype``."""
    torch = ctx.torch
    values = torch.rand(tuple(shape), generator=ctx.cpu_generator(tag), dtype=torch.float32)
    values.mul_(high - low).add_(low)
    return values.to(dtype_of(torch, dtype))


def release(ctx: ProbeContext) -> None:
    """Returns cached device memory after a large probe."""
    gc.collect()
    if ctx.is_gpu:
        ctx.torch.cuda.empty_cache()


def device_canary(ctx: ProbeContext, shape: Any, dtype: str) -> Any:
    """A device tensor filled with ``dtype``'s canary (finite, non-zero, outside the data)."""
    torch = ctx.torch
    return fill_canary(torch, torch.empty(tuple(shape), dtype=dtype_of(torch, dtype), device=ctx.device))


def cpu_scaled(ctx: ProbeContext, gpu: Any, cpu: Any) -> Any:
    """``gpu`` on a GPU, ``cpu`` when the device under test is the CPU (where the probes test
    themselves and large sizes only cost time); probes that use it say so in their metrics."""
    return gpu if ctx.is_gpu else cpu


def scaled_metrics(ctx: ProbeContext) -> dict[str, Any]:
    """The metric that says a probe ran with its CPU sizes."""
    return {} if ctx.is_gpu else {"scaled_down_on_cpu": True}


def truth(torch: Any, t: Any) -> Any:
    """A read-back bool tensor as canonical bools (any non-zero byte is True), so a kernel
    that leaves garbage in a bool output reads as True, as it would to the program."""
    return t.contiguous().view(torch.uint8) != 0


# ---------------------------------------------------------------------------------------------
# Boolean reductions (RKB-011).

#: Sizes of the known-input cases: around 32/128/1024 boundaries and just past powers of two.
BOOL_SIZES = (1, 31, 32, 33, 127, 128, 129, 1023, 1024, 1025, 4097, (1 << 16) + 64, (1 << 20) + 1)


def _bool_known_cases(method: str) -> list[tuple[str, list[int], bool, int | None]]:
    """(label, shape, base value, flipped index or None) for the known-input cases."""
    cases: list[tuple[str, list[int], bool, int | None]] = [
        ("[[False, False]]", [1, 2], False, None),  # the RKB-011 report
        ("[[True, True]]", [1, 2], True, None),
        ("[[False, True]]", [1, 2], False, 1),
    ]
    for n in BOOL_SIZES:
        for base in (False, True):
            cases.append((f"{n} all {base}", [n], base, None))
            for position in sorted({0, n // 2, n - 1}):
                cases.append((f"{n} all {base} but [{position}]", [n], base, position))
    return cases


def run_bool_reduce(ctx: ProbeContext, *, method: str, variant: str) -> ProbeOutput:
    """``all()``/``any()`` of bool tensors with known contents, compared with the answer
    computed by counting (``known``: whole-tensor reductions of all-False, all-True and
    single-flip inputs; ``dim``: reductions over dimensions of 2-D/3-D inputs whose rows are
    all-True, all-False or single-flip, including non-contiguous inputs)."""
    torch = ctx.torch
    acc = CompareAccumulator(torch)
    labels: list[str] = []
    if variant == "known":
        for label, shape, base, flip in _bool_known_cases(method):
            host = torch.full(tuple(shape), base, dtype=torch.bool)
            if flip is not None:
                host.view(-1)[flip] = not base
            expected = _count_truth(torch, host, method, None)
            got = ops_math.reduce(method, ops.stage(host, ctx.device))
            acc.add(truth(torch, ops.readback(got)).reshape(-1), expected.reshape(-1))
            labels.append(label)
    else:
        for label, host, dim, keepdim, transpose in _bool_dim_cases(torch, method):
            source = host.t() if transpose else host
            expected = _count_truth(torch, source, method, dim, keepdim)
            staged = ops.stage(host, ctx.device)
            staged = staged.t() if transpose else staged
            got = ops_math.reduce(method, staged, dim=dim, keepdim=keepdim)
            result = truth(torch, ops.readback(got))
            if tuple(result.shape) != tuple(expected.shape):
                ctx.notes.append(f"{label}: shape {tuple(result.shape)}, expected {tuple(expected.shape)}")
            acc.add(result.reshape(-1), expected.reshape(-1))
            labels.append(label)
    metrics = {"method": method, "cases": len(labels), "largest": max(BOOL_SIZES)}
    stats = acc.stats()
    if "first_mismatch" in stats:
        stats["first_mismatch"]["expected"] += f" (case {labels[stats['first_mismatch']['trial']]})"
    return ProbeOutput(stats, metrics)


def _count_truth(torch: Any, host: Any, method: str, dim: Any, keepdim: bool = False) -> Any:
    """all/any by counting True elements (an independent path from the reduction kernels)."""
    counts = host.to(torch.int64)
    if dim is None:
        total, size = counts.sum(), host.numel()
    else:
        total = counts.sum(dim=dim, keepdim=keepdim)
        dims = dim if isinstance(dim, tuple) else (dim,)
        size = math.prod(host.shape[d] for d in dims)
    return (total == size) if method == "all" else (total > 0)


def _bool_dim_cases(torch: Any, method: str) -> list[tuple[str, Any, Any, bool, bool]]:
    def rows_pattern(rows: int, cols: int) -> Any:
        # all(): rows all True, or with one False; any(): rows all False, or with one True;
        # and for both, some rows of the other kind.
        base = method == "all"
        t = torch.full((rows, cols), base, dtype=torch.bool)
        for i in range(rows):
            kind = i % 4
            if kind == 1:
                t[i, (i * 7) % cols] = not base
            elif kind == 2:
                t[i, :] = not base
            elif kind == 3:
                t[i, cols - 1] = not base
        return t

    square = rows_pattern(1025, 257)
    wide = rows_pattern(1024, 4097)
    cube = rows_pattern(8 * 1025, 33).reshape(8, 1025, 33)
    return [
        ("1025x257 dim=1", square, 1, False, False),
        ("1025x257 dim=0", square, 0, False, False),
        ("1025x257 dim=1 keepdim", square, 1, True, False),
        ("1024x4097 dim=1", wide, 1, False, False),
        ("1025x257 transposed dim=0", square, 0, False, True),
        ("8x1025x33 dim=(0, 2)", cube, (0, 2), False, False),
        ("8x1025x33 dim=2", cube, 2, False, False),
    ]


def run_bool_reduce_huge(ctx: ProbeContext, *, method: str, numel: int, flips: list[int]) -> ProbeOutput:
    """``all()``/``any()`` over more than 2^31 bools: the uniform tensor, then one element
    flipped at each position in ``flips`` (past the 2^31 index boundary) in turn."""
    torch = ctx.torch
    require_memory(ctx, 1 << 20, numel)
    base = method == "all"
    x = torch.full((numel,), base, dtype=torch.bool, device=ctx.device)
    acc = CompareAccumulator(torch)
    expected_uniform = torch.tensor([base])
    acc.add(truth(torch, ops.readback(ops_math.reduce(method, x))).reshape(-1), expected_uniform)
    for position in flips:
        x[position] = not base
        got = truth(torch, ops.readback(ops_math.reduce(method, x))).reshape(-1)
        acc.add(got, torch.tensor([not base]))
        x[position] = base
    del x
    release(ctx)
    return ProbeOutput(acc.stats(), {"method": method, "elements": numel, "flips": ",".join(str(p) for p in flips)})


# ---------------------------------------------------------------------------------------------
# Sum / mean / amax.


def _reduce_cases(ctx: ProbeContext, variant: str) -> list[tuple[list[int], Any, bool]]:
    """(shape, dim, transposed) cases: rows ≥ 1024, rows of 2^k + 1 (≡ 1 mod 32) and 2^k + 64
    (≡ 64 mod 128) elements, a reduction over dimension 0, a long 1-D reduction, 3-D
    reductions over two dimensions and a non-contiguous (transposed) input. On the CPU the
    rows are shorter (still 1024 and more of them)."""
    if ctx.is_gpu:
        cases: list[tuple[list[int], Any, bool]] = [
            ([1024, 4097], 1, False),
            ([4097, 1024], 0, False),
            ([(1 << 20) + 1], None, False),
        ]
        more = [
            ([1025, 2112], 1, False),
            ([64, 1025, 33], (0, 2), False),
            ([2049, 513], 1, True),
            ([(1 << 16) + 64], None, False),
        ]
    else:
        cases = [([1024, 257], 1, False), ([257, 1024], 0, False), ([(1 << 16) + 1], None, False)]
        more = [
            ([1025, 192], 1, False),
            ([16, 1025, 33], (0, 2), False),
            ([513, 129], 1, True),
            ([(1 << 12) + 64], None, False),
        ]
    return cases + more if variant == "standard" else cases


def trial_tag(trial: int) -> str:
    """The seed tag of a GEMM's or a reduction's trial ``trial`` (a GEMM's operands append
    ``a``, ``b``, ``bias``)."""
    return f"case{trial}"


def reduce_range(shape: list[int], dim: Any, dtype: str) -> tuple[float, float]:
    """A reduction's input range [-1, 2)·c, mean 0.5·c: the sums are well conditioned
    (Σ|x| / |Σx| ≈ 1.7), so the float64 reference measures the kernel, not cancellation; for
    float16, c keeps every sum below 2^12 (far from overflow at 65504)."""
    if dim is None:
        terms = math.prod(shape)
    else:
        dims = dim if isinstance(dim, tuple) else (dim,)
        terms = math.prod(shape[d] for d in dims)
    scale = 1.0
    if dtype == "float16":
        scale = min(1.0, 4096.0 / (0.5 * terms))
    return -1.0 * scale, 2.0 * scale


def _reduce_input(ctx: ProbeContext, shape: list[int], dim: Any, dtype: str, tag: str) -> Any:
    """Seeded values on the reduction's range (``reduce_range``)."""
    low, high = reduce_range(shape, dim, dtype)
    return uniform(ctx, shape, low, high, dtype, tag)


def run_reduce(ctx: ProbeContext, *, method: str, dtype: str, variant: str, tolerance: float) -> ProbeOutput:
    """``sum``/``mean`` over threshold shapes, each case a trial, against float64."""
    torch = ctx.torch
    acc = ToleranceAccumulator(torch, tolerance)
    elements = 0
    cases = _reduce_cases(ctx, variant)
    worst, worst_case = -1.0, 0
    for trial, (shape, dim, transposed) in enumerate(cases):
        host = _reduce_input(ctx, shape, dim, dtype, trial_tag(trial))
        source = host.t() if transposed else host
        ref = (
            getattr(source.to(torch.float64), method)()
            if dim is None
            else getattr(source.to(torch.float64), method)(dim=dim)
        )
        staged = ops.stage(host, ctx.device)
        staged = staged.t() if transposed else staged
        got = ops.readback(ops_math.reduce(method, staged, dim=dim))
        error = acc.add(got, ref)
        if error > worst:
            worst, worst_case = error, trial
        elements += host.numel()
    metrics = {
        "method": method,
        "dtype": dtype,
        "cases": len(cases),
        "elements": elements,
        # The case with the largest error (its index): what a repro script rebuilds.
        "worst_case": worst_case,
        **scaled_metrics(ctx),
    }
    return ProbeOutput(acc.stats(), metrics)


def run_amax(ctx: ProbeContext, *, dtype: str) -> ProbeOutput:
    """``amax`` selects an element, so it is compared bit for bit (NaN propagates: a row
    holding a NaN must give NaN)."""
    torch = ctx.torch
    acc = CompareAccumulator(torch)
    cols, n = cpu_scaled(ctx, (4097, (1 << 20) + 1), (257, (1 << 16) + 1))
    cases: list[tuple[list[int], Any]] = [([1024, cols], 1), ([cols, 1024], 0), ([n], None), ([1025, 257], 1)]
    for trial, (shape, dim) in enumerate(cases):
        host = randn(ctx, shape, dtype, f"case{trial}")
        if trial == 3:
            host[7, 100] = float("nan")
            host[1024, 0] = float("nan")
        wide = host.to(torch.float64)
        ref = (wide.amax() if dim is None else wide.amax(dim=dim)).to(host.dtype)
        got = ops.readback(ops_math.reduce("amax", ops.stage(host, ctx.device), dim=dim))
        acc.add(got.reshape(-1), ref.reshape(-1), nan_equal=True)
    return ProbeOutput(acc.stats(), {"method": "amax", "dtype": dtype, "cases": len(cases), **scaled_metrics(ctx)})


def run_sum_huge(ctx: ProbeContext, *, dtype: str, rows: int, cols: int, tolerance: float) -> ProbeOutput:
    """Row sums of a (rows × cols) tensor of more than 2^31 elements. The rows repeat a block
    of 4096 random rows; 2^31 is not a multiple of cols × 4096, so an index that wraps at 2^31
    reads other values."""
    torch = ctx.torch
    itemsize = 2 if dtype != "float32" else 4
    nbytes = rows * cols * itemsize
    require_memory(ctx, nbytes + (1 << 30), nbytes + rows * itemsize)
    block_rows = 4096
    block = _reduce_input(ctx, [block_rows, cols], 1, dtype, "block")
    host = block.repeat((rows + block_rows - 1) // block_rows, 1)[:rows].contiguous()
    staged = ops.stage(host, ctx.device)
    del host
    got = ops.readback(ops_math.reduce("sum", staged, dim=1))
    del staged
    block_ref = block.to(torch.float64).sum(dim=1)
    ref = block_ref.repeat((rows + block_rows - 1) // block_rows)[:rows]
    acc = ToleranceAccumulator(torch, tolerance)
    acc.add(got, ref)
    release(ctx)
    return ProbeOutput(
        acc.stats(), {"method": "sum", "dtype": dtype, "shape": f"{rows}x{cols}", "elements": rows * cols}
    )


# ---------------------------------------------------------------------------------------------
# Elementwise.

#: Elementwise comparisons weigh each element against a block of this many (see add_blocks).
BLOCK = 1024


def _torch_fn(torch: Any, method: str) -> Any:
    return {
        "add": torch.add,
        "sub": torch.sub,
        "mul": torch.mul,
        "div": torch.div,
        "exp": torch.exp,
        "maximum": torch.maximum,
        "minimum": torch.minimum,
    }[method]


def _operand_ranges(method: str) -> tuple[tuple[float, float], tuple[float, float]]:
    """Input ranges: divisors away from zero (|b| ≥ 0.5), exp arguments where every dtype's
    result is finite and normal."""
    if method == "div":
        return (-2.0, 2.0), (0.5, 2.0)
    if method == "exp":
        return (-8.0, 8.0), (0.0, 1.0)
    return (-2.0, 2.0), (-2.0, 2.0)


@dataclass(frozen=True)
class Operand:
    """One tensor operand of an elementwise trial (``elementwise_trials``): seeded uniform
    values of ``shape`` on the operand's range (``_operand_ranges``)."""

    shape: list[int]
    #: The ``cpu_generator`` tag of its values.
    tag: str
    #: The tag of its random signs (a divisor of ``div``), or None.
    sign_tag: str | None = None
    #: How the probe views it: None (as built), ``t`` (transposed), ``every_third`` (a
    #: strided view of every third element).
    view: str | None = None


@dataclass(frozen=True)
class ElementwiseTrial:
    """One trial of an elementwise probe: its label (the ``cases`` metric) and operands; b is
    None for a unary op and a Python float for a scalar operand."""

    label: str
    a: Operand
    b: Operand | float | None


def elementwise_trials(method: str, on_gpu: bool) -> list[ElementwiseTrial]:
    """The trials of an elementwise probe of ``method``, in the probe's order: threshold
    sizes, transposed, broadcast (stride-0) and strided operands and a scalar operand, with
    shorter operands on a CPU device."""

    def a(shape: list[int], tag: str, view: str | None = None) -> Operand:
        return Operand(shape, "a" + tag, view=view)

    def b(shape: list[int], tag: str, view: str | None = None) -> Operand:
        return Operand(shape, "b" + tag, sign_tag="s" + tag if method == "div" else None, view=view)

    unary = method == "exp"
    n1, n2, rows, cols = ((1 << 20) + 1, (1 << 16) + 64, 1025, 257) if on_gpu else ((1 << 16) + 1, (1 << 12) + 64, 257, 65)
    trials = [
        ElementwiseTrial(f"{n1} elements", a([n1], "0"), None if unary else b([n1], "0")),
        ElementwiseTrial(f"{n2} elements", a([n2], "1"), None if unary else b([n2], "1")),
        ElementwiseTrial(f"transposed {cols}x{rows}", a([cols, rows], "2", "t"), None if unary else b([cols, rows], "2", "t")),
    ]
    if not unary:
        trials += [
            ElementwiseTrial(f"{rows}x{cols} with a broadcast row (stride 0)", a([rows, cols], "3"), b([1, cols], "3")),
            ElementwiseTrial(f"{rows}x{cols} with a broadcast column", a([rows, cols], "4"), b([rows, 1], "4")),
            ElementwiseTrial("scalar operand 3.0" if method != "div" else "scalar divisor 3.0", a([4097], "5"), 3.0),
        ]
    else:
        trials.append(ElementwiseTrial("every third element (strided view)", a([3 * 4097], "3", "every_third"), None))
    return trials


def _elementwise_trials(ctx: ProbeContext, method: str, dtype: str) -> list[tuple[str, Any, Any]]:
    """(label, a, b) host operands of ``elementwise_trials``; b is None for unary ops and a
    Python float for scalars."""
    torch = ctx.torch
    (alo, ahi), (blo, bhi) = _operand_ranges(method)

    def build(spec: Operand | float | None, low: float, high: float) -> Any:
        if spec is None or isinstance(spec, float):
            return spec
        values = uniform(ctx, spec.shape, low, high, dtype, spec.tag)
        if spec.sign_tag is not None:
            # Random signs on the divisors.
            signs = uniform(ctx, spec.shape, -1.0, 1.0, "float32", spec.sign_tag) < 0
            values = torch.where(signs, -values, values)
        if spec.view == "t":
            return values.t()
        if spec.view == "every_third":
            return values[::3]
        return values

    return [(t.label, build(t.a, alo, ahi), build(t.b, blo, bhi)) for t in elementwise_trials(method, ctx.is_gpu)]


def _on_device(ctx: ProbeContext, t: Any) -> Any:
    """Stages a host operand keeping its view (transposed/strided) structure."""
    torch = ctx.torch
    if not isinstance(t, torch.Tensor):
        return t
    if t.is_contiguous():
        return ops.stage(t, ctx.device)
    if t.dim() == 2 and t.t().is_contiguous():
        return ops.stage(t.t().contiguous(), ctx.device).t()
    if t.dim() == 1 and t.stride(0) > 1:
        base = ops.stage(t._base if t._base is not None else t.contiguous(), ctx.device)
        return base.as_strided(t.shape, t.stride(), t.storage_offset())
    return ops.stage(t.contiguous(), ctx.device)


def run_elementwise(ctx: ProbeContext, *, method: str, dtype: str, tolerance: float) -> ProbeOutput:
    """An arithmetic op over threshold sizes, broadcast (stride-0), transposed and strided
    operands and a scalar operand, against float64 (blocks of 1024 elements, and ulps)."""
    torch = ctx.torch
    fn = _torch_fn(torch, method)
    acc = ToleranceAccumulator(torch, tolerance, ulp_dtype=dtype)
    labels = []
    worst, worst_case = -1.0, 0
    for index, (label, a, b) in enumerate(_elementwise_trials(ctx, method, dtype)):
        wide_b = b.to(torch.float64) if isinstance(b, torch.Tensor) else b
        ref = fn(a.to(torch.float64)) if b is None else fn(a.to(torch.float64), wide_b)
        da, db = _on_device(ctx, a), _on_device(ctx, b)
        sources = (da,) if b is None or not isinstance(db, torch.Tensor) else (da, db)
        operands = (da,) if b is None else (da, db)
        result = ops_math.elementwise(method, lambda operands=operands: fn(*operands), sources=sources)
        error = acc.add_blocks(ops.readback(result), ref, BLOCK)
        if error > worst:
            worst, worst_case = error, index
        labels.append(label)
    metrics = {
        "method": method,
        "dtype": dtype,
        "cases": ", ".join(labels),
        "block": BLOCK,
        # The case with the largest block error (its index in ``cases``): what a repro
        # script rebuilds.
        "worst_case": worst_case,
        **scaled_metrics(ctx),
    }
    return ProbeOutput(acc.stats(), metrics)


def run_where(ctx: ProbeContext, *, dtype: str) -> ProbeOutput:
    """``torch.where`` selects, so it is compared bit for bit; NaN/Inf in the branch not
    selected must not leak into the output."""
    torch = ctx.torch
    acc = CompareAccumulator(torch)
    n, rows, cols = cpu_scaled(ctx, ((1 << 20) + 1, 1025, 257), ((1 << 16) + 1, 257, 65))
    a = randn(ctx, [n], dtype, "a")
    b = randn(ctx, [n], dtype, "b")
    a[::97] = float("nan")
    b[::89] = float("inf")
    cond = uniform(ctx, [n], 0.0, 1.0, "float32", "cond") < 0.5
    cases = [
        ("same shapes", cond, a, b),
        ("broadcast condition", cond[:rows].reshape(rows, 1), a[: rows * cols].reshape(rows, cols), b[:cols]),
        ("scalar other 0.5", cond, a, 0.5),
    ]
    for _label, c, x, y in cases:
        ref = torch.where(c, x, y)
        dc, dx, dy = _on_device(ctx, c), _on_device(ctx, x), _on_device(ctx, y)
        got = ops_math.elementwise("where", lambda dc=dc, dx=dx, dy=dy: torch.where(dc, dx, dy), sources=(dx,))
        acc.add(ops.readback(got), ref, nan_equal=True)
    metrics = {"method": "where", "dtype": dtype, "cases": len(cases), "elements": n, **scaled_metrics(ctx)}
    return ProbeOutput(acc.stats(), metrics)


def _special_grid(torch: Any, dtype: str) -> list[float]:
    info = torch.finfo(dtype_of(torch, dtype))
    big = math.sqrt(float(info.max)) * 4  # big * big overflows
    return [
        float("nan"),
        float("inf"),
        float("-inf"),
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.5,
        -3.0,
        big,
        -big,
        float(info.max),
        -float(info.max),
        float(info.smallest_normal),
        -float(info.smallest_normal),
    ]


def run_special(ctx: ProbeContext, *, dtype: str, tolerance: float) -> ProbeOutput:
    """NaN/Inf propagation and overflow: add, sub, mul, div, maximum, minimum over every pair
    of special operands (NaN, ±Inf, ±0, ±max, ±smallest normal, values whose square
    overflows) and exp over specials and overflowing arguments. IEEE fixes the special results
    (NaN, ±Inf) exactly; finite results are compared with the dtype tolerance."""
    torch = ctx.torch
    grid = _special_grid(torch, dtype)
    pairs_a = torch.tensor([x for x in grid for _ in grid], dtype=torch.float64)
    pairs_b = torch.tensor([y for _ in grid for y in grid], dtype=torch.float64)
    host_a = pairs_a.to(dtype_of(torch, dtype))
    host_b = pairs_b.to(dtype_of(torch, dtype))
    acc = ToleranceAccumulator(torch, tolerance)
    da, db = ops.stage(host_a, ctx.device), ops.stage(host_b, ctx.device)
    for method in ("add", "sub", "mul", "div", "maximum", "minimum"):
        fn = _torch_fn(torch, method)
        # The exact result rounded once to the dtype: overflow becomes ±Inf as IEEE requires.
        ref = fn(host_a.to(torch.float64), host_b.to(torch.float64)).to(host_a.dtype).to(torch.float64)
        got = ops_math.elementwise(method, lambda fn=fn: fn(da, db), sources=(da, db))
        acc.add(ops.readback(got), ref)
    exp_args = torch.tensor(grid + [100.0, -100.0, 12.0, 89.0, -20.0], dtype=torch.float64).to(host_a.dtype)
    ref = torch.exp(exp_args.to(torch.float64)).to(host_a.dtype).to(torch.float64)
    dexp = ops.stage(exp_args, ctx.device)
    got = ops_math.elementwise("exp", lambda: torch.exp(dexp), sources=(dexp,))
    acc.add(ops.readback(got), ref)
    metrics = {"dtype": dtype, "operands": len(grid), "ops": "add,sub,mul,div,maximum,minimum,exp"}
    return ProbeOutput(acc.stats(), metrics)


def run_add_huge(ctx: ProbeContext, *, dtype: str, numel: int) -> ProbeOutput:
    """a + b over more than 2^31 elements, bit for bit: float16 addition through float32 is
    correctly rounded (float32 has 24 ≥ 2·11 + 2 significand bits, so the double rounding is
    innocuous), on the CPU and on GPUs alike."""
    torch = ctx.torch
    nbytes = numel * 2
    require_memory(ctx, 4 * nbytes, 3 * nbytes)
    a = pattern(torch, numel, dtype, ctx.derive_seed("a"))
    b = pattern(torch, numel, dtype, ctx.derive_seed("b"))
    operands = (ops.stage(a, ctx.device), ops.stage(b, ctx.device))
    got = ops_math.elementwise("add", lambda: torch.add(*operands), sources=operands)
    operands = ()  # drops the inputs, freeing their device memory before the read-back
    result = ops.readback(got)
    del got
    ref = torch.add(a, b)
    del a, b
    acc = CompareAccumulator(torch)
    acc.add(result, ref, nan_equal=True)
    release(ctx)
    return ProbeOutput(acc.stats(), {"method": "add", "dtype": dtype, "elements": numel})


# ---------------------------------------------------------------------------------------------
# Layout: view / reshape / permute / contiguous.


def _layout_trials() -> list[tuple[str, Any]]:
    """(label, transformation) pairs; each transformation maps a tensor to the result."""
    return [
        ("view 528x65", lambda t: t.view(16 * 33, 65)),
        ("permute(2, 0, 1).contiguous()", lambda t: t.permute(2, 0, 1).contiguous()),
        ("transpose(0, 1).contiguous()", lambda t: t.transpose(0, 1).contiguous()),
        ("transpose(1, 2).reshape(-1)", lambda t: t.transpose(1, 2).reshape(-1)),
        ("[:, ::2, 1:].contiguous()", lambda t: t[:, ::2, 1:].contiguous()),
        ("[0:1].expand(8, 33, 65).contiguous()", lambda t: t[0:1].expand(8, 33, 65).contiguous()),
        ("flip(1)", lambda t: t.flip(1)),
        ("flatten(0, 1).t().contiguous()", lambda t: t.flatten(0, 1).t().contiguous()),
    ]


def run_layout(ctx: ProbeContext, *, dtype: str) -> ProbeOutput:
    """Views and the copy kernels behind reshape/permute/contiguous/expand/flip, on odd shapes
    (16×33×65) and on 2^20+1 elements, compared bit for bit with the same transformation on
    the CPU."""
    torch = ctx.torch
    acc = CompareAccumulator(torch)
    small = pattern(torch, 16 * 33 * 65, dtype, ctx.derive_seed("small"), (16, 33, 65))
    side = cpu_scaled(ctx, 1024, 256)
    big = pattern(torch, side * side + 1, dtype, ctx.derive_seed("big"))
    on_device = ops.stage(small, ctx.device)
    labels = []
    for label, transform in _layout_trials():
        ref = transform(small)
        got = ops_math.elementwise("contiguous", lambda transform=transform: transform(on_device), sources=(on_device,))
        acc.add(ops.readback(got).reshape(-1), ref.reshape(-1))
        labels.append(label)
    # side² + 1 elements: the last side² of them (an offset of one element, so vector loads
    # are misaligned) viewed as side x side and transposed.
    big_view = big[1:].view(side, side)
    device_big = ops.stage(big, ctx.device)
    got = ops_math.elementwise(
        "contiguous", lambda: device_big[1:].view(side, side).t().contiguous(), sources=(device_big,)
    )
    acc.add(ops.readback(got).reshape(-1), big_view.t().contiguous().reshape(-1))
    labels.append(f"{side}x{side} at an offset of one element, transposed")
    return ProbeOutput(acc.stats(), {"dtype": dtype, "cases": len(labels), **scaled_metrics(ctx)})


# ---------------------------------------------------------------------------------------------
# GEMMs.


def _gemm_operands(
    ctx: ProbeContext, method: str, shape: dict[str, int], dtype: str, tag: str
) -> tuple[Any, Any, Any, Any]:
    """Host operands (a, b, bias) and the float64 reference for one GEMM case."""
    torch = ctx.torch
    m, k, n = shape["m"], shape["k"], shape["n"]
    batch = shape.get("batch", 1)
    bias = None
    if method == "bmm":
        a = randn(ctx, [batch, m, k], dtype, tag + "a")
        b = randn(ctx, [batch, k, n], dtype, tag + "b")
        ref = torch.bmm(a.to(torch.float64), b.to(torch.float64))
    elif method == "linear":
        a = randn(ctx, [batch, m, k], dtype, tag + "a")
        b = randn(ctx, [n, k], dtype, tag + "b")
        bias = randn(ctx, [n], dtype, tag + "bias")
        ref = torch.nn.functional.linear(a.to(torch.float64), b.to(torch.float64), bias.to(torch.float64))
    else:
        a = randn(ctx, [m, k], dtype, tag + "a")
        b = randn(ctx, [k, n], dtype, tag + "b")
        ref = a.to(torch.float64) @ b.to(torch.float64)
        if method == "addmm":
            bias = randn(ctx, [n], dtype, tag + "bias")
            # beta = 0.5 and alpha = 2 scale exactly.
            ref = 0.5 * bias.to(torch.float64) + 2.0 * ref
    return a, b, bias, ref


def gemm_shapes(shapes: list[dict[str, int]], on_gpu: bool) -> list[dict[str, int]]:
    """The catalog's GEMM shapes a probe runs on its device, in order: a CPU device
    leaves out the GPU-only ones (their trial numbers, and so their seeds, follow)."""
    return list(shapes) if on_gpu else [s for s in shapes if not s.get("gpu_only")]


def run_matmul(
    ctx: ProbeContext, *, method: str, dtype: str, rule_dtype: str, shapes: list[dict[str, int]], tolerance: float
) -> ProbeOutput:
    """A GEMM (``mm``, ``addmm``, ``bmm``, ``linear``) over odd, tall, long-K and GEMV-like
    shapes, each a trial, against float64."""
    torch = ctx.torch
    acc = ToleranceAccumulator(torch, tolerance)
    shapes = gemm_shapes(shapes, ctx.is_gpu)
    worst, worst_case = -1.0, 0
    with precision_context(torch, rule_dtype, dtype):
        for trial, shape in enumerate(shapes):
            a, b, bias, ref = _gemm_operands(ctx, method, shape, dtype, trial_tag(trial))
            da, db = ops.stage(a, ctx.device), ops.stage(b, ctx.device)
            dbias = None if bias is None else ops.stage(bias, ctx.device)
            got = ops_math.matmul(method, da, db, bias=dbias, beta=0.5, alpha=2.0)
            error = acc.add(ops.readback(got), ref)
            if error > worst:
                worst, worst_case = error, trial
    metrics = {
        "method": method,
        "dtype": dtype,
        "tf32": rule_dtype == "tf32",
        "shapes": ",".join(f"{s.get('batch', 1)}x{s['m']}x{s['k']}x{s['n']}" for s in shapes),
        # The shape with the largest error (its index among the shapes run): what a repro
        # script rebuilds.
        "worst_case": worst_case,
        **scaled_metrics(ctx),
    }
    return ProbeOutput(acc.stats(), metrics, tf32_notes(ctx, rule_dtype))


def run_matmul_large(
    ctx: ProbeContext,
    *,
    method: str,
    dtype: str,
    rule_dtype: str,
    m: int,
    k: int,
    n: int,
    tolerance: float,
    canary: bool = False,
    cpu_n: int | None = None,
) -> ProbeOutput:
    """One large GEMM (M > 2^19 rows, N in the millions, or an output past 2 GiB), the whole
    output compared with a float64 reference computed in row blocks. With ``canary`` the
    output is preallocated with the canary (``out=``), so rows the kernel never stored show as
    unchanged (RKB-016). ``cpu_n``: a smaller N used when the device under test is the CPU
    (said so in the metrics); GPUs always get ``n``."""
    torch = ctx.torch
    designed_n = n
    if cpu_n is not None and not ctx.is_gpu:
        n = cpu_n
    itemsize = 4 if dtype == "float32" else 2
    out_bytes = m * n * itemsize
    in_bytes = (m * k + k * n) * itemsize
    require_memory(ctx, in_bytes + out_bytes + min(out_bytes, 1 << 28) * 8, in_bytes + out_bytes)
    batch3 = method in ("bmm", "linear")
    a = randn(ctx, [1, m, k] if batch3 else [m, k], dtype, "a")
    b = randn(ctx, [n, k] if method == "linear" else ([1, k, n] if method == "bmm" else [k, n]), dtype, "b")
    bias = randn(ctx, [n], dtype, "bias") if method in ("addmm", "linear") else None
    da, db = ops.stage(a, ctx.device), ops.stage(b, ctx.device)
    dbias = None if bias is None else ops.stage(bias, ctx.device)
    out = device_canary(ctx, [m, n], dtype) if canary else None
    with precision_context(torch, rule_dtype, dtype), ctx.timer() as timer:
        got = ops_math.matmul(method, da, db, bias=dbias, out=out, beta=0.5, alpha=2.0)
    del da, db, dbias
    result = ops.readback(got).reshape(m, n)
    del got, out
    release(ctx)
    a2 = a.reshape(m, k).to(torch.float64)
    b2 = b.reshape(n, k).t() if method == "linear" else b.reshape(k, n)
    b64 = b2.to(torch.float64)
    bias64 = None if bias is None else bias.to(torch.float64)
    rows_per_chunk = max(1, (1 << 24) // max(n, 1))

    def pieces() -> Iterator[tuple[Any, Any, int]]:
        for start in range(0, m, rows_per_chunk):
            end = min(m, start + rows_per_chunk)
            ref = a2[start:end] @ b64
            if method == "addmm":
                ref = 0.5 * bias64 + 2.0 * ref
            elif method == "linear":
                ref = ref + bias64
            yield result[start:end], ref, start * n

    acc = ToleranceAccumulator(torch, tolerance)
    acc.add_chunks(pieces(), canary=canary_value(dtype) if canary else None)
    metrics = {
        "method": method,
        "dtype": dtype,
        "tf32": rule_dtype == "tf32",
        "shape": f"{m}x{k}x{n}",
        "out_bytes": out_bytes,
        "canary": canary,
        "gemm_s": round(timer.seconds, 6),
    }
    if n != designed_n:
        metrics["scaled_down_on_cpu"] = True
        metrics["gpu_shape"] = f"{m}x{k}x{designed_n}"
    return ProbeOutput(acc.stats(), metrics, tf32_notes(ctx, rule_dtype))


# ---------------------------------------------------------------------------------------------
# Sentinels: outputs prefilled with a canary must be overwritten.


def run_sentinel(ctx: ProbeContext, *, kind: str, dtype: str, tolerance: float) -> ProbeOutput:
    """Operations writing into a canary-filled ``out=`` destination: an output still holding
    the canary means the kernel silently did nothing ("unchanged output")."""
    torch = ctx.torch
    acc = ToleranceAccumulator(torch, tolerance)
    canary = canary_value(dtype)
    labels = []
    with precision_context(torch, dtype, dtype):
        for label, shape, compute, ref in _sentinel_cases(ctx, kind, dtype):
            out = device_canary(ctx, shape, dtype)
            op = {"elementwise": "elementwise", "matmul": "matmul", "reduce": "reduce"}[kind]
            method = label.split("(")[0]
            got = ops_math.run(op, method, lambda compute=compute, out=out: compute(out), out=out)
            acc.add(ops.readback(got), ref, canary=canary)
            labels.append(label)
    return ProbeOutput(acc.stats(), {"kind": kind, "dtype": dtype, "cases": ", ".join(labels), **scaled_metrics(ctx)})


def _sentinel_cases(ctx: ProbeContext, kind: str, dtype: str) -> list[tuple[str, list[int], Any, Any]]:
    torch = ctx.torch
    cases: list[tuple[str, list[int], Any, Any]] = []
    if kind == "elementwise":
        n = cpu_scaled(ctx, (1 << 20) + 1, (1 << 16) + 1)
        a, b = uniform(ctx, [n], -2, 2, dtype, "a"), uniform(ctx, [n], -2, 2, dtype, "b")
        cond = uniform(ctx, [n], 0, 1, "float32", "c") < 0.5
        da, db, dc = (ops.stage(t, ctx.device) for t in (a, b, cond))
        a64, b64 = a.to(torch.float64), b.to(torch.float64)
        cases += [
            ("add(a, b, out=)", [n], lambda out: torch.add(da, db, out=out), a64 + b64),
            ("mul(a, b, out=)", [n], lambda out: torch.mul(da, db, out=out), a64 * b64),
            ("exp(a, out=)", [n], lambda out: torch.exp(da, out=out), torch.exp(a64)),
            ("where(c, a, b, out=)", [n], lambda out: torch.where(dc, da, db, out=out), torch.where(cond, a64, b64)),
        ]
    elif kind == "matmul":
        a, b = randn(ctx, [1025, 96], dtype, "a"), randn(ctx, [96, 257], dtype, "b")
        bias = randn(ctx, [257], dtype, "bias")
        a3, b3 = randn(ctx, [3, 129, 64], dtype, "a3"), randn(ctx, [3, 64, 65], dtype, "b3")
        da, db, dbias, da3, db3 = (ops.stage(t, ctx.device) for t in (a, b, bias, a3, b3))
        a64, b64 = a.to(torch.float64), b.to(torch.float64)
        cases += [
            ("mm(a, b, out=)", [1025, 257], lambda out: torch.mm(da, db, out=out), a64 @ b64),
            (
                "addmm(bias, a, b, out=)",
                [1025, 257],
                lambda out: torch.addmm(dbias, da, db, out=out),
                bias.to(torch.float64) + a64 @ b64,
            ),
            (
                "bmm(a, b, out=)",
                [3, 129, 65],
                lambda out: torch.bmm(da3, db3, out=out),
                torch.bmm(a3.to(torch.float64), b3.to(torch.float64)),
            ),
        ]
    elif kind == "reduce":
        x = _reduce_input(ctx, [1024, cpu_scaled(ctx, 4097, 257)], 1, dtype, "x")
        dx = ops.stage(x, ctx.device)
        x64 = x.to(torch.float64)
        cases += [
            ("sum(x, dim=1, out=)", [1024], lambda out: torch.sum(dx, dim=1, out=out), x64.sum(dim=1)),
            ("mean(x, dim=1, out=)", [1024], lambda out: torch.mean(dx, dim=1, out=out), x64.mean(dim=1)),
            ("amax(x, dim=1, out=)", [1024], lambda out: torch.amax(dx, dim=1, out=out), x64.amax(dim=1)),
        ]
    else:
        raise ValueError(f"unknown sentinel kind {kind!r}")
    return cases
