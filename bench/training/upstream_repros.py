#!/usr/bin/env python3
"""Reproducers of public silent-wrong-result reports in the paths training takes:
torch.compile / Inductor (forward and backward), CUDA graphs, optimizers and autocast.
The table of cases, with the issue text each one rests on, is UPSTREAM.md beside this file.

usage:
    python3 bench/training/upstream_repros.py [--device cuda|cpu] [--only NAME[,NAME...]]
                                              [--isolate] [--list]

Each case builds the issue's minimal repro (small tensors, seeded), computes the right answer
independently (eager on the same device, a closed form, float64, or the for-loop optimizer)
and prints ONE JSON line:

    {"issue": "pytorch/pytorch#NNN", "name": ..., "area": ..., "reproduces": true|false|null,
     "evidence": "...", "torch": "2.x", "device": ..., "seconds": ...}

reproduces: true (the wrong result appears), false (the right result came out), null (the
case could not run here: no CUDA for a CUDA-only case, or an exception, whose text is the
evidence). Every exception is caught, so one case never stops the others, and the script
always exits 0. --isolate runs each case in a child process (a crash or a hang, cut at
--case-timeout seconds, then costs only that case). Needs only torch.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time
import traceback

import torch

CASES: list[dict] = []


def case(name: str, issue: int, area: str, cuda_only: bool = False):
    def register(fn):
        CASES.append({"name": name, "issue": f"pytorch/pytorch#{issue}", "area": area, "cuda_only": cuda_only, "fn": fn})
        return fn

    return register


# ----------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------


def _reset() -> None:
    torch._dynamo.reset()


def _maxdiff(a: torch.Tensor, b: torch.Tensor) -> float:
    d = (a.detach().double().cpu() - b.detach().double().cpu()).abs()
    if d.numel() == 0:
        return 0.0
    return float(torch.nan_to_num(d, nan=float("inf")).max())


def _short(t: torch.Tensor, n: int = 6) -> list:
    flat = t.detach().flatten().cpu()
    vals = flat[:n].tolist()
    return [round(v, 4) if isinstance(v, float) else v for v in vals]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


# ----------------------------------------------------------------------------------------
# torch.compile / Inductor
# ----------------------------------------------------------------------------------------


@case("compile_diagonal_scatter_bwd", 183602, "compile backward (scatter)")
def compile_diagonal_scatter_bwd(device: str):
    """diagonal_scatter(x, src).sum().backward(): x.grad must be 1 off the diagonal, 0 on it."""

    def fn(x, src):
        return torch.diagonal_scatter(x, src, 0).sum()

    torch.manual_seed(0)
    x0 = torch.randn(8, 8, device=device)
    s0 = torch.randn(8, device=device)
    want = 1 - torch.eye(8, device=device)
    x1, s1 = x0.clone().requires_grad_(), s0.clone().requires_grad_()
    fn(x1, s1).backward()
    _reset()
    x2, s2 = x0.clone().requires_grad_(), s0.clone().requires_grad_()
    torch.compile(fn, backend="inductor")(x2, s2).backward()
    _sync(device)
    bad = _maxdiff(x2.grad, want) > 0
    return bad, (
        f"x.grad sum: closed form {float(want.sum()):.0f}, eager {float(x1.grad.sum()):.0f}, "
        f"compiled {float(x2.grad.sum()):.0f}; src.grad sum compiled {float(s2.grad.sum()):.0f} (want 8)"
    )


@case("compile_slice_scatter_bwd", 180164, "compile backward (scatter)")
def compile_slice_scatter_bwd(device: str):
    """slice_scatter backward: positions overwritten by src get grad 0, the rest 1
    (#180164's slice_scatter(x, y, dim=1).sum(dim=1), and the 1-D repros of #180771 / #183898)."""
    parts, bad = [], False

    def one(label, fn, x0, y0, want):
        nonlocal bad
        _reset()
        xe = x0.clone().requires_grad_()
        fn(xe, y0.clone().requires_grad_()).backward()
        _reset()
        xc = x0.clone().requires_grad_()
        torch.compile(fn, backend="inductor")(xc, y0.clone().requires_grad_()).backward()
        _sync(device)
        wrong = _maxdiff(xc.grad, want) > 0
        bad |= wrong
        shown = (f"compiled x.grad {_short(xc.grad)} want {_short(want)}" if xc.grad.dim() == 1 else
                 f"compiled x.grad sum {float(xc.grad.sum()):g} want {float(want.sum()):g}")
        parts.append(f"{label}: eager right={_maxdiff(xe.grad, want) == 0}, {shown} -> {'WRONG' if wrong else 'ok'}")

    x = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0], device=device)
    y = torch.tensor([10.0, 20.0], device=device)
    one("1-D [0:2]", lambda x, y: torch.slice_scatter(x, y, dim=0, start=0, end=2).sum(), x, y,
        torch.tensor([0.0, 0.0, 1.0, 1.0, 1.0], device=device))
    x = torch.tensor([2.0, 4.0, 6.0, 8.0, 10.0, 12.0], device=device)
    y = torch.tensor([30.0, 40.0, 50.0], device=device)
    one("1-D [1:4]", lambda x, y: torch.slice_scatter(x, y, dim=0, start=1, end=4).sum(), x, y,
        torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0], device=device))
    torch.manual_seed(0)
    x = torch.randn(4, 13, 33, device=device)
    y = torch.randn(4, 6, 33, device=device)
    want = torch.ones_like(x)
    want[:, 0:6, :] = 0
    one("3-D dim=1 [0:6] then sum(dim=1)",
        lambda x, y: torch.slice_scatter(x, y, dim=1, start=0, end=6).sum(dim=1).sum(), x, y, want)
    return bad, "; ".join(parts)


