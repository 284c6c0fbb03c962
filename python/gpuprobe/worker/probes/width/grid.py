"""The width family's ``g16`` cases: one dimension just past 2^16 in small tensors.

A CUDA launch grid holds at most 65535 blocks on its second and third axes. A kernel that
maps a batch, a channel or plane count, or attention heads onto those axes fails to launch
("invalid configuration argument"), or leaves what lies past them unwritten, once that
dimension passes 2^16; the tensors involved are a few megabytes. An adaptive pool's window
bounds multiply an output index by an input size: with one spatial size past 2^16 and an
output size of the same order the product passes 2^31 in 32-bit arithmetic.

Oracles, as for every width case (``scope``): each span of the long dimension (the
start, across 2^16, a random place past it, the end) of the result and of the input
gradient equals the same operation on that span alone, computed in float64 on the device
(``along``); the adaptive pools over a tall input are checked whole against their closed
form (window means and maxima of an ``arange`` input, and the gradients that follow).

On a CPU device the boundary is 2^8 (``scope.CPU_BITS_BELOW_SMALL``), so CI runs every
case, its oracle and the planted failures.
"""

from __future__ import annotations

from typing import Any, Callable

from gpuprobe.worker.probes.width.cases import check_attention, first_output, functional, sorted_rows
from gpuprobe.worker.probes.width.scope import GRID_KINDS, Scope, case

#: Device bytes planned per item of the long dimension (the tensors of one batch element,
#: plane or head at the case's peak, with room for workspaces).
SMALL_ITEM = 2048.0
ATTENTION_ITEM = 16384.0


def along(
    s: Scope,
    name: str,
    dtype: str,
    fn: Callable[..., Any],
    x: Any,
    dim: int,
    backward: bool,
    extra: tuple[Any, ...] = (),
) -> None:
    """``fn(x, *extra)`` on the device; each span of dimension ``dim`` of its result (and,
    ``backward``, of the gradient of ``x``) equals ``fn`` on that span of ``x`` (and of each
    ``extra`` tensor) alone in float64, within the dtype's tolerance of the span's largest
    value. ``fn`` must keep dimension ``dim`` where it is and treat its items apart."""
    torch = s.torch
    if backward:
        x.requires_grad_(True)
    out = first_output(s.op(name, dtype, lambda: fn(x, *extra)))
    spans = s.spans(x.shape[dim])

    def part(t: Any, a: int, b: int) -> Any:
        piece = t.detach().narrow(dim, a, b - a)
        return piece.double() if piece.is_floating_point() else piece

    for a, b in spans:
        ref = first_output(fn(part(x, a, b), *(part(t, a, b) for t in extra)))
        s.close(f"{name} [{a}:{b}] of dim {dim}", out.detach().narrow(dim, a, b - a), ref, ref.abs().amax() + 1e-6, dtype)
    if not backward:
        return
    g = s.randn(tuple(out.shape), dtype)
    (gx,) = s.grad(name, dtype, out, (x,), g)
    del out
    for a, b in spans:
        xs = part(x, a, b).requires_grad_(True)
        (want,) = torch.autograd.grad(first_output(fn(xs, *(part(t, a, b) for t in extra))), (xs,), part(g, a, b))
        s.close(f"{name} grad [{a}:{b}] of dim {dim}", gx.narrow(dim, a, b - a), want, want.abs().amax() + 1e-6, dtype)


def _n(s: Scope) -> int:
    """The long dimension: 2^16 + 2^10 + 1 on a GPU."""
    return s.g.length


_SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def _random_case(
    group: str,
    case_name: str,
    op_name: str,
    shape_of: Callable[[int], tuple[int, ...]],
    dim: int,
    dtype: str,
    make: Callable[[Scope], Callable[[Any], Any]],
    backward: bool,
) -> None:
    """Registers ``case_name``: ``make(s)`` on a standard normal input of
    ``shape_of(long dimension)``, checked ``along`` dimension ``dim``."""

    def run(s: Scope) -> None:
        along(s, op_name, dtype, make(s), s.randn(shape_of(_n(s)), dtype), dim, backward)

    case(group, case_name, SMALL_ITEM, GRID_KINDS)(run)


