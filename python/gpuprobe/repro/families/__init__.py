"""Per-family recipes: how a probe's one failing case becomes plain torch code.

One module per probe family (``copy``, ``dtype``, ``ops``, ``pipeline``, ``sweep``), each
a set of recipes: functions from a ``base.Case`` (the probe's catalogue definition, the plan
seed, the observation) to a ``script.Recipe`` (the script's case section and its
``repro.json`` fields). ``script.render`` puts a recipe into the scaffold every script
shares. ``RECIPES`` maps a probe implementation to its recipe; ``UNCOVERED`` says, per
family, why none is made.
"""

from __future__ import annotations

from typing import Callable

from gpuprobe.repro.families import copy, dtype, ops, pipeline, sweep
from gpuprobe.repro.families.base import Case, NoRepro
from gpuprobe.repro.families.ops import elementwise_cases
from gpuprobe.repro.script import Recipe

__all__ = ["Case", "NoRepro", "RECIPES", "UNCOVERED", "elementwise_cases"]


#: Implementation function (``module:function``) → recipe.
RECIPES: dict[str, Callable[[Case], Recipe]] = {
    "gpuprobe.worker.probes.copy_run:run_transfer": copy._transfer,
    "gpuprobe.worker.probes.copy_run:run_tiny": copy._tiny,
    "gpuprobe.worker.probes.copy_run:run_d2d": copy._d2d,
    "gpuprobe.worker.probes.copy_run:run_roundtrip": copy._roundtrip,
    "gpuprobe.worker.probes.dtype_run:run_convert": dtype._convert,
    "gpuprobe.worker.probes.ops_run:run_matmul": ops._matmul,
    "gpuprobe.worker.probes.ops_run:run_elementwise": ops._elementwise,
    "gpuprobe.worker.probes.pipeline_run:run_dataloader": pipeline._dataloader,
    "gpuprobe.worker.probes.ops_run:run_reduce": ops._reduce,
    **sweep.RECIPES,
}

#: Families with no recipe, and why (``no repro: WHY``).
UNCOVERED: dict[str, str] = {
    "rng": "random-generator probes are judged statistically over many samples; no single case fails",
    "alloc": "allocator probes measure the caching allocator's behaviour over a sequence of allocations, "
    "not one computed case",
    "soak": "soak probes fail over minutes of load; one case cannot stand for them",
    "fault": "fault probes trigger deliberate faults (run only when named); the fault is the repro",
    "dist": "multi-GPU collectives need a process group per GPU; not rebuilt as one script yet",
    "native": "native probes call the CUDA/HIP runtime from gpuprobe's own binary; no Python repro",
}