@case("compile_index_add_expanded", 183986, "compile indexing (expanded/stride-0)")
def compile_index_add_expanded(device: str):
    """index_add / index_put(accumulate) into zeros(1, 8).expand(4, -1): rows must not collide."""
    src = torch.ones(3, 8, device=device)
    idx = torch.tensor([0, 1, 0], device=device)

    def f_add(src, idx):
        x = torch.zeros(1, 8, device=src.device).expand(4, -1)
        return x.index_add(0, idx, src)

    def f_put(src, idx):
        x = torch.zeros(1, 8, device=src.device).expand(4, -1)
        return x.index_put((idx,), src, accumulate=True)

    parts, bad = [], False
    for label, fn in (("index_add", f_add), ("index_put(accumulate=True)", f_put)):
        _reset()
        eager = fn(src, idx)
        comp = torch.compile(fn, backend="inductor")(src, idx)
        _sync(device)
        wrong = not torch.equal(eager.cpu(), comp.cpu())
        bad |= wrong
        parts.append(f"{label}: eager rows 0/2 = {eager[0, 0].item():g}/{eager[2, 0].item():g}, "
                     f"compiled {comp[0, 0].item():g}/{comp[2, 0].item():g}")
    return bad, "; ".join(parts)


@case("compile_index_put_duplicate_indices", 174074, "compile indexing (duplicate indices)")
def compile_index_put_duplicate_indices(device: str):
    """x[[0, 0]] += x[[0, 0]] on a float64 (1, 2) input: eager gives 2x."""

    def fn(x):
        x[[0, 0]] += x[[0, 0]]
        return x

    base = torch.tensor([[-0.8716, 0.1114]], dtype=torch.float64, device=device)
    eager = fn(base.clone())
    _reset()
    comp = torch.compile(fn, backend="inductor")(base.clone())
    _sync(device)
    bad = _maxdiff(comp, 2 * base) > 1e-12
    return bad, f"input {_short(base)}; eager {_short(eager)} (= 2x); compiled {_short(comp)}"


