#!/usr/bin/env python3
"""Reproducers for public PyTorch CUDA correctness bugs (see BUGS.md).

Usage:
    python repros.py [--out PATH] [--skip-big] [--only a,b,c]
    python repros.py --list
    python repros.py --one NAME          (internal: run one repro in this process)

Every repro runs in its own subprocess, so a crash / illegal memory access in one
does not lose the others.  One JSON line per bug is written to stdout (and to
--out PATH if given):

    {"name", "issue", "title", "class", "big", "reproduced", "evidence", "seconds"}

reproduced: true / false / null (null = could not run: no CUDA device, OOM,
timeout, unexpected error).  The script always exits 0.

Only imports torch, math, sys, json, traceback, time, os, subprocess.
"""
import json
import math
import os
import subprocess
import sys
import time
import traceback

MARK = "@@REPRO_RESULT@@ "
TIMEOUT_S = 120

REPROS = []  # list of dicts


def repro(name, issue, title, cls, big=False):
    def deco(fn):
        REPROS.append(dict(name=name, issue=issue, title=title, cls=cls, big=big, fn=fn))
        return fn
    return deco


# --------------------------------------------------------------------------
# helpers (used only inside the child process)
# --------------------------------------------------------------------------

def _torch():
    import torch  # noqa: WPS433
    return torch


def _maxabs(a, b):
    torch = _torch()
    d = (a.detach().double().cpu() - b.detach().double().cpu()).abs()
    if d.numel() == 0:
        return 0.0
    return float(torch.nan_to_num(d, nan=float("inf")).max())


def _nonfinite(t):
    torch = _torch()
    return int((~torch.isfinite(t)).sum())


# --------------------------------------------------------------------------
# small repros
# --------------------------------------------------------------------------

@repro("sdpa_cudnn_bwd_nan_seq704",
       "https://github.com/pytorch/pytorch/issues/196678",
       "[SDPA] cuDNN backward returns NaN grad_q for seq_len % 128 == 64 with attn_mask on H100/H200",
       "gradient")
def r_sdpa_cudnn_bwd():
    torch = _torch()
    import torch.nn.functional as F
    L, D = 704, 64

    def make(dev, dtype):
        g = torch.Generator().manual_seed(0)
        q = torch.randn(1, 1, L, D, generator=g) * 0.1
        k = torch.randn(1, 1, L, D, generator=g) * 0.1
        v = torch.randn(1, 1, L, D, generator=g)
        q[..., 0] = 1.0
        k[..., 0] = -120 * math.sqrt(D)  # every logit ~ -120 -> logsumexp < -88.7
        go = torch.randn(1, 1, L, D, generator=g)
        # round through bf16 so the reference sees the same inputs
        q, k, v, go = [t.to(torch.bfloat16).to(dtype).to(dev) for t in (q, k, v, go)]
        for t in (q, k, v):
            t.requires_grad_()
        mask = torch.ones(L, L, dtype=torch.bool, device=dev).tril()[None, None]
        return q, k, v, go, mask

    # reference: CPU float64 math
    q, k, v, go, mask = make("cpu", torch.float64)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out.backward(go)
    ref_nf = _nonfinite(q.grad)
    ref_gq = q.grad.detach()

    results = []
    variants = [("default", None)]
    try:
        from torch.nn.attention import sdpa_kernel, SDPBackend
        variants.append(("cudnn", SDPBackend.CUDNN_ATTENTION))
    except Exception:  # pragma: no cover
        sdpa_kernel = None
    bad = False
    for label, backend in variants:
        q, k, v, go, mask = make("cuda", torch.bfloat16)
        try:
            if backend is None:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            else:
                with sdpa_kernel(backend):
                    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            out.backward(go)
            torch.cuda.synchronize()
        except RuntimeError as e:
            results.append("%s: error %s" % (label, str(e).splitlines()[0][:80]))
            continue
        nf = _nonfinite(q.grad)
        err = _maxabs(torch.nan_to_num(q.grad.float()), ref_gq) if nf == 0 else float("nan")
        results.append("%s: grad_q non-finite=%d/%d maxabs_vs_fp64=%.3g" % (label, nf, q.grad.numel(), err))
        if nf > 0 and ref_nf == 0:
            bad = True
    return bad, "ref(cpu fp64) grad_q non-finite=%d; " % ref_nf + "; ".join(results)


@repro("mha_need_weights_fully_masked_head_nan",
       "https://github.com/pytorch/pytorch/issues/160064",
       "MultiheadAttention returns all NaN when attn_mask fully masks a head and need_weights=True",
       "nan-inf")
def r_mha_masked_head():
    torch = _torch()
    from torch import nn
    torch.manual_seed(0)
    x = torch.randn(1, 5, 3, device="cuda")
    mask = torch.tensor([False, False, True], device="cuda").view(-1, 1, 1).expand(-1, 5, 5)
    att = nn.MultiheadAttention(3, 3, batch_first=True).cuda()
    y1, _ = att(x, x, x, attn_mask=mask, average_attn_weights=False, need_weights=False)
    y2, w = att(x, x, x, attn_mask=mask, average_attn_weights=False, need_weights=True)
    torch.cuda.synchronize()
    n1, n2 = _nonfinite(y1), _nonfinite(y2)
    return (n1 == 0 and n2 > 0), ("need_weights=False output non-finite=%d/%d; need_weights=True output non-finite=%d/%d"
                                  % (n1, y1.numel(), n2, y2.numel()))


@repro("mha_dropout_masked_row_need_weights_nan",
       "https://github.com/pytorch/pytorch/issues/152028",
       "[CUDA] MultiheadAttention with masks and dropout produces NaNs",
       "nan-inf")
def r_mha_dropout():
    torch = _torch()
    from torch import nn

    def run(need_weights):
        torch.manual_seed(0)
        mha = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True, bias=False, device="cuda")
        mha.train()
        q = torch.randn(2, 3, 8, device="cuda")
        k = torch.randn(2, 4, 8, device="cuda")
        v = torch.randn(2, 4, 8, device="cuda")
        m = torch.zeros(3, 4, dtype=torch.bool, device="cuda")
        m[0, :] = True  # first query row fully masked (True = not allowed)
        out, w = mha(q, k, v, attn_mask=m, need_weights=need_weights)
        torch.cuda.synchronize()
        return out, w

    o1, _ = run(False)
    o2, w2 = run(True)
    n1, n2 = _nonfinite(o1), _nonfinite(o2)
    nw = _nonfinite(w2) if w2 is not None else 0
    return (n1 == 0 and n2 > 0), ("need_weights=False out non-finite=%d; need_weights=True out non-finite=%d, weights non-finite=%d"
                                  % (n1, n2, nw))


@repro("softmax_fp64_odd_width_513_1023",
       "https://github.com/pytorch/pytorch/issues/147284",
       "torch.softmax gives wrong result on cuda double tensors with multiple rows and 781 columns",
       "wrong-value")
def r_softmax_fp64():
    torch = _torch()
    worst, bad_w = 0.0, []
    for w in (513, 515, 601, 781, 999, 1001, 1023, 512, 1024, 780):
        s = torch.softmax(torch.zeros(2, w, dtype=torch.float64, device="cuda"), dim=1).sum(-1)
        e = float((s - 1.0).abs().max())
        worst = max(worst, e)
        if e > 1e-9:
            bad_w.append(w)
    return bool(bad_w), "max |sum(softmax)-1| = %.3g (exact math: 0); widths failing (>1e-9): %s" % (worst, bad_w)


