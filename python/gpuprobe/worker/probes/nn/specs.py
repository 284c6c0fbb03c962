"""nn family catalog: convolutions, a small VAE, attention and autocast on the device under test.

Id grammar:

- ``nn.conv2d.<dtype>[.bwd]``, ``nn.conv2d.depthwise.<dtype>`` (depthwise-separable: a
  depthwise 3×3 then a pointwise 1×1), ``nn.conv_transpose2d.<dtype>``;
- ``nn.vae.encode.<dtype>``, ``nn.vae.decode.<dtype>``: an encoder-decoder of conv /
  GroupNorm / SiLU layers with seeded weights (field note 003: all-zero latents; RKB-025);
- ``nn.sdpa.<dtype>.<backend>.d<head_dim>.s<seq>[.<mask>][.noncontig][.bwd]``:
  ``scaled_dot_product_attention`` with the backend forced by ``torch.nn.attention.sdpa_kernel``
  (``math``, ``flash``, ``efficient``, ``cudnn``) or chosen by PyTorch (``default``); masks
  ``causal``, ``padding`` (key padding of odd lengths) and ``allmasked`` (padding plus query
  rows with every key masked); ``noncontig``: q/k/v are strided views of one packed tensor
  (the RKB-018 pattern); ``bwd``: gradients of q, k, v too (RKB-019 runs forward and
  backward);
- ``nn.sdpa.matrix.<dtype>.<backend>[.bwd]`` (full) and ``nn.sdpa.matrix.<dtype>.default.core``
  (standard): the attention matrix, many cases per probe over masks (none, causal, boolean,
  additive, additive requiring grad), odd and unequal lengths, layouts (packed views, stride-0
  expand, grouped-query), adversarial logits and fully masked rows; the factors, the pairwise
  covering design and the core subset are in ``sdpa_matrix``;
- ``nn.autocast.<dtype>``: a small conv + linear model under ``torch.autocast``.

dtypes: ``fp32`` (TF32 off), ``tf32`` (TF32 on, PyTorch's default for convolutions on
NVIDIA), ``fp16``, ``bf16``. Every probe compares with a float64 CPU reference computed from
the same (already rounded) inputs and weights, under the ``tolerance`` rule, except autocast,
whose reference uses the unrounded float32 model (rounding the inputs is what autocast does).

Tolerance scales (the judge's bound is the dtype tolerance times the scale, docs/probes.md):

- float32 only: ``gemm_scale(K)`` for a K-term accumulation (1 up to K = 256, √(K/256)
  beyond; see ``ops_specs.accumulation_scale``);
- convolutions × 4 in float32 and × 2 in the other dtypes: convolution libraries may pick
  Winograd or FFT algorithms, whose rounding error is several times that of a direct sum
  (the float32 base tolerance is only 168 u₃₂; the others are about 8 u);
- sequences of roundings need no more: the half-precision base tolerances are about 8 u,
  and independent roundings add in quadrature (the VAE's ≈ 10 conv / GroupNorm / SiLU
  roundings give √10·u/√3 ≈ 1.8 u, a depthwise-separable pair 0.8 u), so the VAE and the
  depthwise-separable probes use the convolution scale;
- autocast: 2 (its inputs and weights are rounded to the dtype too: ≈ 0.8 u per GEMM);
- attention: 1 for the forward pass (its error is the rounding of the probabilities and of
  the output, ≈ 1.2 u, within the 8 u of the half-precision tolerances), 2 for gradients
  (dS and P are rounded to the dtype before the backward GEMMs, then the gradients). The
  attention matrix follows the same rule: its forward probes take 1, its backward probes and
  the core probes (which mix both directions) 2. Gradients whose reference is a cancelling
  sum of large terms (q, k and mask gradients of logits of ±1e4; the offset column of
  negrow rows) are judged finite-only, as ``nn_run`` explains, instead of loosening the scale.
"""

from __future__ import annotations

from typing import Any

from gpuprobe.worker.catalog import ProbeDef
from gpuprobe.worker.probes.nn import sdpa_matrix
from gpuprobe.worker.probes.ops.specs import SHORT, accumulation_scale, bound, tolerance_rule