@case("compile_max_dim_indices_transposed", 178964, "compile reduction (max indices)")
def compile_max_dim_indices_transposed(device: str):
    """(a + b).max(dim=1) with a transposed a: the indices must match eager's argmax."""

    def fn(a, b):
        return (a + b).max(dim=1)

    torch.manual_seed(0)
    a = torch.randn(8, 8).transpose(0, 1).to(device)  # .to keeps the transposed strides
    b = torch.randn(8, 8).to(device)
    want_idx = (a.double().cpu() + b.double().cpu()).argmax(dim=1)
    eager = fn(a, b)
    _reset()
    comp = torch.compile(fn, backend="inductor")(a, b)
    _sync(device)
    bad = not torch.equal(comp.indices.cpu(), want_idx) or _maxdiff(comp.values, eager.values) > 1e-5
    return bad, (f"a.stride {a.stride()}; float64 argmax {want_idx.tolist()}, eager {eager.indices.cpu().tolist()}, "
                 f"compiled {comp.indices.cpu().tolist()}; values max|diff| {_maxdiff(comp.values, eager.values):.3g}")


@case("compile_amin_amax_bwd", 186799, "compile backward (reduction)")
def compile_amin_amax_bwd(device: str):
    """atan2(x, y).amin(dim=-1).sum().backward() (fp32, the issue's repro) and the fp16/bf16
    amax variant from the thread: compiled x.grad must equal eager's."""
    parts, bad = [], False

    def fn(x, y):
        return torch.atan2(x, y).amin(dim=-1)

    torch.manual_seed(0)
    x_init = torch.randn(2, 3).to(device)
    y = torch.randn(2, 3).to(device)
    xe = x_init.clone().requires_grad_()
    fn(xe, y).sum().backward()
    _reset()
    xc = x_init.clone().requires_grad_()
    torch.compile(fn, backend="inductor")(xc, y).sum().backward()
    _sync(device)
    d = _maxdiff(xe.grad, xc.grad)
    bad |= d > 1e-5
    parts.append(f"atan2.amin fp32: eager {_short(xe.grad)} compiled {_short(xc.grad)} max|diff| {d:.3g}")

    dtype = torch.float16 if device.startswith("cuda") else torch.bfloat16

    def build():
        torch.manual_seed(0)
        x = torch.randn(1, 10, 2, device=device, dtype=dtype, requires_grad=True)
        ws = [torch.randn(2, 2, device=device, dtype=dtype, requires_grad=True) for _ in range(3)]
        return x, ws

    def f(x, w1, w2, w3):
        feat = x @ w1
        feat = feat + feat @ w2
        pooled = feat.amax(dim=1, keepdim=True)
        return feat + pooled.expand(-1, 10, -1) @ w3

    grads = {}
    for label in ("eager", "compiled"):
        _reset()
        x, ws = build()
        run = f if label == "eager" else torch.compile(f, backend="inductor")
        run(x, *ws).float().sum().backward()
        grads[label] = [x.grad.float().cpu()] + [w.grad.float().cpu() for w in ws]
    _sync(device)
    nonfinite = {k: sum(int((~torch.isfinite(g)).sum()) for g in v) for k, v in grads.items()}
    scale = max(float(g.abs().max()) for g in grads["eager"]) or 1.0
    rel = max(_maxdiff(a, b) for a, b in zip(grads["eager"], grads["compiled"])) / scale
    bad |= rel > 0.05 or nonfinite["compiled"] > nonfinite["eager"]
    parts.append(f"amax {str(dtype)[6:]} (x, w1, w2, w3 grads: 32 values): non-finite eager {nonfinite['eager']} "
                 f"compiled {nonfinite['compiled']}; max|diff|/max|grad| {rel:.3g} (rounding noise < 0.05)")
    return bad, "; ".join(parts)


@case("compile_cumsum_dtype", 189518, "compile scan (dtype)")
def compile_cumsum_dtype(device: str):
    """ones(bool).cumsum(1, dtype=bfloat16): the output dtype must stay bfloat16 (Inductor's
    pointless_cumsum pattern drops the dtype= argument)."""

    def f():
        ones = torch.ones((2, 4, 4), dtype=torch.bool, device=device)
        return ones.cumsum(1, dtype=torch.bfloat16)

    eager = f()
    _reset()
    comp = torch.compile(f, backend="inductor")()
    _sync(device)
    bad = comp.dtype != eager.dtype or _maxdiff(comp.float(), eager.float()) > 0
    return bad, f"eager dtype {eager.dtype} values {_short(eager[0, :, 0])}; compiled dtype {comp.dtype} values {_short(comp[0, :, 0])}"


