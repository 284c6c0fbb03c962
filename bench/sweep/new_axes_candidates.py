#!/usr/bin/env python3
"""Checks, outside gpuprobe's oracle, the discrepancies the new sweep axes found on a GPU.

For each (operator, dtype, transform) below, every sample of PyTorch's operator database the
transform applies to is run through gpuprobe's own case builder (``sweep_cases.run_case``)
four ways: the device and the CPU, each through the case's own entry point (an ``out=``
write, an in-place call, a layout) and through the functional call on the same inputs.
It prints, per sample that shows any difference, the largest difference of the device's result from the CPU's result
and from the device's own functional call. A call variant that differs from the functional
call on the same device, where the CPU's agrees, is a device bug whatever the reference;
a layout case that differs from the CPU while the contiguous case agrees is one too.

usage: python3 bench/sweep/new_axes_candidates.py   (on a GPU host, from the repository root)
"""

from __future__ import annotations

import sys
import warnings

sys.path.insert(0, "python")
warnings.simplefilter("ignore")

import torch  # noqa: E402

from gpuprobe.worker.probes.sweep import cases as sweep_cases  # noqa: E402
from gpuprobe.worker.probes.sweep import db as sweep_db  # noqa: E402

CANDIDATES = [
    ("clamp", "uint8", "inplace"),
    ("clamp", "uint8", "inplace_noncontig"),
    ("linspace", "uint8", "out"),
    ("lu", "complex64", "channels_last"),
    ("lu", "complex128", "channels_last"),
    ("lu", "float64", "channels_last"),
    ("linalg.lu", "complex128", "noncontig"),
    ("fft.ihfftn", "float16", "out"),
    ("native_batch_norm", "float16", "out_noncontig"),
    ("nn.functional.avg_pool3d", "float32", "out_noncontig"),
]


def flat(values: list) -> list:
    return [v for v in values if isinstance(v, torch.Tensor)]


def largest_difference(a: list, b: list) -> str:
    a, b = flat(a), flat(b)
    if len(a) != len(b):
        return f"{len(a)} vs {len(b)} outputs"
    worst = 0.0
    for x, y in zip(a, b):
        x, y = x.detach().cpu(), y.detach().cpu()
        if x.shape != y.shape:
            return f"shape {tuple(x.shape)} vs {tuple(y.shape)}"
        if x.numel() == 0:
            continue
        if x.is_complex() or y.is_complex():
            x, y = torch.view_as_real(x.to(torch.complex128)), torch.view_as_real(y.to(torch.complex128))
        x, y = x.double(), y.double()
        same_nonfinite = (torch.isnan(x) & torch.isnan(y)) | ((x == y) & torch.isinf(x))
        diff = torch.where(same_nonfinite, torch.zeros_like(x), (x - y).abs())
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
        worst = max(worst, float(diff.max()))
    return f"{worst:.4g}"


def run(info, sample, case, dtype, device, functional=False):
    try:
        return sweep_cases.run_case(
            torch, info, sample, case, 0, device=device, upcast=False, dtype_name=dtype, functional=functional
        )
    except Exception as exc:  # noqa: BLE001 - printed as the outcome
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"


def main() -> int:
    database = sweep_db.load(torch)
    for key, dtype, transform in CANDIDATES:
        info = database.entry(key)
        samples = sweep_cases.generate_samples(torch, info, dtype, 0, requires_grad=False)
        shown = differing = 0
        for index, sample in enumerate(samples):
            if not sweep_cases.applicable(torch, info, sample, transform, dtype):
                continue
            case = sweep_cases.Case(index, transform, False)
            dev = run(info, sample, case, dtype, "cuda")
            cpu = run(info, sample, case, dtype, "cpu")
            variant = transform in sweep_cases.CALL_VARIANTS
            dev_ref = run(info, sample, case, dtype, "cuda", functional=True) if variant else run(
                info, sample, sweep_cases.Case(index, "base", False), dtype, "cuda"
            )
            cpu_ref = run(info, sample, case, dtype, "cpu", functional=True) if variant else run(
                info, sample, sweep_cases.Case(index, "base", False), dtype, "cpu"
            )

            def cmp(a, b):
                if isinstance(a, str) or isinstance(b, str):
                    return f"[{a if isinstance(a, str) else 'ok'} | {b if isinstance(b, str) else 'ok'}]"
                return largest_difference(a, b)

            other = "functional" if variant else "base"
            results = (cmp(dev, cpu), cmp(dev, dev_ref), cmp(cpu, cpu_ref))
            shown += 1
            if any(r != "0" for r in results):
                differing += 1
                print(
                    f"{key} {dtype} {transform} sample {index}: device vs cpu {results[0]}; device vs device {other} "
                    f"{results[1]}; cpu vs cpu {other} {results[2]}",
                    flush=True,
                )
        print(f"== {key} {dtype} {transform}: {shown} samples, {differing} with a difference", flush=True)
    # The clamp_ candidate, reduced: an in-place clamp of a uint8 tensor by an int32 bound
    # computes in the common dtype (int32) and casts the result back (type promotion of
    # in-place ops); the CPU gives [6, 3, 250].
    x = torch.tensor([6, 0, 200], dtype=torch.uint8)
    low = torch.tensor([-7, 3, 250], dtype=torch.int32)
    print("clamp_ uint8 by an int32 bound: cpu", x.clone().clamp_(low).tolist(), "cuda", x.cuda().clamp_(low.cuda()).tolist())
    return 0


if __name__ == "__main__":
    sys.exit(main())
