"""sweep family catalog: PyTorch's operator database, operator by operator, against float64.

Id grammar: ``sweep.<op>[.<variant>].<dtype>`` (``sweep_db.op_key``), dtype ``fp32``,
``bf16``, ``fp16`` or ``fp64``; plus ``sweep.opdb``, which loads the database and reports
what the sweep can drive on this torch (its version, the number of entries, per dtype).

Which ids exist depends on the installed torch, so the catalog has two parts:

- static (this module, no torch): ``sweep.opdb`` and the ``standard`` tier's fixed subset,
  ``STANDARD_OPS`` × ``STANDARD_DTYPES``: everyday operators of each kind (elementwise,
  reductions, scans, matrix products, convolution, normalization, losses,
  indexing, sorting, pooling, attention), small enough for the standard tier's
  budget;
- expanded (``expanded_specs``, mode ``catalog`` with option ``expand: ["sweep"]``, which
  imports torch): every database entry × every dtype the database lists for the device
  type, in the ``full`` tier. The supervisor asks for it only when the run needs it
  (``--tier full``, or an ``--only`` pattern that names the sweep).

Every sweep probe runs in a side lane (its time goes to float64 references on the host):
the standard subset in lanes ``sweep-1`` and ``sweep-2`` (``subset_lane``), the rest spread over ``lane_count()`` lanes (by the
host's cores) by a hash of the probe id, so the full sweep uses several cores.
"""

from __future__ import annotations

import dataclasses
import os
import zlib
from typing import Any

from gpuprobe.worker.catalog import MEASURE, ProbeDef
from gpuprobe.worker.probes.sweep import db as sweep_db

#: Seconds one run of a probe typically takes on a warm machine, by the longest prefix of its
#: id listed (whole parts): the ``typical_s`` the catalog publishes for each of the
#: family's probes that sets none (lanes are sized by it; a probe no prefix matches counts
#: the engine's default, 0.1 s). Measured on the H200 host (torch 2.11: warm standard tier,
#: mean per probe of three runs with the other lanes beside it, bench/RESULTS.md "The
#: standard tier's lanes"; the full tier's families from its runs there); a whole id is
#: listed where one probe takes several times its sub-family's mean.
TYPICAL_SECONDS = {
    # The sweep's mean on the H200's full tier (10,095 probes of two runs, 0.70 s), and
    # the entries whose probes take many times that (the same runs' means): a lane cut by
    # the flat mean put the low-rank decompositions' 8 probes of 23-30 s each wherever
    # they fell.
    "sweep": 0.700,
    "sweep.gcd": 5.000,
    "sweep.grid_sampler_3d": 5.000,
    "sweep.lcm": 4.500,
    "sweep.linalg.lstsq": 20.000,
    "sweep.logaddexp": 4.500,
    "sweep.pca_lowrank": 23.000,
    "sweep.qr": 5.000,
    "sweep.svd_lowrank": 30.000,
}

_RUN = "gpuprobe.worker.probes.sweep.run"
#: The sweep's own rule (``Rule::Sweep``): the judge reads the failure classes it observed.
SWEEP_RULE: dict[str, Any] = {"kind": "sweep"}
#: Side lanes of the full sweep: three per four host cores (each lane is a worker and its
#: reference process, which take turns: one busy core a lane), between 1 and ``MAX_LANES``.
#: Every dtype of the database (integer, boolean and complex too) doubled the sweep's
#: probes: on the H200 (16 cores) six lanes spent 2,093 probe-seconds in 510 s, the
#: slowest lane holding 496 of them; with every axis, eight lanes spent about 3,900
#: probe-seconds beside the rest of the full tier and needed about 500 s (bench/RESULTS.md):
#: the host's cores, not the lanes, bound the tier, and more, smaller lanes leave fewer
#: cores idle at the end.
MAX_LANES = 12
#: Time limit of one sweep probe: its case budget (20 s) plus the reference process's start.
TIMEOUT_S = 240.0