@case("compile_dynamic_float_clamp_stale", 194976, "compile dynamic shapes (float argument)")
def compile_dynamic_float_clamp_stale(device: str):
    """A clamped SwiGLU whose Python-float limit changes between calls: once Dynamo makes the
    float dynamic, each call must still use its own limit (forward and backward)."""
    import torch.nn.functional as F

    def swiglu(x, limit):
        gate, up = torch.chunk(x, 2, dim=-1)
        gate = F.silu(gate).clamp(max=limit)
        up = up.clamp(min=-limit, max=limit)
        return gate * up

    _reset()
    compiled = torch.compile(swiglu, backend="inductor")
    torch.manual_seed(0)
    x0 = (torch.randn(4, 32) * 4).to(device)
    rows, bad = [], False
    for limit in (7.0, 1.0, 0.5, 3.0, 10.0, 7.0):
        with torch.no_grad():  # an inference call first, then a training call, at each limit
            d_nograd = _maxdiff(swiglu(x0, limit), compiled(x0, limit))
        xe = x0.clone().requires_grad_()
        ye = swiglu(xe, limit)
        ye.sum().backward()
        xc = x0.clone().requires_grad_()
        yc = compiled(xc, limit)
        yc.sum().backward()
        _sync(device)
        df, db = max(d_nograd, _maxdiff(ye, yc)), _maxdiff(xe.grad, xc.grad)
        wrong = df > 1e-5 or db > 1e-5
        bad |= wrong
        rows.append(f"limit {limit}: fwd {df:.3g} bwd {db:.3g}{' WRONG' if wrong else ''}")
    return bad, "max|eager - compiled| per call: " + "; ".join(rows)


@case("compile_unfold_gapped_inplace", 198102, "compile in-place through a view")
def compile_unfold_gapped_inplace(device: str):
    """v = x.unfold(1, 1, 5); v.add_(v): columns 0 and 5 double, columns 1..4 stay as they were."""

    def fn(x):
        v = x.unfold(1, 1, 5)
        v.add_(v)
        return x

    base = torch.arange(1, 25, dtype=torch.int64, device=device).reshape(4, 6)
    eager = fn(base.clone())
    parts, bad = [], False
    for backend in ("aot_eager", "inductor"):
        _reset()
        comp = torch.compile(fn, backend=backend)(base.clone())
        _sync(device)
        wrong = not torch.equal(eager.cpu(), comp.cpu())
        bad |= wrong
        parts.append(f"{backend}: row 0 {comp[0].tolist()}")
    return bad, f"eager row 0 {eager[0].tolist()}; " + "; ".join(parts)


@case("compile_dropout_alias_mutation", 195422, "compile in-place through an alias")
def compile_dropout_alias_mutation(device: str):
    """y = F.dropout(x, 0.5, training=False) is x itself, so y += y must double the caller's x."""

    def f(x):
        y = torch.nn.functional.dropout(x, 0.5, False)
        y += y
        return y

    xe = torch.ones(2, 2, device=device)
    f(xe)
    _reset()
    xc = torch.ones(2, 2, device=device)
    out = torch.compile(f, backend="inductor")(xc)
    _sync(device)
    bad = not torch.equal(xc.cpu(), xe.cpu())
    return bad, f"input after call: eager {xe[0, 0].item():g}, compiled {xc[0, 0].item():g} (returned {out[0, 0].item():g})"


@case("compile_dtype_view_mutation_order", 198101, "compile in-place/view ordering")
def compile_dtype_view_mutation_order(device: str):
    """y = x.view(int32) * 2; y.sub_(-4); x[:, 2:5] = 2; return y.view(int64): y must reflect x
    before the mutation."""

    def fn(x):
        y = x.view(torch.int32) * 2
        y.sub_(-4)
        x[:, 2:5] = 2
        return y.view(torch.int64)

    base = torch.arange(-12, 12, dtype=torch.int64, device=device).reshape(4, 6)
    eager = fn(base.clone())
    _reset()
    comp = torch.compile(fn, backend="inductor")(base.clone())
    _sync(device)
    bad = not torch.equal(eager.cpu(), comp.cpu())
    return bad, f"eager {eager.flatten()[:6].tolist()}; compiled {comp.flatten()[:6].tolist()}"