@repro("avg_pool2d_bwd_channels_last_padding",
       "https://github.com/pytorch/pytorch/issues/188344",
       "avg_pool2d backward returns wrong input gradients on CUDA for channels_last inputs when padding > 0",
       "gradient")
def r_avgpool_cl():
    torch = _torch()
    import torch.nn.functional as F

    def grad(device, cl):
        x = torch.arange(1 * 2 * 4 * 4, device=device, dtype=torch.float64).reshape(1, 2, 4, 4)
        if cl:
            x = x.contiguous(memory_format=torch.channels_last)
        x = x.detach().requires_grad_()
        out = F.avg_pool2d(x, kernel_size=2, stride=1, padding=1)
        out.backward(torch.ones_like(out))
        return x.grad.detach().cpu()

    ref = grad("cpu", False)
    e_nchw = _maxabs(grad("cuda", False), ref)
    e_cl = _maxabs(grad("cuda", True), ref)
    return e_cl > 1e-9, "max|grad - cpu_fp64|: cuda NCHW=%.3g, cuda channels_last=%.3g" % (e_nchw, e_cl)


@repro("norm_fp32_large_magnitude_nan",
       "https://github.com/pytorch/pytorch/issues/162489",
       "float32 overflow in variance computation for normalization layers (|x|~1e30 -> NaN on CUDA)",
       "nan-inf")
def r_norm_overflow():
    torch = _torch()
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 64, generator=g) * 1e30
    ref = F.layer_norm(x.double(), (64,))
    out = F.layer_norm(x.cuda(), (64,))
    x4 = torch.randn(2, 8, 4, 4, generator=g) * 1e30
    ref_bn = F.batch_norm(x4.double(), None, None, training=True)
    out_bn = F.batch_norm(x4.cuda(), None, None, training=True)
    ref_gn = F.group_norm(x4.double(), 2)
    out_gn = F.group_norm(x4.cuda(), 2)
    torch.cuda.synchronize()
    parts, bad = [], False
    for nm, o, r in (("layer_norm", out, ref), ("batch_norm", out_bn, ref_bn), ("group_norm", out_gn, ref_gn)):
        nf, rnf = _nonfinite(o), _nonfinite(r)
        err = _maxabs(torch.nan_to_num(o), r)
        parts.append("%s: cuda non-finite=%d/%d (ref %d), maxabs(nan->0) vs fp64=%.3g" % (nm, nf, o.numel(), rnf, err))
        if (nf > 0 and rnf == 0) or err > 0.1:
            bad = True
    return bad, "; ".join(parts)


@repro("polygamma_high_order_nan",
       "https://github.com/pytorch/pytorch/issues/166409",
       "torch.polygamma produces inconsistent results between CPU and CUDA for moderate orders",
       "nan-inf")
def r_polygamma():
    torch = _torch()
    n = 200
    x = torch.linspace(-2.0, 2.0, 10)
    ref = torch.polygamma(n, x.double()).float()   # truth (float64, overflows to +-inf)
    cpu32 = torch.polygamma(n, x)                    # only used to separate the CUDA-specific part
    out = torch.polygamma(n, x.cuda()).cpu()
    mism = [i for i in range(10) if torch.isnan(out[i]) and not torch.isnan(ref[i])]
    cuda_only = [i for i in mism if not torch.isnan(cpu32[i])]
    # reproduced = CUDA gives NaN where the float64 truth is +-inf AND the CPU float32 kernel does not
    return bool(cuda_only), "cuda=%s ; cpu_fp64=%s ; NaN-where-fp64-not-NaN at %s (CUDA-only: %s)" % (
        [float(v) for v in out], [float(v) for v in ref], mism, cuda_only)


@repro("abs_complex128_overflow_inf",
       "https://github.com/pytorch/pytorch/issues/158412",
       "Inconsistent torch.absolute results on complex128 between CPU and CUDA",
       "nan-inf")
def r_abs_complex():
    torch = _torch()
    big = 1.7976931348623157e308
    inp = torch.complex(torch.ones(3, 3, dtype=torch.float64), torch.full((3, 3), big, dtype=torch.float64))
    ref = torch.abs(inp)  # hypot -> finite (= big)
    out = torch.abs(inp.cuda()).cpu()
    ninf = int(torch.isinf(out).sum())
    return (ninf > 0 and bool(torch.isfinite(ref).all())), "|1 + 1.797e308 j|: cuda=%r (inf count %d/9), cpu=%r, exact=1.7976931348623157e308" % (
        float(out[0, 0]), ninf, float(ref[0, 0]))


@repro("cosine_similarity_half_overflow_no_error",
       "https://github.com/pytorch/pytorch/issues/153209",
       "Inconsistent Error Handling Between CPU and CUDA for cosine_similarity",
       "error")
def r_cosine():
    torch = _torch()
    x1 = torch.tensor(-1.6437e10, dtype=torch.float64)
    x2 = torch.full((3, 8, 2, 6), float("nan"), dtype=torch.float16)
    cpu_err = None
    try:
        torch.cosine_similarity(x1, x2, dim=0, eps=-9.74982e23)
    except RuntimeError as e:
        cpu_err = str(e).splitlines()[0]
    cuda_err = None
    try:
        r = torch.cosine_similarity(x1.cuda(), x2.cuda(), dim=0, eps=-9.74982e23)
        torch.cuda.synchronize()
        cuda_desc = "returned %s, non-finite=%d/%d" % (tuple(r.shape), _nonfinite(r), r.numel())
    except RuntimeError as e:
        cuda_err = str(e).splitlines()[0]
        cuda_desc = "raised: " + cuda_err
    return (cpu_err is not None and cuda_err is None), "cpu: %s ; cuda: %s" % (
        ("raised: " + cpu_err) if cpu_err else "no error", cuda_desc)


@repro("remainder_int_div_by_zero_no_error",
       "https://github.com/pytorch/pytorch/issues/165650",
       "torch.remainder with integer divisor 0 should raise, but returns large values in CUDA",
       "error")
def r_remainder():
    torch = _torch()
    x = torch.tensor([1, 2, 3], dtype=torch.int64)
    y = torch.zeros(3, dtype=torch.int64)
    cpu_err = None
    try:
        torch.remainder(x, y)
    except RuntimeError as e:
        cpu_err = str(e).splitlines()[0]
    try:
        r = torch.remainder(x.cuda(), y.cuda())
        torch.cuda.synchronize()
        cuda_desc = "returned %s" % r.cpu().tolist()
        cuda_raised = False
    except RuntimeError as e:
        cuda_desc = "raised: " + str(e).splitlines()[0]
        cuda_raised = True
    return (cpu_err is not None and not cuda_raised), "cpu: %s ; cuda: %s" % (
        ("raised: " + cpu_err) if cpu_err else "no error", cuda_desc)


@repro("eigh_complex64_batched_non_orthonormal",
       "https://github.com/pytorch/pytorch/issues/192483",
       "torch.linalg.eigh silently returns non-orthonormal eigenvectors for batched complex64 CUDA inputs",
       "wrong-value")
