"""Ops family catalog: PyTorch operations on the device under test against trusted references.

Id grammar: ``ops.<group>.<op>.<dtype>[.<variant>]`` and ``ops.<gemm>.<dtype>[.<variant>]``

- reductions: ``ops.reduce.<sum|mean|amax>.<dtype>``, ``ops.reduce.<all|any>.bool[.dim|.huge]``
  (RKB-011: boolean reductions with known inputs), ``ops.reduce.sum.fp32.rows1024`` (quick);
- elementwise: ``ops.elementwise.<add|sub|mul|div|exp|where|special>.<dtype>`` (``special``:
  NaN/Inf propagation and overflow), ``ops.elementwise.add.fp16.huge``;
- layout: ``ops.layout.<dtype>`` (view, reshape, permute, transpose, expand, flip,
  contiguous);
- GEMMs: ``ops.<matmul|addmm|bmm|linear>.<fp32|tf32|fp16|bf16>`` (``matmul`` is
  ``torch.mm``), variants ``large_m`` (M > 2^19, RKB-014), ``large_n`` (N ≈ 9.5 M, RKB-015),
  ``2gib`` (an output past 2 GiB, RKB-016);
- sentinels: ``ops.sentinel.<elementwise|matmul|reduce>.<dtype>``: outputs prefilled with a
  canary through ``out=`` must be overwritten.

dtypes: ``fp32`` (TF32 off), ``tf32`` (float32 with ``torch.backends.cuda.matmul.allow_tf32``
and ``torch.backends.cudnn.allow_tf32`` on), ``fp16``, ``bf16``, ``int64``, ``bool``.

Rules: ``tolerance`` for math (normwise relative error against a float64 CPU reference, the
dtype's tolerance times a scale, see ``docs/probes.md``), ``bit_exact`` for selections and
data movement (``amax``, ``where``, layout, boolean reductions, float16 addition).
"""

from __future__ import annotations

import math
from typing import Any

from gpuprobe.worker.catalog import BIT_EXACT, ProbeDef
from gpuprobe.worker.tolerances import DTYPE_TOLERANCE

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
    "ops.addmm": 0.077,
    "ops.bmm": 0.154,
    "ops.elementwise": 0.084,
    "ops.layout": 0.034,
    "ops.linear": 0.133,
    "ops.matmul": 0.261,
    "ops.matmul.fp32.large_n": 1.280,
    "ops.reduce": 0.199,
    "ops.sentinel": 0.075,
}

_RUN = "gpuprobe.worker.probes.ops.run"

# ``DTYPE_TOLERANCE``: the judge's base tolerances by rule dtype (docs/probes.md, "Judging"),
# from ``gpuprobe/worker/tolerances.json``, the table the Rust judge embeds.

#: Id part by dtype name.
SHORT = {"float32": "fp32", "tf32": "tf32", "float16": "fp16", "bfloat16": "bf16", "int64": "int64", "bool": "bool"}

FLOATS = ("float32", "float16", "bfloat16")

#: GEMM shapes (M, K, N; batch for bmm/linear): odd sizes, tall and wide, long K (split-K
#: paths), GEMV-like, tiny, and a square-ish 1024 case (GPU only: on the CPU it only costs time).
GEMM_SHAPES: list[dict[str, int]] = [
    {"m": 1025, "k": 64, "n": 255},
    {"m": 257, "k": 129, "n": 65},
    {"m": 4097, "k": 64, "n": 64},
    {"m": 64, "k": 512, "n": 64},
    {"m": 1, "k": 512, "n": 1024},
    {"m": 8, "k": 8, "n": 8},
    {"m": 1024, "k": 256, "n": 1024, "gpu_only": 1},
]

#: RKB-014: M just past 2^19 (≡ 1 mod 32); N = 128 keeps the output (302 MB in float32) well
#: apart from the large-N case (152 MB), so a simulated fault can tell them apart by size.
LARGE_M = (1 << 19) + (1 << 16) + 1
#: RKB-015: the reported shape m = 4, k = 4, n = 9530399.
LARGE_N = 9530399
#: RKB-016: a bfloat16 output of more than 2 GiB with M % 256 != 0.
GIB2_M = (1 << 20) + (1 << 10) + 1
GIB2_N = 1024
#: More than 2^31 elements (index-width boundary), odd remainder.
HUGE = (1 << 31) + (1 << 20) + 1


