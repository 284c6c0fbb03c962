"""The width family's cases: one function per operation × dtype × direction.

Each function gets a ``Scope`` (``scope``) and checks the big result on slices before,
across and past each boundary (``scope.spans``) against the same operation computed alone in
float64 on the device, or against closed forms. ``@case(group, name, bytes_per_element,
kinds)`` registers it; ``bytes_per_element`` × the geometry's element count is the device
memory it plans for (its tensors at their peak).

Shapes: ``n`` boundaries use ``(rows, 1031)`` tensors (row-wise operations reduce or
normalize along the rows; outer-dimension cases run along the 4 million rows), pools use
``(batch, 4, 32, 32)`` planes, attention ``(batch, 4 heads, 128, 64)``; ``d31`` uses one
dimension past 2^31 (a 1-D tensor, or one row of that length).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from gpuprobe.worker.probes.width.scope import (
    ALL_KINDS,
    BYTE_CODE_PERIOD,
    CHUNK,
    CODE_PERIOD,
    LONG_KINDS,
    LONG_STATS_TOLERANCE,
    N_KINDS,
    SCAN_TOLERANCE,
    TOLERANCE,
    WIDE_KINDS,
    CaseRefused,
    Scope,
    case,
)

D_KIND = ("d31",)


def functional(s: Scope) -> Any:
    """``torch.nn.functional`` of the scope's torch (the cases import no torch at import time)."""
    return s.torch.nn.functional


def _row_scale(ref: Any) -> Any:
    """The largest magnitude of each row (last dimension) of a reference, kept for
    broadcasting: the scale of results that mix a whole row (norms, softmax gradients)."""
    if ref.dim() == 0:
        return ref.abs()
    return ref.abs().amax(dim=-1, keepdim=True)