@case("compile_expand_index_put_leak", 175791, "compile in-place through an expanded view")
def compile_expand_index_put_leak(device: str):
    """z = x @ y, then x.expand(1, 2, 4)[0, 1] = 1: z (computed before the write) must not change."""

    def fn(x, y):
        z = x @ y
        expanded = x.expand(1, 2, 4)
        expanded[0, 1] = 1
        return z

    torch.manual_seed(0)
    x1 = torch.randn(1, 2, 4).to(device)
    y1 = torch.randn(1, 4, 4).to(device)
    want = (x1.double().cpu() @ y1.double().cpu())
    out1 = fn(x1.clone(), y1.clone())
    _reset()
    xc = x1.clone()
    out2 = torch.compile(fn, backend="inductor")(xc, y1.clone())
    _sync(device)
    d_eager, d_comp = _maxdiff(out1, want), _maxdiff(out2, want)
    bad = d_comp > 1e-3
    return bad, f"max|z - float64 x@y|: eager {d_eager:.3g}, compiled {d_comp:.3g}; x[0,1] after compiled call {_short(xc[0, 1], 4)}"


@case("compile_copysign_neg_zero", 174172, "compile elementwise (signed zero)")
def compile_copysign_neg_zero(device: str):
    """copysign(x, other=-0.0) must make every element negative (-|x|)."""

    def model_func(self, other):
        return torch.ops.aten.copysign(self, other=other)

    torch.manual_seed(0)
    x = torch.randn(6, device=device)
    want = -x.abs()
    _reset()
    eag = torch.compile(model_func, backend="eager")(x, -0.0)
    _reset()
    ind = torch.compile(model_func, backend="inductor")(x, -0.0)
    _sync(device)
    bad = _maxdiff(ind, want) > 0
    return bad, f"want -|x| {_short(want)}; backend=eager {_short(eag)}; inductor {_short(ind)}"


@case("compile_index_add_fusion_reorder", 171493, "compile indexing (fusion order)")
def compile_index_add_fusion_reorder(device: str):
    """index_add_ into a per-graph accumulator then read back per node, one graph of 1024 nodes:
    every output is f_u / (sum f_u + 1e-6) = 1/1024 (about)."""

    def forward(f, batch):
        f_u = f ** 2 + 0.00987654321
        n_batch = batch.max() + 1
        F_u_mol = torch.zeros((n_batch, f.shape[1]), device=f.device, dtype=f.dtype)
        F_u_mol.index_add_(0, batch, f_u)
        F_u_at_atom = F_u_mol[batch] + 1e-6
        return f_u / F_u_at_atom

    f = torch.ones(1024, 1, device=device)
    batch = torch.zeros(1024, dtype=torch.long, device=device)
    fu = 1 + 0.00987654321
    want = fu / (1024 * fu + 1e-6)
    eager = forward(f, batch)
    _reset()
    comp = torch.compile(forward, backend="inductor")(f, batch)
    _sync(device)
    bad = _maxdiff(comp, torch.full_like(comp, want)) > 1e-6
    return bad, f"want {want:.6g}; eager {eager[0, 0].item():.6g}; compiled first/last {comp[0, 0].item():.6g}/{comp[-1, 0].item():.6g}"


# ----------------------------------------------------------------------------------------
# autocast
# ----------------------------------------------------------------------------------------