def gemm_scale(k: int) -> float:
    """Tolerance scale for k-term sums (mirrors ``ops_run.gemm_scale``; kept torch-free)."""
    return max(1.0, math.sqrt(k / 256.0))


def accumulation_scale(rule_dtype: str, k: int) -> float:
    """The scale a k-term float32 accumulation needs under ``rule_dtype``'s tolerance. Only
    plain float32 needs one: its base tolerance is 168 units of 2^-24, and the accumulation
    error grows like √k·2^-24/2; the half-precision and TF32 tolerances (about 8 units of their
    own roundoff) are orders of magnitude above any float32 accumulation error, and their own
    roundings (inputs for TF32, the output and split-K partial sums for fp16/bf16) do not grow
    with k."""
    return gemm_scale(k) if rule_dtype == "float32" else 1.0


def tolerance_rule(dtype: str, scale: float = 1.0) -> dict[str, Any]:
    """The tolerance rule for results computed in ``dtype`` (``tf32`` for TF32 float32)."""
    return {"kind": "tolerance", "dtype": dtype, "scale": round(float(scale), 6)}


def bound(dtype: str, scale: float = 1.0) -> float:
    """The bound the judge applies: the dtype's tolerance times the scale."""
    return DTYPE_TOLERANCE[dtype] * round(float(scale), 6)


def _math(
    probe_id: str,
    tier: str,
    dtype: str,
    scale: float,
    description: str,
    impl: str,
    params: dict[str, Any],
    **extra: Any,
) -> ProbeDef:
    return ProbeDef(
        id=probe_id,
        tier=tier,
        rule=tolerance_rule(dtype, scale),
        description=description,
        impl=f"{_RUN}:{impl}",
        params={**params, "tolerance": bound(dtype, scale)},
        **extra,
    )


def _gemm(method: str, rule_dtype: str, tier: str) -> ProbeDef:
    compute = "float32" if rule_dtype == "tf32" else rule_dtype
    shapes = [dict(s, batch=3) if method in ("bmm", "linear") else dict(s) for s in GEMM_SHAPES]
    scale = accumulation_scale(rule_dtype, max(s["k"] for s in shapes))
    call = {
        "matmul": "torch.mm(a, b)",
        "addmm": "torch.addmm(bias, a, b, beta=0.5, alpha=2)",
        "bmm": "torch.bmm(a, b) with batch 3",
        "linear": "F.linear(x, w, bias) with a 3-D input",
    }[method]
    return _math(
        f"ops.{method}.{SHORT[rule_dtype]}",
        tier,
        rule_dtype,
        scale,
        f"{call} in {SHORT[rule_dtype]} over {len(shapes)} shapes (odd, tall, long K, GEMV-like) against a float64 CPU reference",
        "run_matmul",
        {
            "method": "mm" if method == "matmul" else method,
            "dtype": compute,
            "rule_dtype": rule_dtype,
            "shapes": shapes,
        },
        timeout_s=120.0,
    )


def _large(
    method: str,
    rule_dtype: str,
    variant: str,
    m: int,
    k: int,
    n: int,
    *,
    canary: bool = False,
    tier: str = "full",
    cpu_n: int | None = None,
) -> ProbeDef:
    compute = "float32" if rule_dtype == "tf32" else rule_dtype
    itemsize = 4 if compute == "float32" else 2
    out_bytes = m * n * itemsize
    call = {"matmul": "torch.mm", "addmm": "torch.addmm", "bmm": "torch.bmm", "linear": "F.linear"}[method]
    what = f"{call} of {m}x{k} by {k}x{n} in {SHORT[rule_dtype]} (output {out_bytes / 2**20:.0f} MiB)"
    if canary:
        what += " into a canary-filled out= buffer (rows never stored show as unchanged)"
    return _math(
        f"ops.{method}.{SHORT[rule_dtype]}.{variant}",
        tier,
        rule_dtype,
        accumulation_scale(rule_dtype, k),
        what + "; every element against a float64 CPU reference",
        "run_matmul_large",
        {
            "method": "mm" if method == "matmul" else method,
            "dtype": compute,
            "rule_dtype": rule_dtype,
            "m": m,
            "k": k,
            "n": n,
            "canary": canary,
            "cpu_n": cpu_n,
        },
        timeout_s=600.0 if tier == "full" else 180.0,
        isolated=tier == "full",
    )


