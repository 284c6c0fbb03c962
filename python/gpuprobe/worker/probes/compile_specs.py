"""compile family catalogue: PyTorch's operator database through ``torch.compile``
(Inductor) against eager on the same device and float64 on the CPU.

Id grammar: ``compile.<program>.<dtype>``. A program is a set of database entries compiled
as one function (``compile_run``): ``standard`` names the standard tier's fixed set (one or
two entries of each kind of kernel Inductor generates), ``pNN`` one of ``CHUNKS`` programs
that together hold every entry of the database (an entry's program is a hash of its key, so
it does not move when the database grows). The chunks are static ids; which entries each
holds depends on the installed torch, read when the probe runs.

Every probe runs in a side lane of its own family (its time goes to tracing and code
generation on the host's cores, while the device idles).
"""

from __future__ import annotations

import zlib
from typing import Any

from gpuprobe.worker.catalog import ProbeDef

_RUN = "gpuprobe.worker.probes.compile_run"
SWEEP_RULE: dict[str, Any] = {"kind": "sweep"}

#: Programs the database is split into. Each compiles in a few passes; about 30 entries a
#: program keeps one probe's compiles within its time limit on a busy host.
CHUNKS = 24
#: Dtypes of the full tier: the floating dtypes training runs in (Inductor computes half
#: precision in float32 registers, its own code path), the integer and index kernels, and
#: booleans (masks and comparisons).
FULL_DTYPES = ("fp32", "bf16", "fp16", "i64", "bool")
#: Passes of the full tier's programs in a dtype (every pass where not named). float16 takes
#: Inductor's half-precision path that bfloat16's programs already drive in every pass (both
#: compute in float32 registers); its own arithmetic is judged in the passes that compile
#: new code for it (and the gradient seeds and value classes, whose half-precision
#: arithmetic is its own): the on-disk cache makes the others cost little, but an empty
#: cache pays about 40 s a program (bench/RESULTS.md).
#: These are the passes a dtype *may* run: the full tier spreads them over its dtypes
#: (``COVERING``), and a program runs its dtype's share.
FULL_PASSES: dict[str, tuple[str, ...]] = {
    "fp16": ("compiled", "dynamic", "sum_grad", "fused", "values"),
    # No gradients in an integer dtype: every pass but the gradient seed's.
    "i64": ("compiled", "dynamic", "noncontig", "channels_last", "values", "out", "out_noncontig", "inplace", "inplace_view", "inplace_alias"),
    # Boolean inputs: Inductor's own loads, stores and promotions of bool (a comparison's
    # result, a mask, a cumulative sum of bools into another dtype); no value classes (two
    # values) and no gradients.
    "bool": ("compiled", "dynamic", "noncontig", "out", "inplace"),
}
#: Passes every program runs in every dtype of the full tier: the compiled call, forward and
#: backward, the baseline of each entry in each dtype. Every other pass runs in ONE of the
#: dtypes that may run it, a different one from program to program (``compile_run.covering_passes``):
#: the product of 24 programs × 4 dtypes × 12 passes was 936 compiles, which on an empty
#: Inductor cache took the H200's 16 cores past the full tier's ten minutes by itself
#: (bench/RESULTS.md); the covering compiles 24 × (5 + 12) = 408 with booleans and ``inplace_output`` and still
#: drives every entry in every pass and in every dtype, and every pass in every dtype (on
#: other programs). The run's seed chooses the placement (``--seed`` moves every pass to
#: another dtype), so a run is reproducible from its seed and a few seeds cover the whole
#: product.
COVERING_EVERY_DTYPE: tuple[str, ...] = ("compiled",)
#: The full family spreads over one lane per two host cores, at most ``MAX_LANES``
#: (``lane_count``): compiling is host work, and on the H200 eight processes compiled 72
#: programs in 420 s on an empty cache (bench/RESULTS.md); four would take twice that.
MAX_LANES = 8
#: The standard tier's program: one entry of each kind of kernel Inductor generates:
#: pointwise, a reduction and a Welford variance, a scan, softmax and layer norm (persistent
#: reductions), gather and index_add (indexing and atomics), pooling, a matrix product
#: (a template or a library call). Forward and backward, static shapes: the standard tier's
#: budget holds one pass of about ten entries (the full tier runs every entry and pass).
STANDARD_KEYS = (
    "add",
    "sum",
    "var_mean",
    "cumsum",
    "softmax",
    "nn.functional.layer_norm",
    "gather",
    "index_add",
    "nn.functional.avg_pool2d",
    "mm",
)
STANDARD_DTYPES = ("fp32",)
#: Passes of the standard program (the full tier runs every pass).
STANDARD_PASSES = ("compiled",)
TIMEOUT_S = 420.0

