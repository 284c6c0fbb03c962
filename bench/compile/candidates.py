"""Standalone repros of what the compile family found that no public issue describes, each
printing eager's result, the compiled result and whether they differ:

    python bench/compile/candidates.py [--device cuda] [--only NAME]

- ``matrix_rank_out``: ``torch.linalg.matrix_rank(A, out=r)`` inside a compiled function
  leaves ``r`` unwritten (eager writes the rank).
- ``avg_pool2d_backward_padding1``: ``avg_pool2d`` with a one-element ``padding`` list
  compiles forward, but its backward fails in Inductor's lowering (``assert len(padding) ==
  2``), with static and with dynamic shapes; eager accepts it.
- ``softshrink_nan``: ``softshrink`` of a NaN (with and without its sign bit) compiled
  returns 0 where eager returns NaN (the compile family's ``values[negnan]`` case on the
  H200, torch 2.11; Inductor's CPU code on torch 2.15 keeps the NaN).
"""

from __future__ import annotations

import argparse

import torch


def matrix_rank_out(device: str) -> bool:
    def f(a: torch.Tensor) -> torch.Tensor:
        out = torch.full((), -7, dtype=torch.int64, device=a.device)
        torch.linalg.matrix_rank(a, out=out)
        return out

    a = torch.randn(5, 5, device=device)
    eager = f(a).item()
    compiled = torch.compile(f)(a).item()
    print(f"matrix_rank_out: eager {eager}, compiled {compiled}")
    return eager != compiled


def avg_pool2d_backward_padding1(device: str) -> bool:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.avg_pool2d(x, kernel_size=[3, 3], stride=[1, 1], padding=[1], ceil_mode=True)

    x = torch.randn(2, 3, 6, 7, device=device, requires_grad=True)
    f(x).sum().backward()
    eager = x.grad.clone()
    found = False
    for dynamic in (False, True):
        x.grad = None
        torch._dynamo.reset()
        try:
            torch.compile(f, dynamic=dynamic)(x).sum().backward()
        except Exception as exc:  # noqa: BLE001
            first = str(exc).strip().splitlines()
            print(f"avg_pool2d_backward_padding1 (dynamic={dynamic}): eager ok, compiled raised {type(exc).__name__}: {first[0] if first else ''}")
            found = True
            continue
        same = torch.allclose(x.grad, eager)
        print(f"avg_pool2d_backward_padding1 (dynamic={dynamic}): compiled ran, gradients {'equal' if same else 'DIFFER'}")
        found |= not same
    return found


def softshrink_nan(device: str) -> bool:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softshrink(x, 0.5)

    nan = torch.tensor(float("nan"))
    x = torch.tensor([1.0, -2.0, 0.1, 0.0, 0.0], device=device)
    x[3] = nan
    x[4] = -nan  # NaN with its sign bit set
    eager = f(x).cpu()
    compiled = torch.compile(f)(x).cpu()
    print(f"softshrink_nan: eager {eager.tolist()}, compiled {compiled.tolist()}")
    return bool((eager.isnan() != compiled.isnan()).any())


CANDIDATES = {
    "matrix_rank_out": matrix_rank_out,
    "avg_pool2d_backward_padding1": avg_pool2d_backward_padding1,
    "softshrink_nan": softshrink_nan,
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    print(f"torch {torch.__version__} on {args.device}")
    found = 0
    for name, repro in CANDIDATES.items():
        if args.only and name != args.only:
            continue
        found += bool(repro(args.device))
    print(f"{found} of {len(CANDIDATES) if not args.only else 1} reproduce")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
