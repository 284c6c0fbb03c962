"""nn family implementation (see ``nn_specs`` for the catalogue, id grammar and tolerances).

Models are written functionally, so the same code runs on the device under test (each
convolution, GEMM and attention call through ``gpuprobe.worker.ops_math``, where fault
simulation can break it) and as the float64 CPU reference (plain torch calls). Inputs and
weights are drawn from the plan seed and rounded to the probe's dtype first; the reference
computes in float64 from those rounded values, so the comparison measures the computation,
not the rounding of the inputs (autocast is the exception: rounding is part of what it does).

Attention backends that cannot run a case (no kernel for this dtype, head size, mask or
device) make the probe SKIP with PyTorch's own explanation; warnings raised by the attention
call (for instance AOTriton's "experimental" notice on ROCm) are kept as observation notes.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from gpuprobe.worker import ops, ops_math
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe, require_memory
from gpuprobe.worker.patterns import derive_seed
from gpuprobe.worker.probes.nn_specs import CPU_SEQ
from gpuprobe.worker.probes.ops_run import (
    ToleranceAccumulator,
    dtype_of,
    precision_context,
    release,
    tf32_notes,
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


def _conv_params(ctx: ProbeContext, kind: str, case: dict[str, Any], dtype: Any, tag: str) -> dict[str, Any]:
    """Weights ~ N(0, 1/fan_in) (activations keep unit scale), biases ~ N(0, 0.1²)."""
    cin, cout, k = case["cin"], case["cout"], case["k"]
    if kind == "depthwise":
        params = {
            "dw": _randn(ctx, [cin, 1, k, k], tag + "dw", 1.0 / k),
            "db": _randn(ctx, [cin], tag + "db", 0.1),
            "pw": _randn(ctx, [cout, cin, 1, 1], tag + "pw", 1.0 / math.sqrt(cin)),
            "pb": _randn(ctx, [cout], tag + "pb", 0.1),
        }
    elif kind == "conv_transpose2d":
        params = {
            "w": _randn(ctx, [cin, cout, k, k], tag + "w", 1.0 / math.sqrt(cin * k * k / case["stride"] ** 2)),
            "b": _randn(ctx, [cout], tag + "b", 0.1),
        }
    else:
        params = {
            "w": _randn(ctx, [cout, cin, k, k], tag + "w", 1.0 / math.sqrt(cin * k * k)),
            "b": _randn(ctx, [cout], tag + "b", 0.1),
        }
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
    with precision_context(torch, rule_dtype, dtype):
        for trial, case in enumerate(cases):
            tag = f"case{trial}"
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
            acc.add(ops.readback(out.detach()), ref.detach())
            if backward:
                grad = _randn(ctx, list(ref.shape), tag + "g").to(dt)
                out.backward(ops.stage(grad, ctx.device))
                ref.backward(grad.to(torch.float64))
                method = "conv_transpose2d" if kind == "conv_transpose2d" else "conv2d"
                for got, want in ((dx.grad, x64.grad), (dparams[weight_name].grad, params64[weight_name].grad)):
                    got = ops_math.finish("conv", method, got)
                    acc.add(ops.readback(got), want)
    metrics = {"kind": kind, "dtype": dtype, "tf32": rule_dtype == "tf32", "cases": len(cases), "backward": backward}
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
    if not ctx.is_gpu and seq > CPU_SEQ:
        seq = CPU_SEQ + 1 if sampled_rows else CPU_SEQ
    batch, heads = (2, 1) if mask in ("padding", "allmasked") else (1, 2)
    causal = mask == "causal"
    elements = batch * heads * seq * head_dim
    require_memory(ctx, 8 * elements * 8 + (seq * seq * 8 * 3 if not sampled_rows else 0), 16 * elements * 2)
    key = (ctx.seed, dtype, head_dim, seq, batch, heads, mask, backward, sampled_rows)
    gen = torch.Generator().manual_seed(derive_seed(ctx.seed, "nn.sdpa.inputs", repr(key)))
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
