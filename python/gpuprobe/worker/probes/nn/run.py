"""nn family implementation (see ``nn_specs`` for the catalog, id grammar and tolerances).

Models are written functionally, so the same code runs on the device under test (each
convolution, GEMM and attention call through ``gpuprobe.worker.ops_math``, where fault
simulation can break it) and as the float64 CPU reference (plain torch calls). Inputs and
weights are drawn from the plan seed and rounded to the probe's dtype first; the reference
computes in float64 from those rounded values, so the comparison measures the computation,
not the rounding of the inputs (autocast is the exception: rounding is part of what it does).

Attention backends that cannot run a case (no kernel for this dtype, head size, mask or
device) make the probe SKIP with PyTorch's own explanation; warnings raised by the attention
call (for instance AOTriton's "experimental" notice on ROCm) are kept as observation notes.
The attention matrix (``run_sdpa_matrix``, cases from ``sdpa_matrix``) runs many cases per
probe instead: a refused case is counted with its reason, and the probe skips only when its
backend refuses every case.

What a repro script restates as data (``repro.families.nn``) is decided by functions of
their own here, which both call: a convolution's weight shapes and scales
(``conv_param_specs``) and an attention case's geometry and seed (``sdpa_case``).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuprobe.worker import ops, ops_math
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe, device_context_problem, require_memory
from gpuprobe.worker.patterns import derive_seed
from gpuprobe.worker.probes.nn import sdpa_matrix
from gpuprobe.worker.probes.nn.specs import CPU_SEQ
from gpuprobe.worker.probes.ops.run import (
    ToleranceAccumulator,
    dtype_of,
    precision_context,
    release,
    tf32_notes,
    trial_tag,
)

#: A convolution runner: (method, compute, sources) -> output.
ConvCall = Callable[[str, Callable[[], Any], tuple[Any, ...]], Any]


def _hooked(method: str, compute: Callable[[], Any], sources: tuple[Any, ...]) -> Any:
    return ops_math.conv(method, compute, sources=sources)


def _plain(method: str, compute: Callable[[], Any], sources: tuple[Any, ...]) -> Any:
    return compute()


def _seeded(ctx: ProbeContext, tag: str) -> Any:
    return ctx.torch.Generator().manual_seed(ctx.derive_seed(tag))


def _randn(ctx: ProbeContext, shape: Any, tag: str, std: float = 1.0, generator: Any = None) -> Any:
    torch = ctx.torch
    g = generator if generator is not None else _seeded(ctx, tag)
    values = torch.randn(tuple(shape), generator=g, dtype=torch.float32)
    return values.mul_(std) if std != 1.0 else values


def _stage_all(ctx: ProbeContext, tensors: dict[str, Any], channels_last: bool = False) -> dict[str, Any]:
    torch = ctx.torch
    out = {}
    for name, t in tensors.items():
        staged = ops.stage(t, ctx.device)
        if channels_last and staged.dim() == 4:
            staged = staged.contiguous(memory_format=torch.channels_last)
        out[name] = staged
    return out


def _wide(torch: Any, tensors: dict[str, Any]) -> dict[str, Any]:
    return {name: t.to(torch.float64) for name, t in tensors.items()}


# ---------------------------------------------------------------------------------------------
# Convolutions.


def conv_param_specs(kind: str, case: dict[str, Any]) -> dict[str, tuple[list[int], float]]:
    """The weights of a convolution case, in the order they are drawn: name → (shape,
    standard deviation). Weights ~ N(0, 1/fan_in) (activations keep unit scale), biases
    ~ N(0, 0.1²); each is seeded by the case's tag and its name."""
    cin, cout, k = case["cin"], case["cout"], case["k"]
    if kind == "depthwise":
        return {
            "dw": ([cin, 1, k, k], 1.0 / k),
            "db": ([cin], 0.1),
            "pw": ([cout, cin, 1, 1], 1.0 / math.sqrt(cin)),
            "pb": ([cout], 0.1),
        }
    if kind == "conv_transpose2d":
        return {"w": ([cin, cout, k, k], 1.0 / math.sqrt(cin * k * k / case["stride"] ** 2)), "b": ([cout], 0.1)}
    return {"w": ([cout, cin, k, k], 1.0 / math.sqrt(cin * k * k)), "b": ([cout], 0.1)}


def _conv_params(ctx: ProbeContext, kind: str, case: dict[str, Any], dtype: Any, tag: str) -> dict[str, Any]:
    """The case's weights (``conv_param_specs``), rounded to ``dtype``."""
    params = {name: _randn(ctx, shape, tag + name, std) for name, (shape, std) in conv_param_specs(kind, case).items()}
    return {name: t.to(dtype) for name, t in params.items()}


def _conv_apply(F: Any, kind: str, x: Any, p: dict[str, Any], case: dict[str, Any], call: ConvCall) -> Any:
    stride, pad = case["stride"], case["pad"]
    if kind == "depthwise":
        mid = call(
            "conv2d",
            lambda: F.conv2d(x, p["dw"], p["db"], stride=stride, padding=pad, groups=case["cin"]),
            (x,),
        )
        return call("conv2d", lambda: F.conv2d(mid, p["pw"], p["pb"]), (mid,))
    if kind == "conv_transpose2d":
        return call(
            "conv_transpose2d",
            lambda: F.conv_transpose2d(x, p["w"], p["b"], stride=stride, padding=pad, output_padding=case["out_pad"]),
            (x,),
        )
    return call(
        "conv2d",
        lambda: F.conv2d(x, p["w"], p["b"], stride=stride, padding=pad, dilation=case.get("dil", 1)),
        (x,),
    )


def run_conv(
    ctx: ProbeContext,
    *,
    kind: str,
    dtype: str,
    rule_dtype: str,
    cases: list[dict[str, Any]],
    backward: bool,
    tolerance: float,
) -> ProbeOutput:
    """Convolutions over ``cases`` (each a trial; with ``backward`` the output, input gradient
    and weight gradient are three trials) against float64."""
    torch = ctx.torch
    F = torch.nn.functional
    dt = dtype_of(torch, dtype)
    acc = ToleranceAccumulator(torch, tolerance)
    weight_name = "pw" if kind == "depthwise" else "w"
    # The case with the largest error (output or gradient): what ``gpuprobe repro`` rebuilds.
    worst, worst_case = -1.0, 0
    with precision_context(torch, rule_dtype, dtype):
        for trial, case in enumerate(cases):
            tag = trial_tag(trial)
            x = _randn(ctx, [case["n"], case["cin"], case["h"], case["w"]], tag + "x").to(dt)
            params = _conv_params(ctx, kind, case, dt, tag)
            channels_last = bool(case.get("channels_last"))
            dx = ops.stage(x, ctx.device)
            if channels_last:
                dx = dx.contiguous(memory_format=torch.channels_last)
            dparams = _stage_all(ctx, params, channels_last)
            x64, params64 = x.to(torch.float64), _wide(torch, params)
            if backward:
                dx.requires_grad_(True)
                dparams[weight_name].requires_grad_(True)
                x64.requires_grad_(True)
                params64[weight_name].requires_grad_(True)
            out = _conv_apply(F, kind, dx, dparams, case, _hooked)
            ref = _conv_apply(F, kind, x64, params64, case, _plain)
            errors = [acc.add(ops.readback(out.detach()), ref.detach())]
            if backward:
                grad = _randn(ctx, list(ref.shape), tag + "g").to(dt)
                out.backward(ops.stage(grad, ctx.device))
                ref.backward(grad.to(torch.float64))
                method = "conv_transpose2d" if kind == "conv_transpose2d" else "conv2d"
                for got, want in ((dx.grad, x64.grad), (dparams[weight_name].grad, params64[weight_name].grad)):
                    got = ops_math.finish("conv", method, got)
                    errors.append(acc.add(ops.readback(got), want))
            if max(errors) > worst:
                worst, worst_case = max(errors), trial
    metrics = {
        "kind": kind,
        "dtype": dtype,
        "tf32": rule_dtype == "tf32",
        "cases": len(cases),
        "backward": backward,
        "worst_case": worst_case,
    }
    return ProbeOutput(acc.stats(), metrics, tf32_notes(ctx, rule_dtype))