@case("autocast_compile_bwd_inner_disabled", 179804, "autocast x compile backward")
def autocast_compile_bwd_inner_disabled(device: str):
    """Outer autocast(bf16), inner autocast(enabled=False) forcing an fp32 matmul, backward
    outside autocast: the weight gradient of the compiled region (aot_eager, then inductor)
    must equal eager's (fp32 in both)."""
    dev_type = "cuda" if device.startswith("cuda") else "cpu"
    torch.manual_seed(0)
    w = torch.nn.Linear(64, 64, device=device)
    h = torch.randn(4, 64, device=device, dtype=torch.bfloat16, requires_grad=True)

    def inner_fn(x):
        with torch.amp.autocast(dev_type, enabled=False):
            return x.float() @ w.weight.float().T

    def weight_grad(fn):
        w.weight.grad = None
        with torch.amp.autocast(dev_type, dtype=torch.bfloat16):
            out = fn(h)
        out.sum().backward()
        _sync(device)
        return w.weight.grad.clone()

    g_eager = weight_grad(inner_fn)
    # float64 reference: d(sum(h @ W^T))/dW = column sums of h, broadcast over rows
    want = h.detach().double().cpu().sum(0).expand(64, 64)
    parts, bad = [f"eager max|g - float64| {_maxdiff(g_eager, want):.3g}"], False
    for backend in ("aot_eager", "inductor"):
        _reset()
        g = weight_grad(torch.compile(inner_fn, backend=backend))
        rel = _maxdiff(g, g_eager) / (float(g_eager.abs().max()) or 1.0)
        wrong = rel > 1e-4
        bad |= wrong
        parts.append(f"{backend}: equal={torch.equal(g, g_eager)} rel diff {rel:.3g} "
                     f"max|g - float64| {_maxdiff(g, want):.3g} grad dtype {g.dtype}")
    return bad, "; ".join(parts)


@case("autocast_dtype_compile_cache_reuse", 181564, "autocast x compile caches")
def autocast_dtype_compile_cache_reuse(device: str):
    """The same model compiled under autocast(bfloat16), then (Dynamo reset, a fresh module)
    under autocast(float16), both training graphs on one Inductor cache: the float16 run's
    logits must be float16 and equal eager float16's. A cache key that records only whether
    autocast is on serves the bfloat16 graph to the float16 run."""
    import tempfile

    dev_type = "cuda" if device.startswith("cuda") else "cpu"
    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpuprobe-autocast-cache-")
    try:
        torch.manual_seed(0)
        base = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16)).to(device)
        x = torch.randn(8, 32, device=device)

        def logits(model, dtype, compiled):
            _reset()
            fn = torch.compile(model) if compiled else model
            with torch.amp.autocast(dev_type, dtype=dtype):
                out = fn(x)
            out.float().sum().backward()
            _sync(device)
            return out.detach()

        logits(copy.deepcopy(base), torch.bfloat16, True)  # fills the cache under bfloat16
        eager = logits(copy.deepcopy(base), torch.float16, False)
        compiled = logits(copy.deepcopy(base), torch.float16, True)
    finally:
        if saved is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved
    rel = _maxdiff(compiled, eager) / (float(eager.abs().max()) or 1.0)
    wrong = compiled.dtype != eager.dtype or rel > 4e-3
    return wrong, (f"under autocast(float16) after a bfloat16 compile: compiled logits {compiled.dtype}, "
                   f"eager {eager.dtype}; max rel diff {rel:.3g}")


@case("default_dtype_compile_cache_reuse", 184405, "compile caches x default dtype")
def default_dtype_compile_cache_reuse(device: str):
    """A function that creates a tensor without a dtype, compiled under the float32 default
    dtype, then (Dynamo reset) again after torch.set_default_dtype(torch.float64), on one
    Inductor cache: the second must return float64, as eager does."""
    import tempfile

    saved_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    saved_dtype = torch.get_default_dtype()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpuprobe-default-dtype-cache-")
    x = torch.randn(8, device=device, dtype=torch.float32)

    def f(t):
        return t * torch.linspace(0.5, 1.5, t.shape[0], device=t.device)

    try:
        _reset()
        torch.compile(f)(x)
        torch.set_default_dtype(torch.float64)
        eager = f(x)
        _reset()
        compiled = torch.compile(f)(x)
        _sync(device)
    finally:
        torch.set_default_dtype(saved_dtype)
        if saved_dir is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved_dir
    wrong = compiled.dtype != eager.dtype
    return wrong, f"under default dtype float64 after a float32 compile: compiled {compiled.dtype}, eager {eager.dtype}"


# ----------------------------------------------------------------------------------------
# CUDA graphs
# ----------------------------------------------------------------------------------------


