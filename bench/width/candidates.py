#!/usr/bin/env python3
"""Standalone repros of what the width probes reported on the H100 stack, each in its own
process (a sticky CUDA fault ends the process), judged against the same operation on a
small slice in float64 or a closed form. Prints one JSON line per repro.

usage: python3 bench/width/candidates.py [--only a,b] [--list]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def _t():
    import torch

    return torch


@case
def cummax_fp16_rows_past_2p31():
    torch = _t()
    x = torch.randn(2**31 // 1031 + 64, 1031, dtype=torch.float16, device="cuda")
    v, i = torch.cummax(x, 1)
    torch.cuda.synchronize()
    r = 2**31 // 1031 + 2
    ref = torch.cummax(x[r : r + 1].double(), 1)[0]
    return bool((v[r : r + 1].double() != ref).any()), "row %d max diff %g" % (r, float((v[r : r + 1].double() - ref).abs().max()))


@case
def layer_norm_bwd_bf16_rows_past_2p32():
    torch = _t()
    F = torch.nn.functional
    rows = 2**32 // 1031 + 64
    x = torch.randn(rows, 1031, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    g = torch.randn(rows, 1031, dtype=torch.bfloat16, device="cuda")
    (gx,) = torch.autograd.grad(F.layer_norm(x, (1031,)), (x,), g)
    torch.cuda.synchronize()
    r = rows - 2
    xs = x[r : r + 1].detach().double().requires_grad_(True)
    (ref,) = torch.autograd.grad(F.layer_norm(xs, (1031,)), (xs,), g[r : r + 1].double())
    err = float((gx[r : r + 1].double() - ref).abs().max())
    return err > 0.1 * float(ref.abs().max()), "last row: max error %g, max |grad| %g, zeros %d" % (
        err, float(ref.abs().max()), int((gx[r] == 0).sum()))


@case
def nll_loss_spatial_bwd_fp16_past_2p31():
    torch = _t()
    F = torch.nn.functional
    batch = 2**31 // (2 * 1031) + 64
    x = torch.randn(batch, 1031, 2, 1, dtype=torch.float16, device="cuda", requires_grad=True)
    t = torch.randint(0, 1031, (batch, 2, 1), device="cuda")
    (gx,) = torch.autograd.grad(F.nll_loss(x, t, reduction="sum"), (x,))
    torch.cuda.synchronize()
    b = batch - 1
    want = torch.zeros(1, 1031, 2, 1, dtype=torch.float64, device="cuda").scatter_(1, t[b : b + 1, None], -1.0)
    bad = int((gx[b : b + 1].double() != want).sum())
    return bad > 0, "last batch: %d of %d gradient elements wrong (expected -1 at the targets)" % (bad, want.numel())


@case
def avg_pool1d_fp16_length_past_2p31():
    torch = _t()
    F = torch.nn.functional
    x = torch.randn(1, 1, 2**31 + 2**25 + 1, dtype=torch.float16, device="cuda")
    out = F.avg_pool1d(x, 2)
    torch.cuda.synchronize()
    ref = F.avg_pool1d(x[..., :192].double(), 2)
    err = float((out[..., :96].double() - ref).abs().max())
    return err > 0.01, "first 96 outputs: max error %g (first: %g, expected %g)" % (err, float(out[0, 0, 0]), float(ref[0, 0, 0]))


@case
def max_pool1d_fp32_length_past_2p31():
    torch = _t()
    F = torch.nn.functional
    x = torch.randn(1, 1, 2**31 + 2**25 + 1, dtype=torch.float32, device="cuda")
    out = F.max_pool1d(x, 2)
    torch.cuda.synchronize()
    ref = F.max_pool1d(x[..., :192].double(), 2)
    err = float((out[..., :96].double() - ref).abs().max())
    return err > 0, "first 96 outputs: max error %g (first: %g, expected %g)" % (err, float(out[0, 0, 0]), float(ref[0, 0, 0]))


@case
def softmax_fp16_row_past_2p31():
    torch = _t()
    x = torch.randn(1, 2**31 + 2**25 + 1, dtype=torch.float16, device="cuda")
    try:
        torch.softmax(x, 1)
        torch.cuda.synchronize()
    except RuntimeError as exc:
        return "INTERNAL ASSERT" in str(exc), str(exc).splitlines()[0][:200]
    return False, "no error"


@case
def sdpa_flash_batch_65537():
    torch = _t()
    F = torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (torch.randn(65537, 4, 128, 64, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    try:
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            out = F.scaled_dot_product_attention(q, k, v)
        torch.cuda.synchronize()
    except RuntimeError as exc:
        return "CUDA error" in str(exc), str(exc).splitlines()[0][:200]
    ref = F.scaled_dot_product_attention(q[-2:].double(), k[-2:].double(), v[-2:].double())
    err = float((out[-2:].double() - ref).abs().max())
    return err > 0.05, "no error; last batches max error %g" % err


def _pool(name, fn, shape, dtype="float32"):
    torch = _t()
    x = torch.randn(*shape, dtype=getattr(torch, dtype), device="cuda", requires_grad=True)
    out = fn(x)
    g = torch.randn_like(out)
    (gx,) = torch.autograd.grad(out, (x,), g)
    torch.cuda.synchronize()
    b = shape[0] - 1
    xs = x[b:].detach().double().requires_grad_(True)
    (ref,) = torch.autograd.grad(fn(xs), (xs,), g[b:].double())
    err = float((gx[b:].double() - ref).abs().max())
    return err > 0.05 * float(ref.abs().max()), "%s: last batch grad max error %g (max %g)" % (name, err, float(ref.abs().max()))


PLANES = (2**31 // (4 * 32 * 32) + 8, 4, 32, 32)


@case
def avg_pool2d_fp16_bwd_past_2p31():
    return _pool("avg_pool2d", lambda x: _t().nn.functional.avg_pool2d(x, 2), PLANES, "float16")


@case
def max_pool2d_fp32_bwd_past_2p31():
    return _pool("max_pool2d", lambda x: _t().nn.functional.max_pool2d(x, 2), PLANES)


@case
def adaptive_avg_pool2d_fp32_bwd_past_2p31():
    return _pool("adaptive_avg_pool2d", lambda x: _t().nn.functional.adaptive_avg_pool2d(x, (8, 8)), PLANES)


@case
def adaptive_avg_pool3d_fp32_bwd_past_2p31():
    shape = (PLANES[0], 4, 4, 16, 64)
    return _pool("adaptive_avg_pool3d", lambda x: _t().nn.functional.adaptive_avg_pool3d(x, (2, 4, 4)), shape)


@case
def upsample_nearest2d_fp16_bwd_past_2p31():
    shape = (PLANES[0] // 4 + 2, 4, 32, 32)
    return _pool("nearest", lambda x: _t().nn.functional.interpolate(x, scale_factor=2, mode="nearest"), shape, "float16")


def run_one(name):
    started = time.time()
    try:
        reproduced, evidence = CASES[name]()
    except Exception as exc:  # noqa: BLE001
        text = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        reproduced, evidence = ("illegal memory access" in text or "CUDA error" in text), text[:300]
    print("RESULT " + json.dumps({"reproduced": reproduced, "evidence": evidence, "seconds": round(time.time() - started, 2)}), flush=True)
    import os

    os._exit(0)


def main(argv):
    if "--one" in argv:
        run_one(argv[argv.index("--one") + 1])
        return 0
    if "--list" in argv:
        print("\n".join(CASES))
        return 0
    only = set(argv[argv.index("--only") + 1].split(",")) if "--only" in argv else None
    for name in CASES:
        if only and name not in only:
            continue
        try:
            p = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True, text=True, timeout=180)
            line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
            res = json.loads(line[7:]) if line else {"reproduced": None, "evidence": "no result: rc=%d %s" % (p.returncode, p.stderr[-300:])}
        except subprocess.TimeoutExpired:
            res = {"reproduced": None, "evidence": "timeout"}
        print(json.dumps({"name": name, **res}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
