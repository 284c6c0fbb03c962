"""The math operations layer: matmul, reductions, elementwise kernels, convolutions, attention.

The ``ops`` and ``nn`` probe families run the operation they test through these hooks, the way
the copy family moves data through ``gpuprobe.worker.ops``. On real hardware a hook is a thin
call: it runs the torch call with the library wrappers bypassed and returns the result. Under
fault simulation it then describes the call to the fault engine (``simulate.FaultEngine``):

- ``op``: ``matmul``, ``reduce``, ``elementwise``, ``conv`` or ``sdpa``;
- ``method``: the function (``mm``, ``addmm``, ``bmm``, ``linear``, ``matmul``; ``sum``,
  ``mean``, ``amax``, ``all``, ``any``; ``add``, ``mul``, ``div``, ``exp``, ``where``,
  ``maximum``, ``minimum``, ``sub``, ``contiguous``; ``conv2d``, ``conv_transpose2d``;
  the attention backend ``math``, ``flash``, ``efficient``, ``cudnn`` or ``default``), so a
  fault's ``when.methods`` can select them;
- ``dtype``: the dtype the kernel computes in (the input dtype for reductions, so ``all`` on a
  bool tensor has dtype ``bool``; the output dtype for the others, which under autocast is
  the reduced precision the kernel really used); ``to_dtype``: the output dtype;
- ``nbytes``: the size of the output in bytes; ``on_device``: always true (these operations
  run on the device under test).

Effects keep the engine's semantics: ``stale`` restores the previous contents of an ``out=``
destination (a kernel that did nothing leaves the canary the probe prefilled) and fills a
fresh output with bytes 0x5A (memory nobody wrote); ``zeros``/``partial_zeros``/``nan``/
``bitflip`` corrupt the output; ``crash``/``hang``/``exception``/``oom`` happen in the call.

Outputs that carry autograd history are corrupted without breaking the graph: the value
becomes the corrupted one and the gradient flows through unchanged (``out + (bad - out)``
with the difference detached), so a backward pass still runs; probes pass the gradients they
read through ``finish`` (method of the forward call), which stands for the backward kernels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gpuprobe.worker import simulate
from gpuprobe.worker.simulate import CallInfo

#: The operations this layer reports to the fault engine.
MATH_OPS = ("matmul", "reduce", "elementwise", "conv", "sdpa")


def _torch() -> Any:
    import torch

    return torch


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def run(
    op: str,
    method: str,
    compute: Callable[[], Any],
    *,
    sources: Sequence[Any] = (),
    out: Any = None,
    dtype: Any = None,
    variant: str | None = None,
    direction: str | None = None,
) -> Any:
    """Runs ``compute()`` (the call under test) with the library wrappers bypassed and lets
    the fault engine corrupt its result.

    ``out`` is the preallocated destination when the call writes into one (``out=``): a
    ``stale`` fault then restores what it held before. ``dtype`` overrides the dtype reported
    to the engine (reductions report their input dtype); ``variant`` and ``direction`` reach
    it as ``CallInfo.variant`` / ``direction``."""
    if op not in MATH_OPS:
        raise ValueError(f"unknown math op {op!r}")
    engine = simulate.engine()
    snapshot = None
    if engine is not None and out is not None and engine.wants(op, "stale"):
        with simulate.bypassed():
            snapshot = out.detach().clone()
    with simulate.bypassed():
        result = compute()
    if engine is None:
        return result
    return finish(
        op, method, result, sources=sources, out=out, snapshot=snapshot, dtype=dtype, variant=variant, direction=direction
    )


def finish(
    op: str,
    method: str,
    result: Any,
    *,
    sources: Sequence[Any] = (),
    out: Any = None,
    snapshot: Any = None,
    dtype: Any = None,
    variant: str | None = None,
    direction: str | None = None,
) -> Any:
    """Describes an already computed ``result`` of ``op`` to the fault engine and returns it,
    possibly corrupted. Probes call it directly for outputs of kernels they cannot wrap one
    by one (the gradients of a backward pass)."""
    engine = simulate.engine()
    torch = _torch()
    if engine is None or not isinstance(result, torch.Tensor):
        return result
    call = CallInfo(
        op=op,
        method=method,
        dtype=_dtype_name(dtype if dtype is not None else result.dtype),
        to_dtype=_dtype_name(result.dtype),
        nbytes=int(result.numel()) * int(result.element_size()),
        on_device=True,
        variant=variant,
        direction=direction,
    )
    fault = engine.decide(call)
    if fault is None:
        return result
    if result.requires_grad:
        with simulate.bypassed(), torch.no_grad():
            bad = engine.apply(fault, call, result.detach().clone(), snapshot=snapshot, in_place=True)
        with simulate.bypassed():
            # The value of ``bad``, the gradient of ``result``.
            return result + (bad - result).detach()
    return engine.apply(fault, call, result, sources=tuple(sources), snapshot=snapshot, in_place=out is not None)


def matmul(
    method: str, a: Any, b: Any, *, bias: Any = None, out: Any = None, beta: float = 1.0, alpha: float = 1.0
) -> Any:
    """A GEMM on the device under test.

    ``method``: ``mm`` (``torch.mm(a, b)``), ``matmul`` (``torch.matmul``), ``bmm``
    (``torch.bmm``), ``addmm`` (``torch.addmm(bias, a, b, beta=, alpha=)``) or ``linear``
    (``F.linear(a, b, bias)``, ``b`` the weight of shape (N, K)); ``out=`` where torch has it.
    """
    torch = _torch()
    extra = {} if out is None else {"out": out}

    def compute() -> Any:
        if method == "mm":
            return torch.mm(a, b, **extra)
        if method == "matmul":
            return torch.matmul(a, b, **extra)
        if method == "bmm":
            return torch.bmm(a, b, **extra)
        if method == "addmm":
            return torch.addmm(bias, a, b, beta=beta, alpha=alpha, **extra)
        if method == "linear":
            if out is not None:
                raise ValueError("F.linear takes no out=")
            return torch.nn.functional.linear(a, b, bias)
        raise ValueError(f"unknown matmul method {method!r}")

    return run("matmul", method, compute, sources=(a, b), out=out)


def reduce(method: str, x: Any, *, dim: Any = None, keepdim: bool = False, out: Any = None) -> Any:
    """A reduction of ``x``: ``sum``, ``mean``, ``amax``, ``all`` or ``any`` over ``dim``
    (everything when None), optionally into ``out``."""
    torch = _torch()
    function = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax, "all": torch.all, "any": torch.any}.get(
        method
    )
    if function is None:
        raise ValueError(f"unknown reduction {method!r}")

    def compute() -> Any:
        kwargs: dict[str, Any] = {}
        if out is not None:
            kwargs["out"] = out
        if dim is None:
            if method == "amax":
                return function(x, dim=tuple(range(x.dim())), keepdim=keepdim, **kwargs)
            if out is not None or keepdim:
                return function(x, dim=tuple(range(x.dim())), keepdim=keepdim, **kwargs)
            return function(x)
        return function(x, dim=dim, keepdim=keepdim, **kwargs)

    return run("reduce", method, compute, sources=(x,), out=out, dtype=x.dtype)


def elementwise(method: str, compute: Callable[[], Any], *, sources: Sequence[Any] = (), out: Any = None) -> Any:
    """An elementwise kernel (arithmetic, ``where``, or the copy kernel behind
    ``.contiguous()``); ``compute`` performs it, writing into ``out`` when given."""
    return run("elementwise", method, compute, sources=sources, out=out)


def conv(method: str, compute: Callable[[], Any], *, sources: Sequence[Any] = ()) -> Any:
    """A convolution (``conv2d``, ``conv_transpose2d``) performed by ``compute``."""
    return run("conv", method, compute, sources=sources)


def sdpa(
    backend: str,
    compute: Callable[[], Any],
    *,
    sources: Sequence[Any] = (),
    variant: str | None = None,
    direction: str | None = None,
) -> Any:
    """``scaled_dot_product_attention`` on ``backend`` performed by ``compute``.

    ``variant`` (the attention matrix passes its mask kind: ``none``, ``causal``, ``bool``,
    ``additive``, ``additive_grad``) and ``direction`` (``forward``; ``backward`` for a
    gradient read after the backward pass, which ``compute`` then simply returns) reach the
    fault engine as ``CallInfo.variant`` / ``direction``, so a fault's ``when.variants`` can
    select one mask kind or the gradients alone."""
    return run("sdpa", backend, compute, sources=sources, variant=variant, direction=direction)