@case("cudagraph_make_graphed_grad_accum", 181723, "CUDA graphs (make_graphed_callables)", cuda_only=True)
def cudagraph_make_graphed_grad_accum(device: str):
    """Two backward passes through a make_graphed_callables module with no zero_grad between
    them (gradient accumulation): param.grad must be g1 + g2, as for the plain module."""
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 16, device=device)
    ref = copy.deepcopy(model)
    sample = torch.randn(4, 16, device=device)
    graphed = torch.cuda.make_graphed_callables(model, (sample,))
    model.zero_grad(set_to_none=True)
    x1, x2 = torch.randn(4, 16, device=device), torch.randn(4, 16, device=device)
    graphed(x1).pow(2).sum().backward()
    g1_graphed = model.weight.grad.clone()
    graphed(x2).pow(2).sum().backward()
    torch.cuda.synchronize()
    got = model.weight.grad.clone()

    ref(x1).pow(2).sum().backward()
    g1 = ref.weight.grad.clone()
    ref(x2).pow(2).sum().backward()
    want = ref.weight.grad.clone()
    g2 = want - g1
    scale = float(want.abs().max()) or 1.0
    rel = _maxdiff(got, want) / scale
    twice_g2 = _maxdiff(got, 2 * g2) / scale
    bad = rel > 1e-3
    return bad, (f"after 2 accumulated backwards: max|grad - (g1+g2)|/max = {rel:.3g}; "
                 f"max|grad - 2*g2|/max = {twice_g2:.3g}; first backward matched eager: {_maxdiff(g1_graphed, g1) / scale < 1e-3}")


@case("cudagraph_reduce_overhead_stale_output", 122192, "CUDA graphs (reduce-overhead)", cuda_only=True)
def cudagraph_reduce_overhead_stale_output(device: str):
    """mode="reduce-overhead": after N calls, the output of call N-1 has been overwritten by
    call N; reading it must raise the documented "overwritten by a subsequent run" error or
    give the right values, never silently give wrong values."""
    rows, bad = [], False
    for n in (2, 3, 4, 6):
        _reset()
        f = torch.compile(lambda x: torch.sin(x) * 2 + 1, mode="reduce-overhead")
        torch.manual_seed(n)
        xs = [torch.randn(64, device=device) for _ in range(n)]
        outs = [f(x) for x in xs]
        torch.cuda.synchronize()
        want = torch.sin(xs[-2]) * 2 + 1
        try:
            held = outs[-2].clone()
        except RuntimeError as exc:
            rows.append(f"n={n}: raised ({str(exc).splitlines()[0][:60]}...)")
            continue
        d = _maxdiff(held, want)
        wrong = d > 1e-5
        bad |= wrong
        rows.append(f"n={n}: no error, max|out[n-2] - eager| = {d:.3g}{' SILENTLY STALE' if wrong else ''}")
    _reset()
    return bad, "; ".join(rows)


# ----------------------------------------------------------------------------------------
# optimizers
# ----------------------------------------------------------------------------------------


@case("optim_adam_capturable_lr0_nan", 126514, "optimizer (Adam capturable/differentiable, tensor lr)")
def optim_adam_capturable_lr0_nan(device: str):
    """Adam with lr=0 on a parameter with an all-zero gradient row: the step must leave the
    parameter unchanged (the for-loop step does). The capturable / differentiable single-tensor
    path forms 0 / -0.0 in its denominator."""
    torch.manual_seed(0)
    p0 = torch.randn(4, 4, device=device)
    g0 = torch.randn(4, 4, device=device)
    g0[0] = 0.0  # a row with zero second moment

    variants = [("for-loop reference", dict(foreach=False), 0.0)]
    if device.startswith("cuda"):
        variants += [
            ("capturable, for-loop, lr=0.0", dict(capturable=True, foreach=False), 0.0),
            ("capturable, for-loop, lr=tensor(0.)", dict(capturable=True, foreach=False), "tensor"),
            ("capturable, foreach, lr=tensor(0.)", dict(capturable=True, foreach=True), "tensor"),
            ("fused, lr=0.0", dict(fused=True), 0.0),
        ]
    variants += [("differentiable, for-loop, lr=0.0", dict(differentiable=True, foreach=False), 0.0)]
    rows, bad = [], False
    for label, kw, lr in variants:
        p = p0.clone()
        p.grad = g0.clone()
        lr_value = torch.tensor(0.0, device=device) if lr == "tensor" else lr
        opt = torch.optim.Adam([p], lr=lr_value, **kw)
        opt.step()
        _sync(device)
        nans = int(p.isnan().sum())
        moved = _maxdiff(torch.nan_to_num(p, nan=0.0), p0) if nans == 0 else float("nan")
        wrong = nans > 0 or moved > 0
        if label != "for-loop reference":
            bad |= wrong
        rows.append(f"{label}: NaN {nans}/16" + ("" if nans else f", max|moved| {moved:.3g}"))
    if not device.startswith("cuda"):
        rows.append("capturable/fused variants need CUDA (not run)")
    return bad, "; ".join(rows)


