"""train family catalog: whole training steps of two tiny models, against float64.

Id grammar: ``train.<model>.<mode>``:

- ``<model>``: ``transformer`` (token and position embeddings, one pre-norm block with
  LayerNorm before causal ``scaled_dot_product_attention`` and RMSNorm before a GELU MLP,
  residuals, a final LayerNorm and a linear head to vocabulary logits; cross-entropy with
  label smoothing and ignored positions; AdamW with weight decay on the matrices) or
  ``convnet`` (conv2d, batch_norm in training mode with running statistics, ReLU and SiLU,
  max and average pooling, a residual add, adaptive pooling, a linear head, cross-entropy;
  SGD with Nesterov momentum and weight decay);
- ``<mode>``: ``fp32`` (float32, TF32 off), ``bf16`` (``torch.autocast`` in bfloat16),
  ``fp16`` (autocast in float16 with ``torch.amp.GradScaler``), and each of those with
  ``.compile`` (the model and its loss under ``torch.compile``, Inductor's default backend);
- nested autocast regions (transformer only): ``bf16.inner_fp32`` (the vocabulary head in
  an inner ``torch.autocast(enabled=False)`` region, float32, inside the outer bf16
  autocast) and ``bf16.inner_fp16`` (the head in an inner ``torch.autocast(float16)``
  region), each also with ``.compile``;
- activation checkpointing (transformer only): ``fp32.checkpoint`` and ``bf16.checkpoint``, the
  block under ``torch.utils.checkpoint.checkpoint`` (``use_reentrant=False``, and ``True`` as
  a second run), judged against float64 like the other modes and, with dropout on, against
  the same steps without checkpointing on the same device (``train_run.run_checkpoint``).

Every probe runs ``STEPS`` steps (forward, backward, ``clip_grad_norm_``, optimizer step)
on fixed seeded batches, one of them accumulating two micro-batches' gradients into
``.grad`` before its optimizer step, and compares each step with the same steps in float64
on the CPU from the same initial weights (``train_run``). The compiled modes also compare
with the eager run of their mode on the same device. The nested modes also check the inner
region's gradients at the precision the region computes in, from the region's own inputs
on the device. Rule ``sweep``: the observation counts the compared quantities as cases.

Tiers: ``train.transformer.bf16`` is in ``standard`` (the everyday mixed-precision step;
well under a second warm). Everything else is ``full``: the compiled modes spend seconds in
Inductor's code generation on a first run. Full-tier probes run in side lane ``train``,
each in a worker of its own (a compiled model leaves Dynamo's caches and Inductor's compile
workers behind).
"""

from __future__ import annotations

from gpuprobe.worker.catalog import ProbeDef
from gpuprobe.worker.probes.sweep.specs import SWEEP_RULE

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
    "train": 1.000,
    "train.transformer": 1.211,
    "train.convnet.bf16.compile": 3.000,
    "train.convnet.fp16.compile": 3.000,
    "train.convnet.fp32.compile": 3.000,
    "train.transformer.bf16": 2.322,
    "train.transformer.bf16.compile": 3.000,
    "train.transformer.bf16.inner_fp16.compile": 3.000,
    "train.transformer.bf16.inner_fp32.compile": 3.000,
    "train.transformer.fp16.compile": 3.000,
    "train.transformer.fp32.compile": 3.000,
}

_RUN = "gpuprobe.worker.probes.train.run"

MODELS = ("transformer", "convnet")
#: Precision modes: (mode name, autocast dtype or None for plain float32).
PRECISIONS: tuple[tuple[str, str | None], ...] = (("fp32", None), ("bf16", "bfloat16"), ("fp16", "float16"))
COMPILE_SUFFIX = ".compile"
#: Nested autocast regions: (mode suffix, the dtype the inner region computes in). The outer
#: autocast is ``NESTED_OUTER``; the inner region is the transformer's vocabulary head.
INNER_REGIONS: tuple[tuple[str, str], ...] = (("inner_fp32", "float32"), ("inner_fp16", "float16"))
NESTED_OUTER = "bf16"
#: The models that have the nested modes: the transformer's head is where training code puts
#: a region of its own precision (logits in float32).
NESTED_MODELS = ("transformer",)
#: Activation checkpointing: the mode suffix, the models and precisions that have it. The
#: transformer only: the conv net's batch normalization would update its running statistics
#: again in the recomputation (PyTorch documents the double update), a difference by design.
CHECKPOINT_SUFFIX = ".checkpoint"
CHECKPOINT_MODELS = ("transformer",)
CHECKPOINT_PRECISIONS = ("fp32", "bf16")
#: The standard tier's probe: the step most users run (bf16 autocast, eager).
STANDARD = ("transformer", "bf16")
LANE = "train"
#: Eager probes: a float64 CPU reference and three tiny steps (well under a second warm on a
#: GPU; the limit covers a cold CPU host).
EAGER_TIMEOUT_S = 120.0
#: Compiled probes: Inductor compiles the forward and backward graphs (about 10 s each cold
#: on a 2-core CPU host, seconds on a GPU host with its kernel cache filled).
COMPILE_TIMEOUT_S = 300.0