# =======================================================================================
# attention: heads or batch past 2^16 (the fused kernels' grid axes)


def _register_attention() -> None:
    for backend in ("default", "flash", "efficient", "cudnn"):
        for where in ("heads", "batch"):

            def run(s: Scope, backend: str = backend, where: str = where) -> None:
                check_attention(s, backend, "bfloat16", True, along=where)

            case("attention", f"sdpa.{backend}.bf16.bwd.{where}", ATTENTION_ITEM, GRID_KINDS)(run)


_register_attention()


# =======================================================================================
# pooling and upsampling: planes (or batch) past 2^16


def _pooled(name: str, dims: int, make: Callable[[Scope], Callable[[Any], Any]], where: str = "planes") -> None:
    """Registers ``<name>.fp32.bwd.<where>``: ``make(s)`` applied to a float32 input of
    ``(1, n, 4, 4)`` (``dims`` 2; ``(1, n, 8)`` for 1, ``(1, n, 2, 4, 4)`` for 3), or with
    the batch long (``where`` ``batch``: ``(n, 1, ...)``)."""
    spatial = {1: (8,), 2: (4, 4), 3: (2, 4, 4)}[dims]
    batch = where == "batch"
    _random_case(
        "pool",
        f"{name}.fp32.bwd.{where}",
        name,
        lambda n: (n, 1, *spatial) if batch else (1, n, *spatial),
        0 if batch else 1,
        "float32",
        make,
        True,
    )


_pooled("avg_pool2d", 2, lambda s: lambda x: functional(s).avg_pool2d(x, 2))
_pooled("max_pool2d", 2, lambda s: lambda x: functional(s).max_pool2d(x, 2))
_pooled("avg_pool3d", 3, lambda s: lambda x: functional(s).avg_pool3d(x, 2))
_pooled("max_pool3d", 3, lambda s: lambda x: functional(s).max_pool3d(x, 2))
_pooled("avg_pool1d", 1, lambda s: lambda x: functional(s).avg_pool1d(x, 2), "batch")
_pooled("max_pool1d", 1, lambda s: lambda x: functional(s).max_pool1d(x, 3, 2))
_pooled("adaptive_avg_pool2d", 2, lambda s: lambda x: functional(s).adaptive_avg_pool2d(x, (3, 3)))
_pooled("adaptive_max_pool2d", 2, lambda s: lambda x: functional(s).adaptive_max_pool2d(x, (3, 3)))
_pooled("adaptive_avg_pool3d", 3, lambda s: lambda x: functional(s).adaptive_avg_pool3d(x, (2, 3, 3)))
_pooled("adaptive_max_pool3d", 3, lambda s: lambda x: functional(s).adaptive_max_pool3d(x, (2, 3, 3)))


def _upsampled(mode: str, dims: int, where: str = "planes") -> None:
    """Registers a 2× ``interpolate`` of ``mode`` (``align_corners=False`` where it applies)."""
    corners = {} if mode == "nearest" else {"align_corners": False}
    _pooled(
        f"upsample_{mode}{dims}d",
        dims,
        lambda s: lambda x: functional(s).interpolate(x, scale_factor=2, mode=mode, **corners),
        where,
    )


_upsampled("nearest", 2)
_upsampled("bilinear", 2)
_upsampled("bicubic", 2)
_upsampled("nearest", 3)
_upsampled("trilinear", 3)
_upsampled("linear", 1, "batch")