def specs() -> list[ProbeDef]:
    """The ops probes, quick tier first."""
    probes: list[ProbeDef] = []
    add = probes.append

    # ---------------------------------------------------------------- quick
    for method in ("all", "any"):
        add(
            ProbeDef(
                id=f"ops.reduce.{method}.bool",
                tier="quick",
                rule=BIT_EXACT,
                description=(
                    f"tensor.{method}() of bool tensors with known contents (all False, all True, one "
                    "element flipped first/middle/last; sizes 1 to 2^20+1 around 32/128/1024 "
                    "boundaries; the RKB-011 [[False, False]] case)"
                ),
                impl=f"{_RUN}:run_bool_reduce",
                params={"method": method, "variant": "known"},
                timeout_s=60.0,
            )
        )
    add(
        _math(
            "ops.reduce.sum.fp32.rows1024",
            "quick",
            "float32",
            1.0,
            "sum over rows of 1024x4097 and over dim 0 of 4097x1024, and of 2^20+1 elements, against float64",
            "run_reduce",
            {"method": "sum", "dtype": "float32", "variant": "quick"},
            timeout_s=60.0,
        )
    )
    add(_gemm("matmul", "float16", "quick"))
    add(_gemm("matmul", "bfloat16", "quick"))
    add(
        _math(
            "ops.sentinel.elementwise.fp32",
            "quick",
            "float32",
            1.0,
            "add/mul/exp/where writing into canary-filled out= buffers of 2^20+1 float32: a kernel "
            "that silently does nothing leaves the canary (unchanged output)",
            "run_sentinel",
            {"kind": "elementwise", "dtype": "float32"},
            timeout_s=60.0,
        )
    )

    # ---------------------------------------------------------------- standard: reductions
    for method in ("all", "any"):
        add(
            ProbeDef(
                id=f"ops.reduce.{method}.bool.dim",
                tier="standard",
                rule=BIT_EXACT,
                description=(
                    f"tensor.{method}(dim) over rows of 1025x257, 1024x4097 and 8x1025x33 bool tensors "
                    "(rows all True, all False or with one element flipped), keepdim, transposed input"
                ),
                impl=f"{_RUN}:run_bool_reduce",
                params={"method": method, "variant": "dim"},
                timeout_s=60.0,
            )
        )
    for method in ("sum", "mean"):
        for dtype in FLOATS:
            add(
                _math(
                    f"ops.reduce.{method}.{SHORT[dtype]}",
                    "standard",
                    dtype,
                    1.0,
                    f"{method} in {dtype} over rows >= 1024, row lengths 2^k+1 and 2^k+64, dim 0, two dims of a "
                    "3-D tensor, a transposed input and long 1-D reductions, against float64",
                    "run_reduce",
                    {"method": method, "dtype": dtype, "variant": "standard"},
                    timeout_s=120.0,
                )
            )
    for dtype in FLOATS:
        add(
            ProbeDef(
                id=f"ops.reduce.amax.{SHORT[dtype]}",
                tier="standard",
                rule=BIT_EXACT,
                description=f"amax in {dtype} over rows and columns and 2^20+1 elements, NaN rows propagating; bit-exact",
                impl=f"{_RUN}:run_amax",
                params={"dtype": dtype},
                timeout_s=60.0,
            )
        )

    # ---------------------------------------------------------------- standard: elementwise
    for method in ("add", "sub", "mul", "div", "exp"):
        for dtype in FLOATS:
            add(
                _math(
                    f"ops.elementwise.{method}.{SHORT[dtype]}",
                    "standard",
                    dtype,
                    1.0,
                    f"{method} in {dtype} over 2^20+1 and 2^16+64 elements, transposed, strided, broadcast "
                    "(stride-0) and scalar operands; float64 reference, blocks of 1024 elements, ulps reported",
                    "run_elementwise",
                    {"method": method, "dtype": dtype},
                    timeout_s=60.0,
                )
            )
    for dtype in FLOATS:
        add(
            ProbeDef(
                id=f"ops.elementwise.where.{SHORT[dtype]}",
                tier="standard",
                rule=BIT_EXACT,
                description=f"torch.where in {dtype} with NaN/Inf in the branch not taken, broadcast and scalar operands; bit-exact",
                impl=f"{_RUN}:run_where",
                params={"dtype": dtype},
                timeout_s=60.0,
            )
        )
        add(
            _math(
                f"ops.elementwise.special.{SHORT[dtype]}",
                "standard",
                dtype,
                1.0,
                f"NaN/Inf propagation and overflow in {dtype}: add/sub/mul/div/maximum/minimum over every pair of "
                "NaN, +-Inf, +-0, +-max, +-smallest normal and overflowing values, and exp",
                "run_special",
                {"dtype": dtype},
                timeout_s=60.0,
            )
        )

    # ---------------------------------------------------------------- standard: layout
    for dtype in ("float32", "float16", "bfloat16", "int64", "bool"):
        add(
            ProbeDef(
                id=f"ops.layout.{SHORT[dtype]}",
                tier="standard",
                rule=BIT_EXACT,
                description=(
                    f"view/reshape/permute/transpose/expand/flip/contiguous of {dtype} tensors of odd shape "
                    "(16x33x65) and 2^20 elements at a one-element offset, bit-exact"
                ),
                impl=f"{_RUN}:run_layout",
                params={"dtype": dtype},
                timeout_s=60.0,
            )
        )

    # ---------------------------------------------------------------- standard: GEMMs
    add(_gemm("matmul", "float32", "standard"))
    add(_gemm("matmul", "tf32", "standard"))
    for method in ("addmm", "bmm", "linear"):
        for rule_dtype in ("float32", "tf32", "float16", "bfloat16"):
            add(_gemm(method, rule_dtype, "standard"))
    add(_large("matmul", "float32", "large_n", 4, 4, LARGE_N, tier="standard", cpu_n=(1 << 20) + 1))

    # ---------------------------------------------------------------- standard: sentinels
    for dtype in ("float16", "bfloat16"):
        add(
            _math(
                f"ops.sentinel.elementwise.{SHORT[dtype]}",
                "standard",
                dtype,
                1.0,
                f"add/mul/exp/where into canary-filled out= buffers in {dtype}",
                "run_sentinel",
                {"kind": "elementwise", "dtype": dtype},
                timeout_s=60.0,
            )
        )
    for kind, what in (("matmul", "mm/addmm/bmm"), ("reduce", "sum/mean/amax over rows")):
        for dtype in FLOATS:
            k = 96 if kind == "matmul" else 1
            add(
                _math(
                    f"ops.sentinel.{kind}.{SHORT[dtype]}",
                    "standard",
                    dtype,
                    accumulation_scale(dtype, k),
                    f"{what} into canary-filled out= buffers in {dtype}: untouched canaries mean the kernel did nothing",
                    "run_sentinel",
                    {"kind": kind, "dtype": dtype},
                    timeout_s=60.0,
                )
            )

    # ---------------------------------------------------------------- full: large cases
    for method in ("matmul", "addmm", "bmm", "linear"):
        add(_large(method, "float32", "large_m", LARGE_M, 64, 128))
    add(_large("matmul", "tf32", "large_m", LARGE_M, 64, 128))
    add(_large("matmul", "float16", "large_m", LARGE_M, 64, 128))
    add(_large("matmul", "bfloat16", "large_m", LARGE_M, 64, 128))
    add(_large("matmul", "bfloat16", "2gib", GIB2_M, 64, GIB2_N, canary=True))
    add(
        _math(
            "ops.reduce.sum.fp16.huge",
            "full",
            "float16",
            1.0,
            "row sums of a 2097155x1025 float16 tensor (more than 2^31 elements) against float64",
            "run_sum_huge",
            {"dtype": "float16", "rows": (1 << 21) + 3, "cols": 1025},
            timeout_s=600.0,
            isolated=True,
        )
    )
    for method in ("all", "any"):
        add(
            ProbeDef(
                id=f"ops.reduce.{method}.bool.huge",
                tier="full",
                rule=BIT_EXACT,
                description=(
                    f"tensor.{method}() of {HUGE} bools (more than 2^31), uniform and with one element "
                    "flipped past the 2^31 index boundary"
                ),
                impl=f"{_RUN}:run_bool_reduce_huge",
                params={"method": method, "numel": HUGE, "flips": [(1 << 31) + 7, HUGE - 1]},
                timeout_s=600.0,
                isolated=True,
            )
        )
    add(
        ProbeDef(
            id="ops.elementwise.add.fp16.huge",
            tier="full",
            rule=BIT_EXACT,
            description=(
                f"a + b over {HUGE} float16 elements (more than 2^31) of non-periodic data, bit-exact "
                "(float16 addition is correctly rounded)"
            ),
            impl=f"{_RUN}:run_add_huge",
            params={"dtype": "float16", "numel": HUGE},
            timeout_s=600.0,
            isolated=True,
        )
    )
    return probes