# ---------------------------------------------------------------------------------------------
# A small VAE.

#: (name, in channels, out channels, stride) of the encoder and decoder convolutions (3×3).
_ENCODER = [("e1", 3, 32, 1), ("e2", 32, 64, 2), ("e3", 64, 64, 1), ("e4", 64, 8, 1)]
_DECODER = [("d1", 4, 64, 1), ("d2", 64, 32, 1), ("d3", 32, 3, 1)]
#: GroupNorm after every convolution but the last, 8 groups.
_GROUPS = 8


def _vae_params(ctx: ProbeContext, layers: list[tuple[str, int, int, int]], dt: Any) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for index, (name, cin, cout, _stride) in enumerate(layers):
        # SiLU halves the second moment roughly; a gain of 1.6 keeps activations near unit scale.
        params[name + ".w"] = _randn(ctx, [cout, cin, 3, 3], name + "w", 1.6 / math.sqrt(cin * 9))
        params[name + ".b"] = _randn(ctx, [cout], name + "b", 0.1)
        if index < len(layers) - 1:
            params[name + ".gw"] = 1.0 + _randn(ctx, [cout], name + "gw", 0.1)
            params[name + ".gb"] = _randn(ctx, [cout], name + "gb", 0.1)
    return {name: t.to(dt) for name, t in params.items()}


def _vae_stack(
    F: Any, x: Any, p: dict[str, Any], layers: list[tuple[str, int, int, int]], call: ConvCall, upsample_after: str = ""
) -> Any:
    h = x
    for index, (name, _cin, _cout, stride) in enumerate(layers):
        src = h
        h = call(
            "conv2d",
            lambda src=src, name=name, stride=stride: F.conv2d(
                src, p[name + ".w"], p[name + ".b"], stride=stride, padding=1
            ),
            (src,),
        )
        if index < len(layers) - 1:
            h = F.silu(F.group_norm(h, _GROUPS, p[name + ".gw"], p[name + ".gb"], eps=1e-6))
        if name == upsample_after:
            h = F.interpolate(h, scale_factor=2.0, mode="nearest")
    return h


