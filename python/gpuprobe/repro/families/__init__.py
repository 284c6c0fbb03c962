"""Per-family recipes: how a probe's one failing case becomes plain torch code.

One module per probe family (``copy``, ``dtype``, ``ops``, ``nn``, ``pipeline``, ``sweep``,
``width``, ``compiled`` for the compile family's programs, ``ambient`` for its
``compile.ambient``, ``optim``, ``graph``, ``train``; the last four copy the probe's own code
into the script with ``copied.Copier``), each a set of recipes:
functions from a ``base.Case`` (the probe's catalog
definition, the plan seed, the observation) to a ``script.Recipe`` (the script's case
section and its ``repro.json`` fields). ``script.render`` puts a recipe into the scaffold
every script shares. ``RECIPES`` maps a probe implementation to its recipe; ``UNCOVERED``
says, per family, and ``NOT_REBUILT``, per implementation, why none is made.
"""

from __future__ import annotations

from typing import Callable

from gpuprobe.repro.families import ambient, compiled, copy, dtype, graph, nn, ops, optim, pipeline, sweep, train, width
from gpuprobe.repro.families.base import Case, NoRepro
from gpuprobe.repro.families.ops import elementwise_cases
from gpuprobe.repro.script import Recipe

__all__ = ["Case", "NoRepro", "NOT_REBUILT", "RECIPES", "UNCOVERED", "elementwise_cases"]


#: Implementation function (``module:function``) → recipe.
RECIPES: dict[str, Callable[[Case], Recipe]] = {
    "gpuprobe.worker.probes.copy.run:run_transfer": copy._transfer,
    "gpuprobe.worker.probes.copy.run:run_tiny": copy._tiny,
    "gpuprobe.worker.probes.copy.run:run_d2d": copy._d2d,
    "gpuprobe.worker.probes.copy.run:run_roundtrip": copy._roundtrip,
    "gpuprobe.worker.probes.copy.run:run_reuse": copy._reuse,
    "gpuprobe.worker.probes.copy.run:run_batch": copy._batch,
    "gpuprobe.worker.probes.dtype.run:run_convert": dtype._convert,
    "gpuprobe.worker.probes.ops.run:run_matmul": ops._matmul,
    "gpuprobe.worker.probes.ops.run:run_elementwise": ops._elementwise,
    "gpuprobe.worker.probes.ops.run:run_reduce": ops._reduce,
    **nn.RECIPES,
    **pipeline.RECIPES,
    **sweep.RECIPES,
    **width.RECIPES,
    **compiled.RECIPES,
    **ambient.RECIPES,
    **optim.RECIPES,
    **graph.RECIPES,
    **train.RECIPES,
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

_P = "gpuprobe.worker.probes."
#: Implementations of covered families that have no recipe, each with why (``no repro: WHY``).
NOT_REBUILT: dict[str, str] = {
    _P + "copy.run:run_p2p": "copies between two GPUs are not rebuilt as a script yet",
    _P + "ops.run:run_amax": "its trials are labelled inputs whose failing one the observation does not name",
    _P + "ops.run:run_where": "its trials are labelled inputs whose failing one the observation does not name",
    _P + "ops.run:run_layout": "its trials are labelled layouts whose failing one the observation does not name",
    _P + "ops.run:run_special": "its trials are special values whose failing one the observation does not name",
    _P + "ops.run:run_sentinel": "a sentinel compares a kernel's output with a canary it must overwrite, over several kernels; "
    "not rebuilt yet",
    _P + "ops.run:run_bool_reduce": "boolean reductions are not rebuilt as a script yet",
    _P + "ops.run:run_bool_reduce_huge": "a reduction past 2^31 elements is not rebuilt as a script yet",
    _P + "ops.run:run_add_huge": "an elementwise kernel past 2^31 elements is not rebuilt as a script yet",
    _P + "ops.run:run_sum_huge": "a reduction past 2^31 elements is not rebuilt as a script yet",
    _P + "ops.run:run_matmul_large": "a GEMM with an output of hundreds of MiB is not rebuilt as a script yet",
    _P + "nn.run:run_sdpa_matrix": "the attention backend matrix is not rebuilt as a script yet",
    _P + "nn.run:run_autocast": "autocast probes are not rebuilt as a script yet",
    _P + "nn.run:run_vae": "the VAE probes run a small model; not rebuilt as a script yet",
    _P + "sweep.coverage:run_opdb": "sweep.opdb reports which operators the database offers; it computes nothing to reproduce",
    _P + "optim.run:run_clip": "gradient-clipping cases are not rebuilt as a script yet",
    _P + "train.run:run_checkpoint": "the activation-checkpointing modes are not rebuilt as a script yet",
}
