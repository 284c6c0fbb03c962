"""optim family catalog: torch.optim's for-loop, foreach and fused steps against float64,
and GradScaler's skip, unscale and growth rules.

Id grammar: ``optim.<optimizer>.<dtype>`` (``optim.adamw.bf16``) for every optimizer of
``torch.optim`` with a foreach or fused implementation, dtype ``fp32``, ``bf16`` or ``fp16``
(the parameters' and gradients' dtype); ``optim.gradscaler.<dtype>``; ``optim.clip_grad.<dtype>``
(``torch.nn.utils.clip_grad_norm_`` and ``clip_grad_value_``: each case is one call, named
``foreach+norm_type=2+clip+mixed_dtypes`` in ``variant``, its direction the quantity judged). Rule ``sweep``: each
case (implementation × configuration, named ``fused+weight_decay=0.1+amsgrad`` in the
observation's ``variant``) is judged after every step (``direction`` ``step<N>``).

Tiers: ``optim.adamw.fp32`` and ``optim.gradscaler.fp32`` are ``standard`` (a subset of
their configurations below the full tier, without the zero-gradient list and the extreme
configurations); every other probe runs in the ``full`` tier, in the side lane ``optim`` (its
time goes to float64 references on the host).
"""

from __future__ import annotations

from typing import Any

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
    # Optimizer implementations against float64 (H200): 40 probes in 81 s at four steps,
    # about 1.6 s a probe; a training step of a small model, under 1 s eager (estimate)
    # and 2-3 s compiled on a filled cache.
    "optim": 1.600,
    # The standard tier's one optimizer probe: it imports torch._dynamo in its worker.
    "optim.adamw.fp32": 2.367,
    "optim.gradscaler": 0.224,
}

_RUN = "gpuprobe.worker.probes.optim.run"

#: (id part, ``torch.optim`` class): every optimizer with a foreach or fused implementation
#: (LBFGS, SparseAdam and Muon have neither). A class missing from the installed torch
#: (Adafactor before 2.5) makes its probes skip.
OPTIMIZERS: tuple[tuple[str, str], ...] = (
    ("adam", "Adam"),
    ("adamw", "AdamW"),
    ("sgd", "SGD"),
    ("adagrad", "Adagrad"),
    ("rmsprop", "RMSprop"),
    ("adamax", "Adamax"),
    ("nadam", "NAdam"),
    ("radam", "RAdam"),
    ("adadelta", "Adadelta"),
    ("asgd", "ASGD"),
    ("rprop", "Rprop"),
    ("adafactor", "Adafactor"),
)
DTYPES = ("fp32", "bf16", "fp16")
#: The standard tier's probes and what they run below the full tier: AdamW, the optimizer
#: of most training jobs, in the configurations that change its arithmetic (decoupled weight
#: decay, amsgrad's running maximum, maximize, and on a GPU capturable with a tensor
#: learning rate), each in every implementation; GradScaler with AdamW and SGD.
STANDARD_OPTIMIZER = ("adamw", "fp32")
STANDARD_CONFIGS = ("weight_decay=0.1+maximize", "weight_decay=0.1+amsgrad", "lr=tensor+amsgrad+capturable")
STANDARD_SCALER = ("fp32", ("adamw", "sgd"))
#: Time limit of one probe: its case budget (60 s) and then some.
TIMEOUT_S = 240.0
STANDARD_TIMEOUT_S = 90.0
LANE = "optim"