def r_eigh():
    torch = _torch()
    B = 512
    parts, bad = [], False
    for N in (17, 24, 32, 40):
        g = torch.Generator().manual_seed(N)
        z = torch.complex(torch.randn(B, N, N, generator=g, dtype=torch.float64),
                          torch.randn(B, N, N, generator=g, dtype=torch.float64))
        Q, _ = torch.linalg.qr(z)
        w = torch.logspace(0, -2, N, dtype=torch.float64)
        A = (Q * w.to(Q.dtype)) @ Q.mH
        A = ((A + A.mH) / 2).to(torch.complex64)
        A = ((A + A.mH) / 2)  # exactly Hermitian in complex64
        Ac = A.cuda()
        eye = torch.eye(N, dtype=torch.complex64, device="cuda")
        worst_n, worst_err = 0, 0.0
        for call in range(6):
            _, V = torch.linalg.eigh(Ac)
            err = (V.mH @ V - eye).abs().amax(dim=(-2, -1))
            nb = int((err > 1e-2).sum())
            worst_n = max(worst_n, nb)
            worst_err = max(worst_err, float(err.max()))
        parts.append("N=%d: worst |V^H V - I|=%.2g, bad batches=%d/%d" % (N, worst_err, worst_n, B))
        if worst_n > 0:
            bad = True
    return bad, "; ".join(parts)


@repro("upsample_nearest_bwd_scale_1_25",
       "https://github.com/pytorch/pytorch/issues/97135",
       "A problem about upsample backward (nearest, non-integer scale: CUDA grad != CPU grad)",
       "gradient")
def r_upsample():
    torch = _torch()
    import torch.nn.functional as F

    def grad(dev):
        t = torch.arange(1 * 3 * 2 * 4, dtype=torch.float64, device=dev).view(1, 3, 2, 4).requires_grad_(True)
        y = F.interpolate(t, scale_factor=1.25, mode="nearest")
        g = torch.Generator().manual_seed(0)
        go = torch.randn(y.shape, generator=g, dtype=torch.float64).to(dev)
        y.backward(go)
        return t.grad.detach().cpu()

    ref = grad("cpu")
    out = grad("cuda")
    e = _maxabs(out, ref)
    # CPU passes gradcheck for this case, so the CPU gradient is the exact adjoint
    return e > 1e-9, "max|grad_cuda - grad_cpu| (fp64) = %.3g" % e


@repro("conv1d_fp16_batch_1251",
       "https://github.com/pytorch/pytorch/issues/59515",
       "Conv1d with large batch size and half precision in cuda returns incorrect result",
       "wrong-value")
def r_conv1d_half():
    torch = _torch()
    g = torch.Generator().manual_seed(0)
    t = torch.rand(1251, 8, 8, generator=g)
    cnn = torch.nn.Conv1d(8, 8, 3)
    ref = torch.nn.functional.conv1d(t.half().double(), cnn.weight.detach().half().double(), cnn.bias.detach().half().double())
    out = cnn.cuda().half()(t.cuda().half())
    torch.cuda.synchronize()
    nf = _nonfinite(out)
    e = _maxabs(torch.nan_to_num(out.float(), nan=1e4), ref)
    return (nf > 0 or e > 0.05), "non-finite=%d, max|out-ref_fp64|=%.3g (fp16 rounding ~1e-3)" % (nf, e)


@repro("embedding_max_norm_empty_weight_ima",
       "https://github.com/pytorch/pytorch/issues/195185",
       "[CUDA] illegal memory read on renorm_kernel (embedding max_norm, zero-width weight)",
       "crash")
def r_embedding_renorm():
    torch = _torch()
    import torch.nn.functional as F
    w = torch.empty((20, 0), dtype=torch.float32)
    idx = torch.tensor([0], dtype=torch.int64)
    cpu = F.embedding(idx, w.clone(), max_norm=1.0, norm_type=2.0)
    out = F.embedding(idx.cuda(), w.cuda(), max_norm=1.0, norm_type=2.0)
    torch.cuda.synchronize()
    return False, "cpu ok shape %s; cuda ok shape %s (no crash)" % (tuple(cpu.shape), tuple(out.shape))


@repro("fold_col2im_overflow_params_ima",
       "https://github.com/pytorch/pytorch/issues/188959",
       "[CUDA] illegal memory access on fold/unfold (col2im) with integer-overflow kernel/dilation/padding/stride",
       "crash")
def r_fold():
    torch = _torch()
    x = torch.zeros(1, 1, 1, device="cuda")
    try:
        y = torch.nn.functional.fold(x, output_size=(100, 100), kernel_size=(1, 1), dilation=(100, 100),
                                     padding=(2 ** 63 - 2, 2 ** 63 - 2), stride=(2 ** 63 - 1, 2 ** 63 - 1))
        torch.cuda.synchronize()
    except RuntimeError as e:
        msg = str(e).splitlines()[0]
        if "illegal memory" in msg or "CUDA error" in msg:
            raise
        return False, "clean RuntimeError (argument check): " + msg[:150]
    return False, "no crash, output shape %s" % (tuple(y.shape),)


# ---- small repros added 2026-11-24 (second batch) --------------------------

def _attn_ref64(q, k, v, mask=None):
    """Plain float64 attention (scores -> softmax -> @v); mask is bool (True=keep) or additive."""
    torch = _torch()
    q, k, v = q.double(), k.double(), v.double()
    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        if mask.dtype == torch.bool:
            s = s.masked_fill(~mask, float("-inf"))
        else:
            s = s + mask.double()
    return torch.softmax(s, dim=-1) @ v


def _sdpa_backends():
    """[(label, backend-or-None)]; None = default dispatch."""
    out = [("default", None)]
    try:
        from torch.nn.attention import SDPBackend
        out += [("cudnn", SDPBackend.CUDNN_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                ("flash", SDPBackend.FLASH_ATTENTION)]
    except Exception:  # pragma: no cover
        pass
    return out


def _sdpa_call(backend, *args, **kw):
    torch = _torch()
    import torch.nn.functional as F
    if backend is None:
        return F.scaled_dot_product_attention(*args, **kw)
    from torch.nn.attention import sdpa_kernel
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(*args, **kw)


def _declined(msg):
    """True when an SDPA backend just refused the inputs (not a bug)."""
    m = msg.lower()
    return ("no available kernel" in m or "no viable backend" in m or "not supported" in m
            or "invalid dtype for bias" in m)


@repro("sdpa_cudnn_fp32_mask_bf16_qkv",
       "https://github.com/pytorch/pytorch/pull/191612",
       "[cuDNN][SDPA] fp32 attn_mask with bf16/fp16 q/k/v is reinterpreted as 16-bit by the cuDNN backend (silent NaN/wrong)",
       "wrong-value")
def r_sdpa_cudnn_fp32_mask():
    torch = _torch()
    B, H, S, D = 2, 4, 32, 64
    g = torch.Generator().manual_seed(0)
    q, k, v = [torch.randn(B, H, S, D, generator=g).to(torch.bfloat16) for _ in range(3)]
    # what nn.Transformer.generate_square_subsequent_mask returns: float32, 0 / -inf
    mask = torch.triu(torch.full((S, S), float("-inf")), diagonal=1)
    ref = _attn_ref64(q, k, v, mask)
    qc, kc, vc, mc = q.cuda(), k.cuda(), v.cuda(), mask.cuda()
    parts, bad = [], False
    for label, be in _sdpa_backends():
        if label == "flash":
            continue  # flash takes no mask
        try:
            out = _sdpa_call(be, qc, kc, vc, attn_mask=mc)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 (AcceleratorError too)
            msg = str(e).splitlines()[0][:90]
            parts.append("%s: raised %s" % (label, msg))
            continue
        nf = _nonfinite(out)
        err = _maxabs(torch.nan_to_num(out.float(), nan=1e4), ref)
        parts.append("%s: non-finite=%d/%d maxabs_vs_fp64=%.3g" % (label, nf, out.numel(), err))
        if label in ("default", "cudnn") and (nf > 0 or err > 0.05):
            bad = True
    return bad, "fp32 causal mask (0/-inf), bf16 q/k/v %s; " % ((B, H, S, D),) + "; ".join(parts)


@repro("sdpa_only_mask_requires_grad_ima",
       "https://github.com/pytorch/pytorch/issues/148476",
       "Illegal memory access in scaled_dot_product_attention if only attn_mask requires grad",
       "crash")
def r_sdpa_mask_grad_only():
    torch = _torch()
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(0)
    q, k, v = [torch.randn(1, 1, 64, 16, generator=g) for _ in range(3)]
    m = torch.randn(1, 1, 64, 64, generator=g)
    # reference: float64 autograd on CPU, only the mask requires grad
    md = m.double().requires_grad_()
    _attn_ref64(q, k, v, md).sum().backward()
    ref = md.grad
    mc = m.cuda().requires_grad_()
    o = F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), attn_mask=mc)
    o.sum().backward()
    torch.cuda.synchronize()
    err = _maxabs(torch.nan_to_num(mc.grad, nan=1e4), ref)
    return err > 1e-3, "fp32 (1,1,64,16), float mask requires_grad, q/k/v do not: max|mask.grad - fp64| = %.3g" % err