#: Seconds one run of a probe typically takes on a warm machine, by the longest prefix of its
#: id listed (whole parts): the ``typical_s`` the catalog publishes for each of the
#: family's probes that sets none (lanes are sized by it; a probe no prefix matches counts
#: the engine's default, 0.1 s). Measured on the H200 host (torch 2.11: warm standard tier,
#: mean per probe of 18 runs with the other lanes beside it, leaving out a worker's first
#: probe, which also pays the device context; ``bench/typical-seconds.py`` and
#: bench/RESULTS.md "Lanes balanced by refreshed estimates"; the full tier's families from
#: its runs there); a whole id is listed where one probe takes several times its
#: sub-family's mean.
TYPICAL_SECONDS = {
    "nn.autocast": 0.137,
    "nn.conv2d": 0.227,
    "nn.conv2d.fp32.bwd": 0.542,
    "nn.conv_transpose2d": 0.123,
    "nn.sdpa": 0.089,
    "nn.sdpa.bf16.default.d128.s4096.causal": 1.006,
    "nn.sdpa.bf16.default.d64.s4096": 0.727,
    "nn.sdpa.bf16.efficient.d64.s1024.bwd": 0.531,
    "nn.sdpa.bf16.math.d64.s1024.bwd": 0.135,
    "nn.sdpa.fp16.default.d128.s4096.causal": 0.982,
    "nn.sdpa.matrix.bf16.default.core": 0.686,
    "nn.sdpa.matrix.fp16.default.core": 0.685,
    "nn.vae": 0.209,
}

_RUN = "gpuprobe.worker.probes.nn.run"

#: Convolution algorithm factor by rule dtype (Winograd / FFT error allowance).
CONV_ALGORITHM = {"float32": 4.0, "tf32": 2.0, "float16": 2.0, "bfloat16": 2.0}

#: conv2d cases: odd spatial sizes, 3×3 / 1×1 / strided 5×5 / channels_last / dilated.
CONV2D_CASES: list[dict[str, Any]] = [
    {"n": 2, "cin": 32, "h": 33, "w": 33, "cout": 48, "k": 3, "stride": 1, "pad": 1, "dil": 1},
    {"n": 2, "cin": 32, "h": 33, "w": 33, "cout": 48, "k": 1, "stride": 1, "pad": 0, "dil": 1},
    {"n": 2, "cin": 16, "h": 65, "w": 65, "cout": 32, "k": 5, "stride": 2, "pad": 2, "dil": 1},
    {"n": 1, "cin": 64, "h": 17, "w": 17, "cout": 64, "k": 3, "stride": 1, "pad": 1, "dil": 1, "channels_last": True},
    {"n": 2, "cin": 8, "h": 31, "w": 31, "cout": 16, "k": 3, "stride": 1, "pad": 2, "dil": 2},
]
#: Backward cases: small spatial sizes keep the weight gradient's sum (N·H_out·W_out terms)
#: short.
CONV2D_BWD_CASES: list[dict[str, Any]] = [
    {"n": 2, "cin": 32, "h": 17, "w": 17, "cout": 48, "k": 3, "stride": 1, "pad": 1, "dil": 1},
    {"n": 2, "cin": 16, "h": 33, "w": 33, "cout": 32, "k": 5, "stride": 2, "pad": 2, "dil": 1},
]
#: Depthwise-separable cases: depthwise k×k (groups = channels), then pointwise to cout.
DEPTHWISE_CASES: list[dict[str, Any]] = [
    {"n": 2, "cin": 64, "h": 33, "w": 33, "cout": 96, "k": 3, "stride": 1, "pad": 1},
    {"n": 2, "cin": 32, "h": 64, "w": 64, "cout": 48, "k": 5, "stride": 2, "pad": 2},
]
#: Transposed convolutions: stride-2 upsampling (k 4, and k 3 with output_padding 1), stride 1.
TRANSPOSED_CASES: list[dict[str, Any]] = [
    {"n": 2, "cin": 32, "h": 17, "w": 17, "cout": 16, "k": 4, "stride": 2, "pad": 1, "out_pad": 0},
    {"n": 2, "cin": 16, "h": 33, "w": 33, "cout": 8, "k": 3, "stride": 2, "pad": 1, "out_pad": 1},
    {"n": 1, "cin": 24, "h": 15, "w": 15, "cout": 24, "k": 3, "stride": 1, "pad": 1, "out_pad": 0},
]