def optimizer_probe(name: str, class_name: str, dtype: str) -> ProbeDef:
    """``optim.<name>.<dtype>``: the standard one carries its subset; in the full tier every
    probe runs every configuration (``optim_run.CONFIGS``)."""
    standard = (name, dtype) == STANDARD_OPTIMIZER
    # The mixed-dtype list and the gradient-layout list are the fp32 probes': neither depends
    # on the probe's dtype.
    params: dict[str, Any] = {
        "optimizer": name,
        "class_name": class_name,
        "dtype": dtype,
        "mixed": dtype == "fp32",
        # Not in the standard probe: torch's CPU fused kernels step such gradients wrongly
        # (docs/probes.md), and the standard tier must pass on a CPU, where CI runs it.
        "layouts": dtype == "fp32" and not standard,
    }
    if standard:
        params["configs"] = list(STANDARD_CONFIGS)
    mixed = ""
    if params["mixed"]:
        mixed = "; a list of float32, bfloat16 and float16 parameters in one group too"
    if params["layouts"]:
        mixed += ", and one of gradients with other strides than their parameters"
    definition = ProbeDef(
        f"optim.{name}.{dtype}",
        "standard" if standard else "full",
        SWEEP_RULE,
        f"torch.optim.{class_name} with {dtype} parameters: the for-loop, foreach and fused implementations in "
        f"each configuration, 3 steps over 123 parameters (odd sizes, 65537 elements, empty, transposed, "
        f"without gradients, more than one multi-tensor launch){mixed}; in the full tier also a list whose "
        "gradients hold exact zeros (rows, elements, whole tensors) in those configurations and in extreme ones "
        "(lr=0, averaging coefficients at 0 and next to 1, eps=1e-16, weight decay 10); against the for-loop in "
        "float64 on the CPU and against each other",
        f"{_RUN}:run_optimizer",
        params,
        timeout_s=STANDARD_TIMEOUT_S if standard else TIMEOUT_S,
    )
    # Standard probes too: the first optimizer a worker builds imports torch._dynamo (4 to 5 s
    # on the H200), which a side lane pays beside the other lanes instead of in the main one.
    return _side(definition)


def scaler_probe(dtype: str) -> ProbeDef:
    """``optim.gradscaler.<dtype>``."""
    standard = dtype == STANDARD_SCALER[0]
    params: dict[str, Any] = {"dtype": dtype}
    if standard:
        params["optimizers"] = list(STANDARD_SCALER[1])
    definition = ProbeDef(
        f"optim.gradscaler.{dtype}",
        "standard" if standard else "full",
        SWEEP_RULE,
        f"torch.amp.GradScaler with {dtype} gradients and Adam, AdamW, SGD and Adagrad in each implementation: steps "
        "with an infinity or a NaN skipped bit for bit and the scale halved, finite steps equal to the unscaled "
        "step, the scale doubled after growth_interval clean steps",
        f"{_RUN}:run_gradscaler",
        params,
        timeout_s=STANDARD_TIMEOUT_S if standard else TIMEOUT_S,
    )
    # Standard probes too: the first optimizer a worker builds imports torch._dynamo (4 to 5 s
    # on the H200), which a side lane pays beside the other lanes instead of in the main one.
    return _side(definition)


def clip_probe(dtype: str) -> ProbeDef:
    """``optim.clip_grad.<dtype>``: the mixed-dtype and gradient-layout lists in the fp32 probe
    (neither depends on the probe's dtype)."""
    extra = dtype == "fp32"
    lists = "the optimizer probes' main list (123 gradients) and zero-gradient list"
    if extra:
        lists += ", a list of float32, bfloat16 and float16 gradients and one with other strides than their parameters"
    return _side(
        ProbeDef(
            f"optim.clip_grad.{dtype}",
            "full",
            SWEEP_RULE,
            f"torch.nn.utils.clip_grad_norm_ and clip_grad_value_ on {dtype} gradients with foreach=False, True and "
            f"None: norm types 2, 1, inf and 0.5, max_norm below and above the total norm, on {lists}; the returned "
            "total norm and the clipped gradients against float64; a NaN and an infinity in one gradient (the norm "
            "NaN or Inf; error_if_nonfinite=True raises and leaves the gradients alone)",
            f"{_RUN}:run_clip",
            {"dtype": dtype, "mixed": extra, "layouts": extra},
            timeout_s=TIMEOUT_S,
        )
    )


def _side(definition: ProbeDef) -> ProbeDef:
    return ProbeDef(
        definition.id,
        definition.tier,
        definition.rule,
        definition.description,
        definition.impl,
        definition.params,
        timeout_s=definition.timeout_s,
        placement="side",
        lane=LANE,
    )


def specs() -> list[ProbeDef]:
    """The standard probes first, then every optimizer × dtype, GradScaler's others and the
    gradient-clipping probes."""
    out = [optimizer_probe(*_standard_optimizer()), scaler_probe(STANDARD_SCALER[0])]
    for name, class_name in OPTIMIZERS:
        for dtype in DTYPES:
            if (name, dtype) != STANDARD_OPTIMIZER:
                out.append(optimizer_probe(name, class_name, dtype))
    out.extend(scaler_probe(dtype) for dtype in DTYPES if dtype != STANDARD_SCALER[0])
    out.extend(clip_probe(dtype) for dtype in DTYPES)
    return out


def _standard_optimizer() -> tuple[str, str, str]:
    name, dtype = STANDARD_OPTIMIZER
    return name, dict(OPTIMIZERS)[name], dtype