@repro("sdpa_efficient_num_heads_65536",
       "https://github.com/pytorch/pytorch/issues/142228",
       "SDPA memory-efficient attention with num_heads >= 65536 (CUDA grid.y limit): launch fails or output is wrong",
       "index-width")
def r_sdpa_heads_65536():
    torch = _torch()
    Hh, S, D = 65536, 16, 32
    g = torch.Generator().manual_seed(0)
    q, k, v = [torch.randn(1, Hh, S, D, generator=g).to(torch.float16) for _ in range(3)]
    ref = _attn_ref64(q, k, v)
    qc, kc, vc = q.cuda(), k.cuda(), v.cuda()
    parts, bad = [], False
    for label, be in _sdpa_backends():
        try:
            out = _sdpa_call(be, qc, kc, vc)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 (AcceleratorError too)
            msg = str(e).splitlines()[0][:90]
            parts.append("%s: raised %s" % (label, msg))
            if not _declined(msg) and label in ("default", "efficient"):
                bad = True
            continue
        nf = _nonfinite(out)
        err = _maxabs(torch.nan_to_num(out.float(), nan=1e4), ref)
        parts.append("%s: non-finite=%d maxabs_vs_fp64=%.3g" % (label, nf, err))
        if label in ("default", "efficient") and (nf > 0 or err > 0.02):
            bad = True
    return bad, "q/k/v (1,65536,16,32) fp16; " + "; ".join(parts)


@repro("sdpa_cudnn_decode_q1_kv65536_bwd",
       "https://github.com/pytorch/pytorch/issues/138529",
       "CuDNN Backend cuDNN Frontend error (SDPA backward, q_len=1, kv_len=2^16, bf16)",
       "error")
def r_sdpa_cudnn_decode_bwd():
    torch = _torch()
    g = torch.Generator().manual_seed(0)
    q0 = torch.randn(1, 16, 1, 64, generator=g).to(torch.bfloat16)
    k0 = torch.randn(1, 16, 2 ** 16, 64, generator=g).to(torch.bfloat16)
    v0 = torch.randn(1, 16, 2 ** 16, 64, generator=g).to(torch.bfloat16)
    # reference: float64 autograd of plain attention (on the GPU, no SDPA kernel involved)
    qd, kd, vd = [t.cuda().double().requires_grad_() for t in (q0, k0, v0)]
    od = _attn_ref64(qd, kd, vd)
    od.backward(torch.ones_like(od))
    refs = [t.grad.detach() for t in (qd, kd, vd)]
    del qd, kd, vd, od
    parts, bad = [], False
    for label, be in _sdpa_backends():
        if label not in ("default", "cudnn"):
            continue
        q, k, v = [t.cuda().requires_grad_() for t in (q0, k0, v0)]
        try:
            out = _sdpa_call(be, q, k, v)
            out.backward(torch.ones_like(out))
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 (AcceleratorError too)
            msg = str(e).splitlines()[0][:100]
            parts.append("%s: raised %s" % (label, msg))
            if not _declined(msg):
                bad = True
            continue
        errs = []
        for nm, t, r in (("dq", q, refs[0]), ("dk", k, refs[1]), ("dv", v, refs[2])):
            rel = _maxabs(torch.nan_to_num(t.grad.float(), nan=1e4), r) / (float(r.abs().max()) or 1.0)
            errs.append("%s rel=%.3g" % (nm, rel))
            if rel > 0.1:  # bf16 grads are ~1e-2 off; a broken kernel gives NaN/garbage
                bad = True
        parts.append("%s: %s" % (label, ", ".join(errs)))
    return bad, "q (1,16,1,64), k/v (1,16,65536,64) bf16, backward with ones; " + "; ".join(parts)


@repro("alloc_spurious_oom_pending_record_stream_free",
       "https://github.com/pytorch/pytorch/issues/189504",
       "CUDACachingAllocator can raise OOM while a fitting free block is in its pool (pending record_stream free)",
       "allocator")
