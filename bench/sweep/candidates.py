#!/usr/bin/env python3
"""Standalone repros of the differences the sweep found on a healthy H100 stack, to decide
for each whether it is a device-side bug, a CPU-side bug or a harness artifact.

Each case builds its input by hand (no operator database, no gpuprobe), runs the op on the
CPU in float64 and on the device, and prints both. Needs only torch.

usage: python3 bench/sweep/candidates.py [--only NAME]
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

import torch

DEV = os.environ.get("CANDIDATE_DEVICE", "cuda")


def show(label: str, value: object) -> None:
    print(f"  {label}: {value}")


def median_stride0() -> None:
    """median / nanmedian / kthvalue reducing along a broadcast (stride 0) dimension: every
    value along it is the same, so the median is that value."""
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        base = torch.randn(1, 2, 1, 2, dtype=dtype)
        x = base.expand(3, 2, 1, 2)
        want = base
        for name, fn in (
            ("median", lambda t: torch.median(t, dim=0, keepdim=True).values),
            ("nanmedian", lambda t: torch.nanmedian(t, dim=0, keepdim=True).values),
            ("kthvalue k=2", lambda t: torch.kthvalue(t, 2, dim=0, keepdim=True).values),
        ):
            got = fn(x.to(DEV)).cpu()
            cpu = fn(x)
            contiguous = fn(x.contiguous().to(DEV)).cpu()
            print(f"  {name} {dtype}: stride {x.stride()} expected {want.flatten().tolist()} cpu {cpu.flatten().tolist()} "
                  f"device {got.flatten().tolist()} device(contiguous copy) {contiguous.flatten().tolist()} "
                  f"-> {'WRONG' if not torch.equal(got, want) else 'ok'}")


def embedding_bag_max_norm() -> None:
    """embedding_bag (mode sum, per_sample_weights, max_norm 1.0, padding_idx 0) with a
    non-contiguous weight, bf16/fp32 on the device against float64 on the CPU."""
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        for layout in ("contiguous", "noncontig"):
            w64 = torch.randn(5, 5, dtype=torch.float64) * 3
            idx = torch.tensor([1, 2, 4, 3, 1, 0])
            offsets = torch.tensor([0, 3])
            psw64 = torch.randn(6, dtype=torch.float64)

            def run(weight: torch.Tensor, psw: torch.Tensor, device: str) -> torch.Tensor:
                if layout == "noncontig":
                    weight = torch.stack([weight, weight], -1)[..., 0]
                    psw = torch.stack([psw, psw], -1)[..., 0]
                return torch.nn.functional.embedding_bag(
                    idx.to(device), weight, offsets.to(device), max_norm=1.0, mode="sum",
                    per_sample_weights=psw, padding_idx=0,
                )

            ref = run(w64.clone(), psw64.clone(), "cpu")
            got = run(w64.to(dtype).to(DEV), psw64.to(dtype).to(DEV), DEV).double().cpu()
            err = (got - ref).abs().max().item()
            print(f"  {dtype} {layout}: max |device - float64 CPU| = {err:.4g}  ({'WRONG' if err > 0.1 else 'ok'})")


def unique_nan() -> None:
    """torch.unique(sorted=False, return_counts=True) with one NaN (pytorch#76571)."""
    x = torch.tensor([1.5, float("nan"), -2.0, 1.5, 3.0])
    for sorted_ in (False, True):
        cpu = torch.unique(x, sorted=sorted_, return_counts=True)
        dev = torch.unique(x.to(DEV), sorted=sorted_, return_counts=True)
        print(f"  sorted={sorted_}: cpu {cpu[0].tolist()} counts {cpu[1].tolist()} | device {dev[0].cpu().tolist()} counts {dev[1].cpu().tolist()}")


def embedding_renorm_noncontiguous() -> None:
    """embedding with max_norm (torch.embedding_renorm_ in place) on a non-contiguous weight
    view, against the same values contiguous: which rows are renormalized, and to what."""
    torch.manual_seed(0)
    idx = torch.tensor([1, 2, 4])
    for device in ("cpu", DEV):
        base = torch.randn(5, 5, dtype=torch.float64) * 3
        contiguous = base.clone().to(device)
        strided = torch.stack([base, base], -1)[..., 0].to(device) if device == "cpu" else torch.stack([base, base], -1).to(device)[..., 0]
        out_c = torch.nn.functional.embedding(idx.to(device), contiguous, max_norm=1.0)
        out_s = torch.nn.functional.embedding(idx.to(device), strided, max_norm=1.0)
        norms_c = contiguous.norm(dim=1).cpu().tolist()
        norms_s = strided.norm(dim=1).cpu().tolist()
        print(f"  {device}: stride {tuple(strided.stride())}; |out strided - out contiguous| = {float((out_s - out_c).abs().max()):.4g}; "
              f"row norms after, contiguous {[round(n, 3) for n in norms_c]} strided {[round(n, 3) for n in norms_s]}")


def unique_nan_dims() -> None:
    """torch.unique of 0/1 values with one NaN, every flag and dim, CPU against the device
    (the number of unique values must not depend on the device)."""
    x = torch.tensor([1.0, 0.0, float("nan"), 1.0, 0.0])
    differ = []
    for sorted_ in (False, True):
        for inverse in (False, True):
            for counts in (False, True):
                for dim in (None, 0, -1):
                    kwargs = dict(sorted=sorted_, return_inverse=inverse, return_counts=counts, dim=dim)
                    cpu = torch.unique(x, **kwargs)
                    dev = torch.unique(x.to(DEV), **kwargs)
                    c0 = cpu[0] if isinstance(cpu, tuple) else cpu
                    d0 = dev[0] if isinstance(dev, tuple) else dev
                    if c0.shape != d0.shape:
                        differ.append(f"{kwargs}: cpu {c0.tolist()} device {d0.cpu().tolist()}")
    print(f"  {len(differ)} of 24 flag combinations differ in the number of unique values")
    for line in differ[:6]:
        print("   ", line)
    x = torch.tensor([1.0, float("nan"), 0.0, 1.0, 0.0])  # the sweep's unique sample 37 with its NaN
    cpu = torch.unique(x, sorted=False, return_counts=True, dim=-1)
    dev = torch.unique(x.to(DEV), sorted=False, return_counts=True, dim=-1)
    print(f"  [1, nan, 0, 1, 0] dim=-1: cpu {cpu[0].tolist()} counts {cpu[1].tolist()} | device {dev[0].cpu().tolist()} counts {dev[1].cpu().tolist()}")
    s = torch.tensor(float("nan"), device=DEV)
    print("  pytorch#76571 repro (0-d NaN, sorted=False, return_counts=True), three calls:",
          [tuple(t.cpu().tolist() for t in torch.unique(s, sorted=False, return_inverse=False, return_counts=True)) for _ in range(3)])


def meshgrid_zero_dim() -> None:
    """meshgrid of a 1-d, a 0-d and a 1-d tensor with indexing='ij' and 'xy'."""
    a, s, b = torch.randn(3), torch.randn(()), torch.randn(3)
    for indexing in ("ij", "xy"):
        cpu = [tuple(t.shape) for t in torch.meshgrid(a, s, b, indexing=indexing)]
        dev = [tuple(t.shape) for t in torch.meshgrid(a.to(DEV), s.to(DEV), b.to(DEV), indexing=indexing)]
        print(f"  indexing={indexing}: cpu {cpu} device {dev} -> {'DIFFER' if cpu != dev else 'same'}")
    cpu = [tuple(t.shape) for t in torch.meshgrid([a, s, b], indexing="ij")]
    dev = [tuple(t.shape) for t in torch.meshgrid([a.to(DEV), s.to(DEV), b.to(DEV)], indexing="ij")]
    print(f"  list form ij: cpu {cpu} device {dev}")


def rms_norm_inf() -> None:
    """rms_norm of a row holding +inf: x·rsqrt(mean(x²)) is inf·0 = NaN at the infinity and
    x·0 = 0 elsewhere in float64 IEEE arithmetic."""
    x = torch.tensor([[float("inf"), 0.7]])
    w = torch.tensor([1.3, -0.4])
    for dtype in (torch.float32, torch.bfloat16):
        cpu = torch.nn.functional.rms_norm(x.double(), [2], w.double())
        dev = torch.nn.functional.rms_norm(x.to(dtype).to(DEV), [2], w.to(dtype).to(DEV)).cpu()
        cpu_same = torch.nn.functional.rms_norm(x.to(dtype), [2], w.to(dtype))
        print(f"  {dtype}: cpu float64 {cpu.tolist()} cpu same dtype {cpu_same.tolist()} device {dev.tolist()}")


def avg_pool1d_transposed_backward() -> None:
    """avg_pool1d backward on a column-major (transposed) input, against the same input made
    contiguous (the gradient does not depend on the layout)."""
    torch.manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        base = torch.randn(2, 9, 3, dtype=torch.float64)  # (N, L, C) then transposed to (N, C, L)

        def grad(device: str, dt: torch.dtype, contiguous: bool) -> torch.Tensor:
            x = base.to(dt).to(device).transpose(1, 2)
            if contiguous:
                x = x.contiguous()
            x.requires_grad_(True)
            out = torch.nn.functional.avg_pool1d(x, kernel_size=3, stride=2, padding=1)
            g = torch.linspace(-1, 1, out.numel(), dtype=torch.float64).reshape(out.shape).to(dt).to(device)
            (out * g).sum().backward()
            return x.grad.double().cpu()

        ref = grad("cpu", torch.float64, True)
        strided = grad(DEV, dtype, False)
        contig = grad(DEV, dtype, True)
        print(f"  {dtype}: max err transposed {float((strided - ref).abs().max()):.4g}, contiguous {float((contig - ref).abs().max()):.4g}")


def upsample_aa_empty() -> None:
    """_upsample_bilinear2d_aa (interpolate antialias=True) on an empty batch."""
    x = torch.randn(0, 2, 6, 6)
    cpu = torch.nn.functional.interpolate(x, size=(3, 3), mode="bilinear", antialias=True)
    show("cpu", tuple(cpu.shape))
    try:
        dev = torch.nn.functional.interpolate(x.to(DEV), size=(3, 3), mode="bilinear", antialias=True)
        torch.cuda.synchronize()
        show("device", tuple(dev.shape))
    except Exception as exc:  # noqa: BLE001
        show("device raised", f"{type(exc).__name__}: {str(exc).splitlines()[0]}")


def channel_shuffle_transposed() -> None:
    x = torch.randn(2, 6, 4, 4).transpose(2, 3)
    cpu = torch.nn.functional.channel_shuffle(x, 3)
    show("cpu", tuple(cpu.shape))
    try:
        dev = torch.nn.functional.channel_shuffle(x.to(DEV), 3).cpu()
        show("device equal to cpu", torch.equal(dev, cpu))
    except Exception as exc:  # noqa: BLE001
        show("device raised", f"{type(exc).__name__}: {str(exc).splitlines()[0]}")


def pixel_unshuffle_empty() -> None:
    x = torch.randn(0, 1, 6, 6)
    show("cpu", tuple(torch.nn.functional.pixel_unshuffle(x, 3).shape))
    show("device", tuple(torch.nn.functional.pixel_unshuffle(x.to(DEV), 3).shape))
    show("cpu, batch 1", tuple(torch.nn.functional.pixel_unshuffle(torch.randn(1, 1, 6, 6), 3).shape))


def batch_norm_empty() -> None:
    x = torch.randn(0, 2, 3)
    rm, rv = torch.zeros(2), torch.ones(2)
    for device in ("cpu", DEV):
        try:
            out = torch.native_batch_norm(x.to(device), None, None, rm.to(device), rv.to(device), True, 0.1, 1e-5)
            show(device, [tuple(t.shape) for t in out])
        except Exception as exc:  # noqa: BLE001
            show(f"{device} raised", f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
        try:
            out = torch.nn.functional.batch_norm(x.to(device), rm.clone().to(device), rv.clone().to(device), training=True)
            show(f"{device} F.batch_norm", tuple(out.shape))
        except Exception as exc:  # noqa: BLE001
            show(f"{device} F.batch_norm raised", f"{type(exc).__name__}: {str(exc).splitlines()[0]}")


def cov_mixed_weights() -> None:
    """cov of a float64 input with float32 aweights and int32 fweights: the product of the
    weights is float32 (type promotion), on the CPU as on the device."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, dtype=torch.float64)
    fw = torch.tensor([1, 3, 2], dtype=torch.int32)
    aw = torch.rand(3, dtype=torch.float32) + 0.1
    cpu32 = torch.cov(x, correction=2, fweights=fw, aweights=aw)
    cpu64 = torch.cov(x, correction=2, fweights=fw, aweights=aw.double())
    dev32 = torch.cov(x.to(DEV), correction=2, fweights=fw.to(DEV), aweights=aw.to(DEV)).cpu()
    print(f"  |device(f32 aweights) - cpu(f32 aweights)| = {float((dev32 - cpu32).abs().max()):.3g}; "
          f"|cpu(f32 aweights) - cpu(f64 aweights)| = {float((cpu32 - cpu64).abs().max()):.3g}")


def mode_nan() -> None:
    x = torch.tensor([[1.0, float("nan"), 2.0, 2.0, 3.0]])
    for dtype in (torch.float32, torch.float16):
        cpu = torch.mode(x.to(dtype), dim=1)
        dev = torch.mode(x.to(dtype).to(DEV), dim=1)
        print(f"  {dtype}: cpu {cpu.values.tolist()} {cpu.indices.tolist()} device {dev.values.cpu().tolist()} {dev.indices.cpu().tolist()}")


def clamp_inplace_uint8_int32_bound() -> None:
    """clamp_ of a uint8 tensor by an int32 bound: in-place ops compute in the common dtype
    (int32) and cast the result back, so it equals clamp(x, low) cast to uint8."""
    x = torch.tensor([6, 0, 200], dtype=torch.uint8)
    low = torch.tensor([-7, 3, 250], dtype=torch.int32)
    want = torch.clamp(x, low).to(torch.uint8)
    cpu = x.clone().clamp_(low)
    dev = x.to(DEV).clamp_(low.to(DEV)).cpu()
    functional = torch.clamp(x.to(DEV), low.to(DEV)).cpu()
    show("expected", want.tolist())
    show("cpu clamp_", cpu.tolist())
    show("device clamp_", dev.tolist())
    show("device clamp (functional)", functional.tolist())
    print(f"  -> {'WRONG' if not torch.equal(dev, want) else 'ok'}")


def ihfftn_half_out() -> None:
    """fft.ihfftn in float16 with out= against the same call without it, on the device (the
    CPU has no float16 FFT): power-of-two sizes, which cuFFT's half precision requires."""
    torch.manual_seed(0)
    for shape in ((4, 8), (2, 4, 8), (8, 16)):
        x = torch.randn(shape, dtype=torch.float16, device=DEV)
        functional = torch.fft.ihfftn(x)
        out = torch.full_like(functional, float("nan"))
        torch.fft.ihfftn(x, out=out)
        ref = torch.fft.ihfftn(x.double().cpu())
        bad = ~torch.isfinite(torch.view_as_real(out)).all(-1)
        print(f"  {shape}: out= has {int(bad.sum())} non-finite of {out.numel()}; functional max err "
              f"{float((functional.cpu().to(torch.complex128) - ref).abs().max()):.3g}; out= against functional "
              f"{'equal' if torch.equal(torch.view_as_real(out), torch.view_as_real(functional)) else 'DIFFERENT'}")


def batch_norm_noncontiguous_out() -> None:
    """native_batch_norm with non-contiguous out, save_mean and save_invstd (every other
    element of wider tensors): the CPU writes them, CUDA asserts."""
    x = torch.randn(4, 3, 5)
    weight, bias = torch.ones(3), torch.zeros(3)

    def strided(shape: tuple[int, ...], device: str) -> torch.Tensor:
        return torch.full(shape[:-1] + (2 * shape[-1],), float("nan"), device=device)[..., ::2]

    for device in ("cpu", DEV):
        outs = (strided((4, 3, 5), device), strided((3,), device), strided((3,), device))
        try:
            torch.native_batch_norm(x.to(device), weight.to(device), bias.to(device), None, None, True, 0.1, 1e-5, out=outs)
            show(device, f"wrote: mean {outs[1].cpu().tolist()}")
        except Exception as exc:  # noqa: BLE001
            show(f"{device} raised", f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}")


def avg_pool2d_noncontiguous_out() -> None:
    """avg_pool2d (the aten op, which takes out=) writing into a non-contiguous out (every
    other element of a wider tensor, filled with NaN first): elements left NaN were never
    written. The same call without out= on the same device is the yardstick."""
    torch.manual_seed(0)
    cases = (
        ((1, 3, 9, 9), (3, 3), (2, 2), (1, 1), True, True),
        ((1, 3, 9, 9), (3, 3), (2, 2), (1, 1), False, False),
        ((2, 4, 8, 8), (2, 2), (2, 2), (0, 0), False, True),
        ((1, 1, 6, 6), (3, 3), (1, 1), (0, 0), False, True),
        ((3, 7, 7), (3, 3), (2, 2), (1, 1), True, True),
    )
    for shape, kernel, stride, padding, ceil_mode, count_include_pad in cases:
        x = torch.randn(shape, device=DEV)
        want = torch._C._nn.avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad)
        wide = torch.full(want.shape[:-1] + (2 * want.shape[-1],), float("nan"), device=DEV)
        out = wide[..., ::2]
        torch._C._nn.avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, out=out)
        unwritten = int(out.isnan().sum())
        differ = int(((out - want).abs() > 1e-5).sum())
        show(
            f"{tuple(shape)} k{kernel} s{stride} p{padding} ceil={ceil_mode}",
            f"{unwritten} of {out.numel()} left NaN, {differ} differ from the functional call",
        )


