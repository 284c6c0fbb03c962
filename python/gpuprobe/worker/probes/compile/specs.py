"""compile family catalog: PyTorch's operator database through ``torch.compile``
(Inductor) against eager on the same device and float64 on the CPU.

Id grammar: ``compile.<program>.<dtype>``. A program is a set of database entries compiled
as one function (``compile_run``): ``standard`` names the standard tier's fixed set (one or
two entries of each kind of kernel Inductor generates), ``pNN`` one of ``CHUNKS`` programs
that together hold every entry of the database (an entry's program is a hash of its key, so
it does not move when the database grows). The chunks are static ids; which entries each
holds depends on the installed torch, read when the probe runs.

Every probe runs in a side lane of its own family (its time goes to tracing and code
generation on the host's cores, while the device idles). The full tier's programs are
placed on those lanes by a measured weight per chunk (``CHUNK_WEIGHTS``, ``lane_plan``):
every dtype of a chunk in one lane, the chunks balanced over the lanes.
"""

from __future__ import annotations

import statistics
import zlib
from typing import Any

from gpuprobe.worker.catalog import ProbeDef

#: Seconds one run of a probe typically takes on a warm machine, by the longest prefix of its
#: id listed (whole parts): the ``typical_s`` the catalog publishes for each of the
#: family's probes that sets none (lanes are sized by it; a probe no prefix matches counts
#: the engine's default, 0.1 s). Measured on the H200 host (torch 2.11: warm standard tier,
#: mean per probe of three runs with the other lanes beside it, bench/RESULTS.md "The
#: standard tier's lanes"; the full tier's families from its runs there); a whole id is
#: listed where one probe takes several times its sub-family's mean.
TYPICAL_SECONDS = {
    # A compiled program of the database on a filled Inductor cache: about a quarter of
    # its time on an empty one. The full tier's programs run the covering of passes over
    # dtypes (15 compiles a program's four dtypes, not 39): on the H200, under the whole
    # full tier's load on an empty cache, a float32 program with every pass took
    # 130-194 s and a bfloat16 one 48-100 s (bench/RESULTS.md); their share of the
    # covering, about 30 s.
    "compile": 8.000,
    "compile.standard": 6.495,
}

_RUN = "gpuprobe.worker.probes.compile.run"
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
#: A lane runs its probes one after another, so the heaviest lane ends the family: the
#: chunks are placed by weight (``lane_plan``), not by index.
MAX_LANES = 8
#: Seconds each chunk's programs took, summed over their five dtypes, under the covering of
#: the default seed (H200, empty Inductor cache, the whole full tier's load: bench/RESULTS.md,
#: "Ambient settings under compile, …", call B; the three chunks whose last dtypes did not
#: land count twice their seconds on the filled cache of call C). The covering puts a
#: chunk's expensive passes into float32 on some chunks and not on others, so its cost is
#: its covering's, not its entries' (each chunk's seconds with every pass on predicted it
#: badly: chunk 7 took 336 s against 169, chunk 5 68 s against 144); every dtype of a chunk
#: shares a lane, so the weight is the sum. Another ``--seed`` moves passes between dtypes
#: and chunks; the weights then place less well, nothing more. The weights only place
#: programs on lanes: every program runs whatever its weight, and a chunk missing here (the
#: database split finer) counts the table's median.
CHUNK_WEIGHTS: dict[int, float] = {
    0: 104.0, 1: 224.0, 2: 276.0, 3: 247.0, 4: 195.0, 5: 68.0, 6: 263.0, 7: 336.0,
    8: 104.0, 9: 80.0, 10: 159.0, 11: 97.0, 12: 151.0, 13: 132.0, 14: 259.0, 15: 126.0,
    16: 268.0, 17: 181.0, 18: 304.0, 19: 146.0, 20: 56.0, 21: 193.0, 22: 162.0, 23: 188.0,
}  # fmt: skip
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
#: ``compile.ambient``: nine small compiles, about 20 s on the CPU's C++ backend warm.
AMBIENT_TIMEOUT_S = 300.0

#: Entries not compiled, by name, and why. Random values differ between eager and compiled
#: code by design (Inductor has its own Philox streams), so random ops would be judged by
#: structure only: that is the sweep's job; compiling them costs time and judges nothing.
_RANDOM_REASON = "random values: compiled and eager draw different streams by design"


def chunk_of(key: str) -> int:
    """The program (0 .. CHUNKS-1) that holds the entry ``key``."""
    return zlib.crc32(key.encode()) % CHUNKS


def exclusion(info: Any, dtype_name: str) -> str | None:
    """Why an entry is not compiled in ``dtype_name``, or None."""
    from gpuprobe.worker.probes.sweep import db as sweep_db

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


def chunk_weight(chunk: int) -> float:
    """The weight that places ``chunk``'s programs: its measured seconds, else the median."""
    found = CHUNK_WEIGHTS.get(chunk)
    return found if found is not None else float(statistics.median(CHUNK_WEIGHTS.values()))


def heaviest_first() -> list[int]:
    """Every chunk, heaviest first (ties by chunk number)."""
    return sorted(range(CHUNKS), key=lambda chunk: (-chunk_weight(chunk), chunk))


def lane_plan(lanes: int) -> dict[int, int]:
    """The lane (1 .. ``lanes``) of each chunk's programs, every dtype of a chunk in one lane.

    Longest processing time first: each chunk, heaviest first, goes to the lane with the
    least weight so far (ties by lane number). The heaviest lane's total then exceeds the
    lightest's by at most the last chunk it took (that lane was the lightest then), and
    the placement depends only on the lane count: the same on every run of a host."""
    loads = [0.0] * max(1, lanes)
    plan: dict[int, int] = {}
    for chunk in heaviest_first():
        lightest = min(range(len(loads)), key=lambda lane: (loads[lane], lane))
        plan[chunk] = lightest + 1
        loads[lightest] += chunk_weight(chunk)
    return plan


def specs() -> list[ProbeDef]:
    """The standard program in ``compile-1``; the full tier's programs on the lanes of
    ``lane_plan``, listed dtype by dtype in ``FULL_DTYPES`` order (the costly float32
    programs first, booleans last, so no lane ends on an expensive program while the
    others idle) and, within a dtype, heaviest chunk first. A lane runs its probes in
    catalog order, so each lane keeps that order."""
    plan = lane_plan(lane_count())
    out = [probe("standard", dtype, "standard", "compile-1") for dtype in STANDARD_DTYPES]
    order = heaviest_first()
    for dtype in FULL_DTYPES:
        for chunk in order:
            out.append(probe(f"p{chunk:02d}", dtype, "full", f"compile-{plan[chunk]}"))
    out.append(ambient_probe())
    return out


def ambient_probe() -> ProbeDef:
    """``compile.ambient``: one training step compiled again under each process-wide setting
    (autocast dtype, grad mode, TF32, default dtype) on the same caches
    (``compile_ambient``). A lane of its own: its compiles are few and small, and none of
    the programs' lanes should wait for them."""
    return ProbeDef(
        "compile.ambient",
        "full",
        SWEEP_RULE,
        "a small training step (conv2d, linear, layer norm, GELU, log-softmax, a tensor created inside) compiled by "
        "torch.compile under each process-wide setting in turn on the same caches: autocast bfloat16 and float16, "
        "float32, TF32, no_grad, default dtype float64; each against eager under the same setting (dtypes exactly, "
        "values and gradients against float64 with eager's own error as the yardstick)",
        "gpuprobe.worker.probes.compile.ambient:run",
        {},
        timeout_s=AMBIENT_TIMEOUT_S,
        placement="side",
        lane="compile-ambient",
    )