def r_alloc_spurious_oom():
    torch = _torch()
    MiB = 1 << 20
    dev = torch.device("cuda")
    side = torch.cuda.Stream()
    # one 100 MiB segment, then split into a 60 MiB block A and a 40 MiB block B that stays live,
    # so that release_cached_blocks() can never hand the segment back to the driver
    x = torch.empty(100 * MiB, dtype=torch.uint8, device=dev)
    seg = x.data_ptr()
    del x
    a = torch.empty(60 * MiB, dtype=torch.uint8, device=dev)
    b = torch.empty(40 * MiB, dtype=torch.uint8, device=dev)
    layout = "A@seg+%d B@seg+%d MiB" % ((a.data_ptr() - seg) // MiB, (b.data_ptr() - seg) // MiB)
    torch.cuda.synchronize()
    reserved = torch.cuda.memory_reserved()
    total = torch.cuda.mem_get_info()[1]
    with torch.cuda.stream(side):
        torch.cuda._sleep(int(2e9))  # keeps the side stream busy for ~1 s
    a.record_stream(side)
    del a  # documented: reuse is deferred until `side` has finished its queued work
    # cap the process so that no new segment fits, but the pending 60 MiB block does
    torch.cuda.set_per_process_memory_fraction(min(1.0, (reserved + 20 * MiB) / total))
    results = []
    try:
        for _ in range(2):  # the 2nd try is an identical, immediate retry with nothing freed in between
            try:
                c = torch.empty(60 * MiB, dtype=torch.uint8, device=dev)
                results.append("ok")
                del c
            except RuntimeError as e:
                if "out of memory" not in str(e).lower():
                    raise
                results.append("OOM")
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    torch.cuda.synchronize()
    del b
    bad = results[0] == "OOM" and results[1] == "ok"
    return bad, ("%s; reserved=%d MiB, cap=reserved+20 MiB; 60 MiB alloc while A's free is pending on a busy stream: "
                 "1st=%s, immediate retry=%s (a fitting block was in the pool after the allocator's own sync)"
                 % (layout, reserved // MiB, results[0], results[1]))


@repro("adaptive_avg_pool2d_start_ind_int32_overflow",
       "https://github.com/pytorch/pytorch/issues/176784",
       "[CUDA] AdaptiveAvgPool2d: START_IND macro causes int32 overflow (in_size*out_size > 2^31) -> OOB read / wrong values",
       "index-width")
def r_aap2d_start_ind():
    torch = _torch()
    import torch.nn.functional as F
    I, O = 65536, 40000  # oh * I > 2^31 for oh >= 32768; the tensors are tiny
    oh = torch.arange(O, dtype=torch.int64)
    s = (oh * I) // O
    e = -((-(oh + 1) * I) // O)  # ceil
    exp_fwd = (s + e - 1).double() / 2  # mean of arange(s, e)
    # d(sum(out))/dx_i = sum over windows containing i of 1/(e-s)
    w = 1.0 / (e - s).double()
    diff = torch.zeros(I + 1, dtype=torch.float64)
    diff.index_add_(0, s, w)
    diff.index_add_(0, e, -w)
    exp_bwd = torch.cumsum(diff, 0)[:I]
    parts, bad = [], False
    # NCHW path (adaptive_average_pool / atomic_adaptive_average_gradinput kernels)
    x = torch.arange(I, dtype=torch.float64, device="cuda").view(1, 1, I, 1).requires_grad_()
    out = F.adaptive_avg_pool2d(x, (O, 1))
    out.sum().backward()
    torch.cuda.synchronize()
    got = out.detach().view(-1).cpu()
    nbad = int(((got - exp_fwd).abs() > 1e-6).sum())
    first = int(((got - exp_fwd).abs() > 1e-6).nonzero()[0]) if nbad else -1
    gerr = _maxabs(torch.nan_to_num(x.grad.view(-1), nan=1e9), exp_bwd)
    parts.append("NCHW fwd wrong outputs=%d/%d (first at oh=%d; overflow starts at oh=32768), bwd max err=%.3g"
                 % (nbad, O, first, gerr))
    bad = bad or nbad > 0 or gerr > 1e-6
    # NHWC path (START_IND_INT macro)
    base = torch.arange(I, dtype=torch.float64).view(1, 1, I, 1)
    x2 = torch.cat([base, base + 1e5], dim=1).cuda().contiguous(memory_format=torch.channels_last)
    out2 = F.adaptive_avg_pool2d(x2, (O, 1))
    torch.cuda.synchronize()
    exp2 = torch.stack([exp_fwd, exp_fwd + 1e5])
    got2 = out2.view(2, O).cpu()
    nbad2 = int(((got2 - exp2).abs() > 1e-6).sum())
    parts.append("channels_last fwd wrong outputs=%d/%d" % (nbad2, 2 * O))
    bad = bad or nbad2 > 0
    return bad, "adaptive_avg_pool2d (1,C,%d,1)->(%d,1), float64 arange input, closed-form reference; " % (I, O) + "; ".join(parts)


@repro("reflection_pad1d_bwd_65536_planes_grid_limit",
       "https://github.com/pytorch/pytorch/pull/185024",
       "reflection_pad1d backward launches grid (w, nplane, nbatch): >= 65536 channels or batch exceeds grid.y/z (CUDA launch error)",
       "index-width")
def r_reflect_pad_bwd():
    torch = _torch()
    import torch.nn.functional as F
    parts, bad = [], False
    for shape in ((1, 65536, 8), (65536, 1, 8)):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(*shape, generator=g)
        go = torch.randn(shape[0], shape[1], shape[2] + 6, generator=g)
        xd = x.double().requires_grad_()
        yd = F.pad(xd, (3, 3), mode="reflect")
        yd.backward(go.double())
        xc = x.cuda().requires_grad_()
        try:
            yc = F.pad(xc, (3, 3), mode="reflect")
            torch.cuda.synchronize()
            ferr = _maxabs(yc, yd)
        except Exception as e:  # noqa: BLE001 (AcceleratorError too)
            parts.append("%s fwd raised %s" % (shape, str(e).splitlines()[0][:70]))
            bad = True
            continue
        try:
            yc.backward(go.cuda())
            torch.cuda.synchronize()
            berr = _maxabs(torch.nan_to_num(xc.grad, nan=1e4), xd.grad)
            parts.append("%s fwd err=%.3g bwd err=%.3g" % (shape, ferr, berr))
            bad = bad or berr > 1e-4 or ferr > 1e-6
        except Exception as e:  # noqa: BLE001 (AcceleratorError too)
            parts.append("%s fwd err=%.3g, bwd raised %s" % (shape, ferr, str(e).splitlines()[0][:70]))
            bad = True
    return bad, "F.pad(mode='reflect', (3,3)) fp32 vs CPU fp64; " + "; ".join(parts)


@repro("interp_linear_width_gt_2pow23_fp32_coords",
       "https://github.com/pytorch/pytorch/issues/144643",
       "nn.functional.interpolate doesn't work correctly with NCW tensors when output W exceeds 2^23 (fp32 source coordinates)",
       "index-width")
def r_interp_linear_2pow23():
    torch = _torch()
    import torch.nn.functional as F
    n = (1 << 22) + 4
    x = (torch.arange(n) % 2).float()  # 0,1,0,1,...
    # closed form of PyTorch's documented align_corners=False linear rule, in float64/int64
    d = torch.arange(2 * n, dtype=torch.float64)
    src = ((d + 0.5) * 0.5 - 0.5).clamp(min=0)
    i0 = src.floor().long()
    lam = src - i0.double()
    i1 = torch.clamp(i0 + 1, max=n - 1)
    xd = x.double()
    ref = (1 - lam) * xd[i0] + lam * xd[i1]
    out = F.interpolate(x.cuda().view(1, 1, -1), size=2 * n, mode="linear").view(-1).double().cpu()
    wrong = (out - ref).abs() > 1e-3
    nbad = int(wrong.sum())
    first = int(wrong.nonzero()[0]) if nbad else -1
    return nbad > 0, "n=2^22+4 -> 2n, fp32: wrong outputs=%d/%d, first wrong index=%d (2^23=%d); max err=%.3g" % (
        nbad, 2 * n, first, 1 << 23, float((out - ref).abs().max()))


# --------------------------------------------------------------------------
# big repros (index-width; need several GB .. ~40 GB)
# --------------------------------------------------------------------------

@repro("arange_gt_2pow32_tail_zero",
       "https://github.com/pytorch/pytorch/issues/197673",
       "[CUDA] torch.arange silently leaves every element from index 2**32 onward as zero when N > 2**32",
       "index-width", big=True)
def r_arange():
    torch = _torch()
    N = 2 ** 32 + 2 ** 20  # ~34 GB int64
    x = torch.arange(N, dtype=torch.int64, device="cuda")
    torch.cuda.synchronize()
    a, b, c = int(x[2 ** 32 - 1]), int(x[2 ** 32]), int(x[-1])
    tail = x[2 ** 32:]
    exp = torch.arange(2 ** 32, N, dtype=torch.int64, device="cuda")
    nwrong = int((tail != exp).sum())
    return nwrong > 0, "x[2^32-1]=%d x[2^32]=%d (exp %d) x[-1]=%d (exp %d); wrong tail elems=%d/%d" % (
        a, b, 2 ** 32, c, N - 1, nwrong, N - 2 ** 32)


@repro("layer_norm_gt_2pow32_elements",
       "https://github.com/pytorch/pytorch/issues/181555",
       "CUDA layer_norm produces incorrect output when flattened tensor size exceeds 2**32",
       "index-width", big=True)
def r_layernorm_big():
    torch = _torch()
    import torch.nn.functional as F
    C = 1024
    M = 2 ** 22 + 64  # M*C = 2^32 + 65536 elements, fp16: 8.6 GB in + 8.6 GB out
    g = torch.Generator().manual_seed(0)
    row = torch.randn(C, generator=g).half()
    ref = F.layer_norm(row.double(), (C,))
    x = torch.empty(M, C, dtype=torch.float16, device="cuda")
    x.copy_(row.cuda().expand(M, C))
    out = F.layer_norm(x, (C,), eps=1e-5)
    torch.cuda.synchronize()
    del x
    refc = ref.cuda().float()
    worst, bad_rows, first_bad = 0.0, 0, -1
    step = 2 ** 18
    for i in range(0, M, step):
        blk = out[i:i + step].float()
        e = (blk - refc).abs()
        e = torch.nan_to_num(e, nan=float("inf")).amax(dim=1)
        nb = int((e > 0.05).sum())
        if nb and first_bad < 0:
            first_bad = i + int((e > 0.05).nonzero()[0])
        bad_rows += nb
        worst = max(worst, float(e.max()))
    return bad_rows > 0, "rows=%d C=%d: bad rows (max err>0.05)=%d, first bad row=%d (row 2^22=%d), worst err=%.3g" % (
        M, C, bad_rows, first_bad, 2 ** 22, worst)


@repro("cumsum_scan_uint32_overflow",
       "https://github.com/pytorch/pytorch/issues/167086",
       "Unchecked uint32 overflow in CUDA scan (cumsum/cumprod/cummin/etc)",
       "index-width", big=True)
def r_cumsum():
    torch = _torch()
    x = torch.zeros((309504, 1, 16384), device="cuda", dtype=torch.float32)  # 20.3 GB, > 2^32 elements
    torch.exp(x)  # leaves a freed 20 GB block full of 1.0 in the caching allocator (as in the issue)
    c = torch.cumsum(x, dim=1)
    torch.cuda.synchronize()
    mx = float(c.max())
    nnz = int((c != 0).sum())
    return (mx != 0.0 or nnz != 0), "max(cumsum(zeros)) = %r (expected 0.0); nonzero elements=%d" % (mx, nnz)


@repro("nll_loss2d_bwd_int32_offset_ima",
       "https://github.com/pytorch/pytorch/issues/190139",
       "[CUDA] NLLLoss2d backward overflows 32-bit tensor offsets",
       "index-width", big=True)
def r_nll2d():
    torch = _torch()
    import torch.nn.functional as F
    x = torch.zeros((2 ** 16 + 1, 2 ** 15, 1, 1), dtype=torch.float16, device="cuda", requires_grad=True)
    target = torch.zeros((2 ** 16 + 1, 1, 1), dtype=torch.int64, device="cuda")
    F.nll_loss(x, target, reduction="sum").backward()
    torch.cuda.synchronize()
    a, b = float(x.grad[0, 0, 0, 0]), float(x.grad[-1, 0, 0, 0])
    return (a != -1.0 or b != -1.0), "grad[0,0]=%r grad[-1,0]=%r (expected -1, -1)" % (a, b)


@repro("adaptive_avg_pool2d_bwd_int32_ima",
       "https://github.com/pytorch/pytorch/issues/188957",
       "[CUDA] illegal memory atomic on atomic_adaptive_average_gradinput",
       "index-width", big=True)
def r_aap2d():
    torch = _torch()
    import torch.nn.functional as F
    x = torch.ones(1, 2050, 1024, 1024, dtype=torch.float32, device="cuda", requires_grad=True)
    out = F.adaptive_avg_pool2d(x, (256, 256))
    out.sum().backward()
    torch.cuda.synchronize()
    gmin, gmax = float(x.grad.min()), float(x.grad.max())
    ok = abs(gmin - 1 / 16) < 1e-6 and abs(gmax - 1 / 16) < 1e-6
    return (not ok), "grad min=%r max=%r (expected 0.0625 everywhere)" % (gmin, gmax)


@repro("adaptive_avg_pool3d_bwd_expanded_ima",
       "https://github.com/pytorch/pytorch/issues/193096",
       "[CUDA] illegal memory read on adaptiveaveragegradinput (expanded input > 2^31 elements)",
       "index-width", big=True)
def r_aap3d():
    torch = _torch()
    import torch.nn.functional as F
    H, W = 46342, 46341
    base = torch.ones((), dtype=torch.float32, device="cuda", requires_grad=True)
    inp = base.expand(1, 1, H, W)
    out = F.adaptive_avg_pool3d(inp, (1, H, 1))
    out.sum().backward()
    torch.cuda.synchronize()
    gv = float(base.grad)
    return abs(gv - H) > 1e-3 * H, "base.grad=%r (expected %d)" % (gv, H)


@repro("nonzero_near_int_max_ima",
       "https://github.com/pytorch/pytorch/issues/80337",
       "Illegal Memory Access from nonzero method when Tensor is Too Large",
       "index-width", big=True)
def r_nonzero():
    torch = _torch()
    M = 2121269248
    nz = torch.ones(M, device="cuda").nonzero()
    torch.cuda.synchronize()
    n, last = nz.shape[0], int(nz[-1, 0])
    return (n != M or last != M - 1), "nonzero rows=%d (expected %d), last index=%d" % (n, M, last)


@repro("conv3d_bf16_large_wrong",
       "https://github.com/pytorch/pytorch/issues/163539",
       "conv3d bfloat16 wrong result (large input, cuDNN)",
       "wrong-value", big=True)
def r_conv3d_bf16():
    torch = _torch()
    import torch.nn.functional as F
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(42)
    x32 = torch.randn(1, 16, 124, 1282, 722, dtype=torch.float32, device="cuda")
    w32 = torch.randn(16, 16, 1, 3, 3, dtype=torch.float32, device="cuda") * (1.0 / 12.0)
    x16, w16 = x32.to(torch.bfloat16), w32.to(torch.bfloat16)
    del x32
    # reference: fp32 conv (TF32 off) of the bf16-rounded operands
    ref = F.conv3d(x16.float(), w16.float())
    out = F.conv3d(x16, w16)
    torch.cuda.synchronize()
    del x16
    scale = float(ref.abs().max())
    worst, nbad = 0.0, 0
    step = 8
    for d in range(0, ref.shape[2], step):
        e = (out[:, :, d:d + step].float() - ref[:, :, d:d + step]).abs()
        e = torch.nan_to_num(e, nan=float("inf"))
        worst = max(worst, float(e.max()))
        nbad += int((e > 0.05 * scale).sum())
    # bf16 output rounding alone is <= 2^-8 * |ref| ~ 0.4% of scale
    return (nbad > 0), "max|bf16 - fp32ref| = %.3g, max|ref| = %.3g, elements off by >5%% of scale: %d" % (
        worst, scale, nbad)


# ---- big repros added 2026-11-24 (second batch) ----------------------------

@repro("embedding_bag_max_bwd_int32_numel_overflow",
       "https://github.com/pytorch/pytorch/issues/188467",
       "int32 overflow in embedding_bag(mode='max') backward when num_weights*dim > INT32_MAX with int32 indices",
       "index-width", big=True)
def r_embbag_max_bwd():
    torch = _torch()
    import torch.nn.functional as F
    dim, r = 2 ** 16, 2 ** 15  # weight numel = 2^31 + 2^16 (8.6 GB fp32, + 8.6 GB grad)

    def grad_row(idx_dtype):
        w = torch.zeros(r + 1, dim, device="cuda", requires_grad=True)
        with torch.no_grad():
            w[r].fill_(1.0)  # the last row holds every column's max
        idx = torch.tensor([0, r], device="cuda", dtype=idx_dtype)
        off = torch.tensor([0], device="cuda", dtype=idx_dtype)
        F.embedding_bag(idx, w, off, mode="max").sum().backward()
        torch.cuda.synchronize()
        gr, g0 = w.grad[r], w.grad[0]
        res = (int((gr != 1).sum()), int((g0 != 0).sum()))
        del w, gr, g0
        torch.cuda.empty_cache()
        return res

    bad32 = grad_row(torch.int32)
    ev = "int32 indices: grad[last row] wrong=%d/%d, grad[row 0] nonzero=%d" % (bad32[0], dim, bad32[1])
    if bad32[0] or bad32[1]:
        bad64 = grad_row(torch.int64)
        ev += "; int64 control: wrong=%d, nonzero=%d" % bad64
    return bool(bad32[0] or bad32[1]), ev + " (expected: last row all 1, row 0 all 0)"


@repro("log_softmax_row_len_int_max",
       "https://github.com/pytorch/pytorch/issues/191565",
       "[CUDA] illegal memory read on cunn_SoftMaxForward when the softmax dim is 2^31-1 long",
       "index-width", big=True)
def r_log_softmax_int_max():
    torch = _torch()
    # control: the same call on a short row must give the exact value (fp32 accumulation)
    c = torch.log_softmax(torch.zeros(2 ** 20 - 1, dtype=torch.float16, device="cuda"), dim=0)
    if abs(float(c.min()) + math.log(2 ** 20 - 1)) > 0.02:
        raise RuntimeError("control (row 2^20-1) already wrong: %r" % float(c.min()))
    N = 2 ** 31 - 1  # fp16: 4.3 GB in + 4.3 GB out
    x = torch.zeros(N, dtype=torch.float16, device="cuda")
    y = torch.log_softmax(x, dim=0)
    torch.cuda.synchronize()
    del x
    exp = -math.log(N)  # -21.4876 (fp16 grid spacing there: 1/64)
    lo, hi = float(y.min()), float(y.max())
    nn_ = int(torch.isnan(y).sum())
    a, b = float(y[0]), float(y[-1])
    bad = nn_ > 0 or abs(lo - exp) > 0.02 or abs(hi - exp) > 0.02
    return bad, "log_softmax(zeros(2^31-1), fp16): min=%r max=%r y[0]=%r y[-1]=%r NaN=%d (exact %.4f)" % (
        lo, hi, a, b, nn_, exp)


@repro("foreach_norm_clip_grad_norm_gt_2pow31",
       "https://github.com/pytorch/pytorch/issues/169930",
       "clip_grad_norm_ (foreach path, _foreach_norm) illegal memory access on a tensor with more than 2^31 elements",
       "index-width", big=True)
def r_foreach_norm_big():
    torch = _torch()
    N = 2 ** 31 + 1  # fp32: 8.6 GB
    g = torch.ones(N, device="cuda")
    exp = math.sqrt(N)
    n1 = float(torch._foreach_norm([g])[0])
    torch.cuda.synchronize()
    p = torch.nn.Parameter(g)  # shares storage; its grad is the same ones tensor
    p.grad = g
    n2 = float(torch.nn.utils.clip_grad_norm_([p], max_norm=1e30))  # clip coef clamps to 1 -> no change
    torch.cuda.synchronize()
    bad = abs(n1 - exp) > 1e-3 * exp or abs(n2 - exp) > 1e-3 * exp
    return bad, "ones(2^31+1): _foreach_norm=%r clip_grad_norm_=%r (exact %.3f)" % (n1, n2, exp)


@repro("upsample_bilinear2d_input_dim_gt_2pow32",
       "https://github.com/pytorch/pytorch/issues/193689",
       "[CUDA] 32-bit input overflow causes OOB read in upsample_bilinear2d_out_frame (one input dim > 2^32)",
       "index-width", big=True)
def r_bilinear_big_h():
    torch = _torch()
    import torch.nn.functional as F
    H = 2 ** 32 + 1  # fp16: 8.6 GB; H-1 = 2^32 is exact in fp32, so the source index is exact
    x = torch.ones(H, dtype=torch.float16, device="cuda")
    x[0] = 3.0
    x[-1] = 2.0
    try:
        out = F.interpolate(x.view(1, 1, H, 1), size=(2, 1), mode="bilinear", align_corners=True)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        if _is_cuda_fault(str(e)):
            raise
        return False, "clean argument error (no silent corruption): " + str(e).splitlines()[0][:150]
    a, b = float(out[0, 0, 0, 0]), float(out[0, 0, 1, 0])
    # align_corners=True with 2 output rows samples exactly the first and the last input row
    return (a != 3.0 or b != 2.0), "bilinear (1,1,2^32+1,1)->(2,1), align_corners: out=[%r, %r] (expected [3.0, 2.0])" % (a, b)


@repro("interpolate_bilinear_channels_last_out_2pow31",
       "https://github.com/pytorch/pytorch/pull/185788",
       "Bilinear interpolate on channels_last CUDA input fails once the output has >= 2^31 elements (32-bit NHWC indexing)",
       "index-width", big=True)
def r_bilinear_nhwc_big():
    torch = _torch()
    import torch.nn.functional as F
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.rand((32, 64, 512, 512), dtype=torch.float16, device="cuda", generator=g)
    xcl = x.contiguous(memory_format=torch.channels_last)
    del x
    try:
        out = F.interpolate(xcl, scale_factor=2, mode="bilinear")  # 32*64*1024*1024 = 2^31 outputs, fp16 4.3 GB
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 (AcceleratorError too)
        msg = str(e).splitlines()[0][:150]
        if not _is_cuda_fault(msg):
            return False, "clean argument error (no silent corruption): " + msg
        return True, "CUDA error on a valid input: " + msg
    parts, bad = [], False
    for i in (0, 31):
        ref = F.interpolate(xcl[i:i + 1].float().cpu(), scale_factor=2, mode="bilinear")
        err = _maxabs(torch.nan_to_num(out[i:i + 1].float(), nan=1e4), ref)
        parts.append("image %d max|out - cpu fp32|=%.3g" % (i, err))
        bad = bad or err > 5e-3
    return bad, "channels_last fp16 (32,64,512,512) x2 bilinear: " + "; ".join(parts)


@repro("sdpa_efficient_attn_mask_offset_2pow32",
       "https://github.com/pytorch/pytorch/issues/187227",
       "[SDPA] 32-bit offset overflow in mem-efficient attention forward with attn_bias (q_len*kv_len > 2^32)",
       "index-width", big=True)
def r_sdpa_eff_mask_big():
    torch = _torch()
    S, D = 65600, 64  # S*S = 4.30e9 > 2^32; rows >= 2^32 // S = 65472 read a wrapped mask row
    g = torch.Generator().manual_seed(0)
    q, k, v = [torch.randn(1, 1, S, D, generator=g).to(torch.bfloat16).cuda() for _ in range(3)]
    # additive causal mask built directly in bf16 (8.6 GB), no bool->float conversion copy
    mask = torch.zeros(S, S, dtype=torch.bfloat16, device="cuda")
    cols = torch.arange(S, device="cuda")
    step = 4096
    for i in range(0, S, step):
        rows = torch.arange(i, min(i + step, S), device="cuda")
        mask[i:i + step].masked_fill_(cols[None, :] > rows[:, None], float("-inf"))
    sel = list(range(0, 32)) + list(range(2 ** 32 // S - 64, S))
    rows = torch.tensor(sel, device="cuda")
    qd, kd, vd = q[0, 0].double(), k[0, 0].double(), v[0, 0].double()
    sc = (qd[rows] @ kd.T) / math.sqrt(D)
    sc.masked_fill_(cols[None, :] > rows[:, None], float("-inf"))
    ref = torch.softmax(sc, -1) @ vd
    del sc, qd, kd, vd
    parts, bad = [], False
    from torch.nn.attention import SDPBackend
    for label, be in (("efficient", SDPBackend.EFFICIENT_ATTENTION), ("default", None)):
        try:
            out = _sdpa_call(be, q, k, v, attn_mask=mask[None, None])
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 (AcceleratorError too)
            msg = str(e).splitlines()[0][:90]
            parts.append("%s: raised %s" % (label, msg))
            if _is_cuda_fault(msg):
                raise
            continue
        err = (torch.nan_to_num(out[0, 0, rows].double(), nan=1e4) - ref).abs().amax(-1)
        badrows = [sel[i] for i in range(len(sel)) if float(err[i]) > 0.05]
        parts.append("%s: bad rows %d/%d (first %s), worst err %.3g" % (
            label, len(badrows), len(sel), badrows[0] if badrows else None, float(err.max())))
        if badrows:
            bad = True
        del out
    return bad, "bf16 S=%d D=%d additive causal mask, checked rows 0..31 and %d..%d vs fp64; " % (
        S, D, sel[32], S - 1) + "; ".join(parts)


# --------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------

def _by_name(name):
    for r in REPROS:
        if r["name"] == name:
            return r
    return None


def _is_cuda_fault(text):
    t = text.lower()
    return ("illegal memory access" in t or "illegal address" in t or "cuda error" in t
            or "misaligned address" in t or "unspecified launch failure" in t
            or "device-side assert" in t or "acceleratorerror" in t)


def run_one(name):
    """Runs inside the child.  Prints one MARK line with the result."""
    r = _by_name(name)
    res = {"reproduced": None, "evidence": ""}
    t0 = time.time()
    try:
        import torch
        if not torch.cuda.is_available():
            res["evidence"] = "no CUDA device"
        else:
            torch.cuda.init()
            rep, ev = r["fn"]()
            try:
                torch.cuda.synchronize()
            except Exception as e:  # late async fault
                raise RuntimeError("late CUDA fault after repro: %s" % e)
            res["reproduced"] = bool(rep)
            res["evidence"] = ev
    except Exception as e:  # noqa: BLE001
        msg = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
        if "OutOfMemory" in type(e).__name__ or "out of memory" in str(e).lower():
            res["reproduced"] = None
            res["evidence"] = "could not run (OOM): " + msg[:300]
        elif _is_cuda_fault(str(e)) and r["cls"] in ("crash", "index-width"):
            res["reproduced"] = True
            res["evidence"] = "CUDA fault: " + msg[:300]
        elif _is_cuda_fault(str(e)):
            res["reproduced"] = None
            res["evidence"] = "unexpected CUDA fault: " + msg[:300]
        else:
            res["reproduced"] = None
            res["evidence"] = "repro raised: " + msg[:300] + " | " + traceback.format_exc().strip().splitlines()[-2][:200]
    res["seconds"] = round(time.time() - t0, 2)
    sys.stdout.write(MARK + json.dumps(res) + "\n")
    sys.stdout.flush()
    os._exit(0)  # skip teardown that may hang/abort after a sticky CUDA error


def run_child(r):
    t0 = time.time()
    base = {"name": r["name"], "issue": r["issue"], "title": r["title"], "class": r["cls"], "big": r["big"]}
    try:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", r["name"]],
                           timeout=TIMEOUT_S, capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        base.update(reproduced=None, evidence="timeout after %ds" % TIMEOUT_S, seconds=round(time.time() - t0, 2))
        return base
    res = None
    for line in (p.stdout or "").splitlines():
        if line.startswith(MARK):
            try:
                res = json.loads(line[len(MARK):])
            except ValueError:
                res = None
    err = p.stderr or ""
    tail = " ".join(err.strip().splitlines()[-3:])[-300:]
    if res is None:
        crashed = p.returncode < 0 or "illegal memory access" in err.lower() or _is_cuda_fault(err)
        if crashed and r["cls"] in ("crash", "index-width"):
            base.update(reproduced=True, evidence="subprocess crashed (rc=%d): %s" % (p.returncode, tail))
        else:
            base.update(reproduced=None, evidence="subprocess died without result (rc=%d): %s" % (p.returncode, tail))
    else:
        base.update(reproduced=res.get("reproduced"), evidence=res.get("evidence", ""))
        if "illegal memory access" in err.lower() and r["cls"] in ("crash", "index-width") and base["reproduced"] is not True:
            base["reproduced"] = True
            base["evidence"] += " | stderr: " + tail
    base["seconds"] = round(time.time() - t0, 2)
    return base


def main(argv):
    if "--one" in argv:
        run_one(argv[argv.index("--one") + 1])
        return 0
    if "--list" in argv:
        for r in REPROS:
            print("%-45s %-12s %s %s" % (r["name"], r["cls"], "big" if r["big"] else "   ", r["issue"]))
        return 0
    out_path = argv[argv.index("--out") + 1] if "--out" in argv else None
    skip_big = "--skip-big" in argv
    only = None
    if "--only" in argv:
        only = set(argv[argv.index("--only") + 1].split(","))
    fh = open(out_path, "w") if out_path else None
    try:
        for r in REPROS:
            if only is not None and r["name"] not in only:
                continue
            if skip_big and r["big"]:
                continue
            try:
                line = json.dumps(run_child(r))
            except Exception as e:  # never let the driver die
                line = json.dumps({"name": r["name"], "issue": r["issue"], "title": r["title"], "class": r["cls"],
                                   "big": r["big"], "reproduced": None,
                                   "evidence": "driver error: %s" % e, "seconds": 0})
            print(line, flush=True)
            if fh:
                fh.write(line + "\n")
                fh.flush()
    finally:
        if fh:
            fh.close()
    return 0


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Exception:  # noqa: BLE001
        traceback.print_exc()
    sys.exit(0)