def matrix_exp_infinity() -> None:
    """matrix_exp of a 4x4 float32 matrix holding one +Inf: run in a child process with a
    20 s limit, since on the H200 (torch 2.11) the CUDA call never returns (the float64 CPU
    call returns at once; NaN input returns on both)."""
    import subprocess

    code = (
        "import torch; x = torch.randn(4, 4, device=%r); x[1, 2] = float('inf'); "
        "y = torch.linalg.matrix_exp(x); torch.cuda.synchronize() if x.is_cuda else None; print(y[0].tolist())"
    ) % DEV
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
        show("device", f"returned (rc {done.returncode}): {done.stdout.strip()[:120]} {done.stderr.strip()[-120:]}")
    except subprocess.TimeoutExpired:
        show("device", "no result within 20 s (killed)")
    x = torch.randn(4, 4, dtype=torch.float64)
    x[1, 2] = float("inf")
    show("cpu float64", torch.linalg.matrix_exp(x)[0].tolist())


def eigh_large_batch() -> None:
    """linalg.eigh of a batch of 65,535 / 65,536 / 65,537 small symmetric (Hermitian)
    matrices: on the H200 (torch 2.11+cu130) the sweep's 65,537 5x5 matrices raised
    CUSOLVER_STATUS_INTERNAL_ERROR in cusolverDnXsyevBatched on the device, where the CPU
    computes. Prints, for each size, dtype and batch, what raises where, and the largest
    residual |A V - V diag(w)| and eigenvalue difference from the CPU's float64."""
    torch.manual_seed(0)
    for n in (3, 5, 8):
        for dtype in (torch.float32, torch.float64, torch.complex128):
            base = torch.randn(4, n, n, dtype=dtype)
            base = base + base.mH  # symmetric / Hermitian
            for batch in (65535, 65536, 65537):
                a = base[torch.arange(batch) % 4]
                w64 = torch.linalg.eigvalsh(base.to(torch.complex128 if dtype.is_complex else torch.float64))
                label = f"n={n} {str(dtype).replace('torch.', '')} batch {batch}"
                try:
                    cpu_w, _ = torch.linalg.eigh(a)
                    cpu = f"cpu ok (max |w - w64| {float((cpu_w[:4].double() - w64).abs().max()):.2e})"
                except Exception as exc:  # noqa: BLE001 - print what raises where
                    cpu = f"cpu raised {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                try:
                    d = a.to(DEV)
                    w, v = torch.linalg.eigh(d)
                    if d.is_cuda:
                        torch.cuda.synchronize()
                    residual = (d @ v - v * w.unsqueeze(-2).to(v.dtype)).abs().max()
                    diff = (w.cpu()[torch.arange(batch) % 4].double() - w64[torch.arange(batch) % 4]).abs().max()
                    device = f"device ok (max |w - w64| {float(diff):.2e}, max residual {float(residual):.2e})"
                except Exception as exc:  # noqa: BLE001 - print what raises where
                    device = f"device raised {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                show(label, f"{cpu}; {device}")


CASES = {f.__name__: f for f in (
    median_stride0, embedding_bag_max_norm, embedding_renorm_noncontiguous, unique_nan, unique_nan_dims, meshgrid_zero_dim, rms_norm_inf,
    avg_pool1d_transposed_backward, upsample_aa_empty, channel_shuffle_transposed,
    pixel_unshuffle_empty, batch_norm_empty, cov_mixed_weights, mode_nan,
    clamp_inplace_uint8_int32_bound, ihfftn_half_out, batch_norm_noncontiguous_out,
    avg_pool2d_noncontiguous_out, matrix_exp_infinity, eigh_large_batch,
)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    print("torch", torch.__version__, "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
    for name, case in CASES.items():
        if args.only and name != args.only:
            continue
        print(f"## {name}: {(case.__doc__ or '').strip().splitlines()[0] if case.__doc__ else ''}")
        try:
            case()
        except Exception:  # noqa: BLE001 - one case's failure does not stop the others
            traceback.print_exc(limit=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