_WHAT = {
    "transformer": (
        "a one-block pre-norm transformer (LayerNorm, causal SDPA, RMSNorm, GELU MLP, residuals, vocabulary head; "
        "cross-entropy with label smoothing and ignored positions) trained with AdamW and clip_grad_norm_"
    ),
    "convnet": (
        "a small conv net (conv2d, training-mode batch_norm, ReLU/SiLU, max/avg pooling, a residual add, adaptive "
        "pooling, linear head, cross-entropy) trained with SGD (Nesterov momentum) and clip_grad_norm_"
    ),
}
_MODE_WHAT = {
    "fp32": "in float32 (TF32 off)",
    "bf16": "under torch.autocast(bfloat16)",
    "fp16": "under torch.autocast(float16) with torch.amp.GradScaler",
    "bf16.inner_fp32": "under torch.autocast(bfloat16) with the vocabulary head in an inner autocast(enabled=False) region "
    "(float32)",
    "bf16.inner_fp16": "under torch.autocast(bfloat16) with the vocabulary head in an inner autocast(float16) region",
}


def probe_id(model: str, mode: str) -> str:
    return f"train.{model}.{mode}"


def _probe(model: str, precision: str, compiled: bool) -> ProbeDef:
    """``precision``: a precision mode, or a nested one (``bf16.inner_fp32``)."""
    mode = precision + (COMPILE_SUFFIX if compiled else "")
    tier = "standard" if (model, mode) == STANDARD else "full"
    description = f"3 training steps (step 2 accumulating 2 micro-batches) of {_WHAT[model]} {_MODE_WHAT[precision]}"
    if compiled:
        description += ", the model and loss under torch.compile (Inductor)"
    description += "; losses, gradient norms, step-1 and accumulated gradients, every step's update, running statistics"
    description += " against the same steps in float64 on the CPU"
    if compiled:
        description += " and against eager on the device"
    if precision != precision.split(".")[0]:
        description += "; the inner region's gradients against float64 from its own inputs, at its precision"
    full = tier == "full"
    return ProbeDef(
        probe_id(model, mode),
        tier,
        SWEEP_RULE,
        description,
        # The nested modes have an entry of their own (``run_nested``, which is ``run``): what is
        # keyed by implementation (the repro recipes) tells them apart.
        f"{_RUN}:{'run_nested' if precision != precision.split('.')[0] else 'run'}",
        {"model": model, "mode": mode},
        timeout_s=COMPILE_TIMEOUT_S if compiled else EAGER_TIMEOUT_S,
        # The standard probe is cheap and shares the main lane; the full tier's go to a side
        # lane of their own, each in a fresh worker.
        placement="side" if full else "shared",
        lane=LANE if full else None,
        isolated=full,
    )


def _checkpoint_probe(model: str, precision: str) -> ProbeDef:
    mode = precision + CHECKPOINT_SUFFIX
    return ProbeDef(
        probe_id(model, mode),
        "full",
        SWEEP_RULE,
        f"3 training steps (step 2 accumulating 2 micro-batches) of {_WHAT[model]} {_MODE_WHAT[precision]}, the block "
        "under torch.utils.checkpoint.checkpoint (use_reentrant=False, and True): every step against float64 on the "
        "CPU; with dropout in the block, the checkpointed steps' gradients and updates against the same steps without "
        "checkpointing on the device (the recomputation replays the forward and its dropout masks)",
        f"{_RUN}:run_checkpoint",
        {"model": model, "mode": mode},
        timeout_s=EAGER_TIMEOUT_S,
        placement="side",
        lane=LANE,
        isolated=True,
    )


def nested_modes() -> list[str]:
    """The nested modes' precisions (``bf16.inner_fp32``, ``bf16.inner_fp16``)."""
    return [f"{NESTED_OUTER}.{inner}" for inner, _dtype in INNER_REGIONS]


def specs() -> list[ProbeDef]:
    """Every model × mode; eager before compiled, so a lane meets the cheap probes first."""
    out: list[ProbeDef] = []
    for compiled in (False, True):
        for model in MODELS:
            for precision, _dtype in PRECISIONS:
                out.append(_probe(model, precision, compiled))
            if model in NESTED_MODELS:
                for nested in nested_modes():
                    out.append(_probe(model, nested, compiled))
        if not compiled:
            out.extend(_checkpoint_probe(model, p) for model in CHECKPOINT_MODELS for p in CHECKPOINT_PRECISIONS)
    return out