def _tall_adaptive(s: Scope, mode: str, channels_last: bool) -> None:
    """An adaptive pool from a tall ``(1, 2, I, 1)`` input (I past 2^16) to ``(O, 1)`` with
    O ≈ 0.6 I, so that output index × input size passes 2^31. The input is ``arange`` (the
    second channel offset by 100000, all exact in float32): output row o is the mean (avg)
    or the last element (max) of the window [⌊oI/O⌋, ⌈(o+1)I/O⌉), and with an upstream
    gradient of ones, element i's gradient is the sum of 1/(window size) over the windows
    that hold it (avg) or the number of windows whose maximum it is (max)."""
    torch = s.torch
    F = functional(s)
    size = _n(s)
    rows = size * 3 // 5 | 1
    offset = 100000.0
    base = torch.arange(size, dtype=torch.float32, device=s.device)
    x = torch.stack([base, base + offset]).view(1, 2, size, 1)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    x.requires_grad_(True)
    o = torch.arange(rows, dtype=torch.int64, device=s.device)
    start = (o * size) // rows
    end = -((-(o + 1) * size) // rows)
    name = f"adaptive_{mode}_pool2d"
    if mode == "avg":
        out = s.op(name, "float32", lambda: F.adaptive_avg_pool2d(x, (rows, 1)))
    else:
        out = s.op(name, "float32", lambda: F.adaptive_max_pool2d(x, (rows, 1), return_indices=True))
    values = first_output(out)
    want = (start + end - 1).double() / 2 if mode == "avg" else (end - 1).double()
    for channel in range(2):
        expected = want + offset * channel
        s.close(f"{name} tall, channel {channel}", values[0, channel, :, 0], expected, expected + 1, "float32")
    if mode == "max":
        s.exact(f"{name} tall, indices", out[1][0, 0, :, 0], end - 1)
    (gx,) = s.grad(name, "float32", values, (x,), torch.ones_like(values))
    grad = torch.zeros(size, dtype=torch.float64, device=s.device)
    if mode == "avg":
        # Σ over windows of 1/(end - start) on [start, end): a difference array, summed.
        step = torch.zeros(size + 1, dtype=torch.float64, device=s.device)
        share = 1.0 / (end - start).double()
        step.index_add_(0, start, share)
        step.index_add_(0, end, -share)
        grad = step.cumsum(0)[:size]
    else:
        grad.index_add_(0, end - 1, torch.ones(rows, dtype=torch.float64, device=s.device))
    for channel in range(2):
        s.close(f"{name} tall grad, channel {channel}", gx[0, channel, :, 0], grad, grad.abs() + 1, "float32")


case("pool", "adaptive_avg_pool2d.tall.fp32.bwd", 64.0, GRID_KINDS)(lambda s: _tall_adaptive(s, "avg", False))
case("pool", "adaptive_avg_pool2d.tall.channels_last.fp32.bwd", 64.0, GRID_KINDS)(
    lambda s: _tall_adaptive(s, "avg", True)
)
case("pool", "adaptive_max_pool2d.tall.fp32.bwd", 64.0, GRID_KINDS)(lambda s: _tall_adaptive(s, "max", False))


# =======================================================================================
# copies: padding with planes (or batch) past 2^16


def _padded(mode: str, dims: int, where: str = "planes") -> None:
    spatial = {1: (8,), 2: (4, 4), 3: (2, 4, 4)}[dims]
    # Last dimension first; reflection needs each pad below its dimension's size.
    pads = {1: (3, 3), 2: (2, 1, 1, 2), 3: (1, 1, 2, 1, 1, 1)}[dims]

    batch = where == "batch"
    _random_case(
        "copy",
        f"{mode}_pad{dims}d.fp32.bwd.{where}",
        f"{mode}_pad{dims}d",
        lambda n: (n, 1, *spatial) if batch else (1, n, *spatial),
        0 if batch else 1,
        "float32",
        lambda s: lambda x: functional(s).pad(x, pads, mode=mode),
        True,
    )


for _mode in ("reflect", "replicate"):
    for _dims in (1, 2, 3):
        _padded(_mode, _dims)
    _padded(_mode, 1, "batch")
_padded("circular", 2)
_padded("constant", 3)


# =======================================================================================
# normalization: batch or channels past 2^16


def _norm(name: str, shape_of: Callable[[int], tuple[int, ...]], dim: int, dtype: str,
          make: Callable[[Scope], Callable[[Any], Any]]) -> None:
    where = "batch" if dim == 0 else "channels"
    _random_case("norm", f"{name}.{_SHORT[dtype]}.bwd.{where}", name, shape_of, dim, dtype, make, True)


_norm("group_norm", lambda n: (n, 4, 8), 0, "float32", lambda s: lambda x: functional(s).group_norm(x, 2))
_norm(
    "batch_norm",
    lambda n: (4, n, 8),
    1,
    "float32",
    lambda s: lambda x: functional(s).batch_norm(x, None, None, training=True),
)
_norm("instance_norm", lambda n: (2, n, 8), 1, "float32", lambda s: lambda x: functional(s).instance_norm(x))
_norm("layer_norm", lambda n: (n, 64), 0, "bfloat16", lambda s: lambda x: functional(s).layer_norm(x, (64,)))


# =======================================================================================
# softmax, scans and reductions along or beside a dimension past 2^16


def _beside(group: str, name: str, shape_of: Callable[[int], tuple[int, ...]], dim: int, dtype: str,
            make: Callable[[Scope], Callable[[Any], Any]], backward: bool) -> None:
    """``make(s)`` reduces or scans along another dimension than ``dim`` (the long one)."""
    suffix = ".bwd" if backward else ""
    _random_case(group, f"{name}.{_SHORT[dtype]}{suffix}.inner{dim}", name, shape_of, dim, dtype, make, backward)


_beside("softmax", "softmax.dim0", lambda n: (8, n), 1, "float32", lambda s: lambda x: x.softmax(0), True)
_beside("softmax", "log_softmax.dim1", lambda n: (2, 8, n), 2, "float16", lambda s: lambda x: x.log_softmax(1), False)
_beside("softmax", "softmax.last", lambda n: (n, 16), 0, "bfloat16", lambda s: lambda x: x.softmax(-1), True)
_beside("scan", "cumsum.dim0", lambda n: (16, n), 1, "float32", lambda s: lambda x: x.cumsum(0), True)
_beside("scan", "cumsum.last", lambda n: (n, 16), 0, "float32", lambda s: lambda x: x.cumsum(1), True)
_beside("scan", "cummax.dim0", lambda n: (16, n), 1, "float32", lambda s: lambda x: x.cummax(0).values, False)
_beside(
    "scan", "logcumsumexp.dim0", lambda n: (8, n), 1, "float32", lambda s: lambda x: x.logcumsumexp(0), False
)
_beside("reduce", "sum.dim0", lambda n: (16, n), 1, "float32", lambda s: lambda x: x.sum(0, keepdim=True), True)
_beside("reduce", "sum.dim1", lambda n: (n, 8, 16), 0, "float16", lambda s: lambda x: x.sum(1), False)
_beside("reduce", "amax.last", lambda n: (4, n, 16), 1, "bfloat16", lambda s: lambda x: x.amax(-1), False)
_beside("reduce", "var.dim0", lambda n: (16, n), 1, "float32", lambda s: lambda x: x.var(0, keepdim=True), True)
_beside(
    "reduce", "argmax.dim0", lambda n: (16, n), 1, "float32", lambda s: lambda x: x.argmax(0, keepdim=True), False
)


# =======================================================================================
# index, embedding and losses: bags, batch or targets past 2^16


def _embedding_bag_bags(s: Scope, mode: str) -> None:
    """``embedding_bag`` of n bags of two distinct rows of a small table: each span of
    bags against float64; the table's gradient against the float64 sum of the upstream
    gradient over the bags that read each row (``max``: only where that row holds the
    larger value), judged relative to the sum of magnitudes it adds up."""
    torch = s.torch
    F = functional(s)
    table_rows, width = (1000, 16) if s.ctx.is_gpu else (50, 4)
    n = _n(s)
    weight = s.randn((table_rows, width), "float32").requires_grad_(True)
    i = torch.arange(n, device=s.device)
    # 6i + 3 is odd and the table size even: the two rows of a bag always differ.
    bags = torch.stack([i % table_rows, (7 * i + 3) % table_rows], 1)
    out = s.op("embedding_bag", "float32", lambda: F.embedding_bag(bags, weight, mode=mode))
    w64 = weight.detach().double()
    for a, b in s.spans(n):
        ref = F.embedding_bag(bags[a:b], w64, mode=mode)
        s.close(f"embedding_bag {mode} bags [{a}:{b}]", out[a:b], ref, ref.abs().amax() + 1e-6, "float32")
    g = s.randn(tuple(out.shape), "float32")
    (gw,) = s.grad("embedding_bag", "float32", out, (weight,), g)
    g64 = g.double()
    if mode == "sum":
        first = second = torch.ones_like(g64)
    else:
        first = (w64[bags[:, 0]] > w64[bags[:, 1]]).double()
        second = 1 - first
    want = torch.zeros_like(w64)
    magnitude = torch.zeros_like(w64)
    for column, share in ((0, first), (1, second)):
        want.index_add_(0, bags[:, column], g64 * share)
        magnitude.index_add_(0, bags[:, column], (g64 * share).abs())
    s.close(f"embedding_bag {mode} table grad", gw, want, magnitude + 1e-6, "float32")


case("index", "embedding_bag.sum.fp32.bwd.bags", 256.0, GRID_KINDS)(lambda s: _embedding_bag_bags(s, "sum"))
case("index", "embedding_bag.max.fp32.bwd.bags", 256.0, GRID_KINDS)(lambda s: _embedding_bag_bags(s, "max"))


def _with_targets(name: str, shape_of: Callable[[int], tuple[int, ...]], classes: int,
                  make: Callable[[Scope], Callable[[Any, Any], Any]]) -> None:
    def run(s: Scope) -> None:
        shape = shape_of(_n(s))
        target_shape = (shape[0], *shape[2:])
        target = s.randint(0, classes, target_shape, "int64")
        along(s, name, "float32", make(s), s.randn(shape, "float32"), 0, True, (target,))

    case("index", f"{name}.fp32.bwd.batch", SMALL_ITEM, GRID_KINDS)(run)


_with_targets("nll_loss", lambda n: (n, 10), 10, lambda s: lambda x, t: functional(s).nll_loss(x, t, reduction="none"))
_with_targets(
    "cross_entropy.spatial",
    lambda n: (n, 5, 2, 2),
    5,
    lambda s: lambda x, t: functional(s).cross_entropy(x, t, reduction="none"),
)


def _grid_sample(s: Scope) -> None:
    n = _n(s)
    grid = s.rand((n, 3, 3, 2), "float32") * 2 - 1
    fn = lambda x, g: functional(s).grid_sample(x, g, mode="bilinear", align_corners=False)  # noqa: E731
    along(s, "grid_sampler_2d", "float32", fn, s.randn((n, 2, 4, 4), "float32"), 0, True, (grid,))


case("index", "grid_sample.fp32.bwd.batch", SMALL_ITEM, GRID_KINDS)(_grid_sample)
case("index", "unfold.fp32.bwd.batch", SMALL_ITEM, GRID_KINDS)(
    lambda s: along(s, "im2col", "float32", lambda x: functional(s).unfold(x, 2), s.randn((_n(s), 2, 4, 4), "float32"), 0,
                    True)
)


# =======================================================================================
# sort and top-k over rows past 2^16


case("sort", "sort.fp32.rows", 256.0, GRID_KINDS)(
    lambda s: sorted_rows(s, "sort", "float32", lambda x: s.torch.sort(x, dim=1), s.randn((_n(s), 16), "float32"))
)
case("sort", "sort.fp32.columns", 256.0, GRID_KINDS)(
    # Rows of a transposed (16, n) tensor: a sort along the strided dimension.
    lambda s: sorted_rows(s, "sort", "float32", lambda x: s.torch.sort(x, dim=1), s.randn((16, _n(s)), "float32").t())
)
case("sort", "topk.fp16.rows", 512.0, GRID_KINDS)(
    lambda s: sorted_rows(s, "topk", "float16", lambda x: s.torch.topk(x, 4, dim=1), s.randn((_n(s), 64), "float16"))
)