#: The standard tier's subset (database keys), one or two of each kind of operator.
STANDARD_OPS = (
    "add",
    "div.no_rounding_mode",
    "exp",
    "sum",
    "var",
    "cumsum",
    "matmul",
    "nn.functional.conv2d",
    "nn.functional.layer_norm",
    "softmax",
    "nn.functional.cross_entropy",
    "nn.functional.embedding",
    "gather",
    "sort",
    "nn.functional.avg_pool2d",
    "nn.functional.scaled_dot_product_attention",
)
STANDARD_DTYPES = ("fp32", "bf16")
#: The standard subset's probes of the other dtype kinds, one operator kind each: an
#: integer elementwise op, a boolean reduction, an integer scan, integer true division (an
#: integer input with a floating result), an unsigned sort, a complex matrix product.
STANDARD_EXTRA = (
    ("add", "i32"),
    ("sum", "bool"),
    ("cumsum", "i64"),
    ("div.no_rounding_mode", "i16"),
    ("sort", "u8"),
    ("matmul", "c64"),
)
#: Value classes, call variants and per-argument shapes each standard-subset probe runs in
#: turn below the full tier (its ``subset`` parameter, ``subset_new_axes``); a run of the
#: full tier runs them all, and the large shapes.
STANDARD_NEW_AXES = 2
#: The tier the fixed subset runs in. Its size is set by the standard tier's 30 s budget:
#: measured on the H100 (bench/RESULTS.md), 33 entries × fp32/bf16 made the standard tier
#: take 38 s (the sweep lane was its last: 10.8 s to import the database, 15.5 s of
#: probes); 16 entries keep the lane within the others.
SUBSET_TIER = "standard"
DTYPE_ORDER = tuple(sweep_db.DTYPES)