def rowwise(
    s: Scope,
    what: str,
    x: Any,
    out: Any,
    ref_fn: Callable[[Any], Any],
    dtype: str,
    *,
    scale: Callable[[Any, Any], Any] | None = None,
    tolerance: float | None = None,
    unit: int | None = None,
) -> None:
    """``out[a:b]`` against ``ref_fn(x[a:b] in float64)`` on the spans of dimension 0
    (``unit``: elements per item of dimension 0 that place the boundaries; by default the
    larger of the input's and the output's)."""
    rows = x.shape[0]
    if unit is None:
        unit = max(1, max(x.numel(), out.numel()) // max(1, rows))
    for a, b in s.spans(rows, unit):
        xs = x[a:b].double()
        ref = ref_fn(xs)
        sc = scale(xs, ref) if scale is not None else ref.abs()
        s.close(f"{what} [{a}:{b}]", out[a:b], ref, sc, dtype, tolerance)


def rowwise_grad(
    s: Scope,
    what: str,
    x: Any,
    grad_out: Any,
    grad_in: Any,
    fn: Callable[[Any], Any],
    dtype: str,
) -> None:
    """The gradient on the spans of dimension 0 against float64 autograd of ``fn`` on the
    slice, judged relative to each row's largest gradient."""
    torch = s.torch
    rows = x.shape[0]
    unit = max(1, x.numel() // max(1, rows))
    for a, b in s.spans(rows, unit):
        xs = x[a:b].detach().double().requires_grad_(True)
        (ref,) = torch.autograd.grad(fn(xs), (xs,), grad_out[a:b].double())
        s.close(f"{what} grad [{a}:{b}]", grad_in[a:b], ref, _row_scale(ref), dtype)


def chunk_stats(s: Scope, flat: Any) -> dict[str, float]:
    """Sum, sum of squares, sum of magnitudes, max and min of a 1-D tensor, in float64 over
    chunks far below the boundary."""
    total = {"sum": 0.0, "sumsq": 0.0, "sumabs": 0.0, "max": float("-inf"), "min": float("inf")}
    for lo in range(0, flat.numel(), CHUNK):
        c = flat[lo : lo + CHUNK].double()
        total["sum"] += float(c.sum())
        total["sumsq"] += float((c * c).sum())
        total["sumabs"] += float(c.abs().sum())
        total["max"] = max(total["max"], float(c.max()))
        total["min"] = min(total["min"], float(c.min()))
    return total


def chunk_logsumexp(s: Scope, flat: Any) -> float:
    """log Σ exp(x) of a 1-D tensor in float64 over chunks."""
    torch = s.torch
    parts = [torch.logsumexp(flat[lo : lo + CHUNK].double(), 0) for lo in range(0, flat.numel(), CHUNK)]
    return float(torch.logsumexp(torch.stack(parts), 0))


#: Added to every element past the first boundary of a tensor that a whole-tensor reduction
#: reads: an operation that misreads the elements past the boundary (a wrapped offset reads
#: equally distributed values from the start) then misses a known, large part of its result.
STEP = 8.0


def stepped(s: Scope, x: Any) -> Any:
    """``x`` with ``STEP`` added past the first boundary (in place; returns ``x``)."""
    if s.g.marks:
        tail = x.view(-1)[s.g.marks[0] :]
        tail += STEP if tail.is_floating_point() else int(STEP)
    return x


def _flat_spans_check(
    s: Scope, what: str, out: Any, expect: Callable[[int, int], Any], dtype: str | None = None, scale: Any = None
) -> None:
    """A 1-D result on its spans against ``expect(a, b)`` (exact, or close with ``scale``)."""
    for a, b in s.spans(out.numel()):
        want = expect(a, b)
        if dtype is None:
            s.exact(f"{what} [{a}:{b}]", out[a:b], want)
        else:
            sc = want.abs() if scale is None else scale(a, b, want)
            s.close(f"{what} [{a}:{b}]", out[a:b], want, sc, dtype)


# =======================================================================================
# create


@case("create", "arange.int64", 8)
def arange_int64(s: Scope) -> None:
    torch = s.torch
    n = s.g.total
    out = s.op("arange", "int64", lambda: torch.arange(n, dtype=torch.int64, device=s.device))
    _flat_spans_check(s, "arange", out, lambda a, b: torch.arange(a, b, dtype=torch.float64, device=s.device))


@case("create", "arange.fp32", 4)
def arange_fp32(s: Scope) -> None:
    torch = s.torch
    n = s.g.total
    out = s.op("arange", "float32", lambda: torch.arange(n, dtype=torch.float32, device=s.device))
    # float32(i): the index rounded once (the kernel computes start + step·i).
    _flat_spans_check(
        s,
        "arange",
        out,
        lambda a, b: torch.arange(a, b, dtype=torch.float64, device=s.device),
        "float32",
        scale=lambda a, b, want: want.abs() + 1.0,
    )


@case("create", "linspace.fp32", 4)
def linspace_fp32(s: Scope) -> None:
    torch = s.torch
    n = s.g.total
    out = s.op("linspace", "float32", lambda: torch.linspace(0.0, 1.0, n, dtype=torch.float32, device=s.device))
    step = 1.0 / (n - 1)

    def expect(a: int, b: int) -> Any:
        return torch.arange(a, b, dtype=torch.float64, device=s.device) * step

    # Values in [0, 1]: the error of start + step·i (or of end - step·(n-1-i)) is a few
    # units of 2^-24 of 1.
    _flat_spans_check(s, "linspace", out, expect, "float32", scale=lambda a, b, want: want.abs() * 0 + 1.0)


@case("create", "full.fp16", 2)
def full_fp16(s: Scope) -> None:
    torch = s.torch
    out = s.op("full", "float16", lambda: torch.full(s.g.shape(), 1.5, dtype=torch.float16, device=s.device))
    flat = out.view(-1)
    _flat_spans_check(s, "full", flat, lambda a, b: torch.full((b - a,), 1.5, dtype=torch.float64))


@case("create", "full.int32", 4)
def full_int32(s: Scope) -> None:
    torch = s.torch
    out = s.op("full", "int32", lambda: torch.full(s.g.shape(), -7, dtype=torch.int32, device=s.device))
    _flat_spans_check(s, "full", out.view(-1), lambda a, b: torch.full((b - a,), -7.0, dtype=torch.float64))


@case("create", "tril.fp16", 4, N_KINDS)
def tril_fp16(s: Scope) -> None:
    torch = s.torch
    side = int(s.g.total**0.5) + 1
    ones = torch.ones((side, side), dtype=torch.float16, device=s.device)
    out = s.op("tril", "float16", lambda: torch.tril(ones))
    del ones
    cols = torch.arange(side, device=s.device)
    for a, b in s.spans(side, side):
        rows = torch.arange(a, b, device=s.device).unsqueeze(1)
        s.exact(f"tril rows [{a}:{b}]", out[a:b], (cols.unsqueeze(0) <= rows).double())


# =======================================================================================
# elementwise and type conversion


def _elementwise(
    s: Scope,
    name: str,
    dtype: str,
    make: Callable[[], Any],
    fn: Callable[[Any], Any],
    ref_fn: Callable[[Any], Any] | None = None,
    exact: bool = False,
) -> None:
    x = make()
    out = s.op(name, dtype, lambda: fn(x))
    ref_fn = ref_fn or fn
    if exact:
        rows = x.shape[0]
        unit = max(1, x.numel() // max(1, rows))
        for a, b in s.spans(rows, unit):
            # The same operation alone on the slice, in the same dtype: bit for bit.
            s.exact(f"{name} [{a}:{b}]", out[a:b], fn(x[a:b]))
    else:
        rowwise(s, name, x, out, ref_fn, dtype)


@case("elementwise", "add.broadcast.fp32", 8)
def add_fp32(s: Scope) -> None:
    x = s.randn(s.g.shape(), "float32")
    bias = s.randn(s.g.shape()[1:], "float32") if not s.g.long else s.randn((), "float32")
    out = s.op("add", "float32", lambda: x + bias)
    rowwise(s, "add", x, out, lambda xs: xs + bias.double(), "float32", scale=lambda xs, ref: ref.abs() + xs.abs())


@case("elementwise", "mul.scalar.fp16", 4)
def mul_fp16(s: Scope) -> None:
    _elementwise(s, "mul", "float16", lambda: s.randn(s.g.shape(), "float16"), lambda x: x * 0.375, exact=True)


@case("elementwise", "sigmoid.fp16", 4)
def sigmoid_fp16(s: Scope) -> None:
    torch = s.torch
    _elementwise(s, "sigmoid", "float16", lambda: s.randn(s.g.shape(), "float16"), torch.sigmoid)


@case("elementwise", "gelu.bf16", 4)
def gelu_bf16(s: Scope) -> None:
    F = functional(s)
    _elementwise(s, "gelu", "bfloat16", lambda: s.randn(s.g.shape(), "bfloat16"), F.gelu)


@case("elementwise", "gelu.bf16.bwd", 8)
def gelu_bf16_bwd(s: Scope) -> None:
    F = functional(s)
    x = s.randn(s.g.shape(), "bfloat16").requires_grad_(True)
    out = F.gelu(x)
    g = s.randn(s.g.shape(), "bfloat16")
    (gx,) = s.grad("gelu", "bfloat16", out, (x,), g)
    del out
    torch = s.torch
    rows = x.shape[0]
    unit = max(1, x.numel() // max(1, rows))
    for a, b in s.spans(rows, unit):
        xs = x[a:b].detach().double().requires_grad_(True)
        (ref,) = torch.autograd.grad(F.gelu(xs), (xs,), g[a:b].double())
        s.close(f"gelu grad [{a}:{b}]", gx[a:b], ref, ref.abs() + 2**-8 * g[a:b].double().abs(), "bfloat16")


@case("elementwise", "where.fp16", 7)
def where_fp16(s: Scope) -> None:
    torch = s.torch
    x = s.randn(s.g.shape(), "float16")
    y = s.randn(s.g.shape(), "float16")
    cond = x > 0
    out = s.op("where", "float16", lambda: torch.where(cond, x, y))
    rows = x.shape[0]
    unit = max(1, x.numel() // max(1, rows))
    for a, b in s.spans(rows, unit):
        s.exact(f"where [{a}:{b}]", out[a:b], torch.where(cond[a:b], x[a:b], y[a:b]))


@case("elementwise", "to_half.fp32", 6)
def to_half(s: Scope) -> None:
    torch = s.torch
    _elementwise(
        s, "convert", "float32", lambda: s.randn(s.g.shape(), "float32"), lambda x: x.to(torch.float16), exact=True
    )


@case("elementwise", "to_float.bf16", 6)
def to_float(s: Scope) -> None:
    torch = s.torch
    _elementwise(
        s, "convert", "bfloat16", lambda: s.randn(s.g.shape(), "bfloat16"), lambda x: x.to(torch.float32), exact=True
    )


@case("elementwise", "masked_fill.bf16", 5)
def masked_fill_bf16(s: Scope) -> None:
    _elementwise(
        s,
        "masked_fill",
        "bfloat16",
        lambda: s.randn(s.g.shape(), "bfloat16"),
        lambda x: x.masked_fill(x < 0, 0.0),
        exact=True,
    )


@case("elementwise", "abs.int32", 8)
def abs_int32(s: Scope) -> None:
    _elementwise(
        s, "abs", "int32", lambda: s.randint(-1000, 1000, s.g.shape(), "int32"), lambda x: x.abs(), exact=True
    )


# =======================================================================================
# reductions


def _reduce_rows(s: Scope, name: str, dtype: str, make: Callable[[], Any], fn: Callable[[Any], Any],
                 ref_fn: Callable[[Any], Any], scale: Callable[[Any, Any], Any], exact: bool = False) -> None:
    """A reduction along the rows (``n``), checked row by row against the slice."""
    x = make()
    out = s.op(name, dtype, lambda: fn(x))
    for a, b in s.spans(x.shape[0], x.shape[1]):
        if exact:
            s.exact(f"{name} rows [{a}:{b}]", out[a:b], fn(x[a:b]))
        else:
            xs = x[a:b].double()
            ref = ref_fn(xs)
            s.close(f"{name} rows [{a}:{b}]", out[a:b], ref, scale(xs, ref), dtype)


def _long_row(s: Scope, dtype: str) -> Any:
    """One row past the boundary, stepped (``stepped``): reductions along it must read
    every element."""
    return stepped(s, s.randn((1, s.g.length), dtype))


def _fp16_sum_scale(s: Scope) -> float:
    """A power of two that keeps the float16 sum along the long row near 2^15, below
    float16's largest value: the sum is about ``STEP`` × the elements past the first
    boundary (2^28 at ``d31``, 2^34 at ``d32`` before scaling). 2^-13 at most, as at
    ``d31``."""
    tail = s.g.length - (s.g.marks[0] if s.g.marks else 0)
    return 2.0 ** min(-13, 15 - math.ceil(math.log2(STEP * tail)))


def _sum_case(s: Scope, dtype: str) -> None:
    torch = s.torch
    if s.g.long:
        x = _long_row(s, dtype)
        if dtype == "float16":
            x *= _fp16_sum_scale(s)
        out = s.op("sum", dtype, lambda: x.sum(dim=1))
        st = chunk_stats(s, x.view(-1))
        s.close("sum along the long row", out, torch.tensor([st["sum"]]), st["sumabs"], dtype)
        return
    _reduce_rows(
        s, "sum", dtype, lambda: s.randn(s.g.shape(), dtype), lambda x: x.sum(dim=1),
        lambda xs: xs.sum(dim=1), lambda xs, ref: xs.abs().sum(dim=1),
    )


@case("reduce", "sum.fp16", 2.1, WIDE_KINDS)
def sum_fp16(s: Scope) -> None:
    _sum_case(s, "float16")


@case("reduce", "sum.bf16", 2.1, WIDE_KINDS)
def sum_bf16(s: Scope) -> None:
    _sum_case(s, "bfloat16")


@case("reduce", "sum.bf16.aligned", 2.1, N_KINDS)
def sum_bf16_aligned(s: Scope) -> None:
    _reduce_rows(
        s, "sum", "bfloat16", lambda: s.randn(s.g.shape(aligned=True), "bfloat16"), lambda x: x.sum(dim=1),
        lambda xs: xs.sum(dim=1), lambda xs, ref: xs.abs().sum(dim=1),
    )


@case("reduce", "sum.fp32", 4.1, WIDE_KINDS)
def sum_fp32(s: Scope) -> None:
    _sum_case(s, "float32")


@case("reduce", "sum.int32", 4.1, WIDE_KINDS)
def sum_int32(s: Scope) -> None:
    if s.g.long:
        x = stepped(s, s.randint(-3, 4, (1, s.g.length), "int32"))
        out = s.op("sum", "int32", lambda: x.sum(dim=1))
        want = sum(int(x.view(-1)[lo : lo + CHUNK].sum()) for lo in range(0, x.numel(), CHUNK))
        s.truth("sum of int32 along the long row", int(out[0]) == want, f"got {int(out[0])}, expected {want}")
        return
    _reduce_rows(
        s, "sum", "int32", lambda: s.randint(-1000, 1000, s.g.shape(), "int32"), lambda x: x.sum(dim=1),
        lambda xs: xs, lambda xs, ref: ref, exact=True,
    )


@case("reduce", "mean.bf16", 2.1, WIDE_KINDS)
def mean_bf16(s: Scope) -> None:
    torch = s.torch
    if s.g.long:
        x = _long_row(s, "bfloat16")
        out = s.op("mean", "bfloat16", lambda: x.mean(dim=1))
        st = chunk_stats(s, x.view(-1))
        n = x.numel()
        s.close("mean along the long row", out, torch.tensor([st["sum"] / n]), st["sumabs"] / n, "bfloat16")
        return
    _reduce_rows(
        s, "mean", "bfloat16", lambda: s.randn(s.g.shape(), "bfloat16"), lambda x: x.mean(dim=1),
        lambda xs: xs.mean(dim=1), lambda xs, ref: xs.abs().mean(dim=1),
    )


@case("reduce", "var.fp32", 4.1, WIDE_KINDS)
def var_fp32(s: Scope) -> None:
    torch = s.torch
    if s.g.long:
        x = _long_row(s, "float32")
        out = s.op("var", "float32", lambda: x.var(dim=1))
        st = chunk_stats(s, x.view(-1))
        n = x.numel()
        var = (st["sumsq"] - st["sum"] ** 2 / n) / (n - 1)
        s.close("var along the long row", out, torch.tensor([var]), var + st["sumsq"] / n, "float32")
        return
    _reduce_rows(
        s, "var", "float32", lambda: s.randn(s.g.shape(), "float32"), lambda x: x.var(dim=1),
        lambda xs: xs.var(dim=1), lambda xs, ref: ref + (xs * xs).mean(dim=1),
    )


@case("reduce", "amax.fp16", 2.1, WIDE_KINDS)
def amax_fp16(s: Scope) -> None:
    _planted_or_rows(s, "amax", "float16")


@case("reduce", "argmax.fp32", 4.1, WIDE_KINDS)
def argmax_fp32(s: Scope) -> None:
    _planted_or_rows(s, "argmax", "float32")


def _planted_or_rows(s: Scope, name: str, dtype: str) -> None:
    """Row-wise on ``n`` shapes (exact against the slice); along the long row of ``d31`` and
    ``d32`` with the maximum planted at a position past the last boundary (closed form)."""
    torch = s.torch
    fn = (lambda t: t.amax(dim=1)) if name == "amax" else (lambda t: t.argmax(dim=1))
    if not s.g.long:
        _reduce_rows(s, name, dtype, lambda: s.randn(s.g.shape(), dtype), fn, lambda xs: xs, lambda xs, r: r, exact=True)
        return
    x = _long_row(s, dtype)
    # Just past the last boundary inside the row (2^31 + 7 at d31, 2^32 + 7 at d32).
    where = min(s.g.length - 1, s.g.marks[-1] + 7)
    x[0, where] = 100.0
    out = s.op(name, dtype, lambda: fn(x))
    want = 100.0 if name == "amax" else float(where)
    s.truth(f"{name} along the long row", float(out[0]) == want, f"got {float(out[0])}, planted {want}")


@case("reduce", "sum.outer.fp32", 4.1, N_KINDS)
def sum_outer_fp32(s: Scope) -> None:
    x = stepped(s, s.randn(s.g.shape(), "float32"))
    out = s.op("sum", "float32", lambda: x.sum(dim=0))
    ref = x.new_zeros(x.shape[1], dtype=s.torch.float64)
    mag = x.new_zeros(x.shape[1], dtype=s.torch.float64)
    step = max(1, CHUNK // x.shape[1])
    for lo in range(0, x.shape[0], step):
        c = x[lo : lo + step].double()
        ref += c.sum(dim=0)
        mag += c.abs().sum(dim=0)
    s.close("sum over the rows", out, ref, mag, "float32")


@case("reduce", "sum.all.fp32", 4.1, N_KINDS)
def sum_all_fp32(s: Scope) -> None:
    torch = s.torch
    x = stepped(s, s.randn(s.g.shape(), "float32"))
    out = s.op("sum", "float32", lambda: x.sum())
    st = chunk_stats(s, x.view(-1))
    s.close("sum of every element", out.reshape(1), torch.tensor([st["sum"]]), st["sumabs"], "float32")


@case("reduce", "argmax.all.fp16", 2.1, N_KINDS)
def argmax_all_fp16(s: Scope) -> None:
    x = s.randn(s.g.shape(), "float16")
    flat = x.view(-1)
    where = s.sentinels(flat.numel(), 1)[-2] if len(s.g.marks) else flat.numel() - 1
    flat[where] = 100.0
    out = s.op("argmax", "float16", lambda: x.argmax())
    s.truth("argmax of every element", int(out) == where, f"got {int(out)}, planted at {where}")


@case("reduce", "any_all.bool", 1.2)
def any_all_bool(s: Scope) -> None:
    torch = s.torch
    x = torch.zeros(s.g.shape(), dtype=torch.bool, device=s.device)
    flat = x.view(-1)
    where = s.sentinels(flat.numel(), 1)
    got = s.op("any", "bool", lambda: x.any())
    s.truth("any of all-False", not bool(got), "got True")
    flat[where[-1]] = True
    got = s.op("any", "bool", lambda: x.any())
    s.truth(f"any with one True at {where[-1]}", bool(got), "got False")
    count = s.op("count_nonzero", "bool", lambda: torch.count_nonzero(x))
    s.truth(f"count_nonzero with one True at {where[-1]}", int(count) == 1, f"got {int(count)}")
    x.fill_(True)
    flat[where[0]] = False
    got = s.op("all", "bool", lambda: x.all())
    s.truth(f"all with one False at {where[0]}", not bool(got), "got True")


@case("reduce", "sum.fp32.bwd", 8.1, N_KINDS)
def sum_fp32_bwd(s: Scope) -> None:
    x = s.randn(s.g.shape(), "float32").requires_grad_(True)
    out = x.sum(dim=1)
    g = s.randn(out.shape, "float32")
    (gx,) = s.grad("sum", "float32", out, (x,), g)
    for a, b in s.spans(x.shape[0], x.shape[1]):
        s.exact(f"sum grad rows [{a}:{b}]", gx[a:b], g[a:b].unsqueeze(1).expand(b - a, x.shape[1]))


# =======================================================================================
# scans


@case("scan", "cumsum.fp32", 8.1, WIDE_KINDS)
def cumsum_fp32(s: Scope) -> None:
    torch = s.torch
    if s.g.long:
        # Positive, stepped inputs: a wrong carry or a misread past the boundary is then an
        # error of the order of the running sum itself, far above the rounding of 2^31
        # additions.
        x = stepped(s, s.rand((s.g.length,), "float32"))
        out = s.op("cumsum", "float32", lambda: torch.cumsum(x, 0))
        for a, b in s.spans(x.numel()):
            prefix = sum(float(x[lo : min(a, lo + CHUNK)].double().sum()) for lo in range(0, a, CHUNK))
            ref = prefix + torch.cumsum(x[a:b].double(), 0)
            s.close(f"cumsum [{a}:{b}]", out[a:b], ref, ref.abs(), "float32", SCAN_TOLERANCE["float32"])
        return
    x = s.randn(s.g.shape(), "float32")
    out = s.op("cumsum", "float32", lambda: torch.cumsum(x, 1))
    rowwise(
        s, "cumsum", x, out, lambda xs: torch.cumsum(xs, 1), "float32",
        scale=lambda xs, ref: torch.cumsum(xs.abs(), 1), tolerance=SCAN_TOLERANCE["float32"],
    )


@case("scan", "cumsum.int32", 12.1, WIDE_KINDS)
def cumsum_int32(s: Scope) -> None:
    torch = s.torch
    if s.g.long:
        x = torch.ones(s.g.length, dtype=torch.int32, device=s.device)
        out = s.op("cumsum", "int32", lambda: torch.cumsum(x, 0))
        _flat_spans_check(s, "cumsum of ones", out, lambda a, b: torch.arange(a + 1, b + 1, dtype=torch.float64))
        return
    x = s.randint(-1000, 1000, s.g.shape(), "int32")
    out = s.op("cumsum", "int32", lambda: torch.cumsum(x, 1))
    for a, b in s.spans(x.shape[0], x.shape[1]):
        s.exact(f"cumsum rows [{a}:{b}]", out[a:b], torch.cumsum(x[a:b], 1))


@case("scan", "cumsum.outer.fp32", 8.1, N_KINDS)
def cumsum_outer_fp32(s: Scope) -> None:
    torch = s.torch
    x = stepped(s, s.randn(s.g.shape(), "float32"))
    out = s.op("cumsum", "float32", lambda: torch.cumsum(x, 0))
    step = max(1, CHUNK // x.shape[1])
    for a, b in s.spans(x.shape[0], x.shape[1]):
        prefix = x.new_zeros(x.shape[1], dtype=torch.float64)
        mag = x.new_zeros(x.shape[1], dtype=torch.float64)
        for lo in range(0, a, step):
            c = x[lo : min(a, lo + step)].double()
            prefix += c.sum(0)
            mag += c.abs().sum(0)
        ref = prefix + torch.cumsum(x[a:b].double(), 0)
        scale = mag + torch.cumsum(x[a:b].double().abs(), 0)
        s.close(f"cumsum over rows [{a}:{b}]", out[a:b], ref, scale, "float32", SCAN_TOLERANCE["float32"])


@case("scan", "cumsum.middle.fp32", 8.1, N_KINDS)
def cumsum_middle_fp32(s: Scope) -> None:
    """A scan along the middle dimension of ``(batch, 3, cols)``: the kernel that walks
    outer rows × inner columns."""
    torch = s.torch
    batch = -(-s.g.total // (3 * s.g.cols))
    x = s.randn((batch, 3, s.g.cols), "float32")
    out = s.op("cumsum", "float32", lambda: torch.cumsum(x, 1))
    rowwise(
        s, "cumsum middle", x, out, lambda xs: torch.cumsum(xs, 1), "float32",
        scale=lambda xs, ref: torch.cumsum(xs.abs(), 1), tolerance=SCAN_TOLERANCE["float32"],
    )


@case("scan", "cummax.fp16", 12.1, N_KINDS)
def cummax_fp16(s: Scope) -> None:
    torch = s.torch
    x = s.randn(s.g.shape(), "float16")
    values, indices = s.op("cummax", "float16", lambda: torch.cummax(x, 1))
    for a, b in s.spans(x.shape[0], x.shape[1]):
        v, i = torch.cummax(x[a:b], 1)
        s.exact(f"cummax values rows [{a}:{b}]", values[a:b], v)
        # Ties may resolve to another index of an equal value: check the value it points at.
        s.exact(f"cummax indices rows [{a}:{b}]", x[a:b].gather(1, indices[a:b]), v)


@case("scan", "logcumsumexp.bf16", 6.1, N_KINDS)
def logcumsumexp_bf16(s: Scope) -> None:
    torch = s.torch
    x = s.randn(s.g.shape(), "bfloat16")
    out = s.op("logcumsumexp", "bfloat16", lambda: torch.logcumsumexp(x, 1))
    rowwise(
        s, "logcumsumexp", x, out, lambda xs: torch.logcumsumexp(xs, 1), "bfloat16",
        scale=lambda xs, ref: ref.abs() + 1.0,
    )


@case("scan", "cumsum.fp32.bwd", 16.1, N_KINDS)
def cumsum_fp32_bwd(s: Scope) -> None:
    torch = s.torch
    x = s.randn(s.g.shape(), "float32").requires_grad_(True)
    out = torch.cumsum(x, 1)
    g = s.randn(s.g.shape(), "float32")
    (gx,) = s.grad("cumsum", "float32", out, (x,), g)
    del out
    for a, b in s.spans(x.shape[0], x.shape[1]):
        gs = g[a:b].double()
        ref = gs.flip(1).cumsum(1).flip(1)
        scale = gs.abs().flip(1).cumsum(1).flip(1)
        s.close(f"cumsum grad rows [{a}:{b}]", gx[a:b], ref, scale, "float32", SCAN_TOLERANCE["float32"])


# =======================================================================================
# normalization


def _layer_norm(s: Scope, dtype: str, aligned: bool = False) -> None:
    torch = s.torch
    F = functional(s)
    if s.g.long:
        x = _long_row(s, dtype)
        out = s.op("layer_norm", dtype, lambda: F.layer_norm(x, (s.g.length,), eps=1e-5))
        st = chunk_stats(s, x.view(-1))
        n = x.numel()
        mean = st["sum"] / n
        rstd = 1.0 / (st["sumsq"] / n - mean * mean + 1e-5) ** 0.5
        flat = out.view(-1)
        xf = x.view(-1)
        for a, b in s.spans(flat.numel()):
            want = (xf[a:b].double() - mean) * rstd
            s.close(f"layer_norm along the long row [{a}:{b}]", flat[a:b], want, want.abs() + 1.0, dtype,
                    max(LONG_STATS_TOLERANCE, TOLERANCE[dtype]))
        return
    shape = s.g.shape(aligned)
    cols = shape[1]
    weight = s.randn((cols,), dtype)
    bias = s.randn((cols,), dtype)
    x = s.randn(shape, dtype)
    out = s.op("layer_norm", dtype, lambda: F.layer_norm(x, (cols,), weight, bias, eps=1e-5))
    w64, b64 = weight.double(), bias.double()
    rowwise(
        s, "layer_norm", x, out, lambda xs: F.layer_norm(xs, (cols,), w64, b64, eps=1e-5), dtype,
        scale=lambda xs, ref: ref.abs() + 1.0,
    )


@case("norm", "layer_norm.fp16", 4.1)
def layer_norm_fp16(s: Scope) -> None:
    _layer_norm(s, "float16")


@case("norm", "layer_norm.bf16", 4.1)
def layer_norm_bf16(s: Scope) -> None:
    _layer_norm(s, "bfloat16")


@case("norm", "layer_norm.fp32", 8.1)
def layer_norm_fp32(s: Scope) -> None:
    _layer_norm(s, "float32")


@case("norm", "layer_norm.fp16.aligned", 4.1, N_KINDS)
def layer_norm_fp16_aligned(s: Scope) -> None:
    _layer_norm(s, "float16", aligned=True)


@case("norm", "layer_norm.bf16.aligned.bwd", 10.1, N_KINDS)
def layer_norm_bf16_aligned_bwd(s: Scope) -> None:
    _layer_norm_bwd(s, aligned=True)


@case("norm", "layer_norm.bf16.bwd", 10.1, N_KINDS)
def layer_norm_bf16_bwd(s: Scope) -> None:
    _layer_norm_bwd(s, aligned=False)


def _layer_norm_bwd(s: Scope, aligned: bool) -> None:
    F = functional(s)
    shape = s.g.shape(aligned)
    cols = shape[1]
    x = s.randn(shape, "bfloat16").requires_grad_(True)
    out = F.layer_norm(x, (cols,), eps=1e-5)
    g = s.randn(shape, "bfloat16")
    (gx,) = s.grad("layer_norm", "bfloat16", out, (x,), g)
    del out
    rowwise_grad(s, "layer_norm", x, g, gx, lambda xs: F.layer_norm(xs, (cols,), eps=1e-5), "bfloat16")


@case("norm", "rms_norm.fp16.aligned", 4.1, N_KINDS)
def rms_norm_fp16(s: Scope) -> None:
    F = functional(s)
    if not hasattr(F, "rms_norm"):
        raise CaseRefused(f"this torch {s.torch.__version__} has no rms_norm")
    shape = s.g.shape(aligned=True)
    cols = shape[1]
    x = s.randn(shape, "float16")
    out = s.op("rms_norm", "float16", lambda: F.rms_norm(x, (cols,), eps=1e-5))
    rowwise(
        s, "rms_norm", x, out, lambda xs: F.rms_norm(xs, (cols,), eps=1e-5), "float16",
        scale=lambda xs, ref: ref.abs() + 1.0,
    )


@case("norm", "group_norm.fp32", 8.1, N_KINDS)
def group_norm_fp32(s: Scope) -> None:
    F = functional(s)
    per = 8 * 129
    batch = -(-s.g.total // per)
    x = s.randn((batch, 8, 129), "float32")
    out = s.op("group_norm", "float32", lambda: F.group_norm(x, 2, eps=1e-5))
    rowwise(
        s, "group_norm", x, out, lambda xs: F.group_norm(xs, 2, eps=1e-5), "float32",
        scale=lambda xs, ref: ref.abs() + 1.0,
    )


#: See ``batch_norm_fp32``.
BATCH_NORM_STATS_TOLERANCE = LONG_STATS_TOLERANCE


@case("norm", "batch_norm.fp32", 8.1)
def batch_norm_fp32(s: Scope) -> None:
    """Training-mode statistics over every element of a channel: ``(rows, 2, 515)`` on ``n``
    shapes (each channel past 2^30, the tensor past the boundary), one channel past 2^31
    on ``d31``."""
    torch = s.torch
    F = functional(s)
    if s.g.long:
        x = stepped(s, s.randn((s.g.length, 1), "float32"))
    else:
        per = 2 * 515
        x = stepped(s, s.randn((-(-s.g.total // per), 2, 515), "float32"))
    channels = x.shape[1]
    running_mean = torch.zeros(channels, device=s.device)
    running_var = torch.ones(channels, device=s.device)
    out = s.op(
        "batch_norm", "float32",
        lambda: F.batch_norm(x, running_mean, running_var, training=True, momentum=1.0, eps=1e-5),
    )
    means, variances = [], []
    for c in range(channels):
        if x.dim() == 3:
            # One channel's elements in chunks of batches.
            st_sum = st_sq = 0.0
            n = 0
            step = max(1, CHUNK // x.shape[2])
            for lo in range(0, x.shape[0], step):
                chunk = x[lo : lo + step, c].double()
                st_sum += float(chunk.sum())
                st_sq += float((chunk * chunk).sum())
                n += chunk.numel()
        else:
            st = chunk_stats(s, x[:, c])
            st_sum, st_sq, n = st["sum"], st["sumsq"], x.shape[0]
        mean = st_sum / n
        means.append(mean)
        variances.append(st_sq / n - mean * mean)
    for c in range(channels):
        # momentum 1: the running statistics become the batch's (variance unbiased).
        # Statistics of 2^30 and more elements accumulated in float32: judged at
        # BATCH_NORM_STATS_TOLERANCE of the channel's spread (the step past the boundary
        # moves them by a large part of it).
        n = x.numel() // channels
        spread = variances[c] ** 0.5
        s.close(f"running_mean[{c}]", running_mean[c : c + 1], torch.tensor([means[c]]), spread, "float32",
                BATCH_NORM_STATS_TOLERANCE)
        s.close(f"running_var[{c}]", running_var[c : c + 1], torch.tensor([variances[c] * n / (n - 1)]),
                variances[c], "float32", BATCH_NORM_STATS_TOLERANCE)
    mean_t = torch.tensor(means, dtype=torch.float64, device=s.device)
    rstd_t = 1.0 / torch.sqrt(torch.tensor(variances, dtype=torch.float64, device=s.device) + 1e-5)
    shape = (1, channels, 1) if x.dim() == 3 else (1, channels)
    rowwise(
        s, "batch_norm", x, out, lambda xs: (xs - mean_t.view(shape)) * rstd_t.view(shape), "float32",
        scale=lambda xs, ref: ref.abs() + 1.0, tolerance=LONG_STATS_TOLERANCE,
    )


# =======================================================================================
# softmax


def _softmax_rows(s: Scope, name: str, dtype: str, aligned: bool = False) -> None:
    torch = s.torch
    fn = torch.softmax if name == "softmax" else torch.log_softmax
    if s.g.long:
        x = _long_row(s, dtype)
        out = s.op(name, dtype, lambda: fn(x, 1))
        lse = chunk_logsumexp(s, x.view(-1))
        xf = x.view(-1)
        tol = max(LONG_STATS_TOLERANCE, TOLERANCE[dtype])
        flat = out.view(-1)
        for a, b in s.spans(flat.numel()):
            if name == "softmax":
                want = torch.exp(xf[a:b].double() - lse)
                scale = want.abs() + 1.0 / xf.numel()
            else:
                want = xf[a:b].double() - lse
                scale = want.abs() + 1.0
            s.close(f"{name} along the long row [{a}:{b}]", flat[a:b], want, scale, dtype, tol)
        return
    x = s.randn(s.g.shape(aligned), dtype)
    out = s.op(name, dtype, lambda: fn(x, 1))
    if name == "softmax":
        rowwise(s, name, x, out, lambda xs: fn(xs, 1), dtype, scale=lambda xs, ref: ref.abs() + 1e-3 * _row_scale(ref))
    else:
        rowwise(s, name, x, out, lambda xs: fn(xs, 1), dtype, scale=lambda xs, ref: ref.abs() + 1.0)


@case("softmax", "softmax.fp16", 4.1)
def softmax_fp16(s: Scope) -> None:
    _softmax_rows(s, "softmax", "float16")


@case("softmax", "softmax.bf16.aligned", 4.1, N_KINDS)
def softmax_bf16(s: Scope) -> None:
    _softmax_rows(s, "softmax", "bfloat16", aligned=True)


@case("softmax", "log_softmax.fp16.aligned", 4.1, N_KINDS)
def log_softmax_fp16_aligned(s: Scope) -> None:
    _softmax_rows(s, "log_softmax", "float16", aligned=True)


@case("softmax", "softmax.fp32", 8.1)
def softmax_fp32(s: Scope) -> None:
    _softmax_rows(s, "softmax", "float32")


@case("softmax", "log_softmax.fp32", 8.1)
def log_softmax_fp32(s: Scope) -> None:
    _softmax_rows(s, "log_softmax", "float32")


@case("softmax", "softmax.bf16.bwd", 8.1, N_KINDS)
def softmax_bf16_bwd(s: Scope) -> None:
    torch = s.torch
    x = s.randn(s.g.shape(), "bfloat16").requires_grad_(True)
    out = torch.softmax(x, 1)
    g = s.randn(s.g.shape(), "bfloat16")
    (gx,) = s.grad("softmax", "bfloat16", out, (x,), g)
    del out
    rowwise_grad(s, "softmax", x, g, gx, lambda xs: torch.softmax(xs, 1), "bfloat16")


@case("softmax", "softmax.outer.fp32", 8.1, N_KINDS)
def softmax_outer_fp32(s: Scope) -> None:
    torch = s.torch
    x = stepped(s, s.randn(s.g.shape(), "float32"))
    out = s.op("softmax", "float32", lambda: torch.softmax(x, 0))
    step = max(1, CHUNK // x.shape[1])
    parts = [torch.logsumexp(x[lo : lo + step].double(), 0) for lo in range(0, x.shape[0], step)]
    lse = torch.logsumexp(torch.stack(parts), 0)
    rowwise(s, "softmax over rows", x, out, lambda xs: torch.exp(xs - lse), "float32",
            scale=lambda xs, ref: ref.abs() + 1e-30, tolerance=LONG_STATS_TOLERANCE)


# =======================================================================================
# pooling and upsampling


def _planes(s: Scope, per_element_of_input: float = 1.0) -> tuple[int, int, int, int]:
    """``(batch, 4, side, side)`` with about ``total × per_element_of_input`` elements."""
    side = 32 if s.ctx.is_gpu else 8
    per = 4 * side * side
    batch = -(-int(s.g.total * per_element_of_input) // per)
    return (batch, 4, side, side)


def _pool_case(s: Scope, name: str, dtype: str, fn: Callable[[Any], Any], backward: bool,
               shape: tuple[int, ...] | None = None) -> None:
    torch = s.torch
    x = s.randn(shape or _planes(s), dtype)
    if backward:
        x.requires_grad_(True)
    out = s.op(name, dtype, lambda: fn(x))
    first = out[0] if isinstance(out, tuple) else out
    rows = x.shape[0]
    # The boundary is the larger tensor's: the output of an upsample, the input of a pool.
    unit = max(1, max(x.numel(), first.numel()) // rows)
    rowwise(
        s, name, x.detach(), first.detach(), lambda xs: first_output(fn(xs)), dtype,
        scale=lambda xs, ref: _row_scale(ref.flatten(1)).view(-1, *([1] * (ref.dim() - 1))) + 1e-6,
        unit=unit,
    )
    if not backward:
        return
    g = s.randn(first.shape, dtype)
    (gx,) = s.grad(name, dtype, first, (x,), g)
    del out, first
    for a, b in s.spans(rows, unit):
        xs = x[a:b].detach().double().requires_grad_(True)
        (ref,) = torch.autograd.grad(first_output(fn(xs)), (xs,), g[a:b].double())
        scale = _row_scale(ref.flatten(1)).view(-1, *([1] * (ref.dim() - 1))) + 1e-6
        s.close(f"{name} grad [{a}:{b}]", gx[a:b], ref, scale, dtype)


def first_output(out: Any) -> Any:
    """The first tensor an operation returns (the values of a ``(values, indices)`` pair)."""
    return out[0] if isinstance(out, tuple) else out


@case("pool", "avg_pool2d.fp16", 3.1, N_KINDS)
def avg_pool2d_fp16(s: Scope) -> None:
    _pool_case(s, "avg_pool2d", "float16", lambda x: functional(s).avg_pool2d(x, 2), False)


@case("pool", "avg_pool2d.fp16.bwd", 5.1, N_KINDS)
def avg_pool2d_fp16_bwd(s: Scope) -> None:
    _pool_case(s, "avg_pool2d", "float16", lambda x: functional(s).avg_pool2d(x, 2), True)


@case("pool", "max_pool2d.fp32.bwd", 13.1, N_KINDS)
def max_pool2d_fp32_bwd(s: Scope) -> None:
    _pool_case(s, "max_pool2d", "float32", lambda x: functional(s).max_pool2d(x, 2), True)


@case("pool", "adaptive_avg_pool2d.fp32.bwd", 9.1, N_KINDS)
def adaptive_avg_pool2d_bwd(s: Scope) -> None:
    out = 8 if s.ctx.is_gpu else 2
    _pool_case(s, "adaptive_avg_pool2d", "float32", lambda x: functional(s).adaptive_avg_pool2d(x, (out, out)), True)


@case("pool", "adaptive_avg_pool3d.fp32.bwd", 9.1, N_KINDS)
def adaptive_avg_pool3d_bwd(s: Scope) -> None:
    batch, channels, side, _ = _planes(s)
    shape = (batch, channels, 4, side // 2, side * 2)
    target = (2, 4, 4) if s.ctx.is_gpu else (2, 2, 2)
    _pool_case(s, "adaptive_avg_pool3d", "float32", lambda x: functional(s).adaptive_avg_pool3d(x, target), True, shape)


@case("pool", "interpolate_nearest.fp16.bwd", 5.1, N_KINDS)
def nearest_fp16_bwd(s: Scope) -> None:
    _pool_case(
        s, "upsample_nearest2d", "float16", lambda x: functional(s).interpolate(x, scale_factor=2, mode="nearest"), True,
        _planes(s, 0.25),
    )


@case("pool", "interpolate_bilinear.bf16", 2.6, N_KINDS)
def bilinear_bf16(s: Scope) -> None:
    _pool_case(
        s, "upsample_bilinear2d", "bfloat16",
        lambda x: functional(s).interpolate(x, scale_factor=2, mode="bilinear", align_corners=False), False,
        _planes(s, 0.25),
    )


def _pool1d_long(s: Scope, name: str, dtype: str, fn: Callable[[Any], Any], upsample: bool) -> None:
    """A pool (window 2, stride 2) or a 2× nearest upsample along one dimension past 2^31,
    checked on spans of the output against the same operation on the input window that
    produces them."""
    length = s.g.length // 2 + 1 if upsample else s.g.length
    x = s.randn((1, 1, length), dtype)
    out = first_output(s.op(name, dtype, lambda: fn(x)))
    for a, b in s.spans(out.shape[-1]):
        if upsample:
            lo, hi = a // 2, -(-b // 2)
            ref = first_output(fn(x[..., lo:hi].double()))[..., a - 2 * lo : a - 2 * lo + (b - a)]
        else:
            ref = first_output(fn(x[..., 2 * a : 2 * b].double()))
        s.close(f"{name} [{a}:{b}]", out[..., a:b], ref, ref.abs() + 1e-3, dtype)


@case("pool", "avg_pool1d.fp16", 3.1, D_KIND)
def avg_pool1d_long(s: Scope) -> None:
    _pool1d_long(s, "avg_pool1d", "float16", lambda x: functional(s).avg_pool1d(x, 2), False)


@case("pool", "max_pool1d.fp32", 10.1, D_KIND)
def max_pool1d_long(s: Scope) -> None:
    _pool1d_long(s, "max_pool1d", "float32", lambda x: functional(s).max_pool1d(x, 2), False)


@case("pool", "interpolate_nearest1d.fp16", 3.1, D_KIND)
def nearest1d_long(s: Scope) -> None:
    _pool1d_long(
        s, "upsample_nearest1d", "float16", lambda x: functional(s).interpolate(x, scale_factor=2, mode="nearest"), True
    )


# =======================================================================================
# index, gather, scatter, embedding, losses, histograms


def _picks(s: Scope, length: int, unit: int = 1) -> list[int]:
    """Indices (of items of ``unit`` elements) to gather or plant: the spans' ends and the
    sentinels past the boundaries."""
    out = set(s.sentinels(length, 2, unit))
    for a, b in s.spans(length, unit):
        out.update({a, b - 1})
    return sorted(out)


def _row_unit(s: Scope) -> int:
    """Elements per row of the main tensor (1 for the 1-D ``d31`` tensor)."""
    return 1 if s.g.long else s.g.cols


@case("index", "index_select.fp16", 2.1, WIDE_KINDS)
def index_select_fp16(s: Scope) -> None:
    torch = s.torch
    x = s.randn(s.g.shape(), "float16")
    picks = _picks(s, x.shape[0], _row_unit(s))
    idx = torch.tensor(picks, device=s.device)
    out = s.op("index_select", "float16", lambda: x.index_select(0, idx))
    for row, i in enumerate(picks):
        s.exact(f"index_select row {i}", out[row], x[i])


@case("index", "take.fp32", 4.1)
def take_fp32(s: Scope) -> None:
    torch = s.torch
    x = s.randn(s.g.shape(), "float32")
    flat = x.view(-1)
    picks = _picks(s, flat.numel())
    idx = torch.tensor(picks, device=s.device)
    out = s.op("take", "float32", lambda: torch.take(x, idx))
    s.exact("take", out, torch.stack([flat[i] for i in picks]))


@case("index", "gather.fp32", 4.2, N_KINDS)
def gather_fp32(s: Scope) -> None:
    torch = s.torch
    x = s.randn(s.g.shape(), "float32")
    idx = s.randint(0, x.shape[1], (x.shape[0], 3), "int64")
    out = s.op("gather", "float32", lambda: x.gather(1, idx))
    for a, b in s.spans(x.shape[0], x.shape[1]):
        s.exact(f"gather rows [{a}:{b}]", out[a:b], x[a:b].gather(1, idx[a:b]))


@case("index", "gather.long.fp32", 4.1, LONG_KINDS)
def gather_long_fp32(s: Scope) -> None:
    torch = s.torch
    x = s.randn((1, s.g.length), "float32")
    picks = _picks(s, s.g.length)
    idx = torch.tensor([picks], device=s.device)
    out = s.op("gather", "float32", lambda: x.gather(1, idx))
    s.exact("gather along the long row", out[0], torch.stack([x[0, i] for i in picks]))


@case("index", "scatter_add.fp32", 4.3, WIDE_KINDS)
def scatter_add_fp32(s: Scope) -> None:
    torch = s.torch
    target = torch.zeros(s.g.shape(), dtype=torch.float32, device=s.device)
    if s.g.long:
        picks = _picks(s, s.g.length)
        flat_idx = picks + picks[::2]
        idx = torch.tensor(flat_idx, device=s.device)
        ones = torch.ones(idx.numel(), device=s.device)
        out = s.op("scatter_add", "float32", lambda: target.scatter_add_(0, idx, ones))
        for a, b in s.spans(s.g.length):
            want = torch.zeros(b - a, dtype=torch.float64)
            for p in picks:
                if a <= p < b:
                    want[p - a] = flat_idx.count(p)
            s.exact(f"scatter_add [{a}:{b}]", out[a:b], want)
        return
    idx = s.randint(0, s.g.cols, (s.g.rows, 2), "int64")
    ones = torch.ones((s.g.rows, 2), device=s.device)
    out = s.op("scatter_add", "float32", lambda: target.scatter_add_(1, idx, ones))
    for a, b in s.spans(s.g.rows, s.g.cols):
        want = torch.zeros((b - a, s.g.cols), dtype=torch.float64, device=s.device)
        want.scatter_add_(1, idx[a:b], torch.ones((b - a, 2), dtype=torch.float64, device=s.device))
        s.exact(f"scatter_add rows [{a}:{b}]", out[a:b], want)


@case("index", "index_add.fp32", 4.1, N_KINDS)
def index_add_fp32(s: Scope) -> None:
    torch = s.torch
    target = torch.zeros(s.g.shape(), dtype=torch.float32, device=s.device)
    picks = _picks(s, s.g.rows, s.g.cols)
    src = s.randn((len(picks), s.g.cols), "float32")
    idx = torch.tensor(picks, device=s.device)
    out = s.op("index_add", "float32", lambda: target.index_add_(0, idx, src))
    for row, i in enumerate(picks):
        s.exact(f"index_add row {i}", out[i], src[row])
    for a, b in s.spans(s.g.rows, s.g.cols):
        untouched = [r for r in range(a, b) if r not in set(picks)]
        if untouched:
            s.exact(f"index_add untouched rows in [{a}:{b}]", out[untouched], torch.zeros(1))


@case("index", "index_put_accumulate.fp32", 4.1)
def index_put_fp32(s: Scope) -> None:
    torch = s.torch
    target = torch.zeros(s.g.total, dtype=torch.float32, device=s.device)
    picks = _picks(s, s.g.total)
    flat_idx = picks + picks[1::2]
    idx = torch.tensor(flat_idx, device=s.device)
    ones = torch.ones(len(flat_idx), device=s.device)
    out = s.op("index_put", "float32", lambda: target.index_put_((idx,), ones, accumulate=True))
    for p in picks:
        want = flat_idx.count(p)
        s.truth(f"index_put accumulate at {p}", float(out[p]) == want, f"got {float(out[p])}, expected {want}")


@case("index", "embedding.fp16.bwd", 4.2, N_KINDS)
def embedding_fp16_bwd(s: Scope) -> None:
    torch = s.torch
    F = functional(s)
    weight = s.randn(s.g.shape(), "float16").requires_grad_(True)
    picks = _picks(s, s.g.rows, s.g.cols)
    idx = torch.tensor(picks + picks[:3], device=s.device)
    out = s.op("embedding", "float16", lambda: F.embedding(idx, weight))
    for row, i in enumerate(picks):
        s.exact(f"embedding row {i}", out[row], weight[i])
    g = torch.ones_like(out)
    (gw,) = s.grad("embedding", "float16", out, (weight,), g)
    for i in picks:
        count = (picks + picks[:3]).count(i)
        s.exact(f"embedding grad row {i}", gw[i], torch.full((1,), float(count)))
    for a, b in s.spans(s.g.rows, s.g.cols):
        untouched = [r for r in range(a, b) if r not in set(picks)]
        if untouched:
            s.exact(f"embedding grad untouched rows in [{a}:{b}]", gw[untouched], torch.zeros(1))


@case("index", "embedding_bag.fp32", 4.1, N_KINDS)
def embedding_bag_fp32(s: Scope) -> None:
    torch = s.torch
    F = functional(s)
    weight = s.randn(s.g.shape(), "float32")
    picks = _picks(s, s.g.rows, s.g.cols)
    bags = torch.tensor([[p, picks[(k + 1) % len(picks)]] for k, p in enumerate(picks)], device=s.device)
    out = s.op("embedding_bag", "float32", lambda: F.embedding_bag(bags, weight, mode="sum"))
    for row, (i, j) in enumerate(bags.tolist()):
        ref = weight[i].double() + weight[j].double()
        s.close(f"embedding_bag bag {row} ({i}, {j})", out[row], ref, weight[i].double().abs() + weight[j].double().abs(),
                "float32")


@case("index", "nll_loss.fp32.bwd", 8.2, N_KINDS)
def nll_loss_fp32_bwd(s: Scope) -> None:
    torch = s.torch
    F = functional(s)
    x = s.randn(s.g.shape(), "float32").requires_grad_(True)
    target = s.randint(0, s.g.cols, (s.g.rows,), "int64")
    out = s.op("nll_loss", "float32", lambda: F.nll_loss(x, target, reduction="none"))
    for a, b in s.spans(s.g.rows, s.g.cols):
        s.exact(f"nll_loss rows [{a}:{b}]", out[a:b], -x[a:b].detach().gather(1, target[a:b, None])[:, 0])
    (gx,) = s.grad("nll_loss", "float32", out, (x,), torch.ones_like(out))
    for a, b in s.spans(s.g.rows, s.g.cols):
        want = torch.zeros((b - a, s.g.cols), dtype=torch.float64, device=s.device)
        want.scatter_(1, target[a:b, None], -1.0)
        s.exact(f"nll_loss grad rows [{a}:{b}]", gx[a:b], want)


@case("index", "nll_loss_spatial.fp16.bwd", 4.2, N_KINDS)
def nll_loss_spatial_bwd(s: Scope) -> None:
    """The spatial form (``(batch, classes, 2, 1)`` inputs, per-pixel targets)."""
    torch = s.torch
    F = functional(s)
    batch = -(-s.g.total // (2 * s.g.cols))
    x = s.randn((batch, s.g.cols, 2, 1), "float16").requires_grad_(True)
    target = s.randint(0, s.g.cols, (batch, 2, 1), "int64")
    loss = F.nll_loss(x, target, reduction="sum")
    (gx,) = s.grad("nll_loss2d", "float16", loss, (x,), torch.ones_like(loss))
    for a, b in s.spans(batch, 2 * s.g.cols):
        want = torch.zeros((b - a, s.g.cols, 2, 1), dtype=torch.float64, device=s.device)
        want.scatter_(1, target[a:b, None], -1.0)
        s.exact(f"nll_loss (spatial) grad batch [{a}:{b}]", gx[a:b], want)


@case("index", "cross_entropy.bf16.bwd", 8.2, N_KINDS)
def cross_entropy_bwd(s: Scope) -> None:
    torch = s.torch
    F = functional(s)
    x = s.randn(s.g.shape(), "bfloat16").requires_grad_(True)
    target = s.randint(0, s.g.cols, (s.g.rows,), "int64")
    out = s.op("cross_entropy", "bfloat16", lambda: F.cross_entropy(x, target, reduction="none"))
    g = torch.ones_like(out)
    (gx,) = s.grad("cross_entropy", "bfloat16", out, (x,), g)
    for a, b in s.spans(s.g.rows, s.g.cols):
        xs = x[a:b].detach().double().requires_grad_(True)
        ref = F.cross_entropy(xs, target[a:b], reduction="none")
        s.close(f"cross_entropy rows [{a}:{b}]", out[a:b], ref, ref.abs() + 1.0, "bfloat16")
        (gref,) = torch.autograd.grad(ref, (xs,), torch.ones_like(ref))
        s.close(f"cross_entropy grad rows [{a}:{b}]", gx[a:b], gref, _row_scale(gref), "bfloat16")


@case("index", "bincount.int32", 12.1)
def bincount_int32(s: Scope) -> None:
    torch = s.torch
    bins = 1031
    x = s.randint(0, bins, (s.g.total,), "int32")
    out = s.op("bincount", "int32", lambda: torch.bincount(x, minlength=bins))
    want = torch.zeros(bins, dtype=torch.int64, device=s.device)
    for lo in range(0, x.numel(), CHUNK):
        want += torch.bincount(x[lo : lo + CHUNK], minlength=bins)
    s.exact("bincount", out, want)


@case("index", "histc.fp32", 4.1)
def histc_fp32(s: Scope) -> None:
    torch = s.torch
    # Enough bins that every count stays below 2^24, where float32 counts are exact.
    bins = 4096 if s.ctx.is_gpu else 64
    x = s.rand((s.g.total,), "float32")
    out = s.op("histc", "float32", lambda: torch.histc(x, bins=bins, min=0.0, max=1.0))
    want = torch.zeros(bins, dtype=torch.float64, device=s.device)
    for lo in range(0, x.numel(), CHUNK):
        want += torch.histc(x[lo : lo + CHUNK], bins=bins, min=0.0, max=1.0).double()
    s.exact("histc", out, want)


@case("index", "nonzero.bool", 1.2)
def nonzero_bool(s: Scope) -> None:
    torch = s.torch
    x = torch.zeros(s.g.shape(), dtype=torch.bool, device=s.device)
    flat = x.view(-1)
    picks = _picks(s, flat.numel())
    for p in picks:
        flat[p] = True
    out = s.op("nonzero", "bool", lambda: torch.nonzero(flat))
    got = [int(v) for v in out.view(-1).tolist()] if out.numel() <= 4096 else None
    s.truth("nonzero of planted Trues", got == picks, f"got {got if got is not None else out.shape}, planted {picks}")


@case("index", "masked_select.fp16", 12.1, N_KINDS)
def masked_select_fp16(s: Scope) -> None:
    torch = s.torch
    x = s.randn(s.g.shape(), "float16")
    mask = torch.zeros(s.g.shape(), dtype=torch.bool, device=s.device)
    picks = _picks(s, x.numel())
    mask.view(-1)[torch.tensor(picks, device=s.device)] = True
    out = s.op("masked_select", "float16", lambda: torch.masked_select(x, mask))
    s.exact("masked_select of planted positions", out, torch.stack([x.view(-1)[p] for p in picks]))


# Index values past int32: int64 indices whose values pass 2^31 (and 2^32 at ``d32``) into
# a source whose indexed dimension is that long. Sources are position-coded (uint8 ones with
# period ``BYTE_CODE_PERIOD``) or planted at the positions read, so each value read names the
# position it came from, and each write lands where its index says or nowhere else in the
# spans. Planting uses one-element slices (a pointer offset, no index kernel).


def _long_index(s: Scope) -> tuple[list[int], Any]:
    """Positions along the long dimension (each span's ends, 2^31 + 7, 2^32 + 7, random ones
    past 2^31, the last) and the same as an int64 tensor on the device."""
    picks = _picks(s, s.g.length)
    return picks, s.torch.tensor(picks, dtype=s.torch.int64, device=s.device)


def _written(s: Scope, what: str, out: Any, values: dict[int, float]) -> None:
    """A 1-D result of the long dimension holds ``values`` at their positions and zero at
    every other position of the spans."""
    torch = s.torch
    for a, b in s.spans(s.g.length):
        want = torch.zeros(b - a, dtype=torch.float64)
        for p, v in values.items():
            if a <= p < b:
                want[p - a] = v
        s.exact(f"{what} [{a}:{b}]", out[a:b], want)


@case("index", "index_select.long.uint8", 1.1, LONG_KINDS)
def index_select_long_uint8(s: Scope) -> None:
    x = s.coded(s.g.length, "uint8", period=BYTE_CODE_PERIOD)
    picks, idx = _long_index(s)
    out = s.op("index_select", "uint8", lambda: x.index_select(0, idx))
    s.exact("index_select at int64 indices past 2^31", out, s.code_of(idx, BYTE_CODE_PERIOD))


@case("index", "gather.long.bool", 1.1, LONG_KINDS)
def gather_long_bool(s: Scope) -> None:
    torch = s.torch
    x = torch.zeros(s.g.length, dtype=torch.bool, device=s.device)
    picks, idx = _long_index(s)
    # Not a period of two: a result read from a shifted place differs from the plan.
    planted = {p for k, p in enumerate(picks) if k % 3 != 1}
    for p in planted:
        x[p : p + 1] = True
    out = s.op("gather", "bool", lambda: x.gather(0, idx))
    want = torch.tensor([float(p in planted) for p in picks])
    s.exact("gather of planted Trues at int64 indices past 2^31", out, want)


@case("index", "embedding.long.fp16.bwd", 4.2, LONG_KINDS)
def embedding_long_fp16_bwd(s: Scope) -> None:
    """A table of one column whose rows pass 2^31: each looked-up row holds its row's code,
    and the dense gradient of the table (upstream ones) counts the look-ups of each row,
    zero on every other row of the spans."""
    torch = s.torch
    F = functional(s)
    weight = s.coded(s.g.length, "float16").view(-1, 1).requires_grad_(True)
    picks, _ = _long_index(s)
    # The last three rows (past every boundary) are looked up twice.
    looked_up = picks + picks[-3:]
    idx = torch.tensor(looked_up, dtype=torch.int64, device=s.device)
    out = s.op("embedding", "float16", lambda: F.embedding(idx, weight))
    s.exact("embedding rows at int64 indices past 2^31", out[:, 0], s.code_of(idx))
    (gw,) = s.grad("embedding", "float16", out, (weight,), torch.ones_like(out))
    _written(s, "embedding grad", gw[:, 0], {p: float(looked_up.count(p)) for p in picks})


@case("index", "index_add.long.fp16", 2.1, LONG_KINDS)
def index_add_long_fp16(s: Scope) -> None:
    torch = s.torch
    target = torch.zeros(s.g.length, dtype=torch.float16, device=s.device)
    picks, idx = _long_index(s)
    # Codes plus one: never zero, exact in float16.
    added = s.code_of(idx) + 1
    out = s.op("index_add", "float16", lambda: target.index_add_(0, idx, added.to(torch.float16)))
    _written(s, "index_add", out, dict(zip(picks, added.tolist())))


@case("index", "scatter.long.uint8", 1.1, LONG_KINDS)
def scatter_long_uint8(s: Scope) -> None:
    torch = s.torch
    target = torch.zeros(s.g.length, dtype=torch.uint8, device=s.device)
    picks, idx = _long_index(s)
    written = s.code_of(idx, BYTE_CODE_PERIOD) + 1
    out = s.op("scatter", "uint8", lambda: target.scatter_(0, idx, written.to(torch.uint8)))
    _written(s, "scatter", out, dict(zip(picks, written.tolist())))


@case("index", "index_fill.long.bool", 1.1, LONG_KINDS)
def index_fill_long_bool(s: Scope) -> None:
    torch = s.torch
    target = torch.zeros(s.g.length, dtype=torch.bool, device=s.device)
    picks, idx = _long_index(s)
    out = s.op("index_fill", "bool", lambda: target.index_fill_(0, idx, True))
    _written(s, "index_fill", out, dict.fromkeys(picks, 1.0))


@case("index", "bincount.values.int64", 8.1, LONG_KINDS)
def bincount_values_int64(s: Scope) -> None:
    """``bincount`` of a few int64 values past 2^31 (2^32), the largest the last position:
    one count per position up to it (16 GiB of int64 counts at ``d31``, 32 GiB at
    ``d32``), each picked value counted where it is and nothing elsewhere in the spans."""
    torch = s.torch
    picks, _ = _long_index(s)
    values = picks + picks[1::2]
    x = torch.tensor(values, dtype=torch.int64, device=s.device)
    out = s.op("bincount", "int64", lambda: torch.bincount(x))
    s.truth("bincount: one count per value up to the largest", out.numel() == s.g.length,
            f"{out.numel()} counts for a largest value of {s.g.length - 1}")
    if out.numel() == s.g.length:
        _written(s, "bincount", out, {p: float(values.count(p)) for p in picks})


@case("index", "histc.bins.fp64", 8.1, LONG_KINDS)
def histc_bins_fp64(s: Scope) -> None:
    """``histc`` with as many bins as the long dimension over [0, bins): value p + 0.5
    falls in bin p (exact in float64), so bin numbers pass 2^31 (2^32)."""
    torch = s.torch
    picks, idx = _long_index(s)
    values = picks + picks[::2]
    x = torch.tensor(values, dtype=torch.float64, device=s.device) + 0.5
    bins = s.g.length
    out = s.op("histc", "float64", lambda: torch.histc(x, bins=bins, min=0.0, max=float(bins)))
    _written(s, "histc", out, {p: float(values.count(p)) for p in picks})


@case("index", "embedding_bag.max.fp32.bwd", 8.2, N_KINDS)
def embedding_bag_max_bwd(s: Scope) -> None:
    """Last of its group at ``n31``/``n32``: a sticky fault here (an illegal address, as
    torch 2.11 with CUDA 13 gives past 2^31) comes after every other case has run in the
    probe's own process, and costs no fresh process.

    ``embedding_bag`` (max) with int32 indices into a table past the boundary: each bag of
    two rows is their element-wise maximum, and the table's gradient is the upstream gradient
    on the row that held each maximum, zero on every row no bag read."""
    torch = s.torch
    F = functional(s)
    weight = s.randn(s.g.shape(), "float32").requires_grad_(True)
    picks = _picks(s, s.g.rows, s.g.cols)
    pairs = [(p, picks[(k + 1) % len(picks)]) for k, p in enumerate(picks)]
    bags = torch.tensor(pairs, device=s.device, dtype=torch.int32)
    out = s.op("embedding_bag", "float32", lambda: F.embedding_bag(bags, weight, mode="max"))
    w = weight.detach()
    for row, (i, j) in enumerate(pairs):
        s.exact(f"embedding_bag max bag {row} ({i}, {j})", out[row], torch.maximum(w[i], w[j]))
    g = s.randn(tuple(out.shape), "float32")
    (gw,) = s.grad("embedding_bag", "float32", out, (weight,), g)
    want = {i: torch.zeros(s.g.cols, dtype=torch.float64, device=s.device) for i in picks}
    for row, (i, j) in enumerate(pairs):
        # Random rows never tie: the larger of the two takes the gradient.
        first = (w[i] > w[j]).double()
        want[i] += g[row].double() * first
        want[j] += g[row].double() * (1 - first)
    for i in picks:
        s.close(f"embedding_bag max grad row {i}", gw[i], want[i], want[i].abs() + 1e-6, "float32")
    read = set(picks)
    for a, b in s.spans(s.g.rows, s.g.cols):
        untouched = [r for r in range(a, b) if r not in read]
        if untouched:
            s.exact(f"embedding_bag max grad untouched rows in [{a}:{b}]", gw[untouched], torch.zeros(1))



# =======================================================================================
# sort and top-k


def sorted_rows(s: Scope, name: str, dtype: str, fn: Callable[[Any], Any], x: Any = None) -> None:
    """``fn`` (a sort or top-k along dimension 1) on the rows of ``x`` (by default the
    geometry's main tensor), checked on spans of rows."""
    if x is None:
        x = s.randn(s.g.shape(), dtype)
    values, indices = s.op(name, dtype, lambda: fn(x))
    # Past the element boundaries a row is x.shape[1] elements; past g16, one item.
    for a, b in s.spans(x.shape[0], 1 if s.g.long else x.shape[1]):
        v, _ = fn(x[a:b])
        s.exact(f"{name} values rows [{a}:{b}]", values[a:b], v)
        # Ties may be ordered differently: each index must point at its value.
        s.exact(f"{name} indices rows [{a}:{b}]", x[a:b].gather(1, indices[a:b]), v)


@case("sort", "sort.fp32", 24.1, N_KINDS)
def sort_fp32(s: Scope) -> None:
    sorted_rows(s, "sort", "float32", lambda x: s.torch.sort(x, dim=1))


@case("sort", "topk.fp16", 4.1, N_KINDS)
def topk_fp16(s: Scope) -> None:
    sorted_rows(s, "topk", "float16", lambda x: s.torch.topk(x, 4, dim=1))


@case("sort", "kthvalue.fp32", 12.1, N_KINDS)
def kthvalue_fp32(s: Scope) -> None:
    torch = s.torch
    x = s.randn(s.g.shape(), "float32")
    values, indices = s.op("kthvalue", "float32", lambda: torch.kthvalue(x, 7, dim=1))
    for a, b in s.spans(x.shape[0], x.shape[1]):
        v, _ = torch.kthvalue(x[a:b], 7, dim=1)
        s.exact(f"kthvalue rows [{a}:{b}]", values[a:b], v)
        s.exact(f"kthvalue indices rows [{a}:{b}]", x[a:b].gather(1, indices[a:b, None])[:, 0], v)


@case("sort", "argsort.bf16", 20.1, N_KINDS)
def argsort_bf16(s: Scope) -> None:
    torch = s.torch
    x = s.randn(s.g.shape(), "bfloat16")
    order = s.op("argsort", "bfloat16", lambda: torch.argsort(x, dim=1))
    for a, b in s.spans(x.shape[0], x.shape[1]):
        s.exact(f"argsort rows [{a}:{b}]", x[a:b].gather(1, order[a:b]), torch.sort(x[a:b], dim=1).values)


@case("sort", "sort.flat.fp16", 30.1)
def sort_flat_fp16(s: Scope) -> None:
    """A sort of every element at once: planted extremes must land at both ends with their
    indices, and every span must be ordered and point at its values."""
    torch = s.torch
    x = s.randn((s.g.total,), "float16")
    low, high = s.sentinels(x.numel(), 2)[:2]
    x[low] = -1000.0
    x[high] = 1000.0
    values, indices = s.op("sort", "float16", lambda: torch.sort(x))
    s.truth("sort: the planted minimum comes first", float(values[0]) == -1000.0 and int(indices[0]) == low,
            f"first is {float(values[0])} from {int(indices[0])}, planted -1000 at {low}")
    s.truth("sort: the planted maximum comes last", float(values[-1]) == 1000.0 and int(indices[-1]) == high,
            f"last is {float(values[-1])} from {int(indices[-1])}, planted 1000 at {high}")
    for a, b in s.spans(x.numel()):
        span = values[a:b]
        if b - a > 1:
            s.truth(f"sort: span [{a}:{b}] is ordered", bool((span[1:] >= span[:-1]).all()), "not ordered")
        s.exact(f"sort: indices of span [{a}:{b}]", x[indices[a:b]], span)


@case("sort", "topk.flat.fp32", 12.1, ("n31", "d31"))
def topk_flat_fp32(s: Scope) -> None:
    torch = s.torch
    x = s.randn((s.g.total,), "float32")
    picks = s.sentinels(x.numel(), 4)
    for rank, p in enumerate(picks):
        x[p] = 1000.0 + rank
    k = len(picks)
    values, indices = s.op("topk", "float32", lambda: torch.topk(x, k))
    want = [(1000.0 + r, p) for r, p in sorted(enumerate(picks), key=lambda rp: -rp[0])]
    got = list(zip([float(v) for v in values.tolist()], [int(i) for i in indices.tolist()]))
    s.truth("topk of planted maxima", got == want, f"got {got}, planted {want}")


# =======================================================================================
# attention


_SDPA_BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION"}


def check_attention(s: Scope, backend: str, dtype: str, backward: bool, along: str | None = None) -> None:
    """Attention on ``(batch, 4 heads, 128, 64)`` past the element boundaries, or (``along``
    ``heads`` or ``batch``) with that one dimension past the ``g16`` boundary and sequences
    of 16, head dim 32; checked on spans of that dimension."""
    torch = s.torch
    F = functional(s)
    if along is None:
        heads, seq, dim = (4, 128, 64) if s.ctx.is_gpu else (2, 8, 8)
        per = heads * seq * dim
        batch = -(-s.g.total // per)
        shape, axis = (batch, heads, seq, dim), 0
    else:
        seq, dim = (16, 32) if s.ctx.is_gpu else (4, 8)
        per, batch = 1, s.g.length
        shape, axis = ((1, batch, seq, dim), 1) if along == "heads" else ((batch, 1, seq, dim), 0)
    q, k, v = (s.randn(shape, dtype) for _ in range(3))
    if backward:
        for t in (q, k, v):
            t.requires_grad_(True)

    def run() -> Any:
        if backend == "default":
            return F.scaled_dot_product_attention(q, k, v)
        attention = getattr(torch.nn, "attention", None)
        if attention is None or not hasattr(attention, "sdpa_kernel"):
            raise CaseRefused(f"this torch {torch.__version__} cannot force an attention backend")
        chosen = getattr(attention.SDPBackend, _SDPA_BACKENDS[backend], None)
        if chosen is None:
            raise CaseRefused(f"this torch {torch.__version__} has no {backend} attention backend")
        with attention.sdpa_kernel([chosen]):
            return F.scaled_dot_product_attention(q, k, v)

    if backend != "default" and not s.ctx.is_gpu:
        raise CaseRefused(f"the {backend} attention backend needs a GPU")
    out = s.op(f"sdpa.{backend}", dtype, run)

    def reference(a: int, b: int) -> tuple[Any, Any, Any, Any]:
        qs, ks, vs = (t.detach().narrow(axis, a, b - a).double().requires_grad_(backward) for t in (q, k, v))
        return F.scaled_dot_product_attention(qs, ks, vs), qs, ks, vs

    what = along or "batches"
    for a, b in s.spans(batch, per):
        ref, *_ = reference(a, b)
        s.close(f"sdpa {what} [{a}:{b}]", out.narrow(axis, a, b - a), ref, _row_scale(ref) + 1e-3, dtype)
    if not backward:
        return
    g = s.randn(shape, dtype)
    grads = s.grad(f"sdpa.{backend}", dtype, out, (q, k, v), g)
    del out
    for a, b in s.spans(batch, per):
        ref, qs, ks, vs = reference(a, b)
        refs = torch.autograd.grad(ref, (qs, ks, vs), g.narrow(axis, a, b - a).double())
        for name, got, want in zip(("dq", "dk", "dv"), grads, refs):
            # Gradients sum products that cancel (dS = P∘(dP - D)): judged against the
            # slice's largest gradient, not each row's.
            s.close(f"sdpa {name} {what} [{a}:{b}]", got.narrow(axis, a, b - a), want, want.abs().amax() + 1e-6, dtype)


def _register_attention() -> None:
    """One case per (backend, dtype, direction) at the element boundaries, in this order:
    the forward cases (9.1 bytes per element), then the backward ones (21.1: cuDNN's
    backward workspace)."""
    forward = [("default", "bfloat16"), ("default", "float16"), ("flash", "bfloat16"), ("efficient", "bfloat16"),
               ("cudnn", "bfloat16")]
    backward = [("default", "bfloat16"), ("efficient", "bfloat16"), ("cudnn", "bfloat16")]
    short = {"bfloat16": "bf16", "float16": "fp16"}
    for cases, is_backward, per_element in ((forward, False, 9.1), (backward, True, 21.1)):
        for backend, dtype in cases:

            def run(s: Scope, backend: str = backend, dtype: str = dtype, is_backward: bool = is_backward) -> None:
                check_attention(s, backend, dtype, is_backward)

            name = f"sdpa.{backend}.{short[dtype]}" + (".bwd" if is_backward else "")
            case("attention", name, per_element, N_KINDS)(run)


_register_attention()


# =======================================================================================
# copies


def _code_check(s: Scope, what: str, out: Any, flat_index_of: Callable[[int, int], Any]) -> None:
    """``out`` viewed flat holds the code of ``flat_index_of(a, b)`` on each span."""
    flat = out.reshape(-1)
    for a, b in s.spans(flat.numel()):
        s.exact(f"{what} [{a}:{b}]", flat[a:b], s.code_of(flat_index_of(a, b)))


def _idx(s: Scope, a: int, b: int) -> Any:
    return s.torch.arange(a, b, dtype=s.torch.int64, device=s.device)


@case("copy", "clone.fp16", 4.1, ALL_KINDS)
def clone_fp16(s: Scope) -> None:
    x = s.coded(s.g.total, "float16")
    out = s.op("clone", "float16", lambda: x.clone())
    _code_check(s, "clone", out, lambda a, b: _idx(s, a, b))


@case("copy", "transpose_contiguous.fp16", 4.1, N_KINDS)
def transpose_fp16(s: Scope) -> None:
    rows, cols = s.g.rows, s.g.cols
    x = s.coded(rows * cols, "float16").view(cols, rows)
    out = s.op("contiguous", "float16", lambda: x.t().contiguous())
    # out[r, c] = x[c, r], whose flat source index is c·rows + r.
    _code_check(s, "transpose", out, lambda a, b: (_idx(s, a, b) % cols) * rows + _idx(s, a, b) // cols)


@case("copy", "cat.fp16", 4.1)
def cat_fp16(s: Scope) -> None:
    torch = s.torch
    n = s.g.total
    half = n // 2 + 3
    first = s.coded(half, "float16")
    second = s.coded(n - half, "float16", start=half)
    out = s.op("cat", "float16", lambda: torch.cat([first, second]))
    _code_check(s, "cat", out, lambda a, b: _idx(s, a, b))


@case("copy", "flip.fp16", 4.1)
def flip_fp16(s: Scope) -> None:
    n = s.g.total
    x = s.coded(n, "float16")
    out = s.op("flip", "float16", lambda: x.flip(0))
    _code_check(s, "flip", out, lambda a, b: (n - 1) - _idx(s, a, b))


@case("copy", "roll.fp16", 4.1)
def roll_fp16(s: Scope) -> None:
    n = s.g.total
    shift = s.g.bound // 3 + 5
    x = s.coded(n, "float16")
    out = s.op("roll", "float16", lambda: x.roll(shift))
    _code_check(s, "roll", out, lambda a, b: (_idx(s, a, b) - shift) % n)


@case("copy", "repeat.fp16", 3.1)
def repeat_fp16(s: Scope) -> None:
    part = s.g.total // 2 + 1
    x = s.coded(part, "float16")
    out = s.op("repeat", "float16", lambda: x.repeat(2))
    _code_check(s, "repeat", out, lambda a, b: _idx(s, a, b) % part)


@case("copy", "pad.fp16", 4.1, N_KINDS)
def pad_fp16(s: Scope) -> None:
    torch = s.torch
    rows, cols = s.g.rows, s.g.cols
    x = s.coded(rows * cols, "float16").view(rows, cols)
    out = s.op("constant_pad_nd", "float16", lambda: functional(s).pad(x, (1, 2)))
    for a, b in s.spans(rows, cols):
        want = torch.zeros((b - a, cols + 3), dtype=torch.float64, device=s.device)
        want[:, 1 : cols + 1] = s.code_of(_idx(s, a * cols, b * cols)).view(b - a, cols)
        s.exact(f"pad rows [{a}:{b}]", out[a:b], want)


@case("copy", "strided_clone.fp16", 3.1, N_KINDS)
def strided_clone_fp16(s: Scope) -> None:
    rows, cols = s.g.rows, s.g.cols
    x = s.coded(rows * cols, "float16").view(rows, cols)
    out = s.op("clone", "float16", lambda: x[:, ::2].contiguous())
    kept = out.shape[1]
    _code_check(s, "strided clone", out, lambda a, b: (_idx(s, a, b) // kept) * cols + 2 * (_idx(s, a, b) % kept))


@case("copy", "copy_to_fp32.fp16", 6.1)
def copy_to_fp32(s: Scope) -> None:
    torch = s.torch
    x = s.coded(s.g.total, "float16")
    out = torch.empty(s.g.total, dtype=torch.float32, device=s.device)
    got = s.op("copy_", "float16", lambda: out.copy_(x))
    _code_check(s, "copy_ to float32", got, lambda a, b: _idx(s, a, b))


# Position codes must be exact in float16.
assert CODE_PERIOD < 2048
