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