# ----------------------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------------------


def run_case(c: dict, device: str) -> dict:
    row = {"issue": c["issue"], "name": c["name"], "area": c["area"], "reproduces": None, "evidence": "",
           "torch": torch.__version__, "device": device, "seconds": 0.0}
    started = time.perf_counter()
    try:
        if c["cuda_only"] and not device.startswith("cuda"):
            row["evidence"] = "CUDA-only case (CUDA graphs / capturable state); not run on " + device
        elif device.startswith("cuda") and not torch.cuda.is_available():
            row["evidence"] = "CUDA requested but torch.cuda.is_available() is False"
        else:
            reproduces, evidence = c["fn"](device)
            row["reproduces"], row["evidence"] = bool(reproduces), evidence
    except Exception as exc:  # noqa: BLE001 - a case that cannot run reports null, the others go on
        tail = traceback.format_exception_only(type(exc), exc)[-1].strip().splitlines()[0]
        row["evidence"] = f"could not run: {tail[:400]}"
    finally:
        try:
            torch._dynamo.reset()
        except Exception:  # noqa: BLE001
            pass
    row["seconds"] = round(time.perf_counter() - started, 2)
    return row


def run_isolated(c: dict, device: str, timeout: float) -> dict:
    row = {"issue": c["issue"], "name": c["name"], "area": c["area"], "reproduces": None, "evidence": "",
           "torch": torch.__version__, "device": device, "seconds": 0.0}
    started = time.perf_counter()
    cmd = [sys.executable, os.path.abspath(__file__), "--device", device, "--only", c["name"]]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        if lines:
            return json.loads(lines[-1])
        tail = " ".join(p.stderr.strip().splitlines()[-3:])[-400:]
        row["evidence"] = f"child process exited {p.returncode} without a result: {tail}"
    except subprocess.TimeoutExpired:
        row["evidence"] = f"timed out after {timeout:.0f} s"
    except Exception as exc:  # noqa: BLE001
        row["evidence"] = f"could not start the child process: {exc}"
    row["seconds"] = round(time.perf_counter() - started, 2)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--isolate", action="store_true", help="run each case in its own child process")
    parser.add_argument("--case-timeout", type=float, default=300.0, help="seconds per case with --isolate")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args()
    if args.list:
        for c in CASES:
            print(f"{c['name']:42s} {c['issue']:22s} {'cuda-only ' if c['cuda_only'] else ''}{c['area']}")
        return 0
    wanted = {n.strip() for n in args.only.split(",") if n.strip()}
    unknown = wanted - {c["name"] for c in CASES}
    for name in sorted(unknown):
        print(json.dumps({"issue": None, "name": name, "reproduces": None, "evidence": "no such case",
                          "torch": torch.__version__}), flush=True)
    for c in CASES:
        if wanted and c["name"] not in wanted:
            continue
        try:
            row = run_isolated(c, args.device, args.case_timeout) if args.isolate else run_case(c, args.device)
        except Exception as exc:  # noqa: BLE001 - never let the driver die
            row = {"issue": c["issue"], "name": c["name"], "reproduces": None,
                   "evidence": f"driver error: {exc}", "torch": torch.__version__}
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
    sys.exit(0)