#: SDPA head dims and sequence lengths by tier; batch × heads is 2 (1×2, or 2×1 with masks
#: that differ per batch element).
SDPA_BACKENDS = ("math", "flash", "efficient", "cudnn", "default")
QUICK_SEQ = 128
#: Every backend × dtype × case runs at this length; the float64 CPU reference is the cost,
#: and it grows with the square of the length.
STANDARD_SEQ = 1024
#: The length of the published bf16 attention reports (RKB-019): a few cases on the default
#: backend run at it too.
REPORTED_SEQ = 4096
#: Sequence length used when the device under test is the CPU (the metrics say so).
CPU_SEQ = 256
#: Full tier: one long sequence (2^16 + 1), compared on sampled query rows.
LONG_SEQ = (1 << 16) + 1

#: VAE image size (2 images, 3 channels) and its latent (4 channels, half the size).
VAE_IMAGE = 128


def _conv_k(case: dict[str, Any], kind: str) -> int:
    if kind == "depthwise":
        return max(case["k"] * case["k"], case["cin"])
    if kind == "conv_transpose2d":
        per_axis = -(-case["k"] // case["stride"])
        return case["cin"] * per_axis * per_axis
    return case["cin"] * case["k"] * case["k"]


def conv_scale(rule_dtype: str, k: int) -> float:
    """Tolerance scale of a convolution probe (see the module docstring)."""
    return accumulation_scale(rule_dtype, k) * CONV_ALGORITHM[rule_dtype]


def _compute(rule_dtype: str) -> str:
    return "float32" if rule_dtype == "tf32" else rule_dtype


def _probe(
    probe_id: str,
    tier: str,
    rule_dtype: str,
    scale: float,
    description: str,
    impl: str,
    params: dict[str, Any],
    **extra: Any,
) -> ProbeDef:
    # No placement: nn probes are shared like the operators', so that the planner cuts them
    # into the same pieces of equal estimated work (a side lane of their own was cut apart,
    # and on the H200 the standard tier's two nn pieces ended 1-3 s after the shared ones).
    return ProbeDef(
        id=probe_id,
        tier=tier,
        rule=tolerance_rule(rule_dtype, scale),
        description=description,
        impl=f"{_RUN}:{impl}",
        params={**params, "tolerance": bound(rule_dtype, scale), "rule_dtype": rule_dtype},
        **extra,
    )


def _conv(kind: str, rule_dtype: str, tier: str, *, backward: bool = False) -> ProbeDef:
    if kind == "conv2d":
        cases = CONV2D_BWD_CASES if backward else CONV2D_CASES
    else:
        cases = DEPTHWISE_CASES if kind == "depthwise" else TRANSPOSED_CASES
    k = max(_conv_k(c, kind) for c in cases)
    if backward:
        # Input gradient: cout·k² terms; weight gradient: n·h_out·w_out terms.
        k = max(
            k,
            max(c["cout"] * c["k"] * c["k"] for c in cases),
            max(c["n"] * (-(-c["h"] // c["stride"])) * (-(-c["w"] // c["stride"])) for c in cases),
        )
    scale = conv_scale(rule_dtype, k)
    name = {"conv2d": "nn.conv2d", "depthwise": "nn.conv2d.depthwise", "conv_transpose2d": "nn.conv_transpose2d"}[kind]
    suffix = ".bwd" if backward else ""
    what = {
        "conv2d": "F.conv2d (3x3, 1x1, strided 5x5, channels_last, dilated; odd sizes)",
        "depthwise": "depthwise-separable convolution (depthwise kxk with groups=C, then pointwise 1x1)",
        "conv_transpose2d": "F.conv_transpose2d (stride-2 upsampling with k 4 and k 3 + output_padding, stride 1)",
    }[kind]
    if backward:
        what += "; input and weight gradients"
    return _probe(
        f"{name}.{SHORT[rule_dtype]}{suffix}",
        tier,
        rule_dtype,
        scale,
        f"{what} in {SHORT[rule_dtype]} against a float64 CPU reference",
        "run_conv",
        {"kind": kind, "dtype": _compute(rule_dtype), "cases": cases, "backward": backward},
        timeout_s=120.0,
    )


def _sdpa(
    dtype: str,
    backend: str,
    head_dim: int,
    seq: int,
    tier: str,
    *,
    mask: str = "none",
    layout: str = "contiguous",
    backward: bool = False,
    sampled_rows: int = 0,
) -> ProbeDef:
    parts = [f"nn.sdpa.{SHORT[dtype]}.{backend}.d{head_dim}.s{seq}"]
    if mask != "none":
        parts.append(mask)
    if layout != "contiguous":
        parts.append(layout)
    if backward:
        parts.append("bwd")
    chosen = "chosen by PyTorch" if backend == "default" else f"forced to {backend}"
    what = f"scaled_dot_product_attention in {dtype}, backend {chosen}, head_dim {head_dim}, seq {seq}"
    what += {
        "none": "",
        "causal": ", causal",
        "padding": ", key padding of odd lengths",
        "allmasked": ", key padding plus query rows with every key masked (only rows with a key are compared)",
    }[mask]
    if layout == "noncontig":
        what += ", q/k/v strided views of one packed tensor"
    if backward:
        what += "; output and q/k/v gradients"
    if sampled_rows:
        what += f"; {sampled_rows} sampled query rows compared"
    return _probe(
        ".".join(parts),
        tier,
        dtype,
        2.0 if backward else 1.0,
        what + " against a float64 CPU reference",
        "run_sdpa",
        {
            "dtype": dtype,
            "backend": backend,
            "head_dim": head_dim,
            "seq": seq,
            "mask": mask,
            "layout": layout,
            "backward": backward,
            "sampled_rows": sampled_rows,
        },
        timeout_s=600.0 if tier == "full" else 180.0,
        isolated=tier == "full",
    )


def _sdpa_matrix(dtype: str, backend: str, tier: str, design: str, direction: str | None) -> ProbeDef:
    """One attention-matrix probe: the ``design``'s cases (``pairwise``: the ``direction``
    half; ``core``: both directions) on one backend. Scale 1 for forward cases, 2 when
    gradients are compared (the ``core`` probes mix both and take 2), as for ``nn.sdpa.*``.

    Not isolated, even in the full tier: consecutive probes differ only in the backend and
    share the float64 references of their cases, which a worker of their own would recompute;
    their largest device allocation (the long case) is about 100 MB."""
    cases = sdpa_matrix.probe_cases(design, direction, backend)
    backward = design == "core" or direction == "backward"
    suffix = ".core" if design == "core" else ".bwd" if backward else ""
    chosen = "chosen by PyTorch" if backend == "default" else f"forced to {backend}"
    what = (
        f"scaled_dot_product_attention in {dtype}, backend {chosen}: {len(cases)} cases "
        + ("(the core subset, forward and backward)" if design == "core" else f"({direction}, pairwise design)")
        + " over masks, odd and unequal lengths, packed/expanded/grouped-query layouts, "
        "adversarial logits and fully masked rows, against a float64 CPU reference"
    )
    return _probe(
        f"nn.sdpa.matrix.{SHORT[dtype]}.{backend}{suffix}",
        tier,
        dtype,
        2.0 if backward else 1.0,
        what,
        "run_sdpa_matrix",
        {"dtype": dtype, "backend": backend, "design": design, "direction": direction},
        timeout_s=300.0 if tier == "full" else 120.0,
    )


def specs() -> list[ProbeDef]:
    """The nn probes, quick tier first."""
    probes: list[ProbeDef] = []
    add = probes.append

    # ---------------------------------------------------------------- quick
    add(_conv("conv2d", "bfloat16", "quick"))
    add(_sdpa("bfloat16", "default", 64, QUICK_SEQ, "quick"))

    # ---------------------------------------------------------------- standard: convolutions
    for rule_dtype in ("float32", "tf32", "float16"):
        add(_conv("conv2d", rule_dtype, "standard"))
    for rule_dtype in ("float32", "float16", "bfloat16"):
        add(_conv("conv2d", rule_dtype, "standard", backward=True))
        add(_conv("depthwise", rule_dtype, "standard"))
        add(_conv("conv_transpose2d", rule_dtype, "standard"))

    # ---------------------------------------------------------------- standard: VAE
    for part in ("encode", "decode"):
        for rule_dtype in ("float32", "float16", "bfloat16"):
            scale = conv_scale(rule_dtype, 64 * 9)
            add(
                _probe(
                    f"nn.vae.{part}.{SHORT[rule_dtype]}",
                    "standard",
                    rule_dtype,
                    scale,
                    (
                        f"VAE-like {'encoder' if part == 'encode' else 'decoder'} (conv/GroupNorm/SiLU, "
                        f"seeded weights) in {SHORT[rule_dtype]} on 2 images of {VAE_IMAGE}x{VAE_IMAGE} "
                        "against a float64 CPU reference"
                    ),
                    "run_vae",
                    {"part": part, "dtype": _compute(rule_dtype), "image": VAE_IMAGE},
                    timeout_s=120.0,
                )
            )

    # ---------------------------------------------------------------- standard: attention
    # Backends innermost: consecutive probes share one input set and its float64 reference.
    for dtype in ("bfloat16", "float16"):
        cases: list[dict[str, Any]] = [{"head_dim": d} for d in (32, 64, 128)]
        cases += [{"head_dim": d, "mask": "causal"} for d in (64, 128)]
        cases += [{"head_dim": 64, "mask": "padding"}, {"head_dim": 64, "mask": "allmasked"}]
        cases += [{"head_dim": 64, "backward": True}]
        cases += [{"head_dim": d, "mask": "causal", "backward": True} for d in (64, 128)]
        if dtype == "bfloat16":
            cases.append({"head_dim": 64, "layout": "noncontig"})
        for case in cases:
            for backend in SDPA_BACKENDS:
                add(
                    _sdpa(
                        dtype,
                        backend,
                        case["head_dim"],
                        STANDARD_SEQ,
                        "standard",
                        **{k: v for k, v in case.items() if k != "head_dim"},
                    )
                )

    # The RKB-019 repro length, on the backend PyTorch picks by itself.
    for dtype, head_dim, mask in (("bfloat16", 128, "causal"), ("float16", 128, "causal"), ("bfloat16", 64, None)):
        extra = {"mask": mask} if mask else {}
        add(_sdpa(dtype, "default", head_dim, REPORTED_SEQ, "standard", **extra))

    # ---------------------------------------------------------------- standard: attention matrix
    # The core subset on the backend PyTorch picks (sdpa_matrix.CORE_CASES).
    for dtype in ("bfloat16", "float16"):
        add(_sdpa_matrix(dtype, "default", "standard", "core", None))

    # ---------------------------------------------------------------- standard: autocast
    for dtype in ("bfloat16", "float16"):
        add(
            _probe(
                f"nn.autocast.{SHORT[dtype]}",
                "standard",
                dtype,
                2.0,
                (
                    f"a conv + SiLU + pool + linear + GELU + linear model run under torch.autocast({dtype}) "
                    "against the float64 result of its float32 weights"
                ),
                "run_autocast",
                {"dtype": dtype},
                timeout_s=60.0,
            )
        )

    # ---------------------------------------------------------------- full
    add(_sdpa("bfloat16", "default", 128, LONG_SEQ, "full", mask="causal", sampled_rows=512))
    # The attention matrix's pairwise design; backends innermost, so that consecutive probes
    # share the references of their cases.
    for dtype in ("bfloat16", "float16"):
        for direction in sdpa_matrix.PROBE_DIRECTIONS:
            for backend in SDPA_BACKENDS:
                add(_sdpa_matrix(dtype, backend, "full", "pairwise", direction))
    return probes