def run_vae(ctx: ProbeContext, *, part: str, dtype: str, rule_dtype: str, image: int, tolerance: float) -> ProbeOutput:
    """A VAE-like encoder (conv/GroupNorm/SiLU, one stride-2 step, latent mean of 4 channels)
    or decoder (conv/GroupNorm/SiLU, nearest 2× upsampling, 3 output channels)."""
    torch = ctx.torch
    F = torch.nn.functional
    dt = dtype_of(torch, dtype)
    if part == "encode":
        layers, upsample = _ENCODER, ""
        x = (torch.rand((2, 3, image, image), generator=_seeded(ctx, "image"), dtype=torch.float32) * 2 - 1).to(dt)
    else:
        layers, upsample = _DECODER, "d1"
        x = _randn(ctx, [2, 4, image // 2, image // 2], "latent").to(dt)
    params = _vae_params(ctx, layers, dt)
    with precision_context(torch, rule_dtype, dtype):
        out = _vae_stack(F, ops.stage(x, ctx.device), _stage_all(ctx, params), layers, _hooked, upsample)
        got = ops.readback(out)
    ref = _vae_stack(F, x.to(torch.float64), _wide(torch, params), layers, _plain, upsample)
    if part == "encode":
        got, ref = got[:, :4], ref[:, :4]
    acc = ToleranceAccumulator(torch, tolerance)
    acc.add(got, ref)
    metrics = {
        "part": part,
        "dtype": dtype,
        "input": "x".join(str(d) for d in x.shape),
        "output": "x".join(str(d) for d in got.shape),
        "convolutions": len(layers),
    }
    return ProbeOutput(acc.stats(), metrics)


# ---------------------------------------------------------------------------------------------
# Autocast.


def _autocast_model(F: Any, x: Any, p: dict[str, Any], conv: ConvCall, linear: Callable[..., Any]) -> Any:
    h = conv("conv2d", lambda: F.conv2d(x, p["cw"], p["cb"], padding=1), (x,))
    h = F.silu(h).mean(dim=(2, 3))
    h = F.gelu(linear(h, p["l1w"], p["l1b"]))
    return linear(h, p["l2w"], p["l2b"])


def run_autocast(ctx: ProbeContext, *, dtype: str, rule_dtype: str, tolerance: float) -> ProbeOutput:
    """A conv + linear model under ``torch.autocast(device, dtype)`` against the float64
    result of its float32 weights and input."""
    torch = ctx.torch
    F = torch.nn.functional
    dt = dtype_of(torch, dtype)
    params = {
        "cw": _randn(ctx, [32, 16, 3, 3], "cw", 1.0 / 12.0),
        "cb": _randn(ctx, [32], "cb", 0.1),
        "l1w": _randn(ctx, [64, 32], "l1w", 1.0 / math.sqrt(32)),
        "l1b": _randn(ctx, [64], "l1b", 0.1),
        "l2w": _randn(ctx, [10, 64], "l2w", 1.0 / math.sqrt(64)),
        "l2b": _randn(ctx, [10], "l2b", 0.1),
    }
    x = _randn(ctx, [4, 16, 32, 32], "x")

    def linear_hooked(h: Any, w: Any, b: Any) -> Any:
        return ops_math.matmul("linear", h, w, bias=b)

    def linear_plain(h: Any, w: Any, b: Any) -> Any:
        return F.linear(h, w, b)

    dparams = _stage_all(ctx, params)
    dx = ops.stage(x, ctx.device)
    try:
        autocast = torch.autocast(device_type=ctx.device.type, dtype=dt)
    except (RuntimeError, ValueError) as exc:
        raise SkipProbe(f"torch.autocast({ctx.device.type}, {dtype}) is not available: {exc}") from exc
    with autocast:
        out = _autocast_model(F, dx, dparams, _hooked, linear_hooked)
    got = ops.readback(out)
    ref = _autocast_model(F, x.to(torch.float64), _wide(torch, params), _plain, linear_plain)
    notes = []
    if got.dtype != dt:
        notes.append(f"the autocast output is {got.dtype}, not {dt}: autocast did not lower the precision")
    acc = ToleranceAccumulator(torch, tolerance)
    acc.add(got, ref)
    metrics = {"dtype": dtype, "output_dtype": str(got.dtype).replace("torch.", ""), "batch": 4}
    return ProbeOutput(acc.stats(), metrics, notes)


# ---------------------------------------------------------------------------------------------
# Scaled dot-product attention.

_BACKEND_NAMES = {
    "math": "MATH",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
}

#: Float64 references of recent cases (consecutive probes differ only in the backend).
_REFERENCES: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
_REFERENCES_KEPT = 3


def _backend_context(torch: Any, backend: str) -> Any:
    if backend == "default":
        return contextlib.nullcontext()
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as exc:
        raise SkipProbe(f"this torch {torch.__version__} cannot force an attention backend: {exc}") from exc
    member = getattr(SDPBackend, _BACKEND_NAMES[backend], None)
    if member is None:
        raise SkipProbe(f"this torch {torch.__version__} has no SDPBackend.{_BACKEND_NAMES[backend]}")
    return sdpa_kernel([member])


def _unavailable(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in ("No available kernel", "No viable backend"))


def _allowed_mask(torch: Any, mask: str, batch: int, seq: int) -> Any:
    """The boolean mask (True: may attend) of shape (batch, 1, seq|1, seq), or None."""
    if mask in ("none", "causal"):
        return None
    lengths = [seq // 2 + 1 if (seq // 2) % 2 == 0 else seq // 2, seq - 31]
    keys = torch.arange(seq)
    allowed = torch.stack([keys < lengths[b % 2] for b in range(batch)]).reshape(batch, 1, 1, seq)
    if mask == "padding":
        return allowed
    full = allowed.expand(batch, 1, seq, seq).clone()
    for row in (1, seq // 3, seq - 1):
        full[0, 0, row, :] = False
    full[batch - 1, 0, 2, :] = False
    return full


def _attention_reference(
    torch: Any,
    q: Any,
    k: Any,
    v: Any,
    allowed: Any,
    causal: bool,
    grad: Any,
    rows: Any,
) -> dict[str, Any]:
    """Float64 attention (and gradients of sum(out · grad) when ``grad`` is given), one
    (batch, head) at a time; fully masked query rows get output 0 and are flagged invalid.
    ``rows``: compute only these query rows (long sequences)."""
    batch, heads, seq, head_dim = q.shape
    scale = 1.0 / math.sqrt(head_dim)
    nrows = seq if rows is None else int(rows.numel())
    out = torch.zeros((batch, heads, nrows, head_dim), dtype=torch.float64)
    valid = torch.ones((batch, heads, nrows), dtype=torch.bool)
    grads = [torch.zeros(q.shape, dtype=torch.float64) for _ in range(3)] if grad is not None else None
    query_index = torch.arange(seq) if rows is None else rows
    for b in range(batch):
        for h in range(heads):
            qb = q[b, h].to(torch.float64)
            if rows is not None:
                qb = qb[rows]
            kb, vb = k[b, h].to(torch.float64), v[b, h].to(torch.float64)
            if grad is not None:
                qb.requires_grad_(True)
                kb.requires_grad_(True)
                vb.requires_grad_(True)
            scores = (qb @ kb.t()) * scale
            may = torch.ones((nrows, seq), dtype=torch.bool)
            if causal:
                may &= torch.arange(seq).unsqueeze(0) <= query_index.unsqueeze(1)
            if allowed is not None:
                mb = allowed[b, 0]
                may &= mb[query_index] if mb.shape[0] == seq else mb.expand(nrows, seq)
            row_ok = may.any(dim=1)
            scores = scores.masked_fill(~may, float("-inf"))
            probs = torch.softmax(scores, dim=-1)
            probs = torch.where(row_ok.unsqueeze(1), probs, torch.zeros_like(probs))
            ob = probs @ vb
            if grad is not None:
                (ob * grad[b, h].to(torch.float64)).sum().backward()
                grads[0][b, h] = qb.grad
                grads[1][b, h] = kb.grad
                grads[2][b, h] = vb.grad
            out[b, h] = ob.detach()
            valid[b, h] = row_ok
    return {"out": out, "valid": valid, "grads": grads}


def _describe_masked_rows(torch: Any, rows: Any) -> str:
    if rows.numel() == 0:
        return "none"
    values = rows.to(torch.float32)
    if bool(torch.isnan(values).all()):
        return "NaN"
    if bool(torch.isnan(values).any()):
        return "partly NaN"
    if bool((values == 0).all()):
        return "zeros"
    return "finite values"


@dataclass(frozen=True)
class SdpaCase:
    """An attention probe's case as run on its device (``sdpa_case``)."""

    #: The sequence length run (the catalog's, or ``CPU_SEQ`` on a CPU device).
    seq: int
    batch: int
    heads: int
    #: What the inputs and the cached float64 reference are keyed by.
    key: tuple[Any, ...]
    #: The seed of q, k, v, the output gradient and the sampled rows, in that order.
    seed: int


def sdpa_case(
    plan_seed: int, dtype: str, head_dim: int, seq: int, mask: str, backward: bool, sampled_rows: int, on_gpu: bool
) -> SdpaCase:
    """The sequence length, batch and heads an attention probe runs, and its inputs' seed:
    a CPU device runs ``CPU_SEQ`` rows at most (one more when rows are sampled); a padding
    mask needs two batch entries, the other masks two heads. Probes of the same case share
    their inputs (the seed does not name the probe) and so their reference."""
    if not on_gpu and seq > CPU_SEQ:
        seq = CPU_SEQ + 1 if sampled_rows else CPU_SEQ
    batch, heads = (2, 1) if mask in ("padding", "allmasked") else (1, 2)
    key = (plan_seed, dtype, head_dim, seq, batch, heads, mask, backward, sampled_rows)
    return SdpaCase(seq, batch, heads, key, derive_seed(plan_seed, "nn.sdpa.inputs", repr(key)))


def run_sdpa(
    ctx: ProbeContext,
    *,
    dtype: str,
    backend: str,
    head_dim: int,
    seq: int,
    mask: str,
    layout: str,
    backward: bool,
    sampled_rows: int,
    rule_dtype: str,
    tolerance: float,
) -> ProbeOutput:
    """Attention on one backend against float64 (output; with ``backward`` also the q, k, v
    gradients of sum(out · g)); only query rows with at least one key to attend are compared."""
    torch = ctx.torch
    F = torch.nn.functional
    dt = dtype_of(torch, dtype)
    designed_seq = seq
    geometry = sdpa_case(ctx.seed, dtype, head_dim, seq, mask, backward, sampled_rows, ctx.is_gpu)
    seq, batch, heads, key = geometry.seq, geometry.batch, geometry.heads, geometry.key
    causal = mask == "causal"
    elements = batch * heads * seq * head_dim
    require_memory(ctx, 8 * elements * 8 + (seq * seq * 8 * 3 if not sampled_rows else 0), 16 * elements * 2)
    gen = torch.Generator().manual_seed(geometry.seed)
    shape = [batch, heads, seq, head_dim]
    q, k, v = (_randn(ctx, shape, "", generator=gen).to(dt) for _ in range(3))
    grad = _randn(ctx, shape, "", generator=gen).to(dt) if backward else None
    rows = None
    if sampled_rows:
        picks = torch.randperm(seq, generator=gen)[: max(0, sampled_rows - 96)]
        edges = torch.cat([torch.arange(32), torch.arange(seq // 2 - 16, seq // 2 + 16), torch.arange(seq - 32, seq)])
        rows = torch.unique(torch.cat([picks, edges]))
    allowed = _allowed_mask(torch, mask, batch, seq)
    reference = _REFERENCES.get(key)
    if reference is None:
        reference = _attention_reference(torch, q, k, v, allowed, causal, grad, rows)
        _REFERENCES[key] = reference
        while len(_REFERENCES) > _REFERENCES_KEPT:
            _REFERENCES.popitem(last=False)
    else:
        _REFERENCES.move_to_end(key)

    if layout == "noncontig":
        packed = ops.stage(torch.stack([t.permute(0, 2, 1, 3) for t in (q, k, v)], dim=2), ctx.device)
        dq, dk, dv = (packed[:, :, i].transpose(1, 2) for i in range(3))
    else:
        dq, dk, dv = (ops.stage(t, ctx.device) for t in (q, k, v))
    if backward:
        for t in (dq, dk, dv):
            t.requires_grad_(True)
    dmask = None if allowed is None else ops.stage(allowed, ctx.device)
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with _backend_context(torch, backend), ctx.timer() as timer:
                out = ops_math.sdpa(
                    backend,
                    lambda: F.scaled_dot_product_attention(dq, dk, dv, attn_mask=dmask, is_causal=causal),
                    sources=(dq, dk, dv),
                )
            if backward:
                with _backend_context(torch, backend):
                    out.backward(ops.stage(grad, ctx.device))
        except RuntimeError as exc:
            if _unavailable(exc):
                said = "; ".join(dict.fromkeys(str(w.message).strip() for w in caught))
                reason = f"the {backend} attention backend cannot run this case on {ctx.device}: {exc}"
                if said:
                    reason += f" ({said[:600]})"
                raise SkipProbe(reason) from exc
            raise
    for message in dict.fromkeys(f"{w.category.__name__}: {str(w.message).strip()}" for w in caught):
        notes.append(f"{backend} attention warned: {message}")
    got = ops.readback(out.detach())
    if rows is not None:
        got = got[:, :, rows]
    valid = reference["valid"].unsqueeze(-1).expand(got.shape)
    acc = ToleranceAccumulator(torch, tolerance)
    acc.add(got, reference["out"], valid=valid)
    metrics: dict[str, Any] = {
        "dtype": dtype,
        "backend": backend,
        "shape": "x".join(str(d) for d in shape),
        "mask": mask,
        "layout": layout,
        "backward": backward,
        "forward_s": round(timer.seconds, 6),
    }
    if seq != designed_seq:
        metrics["scaled_down_on_cpu"] = True
        metrics["gpu_seq"] = designed_seq
    if rows is not None:
        metrics["compared_rows"] = int(rows.numel())
    masked = ~reference["valid"]
    if bool(masked.any()):
        metrics["fully_masked_rows"] = int(masked.sum())
        metrics["fully_masked_rows_output"] = _describe_masked_rows(torch, got[masked])
    if backward:
        for name, tensor, want in zip(("dq", "dk", "dv"), (dq, dk, dv), reference["grads"]):
            if tensor.grad is None:
                raise RuntimeError(f"the backward pass produced no gradient for {name}")
            acc.add(ops.readback(ops_math.finish("sdpa", backend, tensor.grad)), want)
    if seq >= 4096:
        release(ctx)
    return ProbeOutput(acc.stats(), metrics, notes)


# ---------------------------------------------------------------------------------------------
# The attention matrix (``nn.sdpa.matrix.*``; factors, covering designs and cases in
# ``sdpa_matrix``). One probe runs many cases on one backend; a case the backend refuses is
# counted, not failed, and the probe skips only when it refuses them all.

#: Float64 references by (seed, dtype, case, sizes): the probes of one dtype and direction
#: differ only in the backend and run one after the other, so a whole probe's cases are kept.
_MATRIX_REFERENCES: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
_MATRIX_REFERENCES_KEPT = 48

#: How PyTorch says a backend cannot take a case: no kernel (sdpa_kernel forced one that
#: does not apply; its warnings say why), an unsupported combination raised by the kernel
#: itself (cuDNN finds no execution plan for a graph), or a mask gradient the backend's
#: autograd formula does not have.
_REFUSALS = (
    "No available kernel",
    "No viable backend",
    "not supported",
    "Not supported",
    "NOT_SUPPORTED",
    "does not support",
    "execution plans",
    "is not differentiable with respect to",
    "derivative for",
)

#: negrow rows: every logit is pushed down by this much (exactly representable in fp16 and
#: bf16, so the float mask carries it unrounded): "far below zero" is ≈ −1e4.
_NEGROW_SHIFT = -10240.0
#: Without a float mask, negrow rows get their shift from head-dim 0: every key holds
#: ``_NEGROW_KEY`` there and the row's query ``-_NEGROW_QUERY`` (logit shift −β·c/√d:
#: −10240 at d = 64, −7241 at d = 128; q stays below fp16's 65504). The other components
#: are multiples of 1/8 in [−4, 4], so every logit is an exact float32 sum whatever the
#: kernel's summation order: otherwise float32 rounding at |logit| ≈ 1e4 (≈ 1e-3) would be
#: the kernel's honest error and could approach the fp16 bound.
_NEGROW_KEY = 2.0
_NEGROW_QUERY = 40960.0

#: In negrow cases without a float mask, head-dim 0 of the q and k gradients is judged
#: finite-only as well (the other columns as usual): every key holds the same constant
#: there, so dq[..., 0] is c/√d · Σ_j dS_ij, a sum that cancels exactly (its reference is 0;
#: in a correct kernel, the log-sum-exp it recomputes at |logit| ≈ 1e4 leaves ≈ c/√d ·
#: ulp(1e4) · |dO·O|, about 1 % of dq's rms in fp16 on the CPU), and dk[..., 0] sums
#: ±β-weighted terms (β = 40960) that cancel in part: it dwarfs the other columns, and its
#: relative rounding (≈ 1.5e-3 in fp16 on the CPU) leaves too thin a margin to the fp16 bound.

#: Finite-only tensors: what a backward pass of ``large`` inputs is judged on for q, k and
#: the mask. With logits of ±1e4 almost every softmax row is one-hot, so these gradients are
#: tiny differences of large terms: the reference is ≈ 0 in most rows while the rounding of
#: P and dS to the dtype inside any correct kernel leaves ≈ u·|dO|·|v|·|k| per row, far more
#: than the normwise tolerance relative to a near-zero norm. They must still be finite; the
#: output and the v gradient (P^T dO, well conditioned) are compared as usual.
_FINITE_ONLY_LARGE = ("dq", "dk", "dmask")

#: Failing and refused cases kept in the observation (the counts cover them all).
_CASES_SHOWN = 5


class _Refused(Exception):
    """The backend cannot run this case; the message is PyTorch's reason."""


#: Errors of the device itself ("CUDA error: operation not supported") are failures, never
#: refusals, whatever words they use.
_DEVICE_ERRORS = ("CUDA error", "HIP error", "cudaError", "hipError", "illegal memory access")


def _refusal(exc: BaseException, mask_kind: str | None = None) -> bool:
    """Whether an exception is the backend declining the case. A float32 mask with fp16/bf16
    q, k, v (``additive_fp32``) is outside what PyTorch documents (a float mask of the
    query's dtype), so an error that names the dtype refuses that case as well."""
    text = str(exc)
    if any(marker in text for marker in _DEVICE_ERRORS):
        return False
    if mask_kind == "additive_fp32" and "dtype" in text.lower():
        return True
    return any(marker in text for marker in _REFUSALS)


def _math_precision_problem(torch: Any) -> str | None:
    """Why the math backend would not compute logits of ±1e4 in full float32, or None.

    Since torch 2.5 the math backend upcasts fp16/bf16 to float32 unless
    ``allow_fp16_bf16_reduction_math_sdp(True)``; before, it multiplied and summed in the
    input dtype, where a logit of 1e4 keeps no fraction (bf16 spacing there is 64). Adversarial
    logits are then beyond what that backend promises, and its cases with them (``large``,
    ``negrow``) are refused with this reason, on ``math`` and on ``default`` (which may pick
    it)."""
    allowed = getattr(torch.backends.cuda, "fp16_bf16_reduction_math_sdp_allowed", None)
    if allowed is None:
        return (
            f"this torch {torch.__version__} computes math attention in the input dtype "
            "(no float32 upcast before torch 2.5): logits of 1e4 keep no fraction"
        )
    try:
        if allowed():
            return (
                "math attention may reduce in fp16/bf16 "
                "(torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True))"
            )
    except (RuntimeError, AttributeError):
        return None
    # Its float32 GEMMs then follow the float32 matmul precision: TF32 (or bf16 passes)
    # rounds q and k to 10 bits, a logit of 1e4 by about 5.
    getter = getattr(torch, "get_float32_matmul_precision", None)
    precision = getter() if getter is not None else "highest"
    if precision != "highest":
        return f"float32 matmuls run at reduced precision (torch.get_float32_matmul_precision() == {precision!r})"
    return None


def _case_sizes(ctx: ProbeContext, case: dict[str, Any]) -> dict[str, Any]:
    """Batch, heads and lengths of a case on this device (shorter on a CPU)."""
    q_len, kv_len = sdpa_matrix.lengths_of(case["length"])
    long_case = bool(case.get("sampled_rows"))
    if not ctx.is_gpu:
        q_len, kv_len = sdpa_matrix.cpu_length(q_len), sdpa_matrix.cpu_length(kv_len)
    heads = 2 if long_case else sdpa_matrix.HEADS
    layout = case["layout"]
    kv_heads = heads // 2 if layout == "gqa" else 1 if layout == "expand" else heads
    return {
        "batch": 1 if long_case else sdpa_matrix.BATCH,
        "heads": heads,
        "kv_heads": kv_heads,
        "q_len": q_len,
        "kv_len": kv_len,
        "head_dim": case["head_dim"],
        "rows": (min(case["sampled_rows"], q_len // 2) if not ctx.is_gpu else case["sampled_rows"]) if long_case else 0,
    }


def _quantized(torch: Any, shape: list[int], gen: Any) -> Any:
    """Standard normal values rounded to multiples of 1/8 in [−4, 4] (exact products)."""
    values = torch.randn(tuple(shape), generator=gen, dtype=torch.float32)
    return (values * 8).round_().clamp_(-32, 32).div_(8)


def _matrix_mask(torch: Any, case: dict[str, Any], sizes: dict[str, Any], dt: Any, gen: Any) -> Any:
    """The attention mask of a case, shape (B, 1, L, S), or None (``none``, ``causal``)."""
    mask_kind = case["mask"]
    if mask_kind not in sdpa_matrix.MASKS_WITH_ROWS:
        return None
    batch, q_len, kv_len = sizes["batch"], sizes["q_len"], sizes["kv_len"]
    rows = torch.arange(q_len)
    emptied = _emptied_rows(case, batch, q_len)
    if mask_kind == "bool":
        # Every row keeps at least one key (its diagonal), unless the case empties it.
        keep = torch.zeros((batch, 1, q_len, kv_len), dtype=torch.bool)
        keep[:, 0, rows, rows % kv_len] = True
        allowed = (torch.rand((batch, 1, q_len, kv_len), generator=gen) > 0.3) | keep
        for b, row in emptied:
            allowed[b, 0, row, :] = False
        return allowed
    values = torch.randn((batch, 1, q_len, kv_len), generator=gen, dtype=torch.float32)
    # Key padding of the last batch element: −inf for its last keys (never a whole row).
    pad = kv_len // 7 + 1
    values[batch - 1, 0, :, kv_len - pad :] = float("-inf")
    if case["input"] == "negrow":
        # A quarter of the rows: every logit −10240 + q·k/√d (the padding stays −inf).
        shifted = values[:, 0, rows % 4 == 1, :]
        values[:, 0, rows % 4 == 1, :] = torch.where(torch.isinf(shifted), shifted, torch.tensor(_NEGROW_SHIFT))
    for b, row in emptied:
        values[b, 0, row, :] = float("-inf")
    # additive_fp32 keeps the mask in float32 whatever the dtype of q, k and v.
    return values if mask_kind == "additive_fp32" else values.to(dt)


def _emptied_rows(case: dict[str, Any], batch: int, q_len: int) -> list[tuple[int, int]]:
    """(batch, query row) pairs with no key at all (``fullmask`` inputs)."""
    if case["input"] != "fullmask":
        return []
    rows = [(0, 1), (0, q_len // 3), (0, q_len - 1), (batch - 1, 2)]
    return list(dict.fromkeys(rows))


def _matrix_inputs(
    ctx: ProbeContext, case: dict[str, Any], sizes: dict[str, Any], dtype: str, dt: Any
) -> dict[str, Any]:
    """The host inputs of a case (rounded to the dtype), drawn from the plan seed, the dtype
    and the case: the same on every backend, so probes share one reference."""
    torch = ctx.torch
    tag = f"{dtype}/{case['name']}/{sizes['batch']}x{sizes['heads']}x{sizes['q_len']}x{sizes['kv_len']}"
    gen = torch.Generator().manual_seed(derive_seed(ctx.seed, "nn.sdpa.matrix.inputs", tag))
    batch, heads, kv_heads = sizes["batch"], sizes["heads"], sizes["kv_heads"]
    q_len, kv_len, d = sizes["q_len"], sizes["kv_len"], sizes["head_dim"]
    q_shape, kv_shape = [batch, heads, q_len, d], [batch, kv_heads, kv_len, d]
    kind = case["input"]
    if kind == "large":
        # Integers times 8 (q) and 4 (k), |q| ≤ 128, |k| ≤ 64: every product and partial sum
        # is an exact float32 integer, and the logits (std ≈ 2900) reach ±1e4.
        q = torch.randint(-16, 17, tuple(q_shape), generator=gen).to(torch.float32) * 8
        k = torch.randint(-16, 17, tuple(kv_shape), generator=gen).to(torch.float32) * 4
    elif kind == "negrow" and case["mask"] not in sdpa_matrix.FLOAT_MASKS:
        q, k = _quantized(torch, q_shape, gen), _quantized(torch, kv_shape, gen)
        k[..., 0] = _NEGROW_KEY
        q[..., 0] = 0.0
        q[:, :, torch.arange(q_len) % 4 == 1, 0] = -_NEGROW_QUERY
    else:
        q = torch.randn(tuple(q_shape), generator=gen, dtype=torch.float32)
        k = torch.randn(tuple(kv_shape), generator=gen, dtype=torch.float32)
    v = torch.randn(tuple(kv_shape), generator=gen, dtype=torch.float32)
    mask = _matrix_mask(torch, case, sizes, dt, gen)
    out: dict[str, Any] = {"q": q.to(dt), "k": k.to(dt), "v": v.to(dt), "mask": mask}
    rows = None
    if sizes["rows"]:
        count = sizes["rows"]
        edges = torch.cat(
            [torch.arange(32), torch.arange(q_len // 2 - 16, q_len // 2 + 16), torch.arange(q_len - 32, q_len)]
        )
        picks = torch.randperm(q_len, generator=gen)[: max(0, count - edges.numel())]
        rows = torch.unique(torch.cat([edges, picks]))
    out["rows"] = rows
    if case["direction"] != "forward":
        grad = torch.randn((batch, heads, q_len, d), generator=gen, dtype=torch.float32)
        # A loss that ignores query rows with no key (as training ignores padding): whatever a
        # backend puts in those rows then cannot reach any gradient, unless it is NaN or Inf.
        for b, row in _emptied_rows(case, batch, q_len):
            grad[b, :, row, :] = 0.0
        out["grad"] = grad.to(dt)
    return out


def _heads(torch: Any, t: Any, layout: str, heads: int) -> Any:
    """k or v with one slice per query head: expanded (stride 0), or each of the ``gqa``
    heads repeated for the query heads of its group (``repeat_interleave``)."""
    if layout == "expand":
        return t.expand(t.shape[0], heads, t.shape[2], t.shape[3])
    if layout == "gqa":
        return t.repeat_interleave(heads // t.shape[1], dim=1)
    return t


def _matrix_reference(
    torch: Any, case: dict[str, Any], inputs: dict[str, Any], heads: int
) -> dict[str, Any]:
    """Float64 attention on the CPU, as PyTorch documents it (causal: top-left aligned;
    boolean mask: True may attend; float mask: added to the scaled logits), with autograd for
    the gradients of sum(out · grad) with respect to the inputs the case differentiates
    (``sdpa_matrix.differentiated``). Query rows with no key are flagged invalid; their
    output and gradients are 0 (a zero probability row)."""
    f64 = torch.float64
    backward = "grad" in inputs
    q, k, v = (inputs[name].to(f64) for name in ("q", "k", "v"))
    mask_kind = case["mask"]
    m = None
    if mask_kind in sdpa_matrix.FLOAT_MASKS:
        m = inputs["mask"].to(f64)
    wanted = sdpa_matrix.differentiated(case) if backward else ()
    for name, t in (("q", q), ("k", k), ("v", v), ("mask", m)):
        if name in wanted and t is not None:
            t.requires_grad_(True)
    rows = inputs["rows"]
    q_len, kv_len, d = q.shape[2], k.shape[2], q.shape[3]
    query_index = torch.arange(q_len) if rows is None else rows
    qq = q if rows is None else q[:, :, rows]
    kk, vv = _heads(torch, k, case["layout"], heads), _heads(torch, v, case["layout"], heads)
    scores = torch.matmul(qq, kk.transpose(-1, -2)) * (1.0 / math.sqrt(d))
    allowed = torch.ones((query_index.numel(), kv_len), dtype=torch.bool)
    if mask_kind == "causal":
        allowed = torch.arange(kv_len).unsqueeze(0) <= query_index.unsqueeze(1)
    allowed = allowed.expand(q.shape[0], 1, query_index.numel(), kv_len)
    if mask_kind == "bool":
        allowed = allowed & inputs["mask"][:, :, query_index]
    if m is not None:
        bias = m[:, :, query_index] if rows is not None else m
        finite = torch.isfinite(bias)
        allowed = allowed & finite
        scores = scores + torch.where(finite, bias, torch.zeros((), dtype=f64))
    row_ok = allowed.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~allowed, float("-inf"))
    # Rows with no key: softmax over zeros, then zero probabilities (no NaN, no gradient).
    scores = torch.where(row_ok, scores, torch.zeros((), dtype=f64))
    probs = torch.where(row_ok, torch.softmax(scores, dim=-1), torch.zeros((), dtype=f64))
    out = torch.matmul(probs, vv)
    result: dict[str, Any] = {
        "out": out.detach(),
        "valid": row_ok.squeeze(-1).expand(q.shape[0], heads, query_index.numel()).clone(),
        "mask_valid": row_ok.squeeze(-1).clone(),
    }
    if backward:
        out.backward(inputs["grad"].to(f64))
        grads = {"dq": q.grad, "dk": k.grad, "dv": v.grad, "dmask": None if m is None else m.grad}
        result["grads"] = {f"d{name}": grads[f"d{name}"] for name in wanted}
    return result


def _matrix_device(
    ctx: ProbeContext, case: dict[str, Any], inputs: dict[str, Any], backend: str
) -> tuple[dict[str, Any], list[str]]:
    """Runs a case on the device under test: the output and (backward) the gradients, read
    back; and the warnings PyTorch gave. Raises ``_Refused`` when the backend cannot run it."""
    torch = ctx.torch
    F = torch.nn.functional
    layout, mask_kind = case["layout"], case["mask"]
    backward = case["direction"] != "forward"
    wanted = sdpa_matrix.differentiated(case)
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    heads = q.shape[1]
    # The tensors autograd accumulates into, and where each gradient sits in them:
    # (leaf, index along the packing dimension or None, whether it is (B, L, H, d)).
    leaves: dict[str, Any]
    where: dict[str, tuple[str, int | None, bool]]
    if layout == "noncontig":
        # Strided views of one packed projection output (B, L, 3, H, d), as models slice it
        # (the RKB-018 pattern); k and v alone are packed when the lengths differ, or when q
        # alone requires grad (``backward_partial``).
        if q.shape[2] == k.shape[2] and case["direction"] != "backward_partial":
            leaves = {"qkv": ops.stage(torch.stack([t.permute(0, 2, 1, 3) for t in (q, k, v)], dim=2), ctx.device)}
            where = {"dq": ("qkv", 0, True), "dk": ("qkv", 1, True), "dv": ("qkv", 2, True)}
        else:
            leaves = {
                "q": ops.stage(q.permute(0, 2, 1, 3).contiguous(), ctx.device),
                "kv": ops.stage(torch.stack([t.permute(0, 2, 1, 3) for t in (k, v)], dim=2), ctx.device),
            }
            where = {"dq": ("q", None, True), "dk": ("kv", 0, True), "dv": ("kv", 1, True)}
    else:
        leaves = {name: ops.stage(inputs[name], ctx.device) for name in ("q", "k", "v")}
        where = {"dq": ("q", None, False), "dk": ("k", None, False), "dv": ("v", None, False)}
    if backward:
        for leaf_name, leaf in leaves.items():
            # A leaf requires grad when an operand taken from it does.
            if any(where[f"d{name}"][0] == leaf_name for name in wanted if name != "mask"):
                leaf.requires_grad_(True)

    def operand(name: str) -> Any:
        leaf_name, index, packed = where[name]
        t = leaves[leaf_name]
        if index is not None:
            t = t[:, :, index]
        if packed:
            t = t.transpose(1, 2)
        return _heads(torch, t, layout, heads) if layout == "expand" and name != "dq" else t

    dq, dk, dv = operand("dq"), operand("dk"), operand("dv")
    if layout == "expand" and (dk.stride(1) != 0 or dv.stride(1) != 0):
        raise RuntimeError(f"expanded k/v have head strides {dk.stride(1)}, {dv.stride(1)}, not 0")
    dmask = None if inputs["mask"] is None else ops.stage(inputs["mask"], ctx.device)
    if dmask is not None and mask_kind == "additive_grad":
        dmask.requires_grad_(True)
    kwargs: dict[str, Any] = {"attn_mask": dmask, "is_causal": mask_kind == "causal"}
    if layout == "gqa":
        kwargs["enable_gqa"] = True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step = "forward"
        try:
            with _backend_context(torch, backend):
                out = ops_math.sdpa(
                    backend,
                    lambda: F.scaled_dot_product_attention(dq, dk, dv, **kwargs),
                    sources=(dq, dk, dv),
                    variant=mask_kind,
                    direction="forward",
                )
                if backward:
                    step = "backward"
                    out.backward(ops.stage(inputs["grad"], ctx.device))
        except TypeError as exc:
            if "enable_gqa" in str(exc):
                raise _Refused(f"this torch {torch.__version__} has no enable_gqa: {exc}") from exc
            raise
        except RuntimeError as exc:
            if _refusal(exc, mask_kind):
                said = "; ".join(dict.fromkeys(str(w.message).strip() for w in caught))
                reason = f"{step}: {exc}" + (f" ({said[:600]})" if said else "")
                raise _Refused(reason) from exc
            raise
        warned = list(dict.fromkeys(f"{w.category.__name__}: {str(w.message).strip()}" for w in caught))
    results: dict[str, Any] = {"out": ops.readback(out.detach())}
    if backward:
        for name, (leaf_name, index, packed) in where.items():
            grad = leaves[leaf_name].grad
            if grad is not None:
                if index is not None:
                    grad = grad[:, :, index]
                if packed:
                    grad = grad.transpose(1, 2)
                # Gradients stand for the backward kernels' outputs under fault simulation.
                grad = ops.readback(
                    ops_math.sdpa(backend, lambda g=grad: g, variant=mask_kind, direction="backward")
                )
            results[name] = grad
        if mask_kind == "additive_grad":
            grad = dmask.grad
            if grad is not None:
                grad = ops.readback(ops_math.sdpa(backend, lambda: grad, variant=mask_kind, direction="backward"))
            results["dmask"] = grad
    return results, warned


def _reference_for(
    ctx: ProbeContext, case: dict[str, Any], inputs: dict[str, Any], sizes: dict[str, Any], dtype: str
) -> dict[str, Any]:
    """The case's float64 reference, from the cache when an earlier backend computed it."""
    torch = ctx.torch
    key = (ctx.seed, dtype, case["name"], tuple(sorted(sizes.items())))
    reference = _MATRIX_REFERENCES.get(key)
    if reference is None:
        reference = _matrix_reference(torch, case, inputs, sizes["heads"])
        _MATRIX_REFERENCES[key] = reference
        while len(_MATRIX_REFERENCES) > _MATRIX_REFERENCES_KEPT:
            _MATRIX_REFERENCES.popitem(last=False)
    else:
        _MATRIX_REFERENCES.move_to_end(key)
    return reference


def _finite_only(torch: Any, got: Any, want: Any) -> Any:
    """``got`` with every finite element replaced by the reference: compared so, only NaN and
    Inf where the reference is finite count (see ``_FINITE_ONLY_LARGE``)."""
    return torch.where(torch.isfinite(got), want, got.to(want.dtype))


def _matrix_trials(
    torch: Any, case: dict[str, Any], got: dict[str, Any], reference: dict[str, Any], rows: Any
) -> tuple[list[tuple[str, Any, Any, Any]], list[str]]:
    """The comparisons of one case as (name, device result, reference, elements compared or
    None for all), and the gradients the backward pass did not return.

    Fully masked query rows (``valid`` False) are left out of the output, dq and mask
    gradient comparisons; k and v gradients are compared whole, so NaN that a masked row
    spreads into them fails."""
    valid = reference["valid"]
    all_valid = bool(valid.all())
    out = got["out"] if rows is None else got["out"][:, :, rows]
    trials = [("out", out, reference["out"], None if all_valid else valid.unsqueeze(-1).expand(out.shape))]
    missing: list[str] = []
    offset_column = case["input"] == "negrow" and case["mask"] not in sdpa_matrix.FLOAT_MASKS
    for name, want in reference.get("grads", {}).items():
        tensor = got.get(name)
        if tensor is None:
            missing.append(name)
            continue
        select = None
        if name == "dq" and not all_valid:
            select = valid.unsqueeze(-1).expand(tensor.shape)
        elif name == "dmask" and not all_valid:
            select = reference["mask_valid"].unsqueeze(-1).expand(tensor.shape)
        if case["input"] == "large" and name in _FINITE_ONLY_LARGE:
            tensor = _finite_only(torch, tensor, want)
        if offset_column and name in ("dq", "dk"):
            # Head-dim 0 carries the negrow offset (see _NEGROW_QUERY): finite-only there,
            # the other columns as usual.
            column = torch.zeros(tensor.shape, dtype=torch.bool)
            column[..., 0] = True
            offset = column if select is None else column & select
            rest = ~column if select is None else ~column & select
            trials.append((name + "[0]", _finite_only(torch, tensor, want), want, offset))
            trials.append((name, tensor, want, rest))
            continue
        trials.append((name, tensor, want, select))
    return trials, missing


def run_sdpa_matrix(
    ctx: ProbeContext,
    *,
    dtype: str,
    backend: str,
    design: str,
    direction: str | None,
    rule_dtype: str,
    tolerance: float,
) -> ProbeOutput:
    """The cases of one attention-matrix probe on one backend against float64 (see
    ``sdpa_matrix``). Every compared tensor of every case is a trial of one ``CompareStats``;
    the metrics count the cases run, refused and failed, and name the first failing ones
    with their factors and largest error. Query rows with no key are left out of the output,
    dq and mask-gradient comparisons (their values are each backend's choice), while NaN/Inf
    anywhere else, k/v gradients included, fails. The probe skips only when the backend
    refuses every case."""
    torch = ctx.torch
    dt = dtype_of(torch, dtype)
    cases = sdpa_matrix.probe_cases(design, direction, backend)
    acc = ToleranceAccumulator(torch, tolerance)
    precision_problem = _math_precision_problem(torch) if backend in ("math", "default") else None
    refused: list[dict[str, str]] = []
    # Cases that raised on a valid input (not a refusal): the other cases still run, and
    # the probe ends in an error that names them.
    raised: list[dict[str, str]] = []
    failing: list[dict[str, Any]] = []
    warned: list[str] = []
    run = failed = masked_rows = 0
    masked_outputs: set[str] = set()
    worst: dict[str, Any] = {}
    scaled = False
    for case in cases:
        sizes = _case_sizes(ctx, case)
        scaled = scaled or (sizes["q_len"], sizes["kv_len"]) != sdpa_matrix.lengths_of(case["length"])
        try:
            if precision_problem and case["input"] in ("large", "negrow"):
                raise _Refused(precision_problem)
            if sizes["rows"]:
                # The long case: sampled rows of scores over every key, in float64 on the host.
                elements = sizes["batch"] * sizes["heads"] * sizes["kv_len"] * sizes["head_dim"]
                scores = sizes["batch"] * sizes["heads"] * sizes["rows"] * sizes["kv_len"]
                try:
                    require_memory(ctx, scores * 8 * 5 + elements * 8 * 4, elements * 2 * 8)
                except SkipProbe as exc:
                    raise _Refused(str(exc)) from exc
            inputs = _matrix_inputs(ctx, case, sizes, dtype, dt)
            got, said = _matrix_device(ctx, case, inputs, backend)
        except _Refused as exc:
            refused.append({"case": case["name"], "reason": str(exc)[:800]})
            continue
        except Exception as exc:  # noqa: BLE001 - a valid case raised: reported below
            message = f"{type(exc).__name__}: {str(exc).strip()}".splitlines()[0][:400]
            if ctx.is_gpu and device_context_problem(torch, ctx.device) is not None:
                # A sticky fault: nothing more can run in this worker (the worker restarts).
                raise RuntimeError(f"case {case['name']} faulted: {message}") from exc
            raised.append({"case": case["name"], "error": message})
            continue
        run += 1
        warned.extend(w for w in said if w not in warned)
        reference = _reference_for(ctx, case, inputs, sizes, dtype)
        trials, missing = _matrix_trials(torch, case, got, reference, inputs["rows"])
        masked = ~reference["valid"]
        if bool(masked.any()):
            masked_rows += int(masked.sum())
            masked_outputs.add(_describe_masked_rows(torch, trials[0][1][masked]))
        before = acc.failed_trials
        errors: dict[str, float] = {}
        bad: list[str] = []
        for name, tensor, want, select in trials:
            ahead = acc.failed_trials
            errors[name] = acc.add(tensor, want, valid=select)
            if acc.failed_trials > ahead:
                bad.append(name)
        for name in missing:
            # A gradient the backward pass should have produced and did not: wrong numbers
            # for the training that relies on it (compared as zeros).
            want = reference["grads"][name]
            errors[name] = acc.add(torch.zeros_like(want), want)
            bad.append(f"{name} (none returned)")
        case_worst = max(errors.values(), default=0.0)
        if acc.failed_trials > before:
            failed += 1
            if len(failing) < _CASES_SHOWN:
                failing.append(
                    {
                        "case": case["name"],
                        **{f: case[f] for f in ("mask", "length", "layout", "input", "direction", "head_dim")},
                        "shape": f"{sizes['batch']}x{sizes['heads']}x{sizes['q_len']}x{sizes['kv_len']}",
                        "failed": bad,
                        "max_rel_err": case_worst,
                    }
                )
        elif case_worst > worst.get("rel_err", -1.0):
            worst = {"case": case["name"], "tensor": max(errors, key=errors.__getitem__), "rel_err": case_worst}
        if sizes["rows"] and ctx.is_gpu:
            release(ctx)
    if raised:
        others = f"{run} other cases ran, {failed} failed" + (
            f" (first: {failing[0]['case']}: {', '.join(failing[0]['failed'])})" if failing else ""
        )
        named = "; ".join(f"{r['case']}: {r['error'][:300]}" for r in raised[:_CASES_SHOWN])
        raise RuntimeError(
            f"{len(raised)} of {len(cases)} cases raised on valid inputs: {named} ({others}, {len(refused)} refused)"
        )
    if run == 0:
        first = refused[0]["reason"] if refused else "no cases"
        raise SkipProbe(
            f"the {backend} attention backend cannot run any of its {len(cases)} cases on {ctx.device}: {first}"
        )
    metrics: dict[str, Any] = {
        "dtype": dtype,
        "backend": backend,
        "design": design,
        "direction": direction or "both",
        "cases": len(cases),
        "cases_run": run,
        "cases_refused": len(refused),
        "cases_failed": failed,
    }
    if failing:
        metrics["failing_cases"] = failing
    if worst:
        metrics["worst_passing_case"] = worst
    if refused:
        metrics["refused_cases"] = refused[:_CASES_SHOWN]
    if masked_rows:
        metrics["fully_masked_rows"] = masked_rows
        metrics["fully_masked_rows_output"] = ", ".join(sorted(masked_outputs))
    if scaled:
        metrics["scaled_down_on_cpu"] = True
    if precision_problem:
        metrics["math_precision"] = precision_problem
    notes: list[str] = []
    if refused:
        notes.append(
            f"{len(refused)} of {len(cases)} cases refused by the {backend} attention backend "
            f"(first: {refused[0]['case']}: {refused[0]['reason'][:300]})"
        )
    for message in warned[:_CASES_SHOWN]:
        notes.append(f"{backend} attention warned: {message}")
    return ProbeOutput(acc.stats(), metrics, notes)
