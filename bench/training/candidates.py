"""Standalone repros of what the optim family found that no public issue describes:

    python bench/training/candidates.py [--device cpu]

- ``fused_cpu_grad_strides``: a fused CPU optimizer step (Adam, AdamW, SGD, Adagrad) whose
  gradient has other strides than its parameter (a transposed gradient, as ``bmm``'s
  backward can produce) computes a wrong step silently; the for-loop and foreach steps
  agree with each other. CUDA's fused kernels refuse the same input ("params, grads,
  exp_avgs, and exp_avg_sqs must have same dtype, device, and layout",
  pytorch/pytorch#106951, #110758).
"""

from __future__ import annotations

import argparse

import torch


def fused_cpu_grad_strides(device: str) -> bool:
    differ = False
    for name in ("Adam", "AdamW", "SGD", "Adagrad"):
        steps = {}
        for implementation in ("for-loop", "foreach", "fused"):
            torch.manual_seed(0)
            parameter = torch.nn.Parameter(torch.randn(4, 6, device=device))
            parameter.grad = torch.randn(6, 4, device=device).t()  # strides (1, 4), the parameter's (6, 1)
            kwargs = {"lr": 0.1}
            if name == "SGD":
                kwargs["momentum"] = 0.9
            if implementation == "fused":
                kwargs["fused"] = True
            else:
                kwargs["foreach"] = implementation == "foreach"
            optimizer = getattr(torch.optim, name)([parameter], **kwargs)
            try:
                optimizer.step()
                steps[implementation] = parameter.detach().clone()
            except RuntimeError as exc:
                steps[implementation] = f"raises: {str(exc).splitlines()[0][:80]}"
        loop = steps["for-loop"]
        line = []
        for implementation in ("foreach", "fused"):
            got = steps[implementation]
            if isinstance(got, str):
                line.append(f"{implementation} {got}")
            else:
                error = (got - loop).abs().max().item()
                line.append(f"{implementation} max |diff| {error:.3g}")
                differ |= implementation == "fused" and error > 1e-6
        print(f"  {name}: " + ", ".join(line))
    return differ


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    print(f"torch {torch.__version__} on {args.device}")
    found = fused_cpu_grad_strides(args.device)
    print("fused_cpu_grad_strides: " + ("REPRODUCED (fused differs from the for-loop step)" if found else "not reproduced"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