#: Entries not compiled, by name, and why. Random values differ between eager and compiled
#: code by design (Inductor has its own Philox streams), so random ops would be judged by
#: structure only: that is the sweep's job; compiling them costs time and judges nothing.
_RANDOM_REASON = "random values: compiled and eager draw different streams by design"


def chunk_of(key: str) -> int:
    """The program (0 .. CHUNKS-1) that holds the entry ``key``."""
    return zlib.crc32(key.encode()) % CHUNKS


def exclusion(info: Any, dtype_name: str) -> str | None:
    """Why an entry is not compiled in ``dtype_name``, or None."""
    from gpuprobe.worker.probes import sweep_db

    if sweep_db.oracle_for(info, dtype_name) != "value":
        return _RANDOM_REASON if sweep_db.is_random(info.name) else "no value oracle (uninitialized or non-deterministic output)"
    if sweep_db.dtype_kind(dtype_name) == "complex":
        return "complex dtypes are not compiled (Inductor falls back to eager for most complex kernels)"
    name = str(getattr(info, "name", ""))
    if name.startswith("sparse.") or "to_sparse" in name:
        return "sparse layouts are not compiled"
    return None


def probe(program: str, dtype: str, tier: str, lane: str) -> ProbeDef:
    params: dict[str, Any] = {"dtype": dtype}
    if program == "standard":
        params["keys"] = list(STANDARD_KEYS)
        params["passes"] = list(STANDARD_PASSES)
        what = "the standard program (one or two entries of each kind of kernel Inductor generates)"
    else:
        params["chunk"] = int(program[1:])
        # Which of the dtype's passes run is chosen when the probe runs, from the run's seed
        # (``compile_run.covering_passes``): each pass in one dtype per program.
        params["covering"] = True
        what = f"program {program} of the operator database (1/{CHUNKS} of its entries, by a hash of the key)"
    return ProbeDef(
        f"compile.{program}.{dtype}",
        tier,
        SWEEP_RULE,
        f"{what} in {dtype} compiled by torch.compile (Inductor): static and dynamic shapes, forward and backward "
        "(random and .sum() gradient seeds), value classes and Python scalars at the dtype's edges, non-contiguous and "
        "channels_last inputs, out= and in-place (into views with gaps too), against eager on the device and float64",
        f"{_RUN}:run_program",
        params,
        timeout_s=TIMEOUT_S,
        placement="side",
        lane=lane,
    )


def lane_count() -> int:
    """How many side lanes the full tier's programs spread over on this host."""
    import os

    return max(1, min(MAX_LANES, (os.cpu_count() or 1) // 2))


def specs() -> list[ProbeDef]:
    lanes = lane_count()
    out = [probe("standard", dtype, "standard", "compile-1") for dtype in STANDARD_DTYPES]
    index = 0
    for dtype in FULL_DTYPES:
        for chunk in range(CHUNKS):
            out.append(probe(f"p{chunk:02d}", dtype, "full", f"compile-{index % lanes + 1}"))
            index += 1
    return out
