#!/usr/bin/env python3
"""Checks the workarounds the knowledge base offers for two cuDNN attention bugs, on the
repros of `repros.py` (same inputs, judged against float64 on the CPU):

- RKB-056 (pytorch/pytorch#196678): `torch.backends.cuda.enable_cudnn_sdp(False)`; the
  default dispatch's grad_q with cuDNN attention on, then off.
- RKB-057 (pytorch/pytorch PR #191612): pass the mask in the query's dtype; the default
  dispatch's output with the float32 mask, then with `mask.to(q.dtype)`.

Usage: python workarounds.py   (one JSON line per check; needs a CUDA device)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import repros  # noqa: E402  (the repro helpers; importing runs nothing)


def rkb056():
    torch = repros._torch()
    before = repros.r_sdpa_cudnn_bwd()[1]
    torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        after = repros.r_sdpa_cudnn_bwd()[1]
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)
    return {"entry": "RKB-056", "workaround": "torch.backends.cuda.enable_cudnn_sdp(False)",
            "cudnn_on": before, "cudnn_off": after}


def rkb057():
    torch = repros._torch()
    B, H, S, D = 2, 4, 32, 64
    g = torch.Generator().manual_seed(0)
    q, k, v = [torch.randn(B, H, S, D, generator=g).to(torch.bfloat16) for _ in range(3)]
    mask = torch.triu(torch.full((S, S), float("-inf")), diagonal=1)
    ref = repros._attn_ref64(q, k, v, mask)
    qc, kc, vc = q.cuda(), k.cuda(), v.cuda()
    out = {}
    for label, m in (("fp32_mask", mask.cuda()), ("mask_in_query_dtype", mask.to(q.dtype).cuda())):
        o = repros._sdpa_call(None, qc, kc, vc, attn_mask=m)
        torch.cuda.synchronize()
        nf = repros._nonfinite(o)
        err = repros._maxabs(torch.nan_to_num(o.float(), nan=1e4), ref)
        out[label] = "non-finite=%d/%d maxabs_vs_fp64=%.3g" % (nf, o.numel(), err)
    return {"entry": "RKB-057", "workaround": "attn_mask.to(q.dtype)", **out}


if __name__ == "__main__":
    for check in (rkb056, rkb057):
        print(json.dumps(check()), flush=True)