def lane_count() -> int:
    """How many side lanes the full sweep spreads over on this host."""
    return max(1, min(MAX_LANES, (os.cpu_count() or 1) * 3 // 4))


#: Lanes the standard subset is split over. Its lane was the standard tier's last (database
#: import then 32 probes, 20 s of the 31 s, bench/RESULTS.md); two lanes each import the
#: database but run half the probes, side by side.
SUBSET_LANES = 2


#: Each sweep worker's reference process (``sweep_ref``) starts before the worker imports
#: torch: its own imports of torch and the operator database (about 8 s of a contended host)
#: then overlap the worker's instead of following its hello.
_HELPERS = "gpuprobe.worker.probes.sweep.ref:prestart_shared"


#: Seconds of a standard-subset probe, and of importing the operator database, which each
#: subset lane's first probe pays (``sweep.opdb`` in ``sweep-1``): on the H200, warm
#: standard tier, means of three runs, 0.2 s and 4.1 s (bench/RESULTS.md, "The standard
#: tier's lanes"). The engine's table by id prefix holds the full tier's probes of the same
#: operators, which run every case and cost several times as much.
SUBSET_PROBE_S = 0.2
DATABASE_IMPORT_S = 4.1


def subset_lane(key: str) -> str:
    """The side lane of a standard-subset entry: entries alternate between the subset's
    lanes in ``STANDARD_OPS`` order (``sweep.opdb`` runs first in ``sweep-1``)."""
    return f"sweep-{STANDARD_OPS.index(key) % SUBSET_LANES + 1}"


def standard_probes() -> list[tuple[str, str]]:
    """(key, dtype) of every standard-subset probe, in catalog order."""
    return [(key, dtype) for key in STANDARD_OPS for dtype in STANDARD_DTYPES] + list(STANDARD_EXTRA)


def subset_new_axes(key: str, dtype: str) -> list[str]:
    """The value classes, call variants and per-argument shapes a standard-subset probe
    runs below the full tier (the large shapes run in the full tier only). Floating and
    complex probes step, one after another, through the floating value classes, every call
    variant and the per-argument shapes, two each; integer and boolean probes (few, and
    cheap: no backward) run every value class of their kind and step through the call
    variants (per-argument shapes are for floating and complex samples). The subset covers
    each of them on some operator (``tests/python/test_sweep.py`` holds it)."""
    from gpuprobe.worker.probes.sweep import cases as sweep_cases

    name = sweep_db.DTYPES[dtype]
    exact = sweep_db.is_exact_dtype(name)
    pool = (
        sweep_cases.CALL_VARIANTS
        if exact
        else sweep_cases.FLOAT_VALUE_CLASSES + sweep_cases.CALL_VARIANTS + sweep_cases.ARGUMENT_TRANSFORMS
    )
    same_kind = [p for p in standard_probes() if sweep_db.is_exact_dtype(sweep_db.DTYPES[p[1]]) == exact]
    position = same_kind.index((key, dtype))
    turn = [pool[(position * STANDARD_NEW_AXES + i) % len(pool)] for i in range(STANDARD_NEW_AXES)]
    own = list(sweep_cases.INTEGER_VALUE_CLASSES) if sweep_db.dtype_kind(name) == "integer" else []
    return own + turn


def lane_for(probe_id: str, lanes: int | None = None) -> str:
    """The side lane of a full-tier sweep probe, by a hash of its whole id: an operator's
    dtypes spread over the lanes, so an expensive operator (a convolution in fifteen
    dtypes) does not load one lane alone."""
    return f"sweep-{zlib.crc32(probe_id.encode()) % (lanes or lane_count()) + 1}"


def probe(key: str, dtype: str, tier: str, lane: str | None = None) -> ProbeDef:
    """The ProbeDef of ``sweep.<key>.<dtype>``; a standard-subset probe carries the value
    classes and call variants it runs below the full tier (``subset_new_axes``)."""
    params: dict[str, Any] = {"key": key, "dtype": dtype}
    if tier == SUBSET_TIER:
        params["subset"] = subset_new_axes(key, dtype)
    reference = "the CPU in the same dtype" if sweep_db.is_exact_dtype(sweep_db.DTYPES[dtype]) else "float64 on the CPU"
    return ProbeDef(
        f"sweep.{key}.{dtype}",
        tier,
        SWEEP_RULE,
        f"{key} in {dtype} on the device (every input transform, value class and call variant; forward and "
        f"backward) against {reference}",
        f"{_RUN}:run_op",
        params,
        timeout_s=TIMEOUT_S,
        placement="side",
        lane=lane or lane_for(f"sweep.{key}.{dtype}"),
        helpers=_HELPERS,
    )


def specs() -> list[ProbeDef]:
    """The static part: the database report and the standard subset."""
    out = [
        ProbeDef(
            "sweep.opdb",
            SUBSET_TIER,
            MEASURE,
            "loads PyTorch's operator database and counts what the sweep drives on this torch",
            "gpuprobe.worker.probes.sweep.coverage:run_opdb",
            timeout_s=TIMEOUT_S,
            placement="side",
            lane="sweep-1",
            helpers=_HELPERS,
        )
    ]
    out[0] = dataclasses.replace(out[0], typical_s=DATABASE_IMPORT_S)
    lanes_begun = {"sweep-1"}
    for key, dtype in standard_probes():
        subset = probe(key, dtype, SUBSET_TIER, lane=subset_lane(key))
        seconds = SUBSET_PROBE_S
        if subset.lane not in lanes_begun:
            lanes_begun.add(subset.lane)
            seconds += DATABASE_IMPORT_S
        out.append(dataclasses.replace(subset, typical_s=seconds))
    return out


def resolve(probe_id: str) -> ProbeDef | None:
    """The ProbeDef of any well-formed sweep id (the expanded ones are not in the static
    catalog); None for anything else."""
    if not probe_id.startswith("sweep."):
        return None
    body, _, dtype = probe_id[len("sweep.") :].rpartition(".")
    if not body or dtype not in DTYPE_ORDER:
        return None
    subset = (body, dtype) in standard_probes()
    return probe(body, dtype, SUBSET_TIER if subset else "full", lane=subset_lane(body) if subset else None)


def expanded_specs(torch: Any) -> list[ProbeDef]:
    """Every database entry × dtype the database lists for this machine's device type."""
    from gpuprobe.worker.probes.sweep import db as sweep_db

    database = sweep_db.load(torch)
    dev_type = "cuda" if _has_gpu(torch) else "cpu"
    static = {p.id for p in specs()}
    out = []
    for key, info in database.ops.items():
        for dtype in DTYPE_ORDER:
            if not sweep_db.supports(info, torch, sweep_db.DTYPES[dtype], dev_type):
                continue
            definition = probe(key, dtype, "full")
            if definition.id not in static:
                out.append(definition)
    return out


def _has_gpu(torch: Any) -> bool:
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False
