"""train family implementation: whole training steps against float64 (catalog and id
grammar in ``train_specs``).

A probe builds one of two tiny models from the plan's seed (the same initial weights and
batches for every mode of a model), then runs ``STEPS`` training steps three times over:

- the **reference**: float64 on the CPU, eager, no autocast, the same optimizer;
- the **subject**: the probe's mode on the device under test (float32 with TF32 off,
  autocast bfloat16, or autocast float16 with ``torch.amp.GradScaler``; or bfloat16
  autocast with the transformer's vocabulary head in a nested autocast region of its own
  precision), eager or with the model and its loss under ``torch.compile``;
- for compiled modes, the same mode **eager** on the device, as a second yardstick.

One step is ``zero_grad``, forward (loss included), backward (scaled, then unscaled, under
the GradScaler), ``clip_grad_norm_``, the optimizer's step (and the scaler's update). Step
``ACCUMULATE_STEP + 1`` accumulates ``MICRO_BATCHES`` micro-batches: forward and backward
of each, each loss divided by their number, the gradients summed into ``.grad`` by autograd
before the one optimizer step (what every job with gradient accumulation does). The
observation is the sweep's (``SweepStats``): each compared quantity is a case, its variant
names the yardstick (``float64`` or ``eager``), its direction the quantity, its sample the
step (1-based), its output the tensor.

Compared, each norm-wise (‖found − expected‖₂ against ``bound × ‖expected‖₂``, ``bound``
from ``tolerance``):

- every step's loss and the gradients' global norm (``clip_grad_norm_``'s return value);
- step 1's gradient of every parameter (before clipping; unscaled under the GradScaler),
  and the accumulated gradient of the accumulating step;
- every step's update of every parameter (its value after the step less its value before):
  the update, not the parameter, so that a skipped or wrong step is seen in full while
  rounding is judged against what the step changed. The parameter itself is stored in
  float32, so the bound gains the float32 rounding of the stored parameter (``u₃₂·‖p‖`` per
  step: round to nearest moves each element by at most ``u₃₂·|p|``);
- the parameters after the last step, as the sum of the updates, and the batch-norm running
  statistics as their change from the initial values (``num_batches_tracked`` exactly);
- under the GradScaler, every step's decision: the initial scale is chosen from the
  reference (``grad_scaler_scale``) so that no step can overflow float16, and a step the
  device skips (it found Inf/NaN in its gradients) is ``nonfinite_invented``;
- nested modes (``judge_region``): step 1's gradients of the inner region's parameters
  against float64 computed from the region's own inputs on the device (the head's input and
  its logits, whose loss gradient is recomputed in float64), with a bound at the precision
  the region computes in. Against the whole model's float64 steps those gradients carry the
  outer bf16 rounding of everything upstream, which would hide a region that computed its
  backward in bf16 (a bf16-sized error where float32 allows about 1e-5).

Rules that keep a benign difference from failing (docs/probes.md, "train"), each shown
failing without it by ``tests/python/test_train.py``:

- AdamW's ``eps`` is a quarter of the clipped gradient's root-mean-square
  (``adam_eps``) instead of 1e-8: with a negligible ``eps`` the first step's update is
  ``lr·sign(g)``, a discontinuous function of the gradient, and elements whose gradient lies
  within rounding noise of zero flip sign (measured on the transformer: 0.7% of the
  update's norm in float32, 75% under bf16 autocast). With ``eps`` above the noise the
  update is Lipschitz in the gradient (slope at most ``1/eps``); the kernels are the same.
- the bounds are multiples of the unit roundoff of the precision the mode computes its
  matrix products in (``tolerance``); under autocast a case's bound grows to
  ``NOISE_FACTOR`` times the error that autocast's rounding, emulated exactly in float64
  (``_rounding_emulator``), makes in the same quantity: gradients of the layers furthest
  from the loss are cancelling sums (behind batch normalization) that amplify rounding
  about fifteenfold (the conv net's first convolution), on any correct implementation. A case whose bound would pass ``BOUND_CAP`` is
  not judged (``ill_conditioned``). In the nested modes the emulation rounds the inner
  region's products to the region's own dtype (``_emulated_region``), forward and backward.
- a region check's bound is the float32 floor or ``REGION_NOISE_FACTOR`` times the error
  that rounding the region's own operands and results to its dtype makes, whichever is
  larger (the device rounds the same operands: the same draw, up to ties and the order of
  its sums).
- an update's bound gains the float32 rounding of the stored parameter.
- a loss or update that is NaN/Inf where the reference is finite is ``nonfinite_invented``
  (``sweep_oracle.compare_leaf``'s rule); anything that cannot be judged (the reference
  failed, the compiler raised) is counted in ``unjudged`` with its reason.
"""

from __future__ import annotations

import contextlib
import copy
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils.checkpoint
from torch import nn
from torch.nn import functional as F

from gpuprobe.worker import ops, simulate
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe, device_context_problem
from gpuprobe.worker.faults import is_device_fault
from gpuprobe.worker.patterns import derive_seed
from gpuprobe.worker.probes.compile import run as compile_run
from gpuprobe.worker.probes.precision import tf32_mode
from gpuprobe.worker.probes.sweep import oracle as sweep_oracle
from gpuprobe.worker.probes.train import specs as train_specs
from gpuprobe.worker.tally import CaseTally

#: Training steps per run.
STEPS = 3
#: ``clip_grad_norm_``'s limit: below the models' gradient norms (about 0.9 on both), so that
#: clipping scales every step's gradients.
MAX_NORM = 0.5
#: ``torch.compile``'s options in the compiled modes: none, Inductor's default backend
#: (a test of the CPU swaps in ``aot_eager``, which skips code generation).
COMPILE_OPTIONS: dict[str, Any] = {}
#: Label of positions the transformer's loss ignores.
IGNORE_INDEX = -100
#: The step (0-based) that accumulates gradients over ``MICRO_BATCHES`` micro-batches before
#: its optimizer step; the other steps run one batch each.
ACCUMULATE_STEP = 1
MICRO_BATCHES = 2
#: The nested modes' inner region: the transformer's vocabulary head, these parameters.
REGION_PARAMETERS = ("head.weight", "head.bias")

# ---------------------------------------------------------------------------------------------
# Tolerances.

#: Unit roundoff of the precision a mode computes its matrix products in.
UNIT_ROUNDOFF = {"float32": 2.0**-24, "bfloat16": 2.0**-8, "float16": 2.0**-11}
#: Norm-wise relative bounds in units of that roundoff, per compared quantity. float32: the
#: loss and the gradient norm are sums over the whole batch of a forward pass about ten
#: roundings deep (a few u each, growing as √K for K-term products, K ≤ 1200 here): 2^8 u
#: (1.5e-5), ten times what the CPU shows; gradients, updates and running statistics carry
#: the backward pass too, through batch normalization, whose gradients are cancelling sums:
#: 2^10 u (6.1e-5), twenty times the CPU's, room for convolution algorithms (Winograd, FFT)
#: with a few times a direct sum's error. Under autocast (u = 2^-8 for bf16, 2^-11 for
#: fp16; matrix products round their inputs and output, reductions stay in float32) these
#: are floors, raised per case by the emulated rounding (``NOISE_FACTOR``): the loss, a
#: float32 mean, 2^4 u; the rest 2^6 u (bf16 0.25, fp16 0.031), ten times the error of the
#: best-conditioned tensors (the output layer's bias, whose gradient sums the rounded
#: logits' gradient, a rounding the emulation leaves out). A skipped step (relative error
#: 1), a zeroed tensor (1) or garbage (≫ 1) stays far outside every bound.
FACTORS: dict[str, dict[str, float]] = {
    "float32": {"loss": 2**8, "grad_norm": 2**8, "grad": 2**10, "update": 2**10, "params": 2**10, "running_stats": 2**10},
    "half": {"loss": 2**4, "grad_norm": 2**4, "grad": 2**6, "update": 2**6, "params": 2**6, "running_stats": 2**6},
}
#: Parameters (and optimizer state) stay float32 in every mode: each stored step rounds by
#: at most this much of the parameter, and a step may store twice (AdamW's for-each
#: implementation decays the parameter in place, then adds the update).
PARAMETER_ROUNDOFF = 2.0**-24
ROUNDINGS_PER_STEP = 2
#: A half-precision case's bound is at least this many times the error that emulating
#: autocast's rounding in float64 makes in the same quantity (``_rounding_emulator``):
#: the device's own rounding is another draw of the same error, amplified by the same
#: cancellations, plus the elementwise roundings between products the emulation leaves out.
NOISE_FACTOR = 8.0
#: A bound beyond this would pass a skipped step (relative error 1): such a case is not
#: judged (``ill_conditioned``). Also the bound when the emulation is unavailable.
BOUND_CAP = 0.5
#: A region check's bound is at least this many times the error that rounding the region's
#: operands and results to its dtype makes in float64 (``region_gradients``): the device
#: rounds the same operands, so its error is the same draw, up to rounding ties and the
#: order of its sums (measured on the CPU: 1.0 times the emulated error).
REGION_NOISE_FACTOR = 2.0
#: The checkpoint modes' steps against the same steps without checkpointing on the same device
#: (``judge_recomputation``), norm-wise in units of the mode's u: the recomputation is the
#: same arithmetic on the same values (on the CPU the two agree bit for bit), so they may
#: differ only where the device's backward sums in another order (atomic additions in an
#: attention backward: float32-level differences, which under autocast can flip a rounding
#: to bf16 downstream). A dropout mask not replayed moves gradients by tens of percent.
RECOMPUTE_FACTORS = {"float32": 2**6, "half": 2**2}
#: Dropout probability in the block for the checkpoint modes' same-device comparison.
CHECKPOINT_DROPOUT = 0.1
#: The GradScaler's initial scale leaves at least this factor between the reference's
#: largest backward value times the scale and float16's largest finite value.
SCALER_HEADROOM = 8.0
FLOAT16_MAX = 65504.0
#: The GradScaler's default initial scale, the largest this probe uses.
DEFAULT_SCALE = 2.0**16
#: The initial scale where the reference's backward could not be watched (no dispatch
#: modes): small enough for values up to 16 with the headroom above.
FALLBACK_SCALE = 2.0**9


def recompute_tolerance(dtype_name: str) -> float:
    """The norm-wise relative bound of a checkpointed step against the same step without
    checkpointing on the same device (``RECOMPUTE_FACTORS``)."""
    return RECOMPUTE_FACTORS["float32" if dtype_name == "float32" else "half"] * UNIT_ROUNDOFF[dtype_name]


def tolerance(dtype_name: str, quantity: str) -> float:
    """The norm-wise relative bound of ``quantity`` in a mode computing in ``dtype_name``."""
    table = FACTORS["float32" if dtype_name == "float32" else "half"]
    return table[quantity] * UNIT_ROUNDOFF[dtype_name]


def grad_scaler_scale(peak_backward: float | None) -> float:
    """The GradScaler's initial scale: the largest power of two up to the default (2^16)
    for which the reference's largest backward value times the scale stays
    ``SCALER_HEADROOM`` below float16's largest finite value. Backward is linear in the
    loss's gradient, so the scale multiplies every backward value: no float16 tensor of the
    device's backward can overflow (the reference's peak counts float32 intermediates too,
    so this errs on the safe side), and a step the device skips is its own Inf/NaN."""
    if peak_backward is None or not math.isfinite(peak_backward):
        return FALLBACK_SCALE
    if peak_backward <= 0:
        return DEFAULT_SCALE
    exponent = math.floor(math.log2(FLOAT16_MAX / (SCALER_HEADROOM * peak_backward)))
    return float(2.0 ** max(0, min(16, exponent)))


# ---------------------------------------------------------------------------------------------
# The models.


class TinyTransformer(nn.Module):
    """One pre-norm block: token + position embeddings, LayerNorm → causal attention →
    residual, RMSNorm → GELU MLP → residual, final LayerNorm, a linear head to vocabulary
    logits; cross-entropy with label smoothing and an ignore index. Odd sizes: vocabulary
    97, sequence 19, MLP width 131, batch 3."""

    VOCAB, WIDTH, HEADS, SEQ, HIDDEN, BATCH = 97, 48, 3, 19, 131, 3

    def __init__(self) -> None:
        super().__init__()
        width = self.WIDTH
        self.token = nn.Embedding(self.VOCAB, width)
        self.position = nn.Embedding(self.SEQ, width)
        self.attn_norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.attn_out = nn.Linear(width, width)
        # eps given: RMSNorm's default is the input dtype's machine epsilon, which would make
        # float64 and autocast compute different functions.
        self.mlp_norm = nn.RMSNorm(width, eps=1e-5)
        self.mlp_in = nn.Linear(width, self.HIDDEN)
        self.mlp_out = nn.Linear(self.HIDDEN, width)
        self.final_norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, self.VOCAB)

    #: The vocabulary head's computation, ``head_region(x, weight, bias)``; None: the plain
    #: head. The nested modes run it in an inner autocast region (``_inner_region``).
    head_region = None
    #: Whether ``forward`` also returns the head's input and its logits, detached: what the
    #: nested modes' region check starts from.
    expose_head = False
    #: Activation checkpointing (the checkpoint modes): None, off; else the block runs under
    #: ``torch.utils.checkpoint.checkpoint`` with this ``use_reentrant``.
    checkpoint_reentrant: bool | None = None
    #: Dropout after the attention's output projection and the MLP's activation (0: none, as
    #: in the float64 reference; the checkpoint modes' same-device comparison turns it on).
    dropout = 0.0
    #: Fault simulation of the checkpoint modes: called with the MLP's hidden activation when
    #: the block runs again in the backward (a recomputation), returns what the block uses.
    on_recompute: Callable[[torch.Tensor], torch.Tensor] | None = None
    _block_runs = 0

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> Any:
        seq = tokens.shape[1]
        positions = torch.arange(seq, device=tokens.device)
        h = self.token(tokens) + self.position(positions)
        if self.checkpoint_reentrant is None:
            h = self.block(h)
        else:
            self._block_runs = 0
            h = torch.utils.checkpoint.checkpoint(self.block, h, use_reentrant=self.checkpoint_reentrant)
        x = self.final_norm(h)
        logits = self.head(x) if self.head_region is None else self.head_region(x, self.head.weight, self.head.bias)
        loss = self.loss(logits, targets)
        if self.expose_head:
            return loss, x.detach(), logits.detach()
        return loss

    def block(self, h: torch.Tensor) -> torch.Tensor:
        """The pre-norm block: attention and MLP, each added to the residual stream."""
        batch, seq, width = h.shape
        heads = self.HEADS
        q, k, v = self.qkv(self.attn_norm(h)).view(batch, seq, 3, heads, width // heads).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        attention = self.attn_out(attended.transpose(1, 2).reshape(batch, seq, width))
        if self.dropout:
            attention = F.dropout(attention, self.dropout, training=True)
        h = h + attention
        hidden = F.gelu(self.mlp_in(self.mlp_norm(h)))
        if self.dropout:
            hidden = F.dropout(hidden, self.dropout, training=True)
        if self.on_recompute is not None:
            # The first run is the forward; any later one before the next forward recomputes.
            self._block_runs += 1
            if self._block_runs > 1:
                hidden = self.on_recompute(hidden)
        return h + self.mlp_out(hidden)

    @classmethod
    def loss(cls, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(
            logits.reshape(-1, cls.VOCAB), targets.reshape(-1), label_smoothing=0.1, ignore_index=IGNORE_INDEX
        )


class TinyConvNet(nn.Module):
    """conv → batch_norm → ReLU → max pool, conv → batch_norm → SiLU, a residual conv →
    batch_norm added back → SiLU, average pool, adaptive average pool, linear head;
    cross-entropy. Images 4 × 3 × 23 × 23 (odd: the pools drop a row and a column)."""

    CHANNELS, CLASSES, IMAGE, BATCH = 3, 10, 23, 4

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(self.CHANNELS, 12, 3, padding=1, bias=False)
        self.stem_norm = nn.BatchNorm2d(12)
        self.widen = nn.Conv2d(12, 20, 3, padding=1, bias=False)
        self.widen_norm = nn.BatchNorm2d(20)
        self.residual = nn.Conv2d(20, 20, 3, padding=1, bias=False)
        self.residual_norm = nn.BatchNorm2d(20)
        self.head = nn.Linear(20, self.CLASSES)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        h = F.max_pool2d(F.relu(self.stem_norm(self.stem(images))), 2)
        h = F.silu(self.widen_norm(self.widen(h)))
        h = F.silu(h + self.residual_norm(self.residual(h)))
        h = F.avg_pool2d(h, 2)
        h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        return F.cross_entropy(self.head(h), labels)


Batch = tuple[torch.Tensor, torch.Tensor]


def _transformer_batches(generator: torch.Generator) -> list[Batch]:
    """Random tokens; each position's target is the next token, the last position of every
    row and a few more are ignored. One batch per step, then the accumulating step's further
    micro-batches (``step_batches``)."""
    m = TinyTransformer
    out = []
    for step in range(STEPS + MICRO_BATCHES - 1):
        tokens = torch.randint(0, m.VOCAB, (m.BATCH, m.SEQ + 1), generator=generator)
        targets = tokens[:, 1:].clone()
        targets[0, -3:] = IGNORE_INDEX
        targets[step % m.BATCH, 7] = IGNORE_INDEX
        out.append((tokens[:, :-1].contiguous(), targets))
    return out


def _convnet_batches(generator: torch.Generator) -> list[Batch]:
    m = TinyConvNet
    return [
        (
            torch.randn(m.BATCH, m.CHANNELS, m.IMAGE, m.IMAGE, generator=generator),
            torch.randint(0, m.CLASSES, (m.BATCH,), generator=generator),
        )
        for _ in range(STEPS + MICRO_BATCHES - 1)
    ]


def step_batches(batches: list[Batch]) -> list[list[Batch]]:
    """The micro-batches of each step: batch ``s`` for step ``s``, and the batches past
    ``STEPS`` added to the accumulating step."""
    out = [[b] for b in batches[:STEPS]]
    out[ACCUMULATE_STEP].extend(batches[STEPS:])
    return out


def adam_eps(parameter_count: int) -> float:
    """AdamW's ``eps``: a quarter of the root-mean-square of a gradient clipped to
    ``MAX_NORM`` (every step is clipped: the models' norms exceed it)."""
    return MAX_NORM / math.sqrt(parameter_count) / 4.0


def _adamw(model: nn.Module) -> torch.optim.Optimizer:
    """AdamW with weight decay on the matrices (embeddings, linear weights), none on the
    norms' weights and the biases: two parameter groups, as training scripts set it up."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    count = sum(p.numel() for p in model.parameters())
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
        lr=3e-3,
        betas=(0.9, 0.95),
        eps=adam_eps(count),
    )


def _sgd(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)


@dataclass(frozen=True)
class ModelKind:
    """One model of the family: its class, its batches and its optimizer."""

    build: Callable[[], nn.Module]
    batches: Callable[[torch.Generator], list[Batch]]
    optimizer: Callable[[nn.Module], torch.optim.Optimizer]
    optimizer_name: str


MODELS: dict[str, ModelKind] = {
    "transformer": ModelKind(TinyTransformer, _transformer_batches, _adamw, "AdamW"),
    "convnet": ModelKind(TinyConvNet, _convnet_batches, _sgd, "SGD(nesterov)"),
}


def initial_model(kind: ModelKind, seed: int) -> nn.Module:
    """The model with PyTorch's default initialisation drawn from ``seed`` (float32, CPU),
    the process's global generator left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return kind.build()


# ---------------------------------------------------------------------------------------------
# Running the steps.


@dataclass
class Trajectory:
    """What one run of the steps produced, read back as float64 CPU tensors."""

    names: list[str]
    initial: list[torch.Tensor]
    losses: list[torch.Tensor] = field(default_factory=list)
    grad_norms: list[torch.Tensor] = field(default_factory=list)
    #: Step 1's gradients (None where a parameter got none).
    first_grads: list[torch.Tensor | None] = field(default_factory=list)
    #: The accumulating step's gradients, summed over its micro-batches.
    accumulated_grads: list[torch.Tensor | None] = field(default_factory=list)
    #: Step 1's input of the vocabulary head and its logits (models that expose them).
    head_seen: list[torch.Tensor] = field(default_factory=list)
    #: The parameters after each step.
    after: list[list[torch.Tensor]] = field(default_factory=list)
    #: Buffers (batch-norm statistics): before step 1 and after the last step.
    buffers_before: dict[str, torch.Tensor] = field(default_factory=dict)
    buffers_after: dict[str, torch.Tensor] = field(default_factory=dict)
    #: The GradScaler's decision per step (True: the step was skipped).
    skipped: list[bool] = field(default_factory=list)
    #: The largest magnitude of any backward value (reference runs that track it; None
    #: where it could not be watched).
    peak_backward: float | None = None
    #: The exception that ended the run early, as text, and the step it happened in.
    error: str | None = None
    error_step: int = 0
    #: The exception came from Dynamo or Inductor (compiling), not from running kernels.
    compile_error: bool = False
    seconds: float = 0.0
    #: Dynamo's counters after a compiled run (graphs, graph breaks).
    graphs: int | None = None
    graph_breaks: int | None = None

    @property
    def steps_done(self) -> int:
        return len(self.after)

    def update(self, step: int, index: int) -> torch.Tensor:
        """Parameter ``index``'s change in ``step`` (0-based)."""
        before = self.initial[index] if step == 0 else self.after[step - 1][index]
        return self.after[step][index] - before


def _host64(t: torch.Tensor) -> torch.Tensor:
    """A float64 CPU copy (never faulted; always a copy, also of a CPU float64 tensor)."""
    return ops.readback(t.detach()).to(torch.float64, copy=True)


class _Faults:
    """Fault simulation: corrupts the device's gradients (direction ``grad``, after
    backward; ``accumulate``, the partial sum between the accumulating step's micro-batches;
    ``region``, the inner region's parameters' gradients in the nested modes) or parameters
    (``update``, after the optimizer's step) for a fault that names op ``train``, the model
    as method and the mode as variant."""

    def __init__(self, model: str, dtype_name: str, variant: str) -> None:
        engine = simulate.engine()
        self.engine = engine if engine is not None and engine.wants("train") else None
        self.model, self.dtype_name, self.variant = model, dtype_name, variant

    def apply(self, direction: str, tensors: list[torch.Tensor]) -> None:
        if self.engine is None:
            return
        call = simulate.CallInfo(
            op="train", method=self.model, dtype=self.dtype_name, on_device=True, variant=self.variant, direction=direction
        )
        fault = self.engine.decide(call)
        if fault is None:
            return
        if fault.effect in ("exception", "crash", "hang", "oom"):
            self.engine.apply(fault, call, None)
        with torch.no_grad():
            for t in tensors:
                t.copy_(self.engine.apply(fault, call, t.detach().clone()))

    def recomputed(self, t: torch.Tensor) -> torch.Tensor:
        """Direction ``recompute`` (checkpoint modes): ``t``, an activation the block computes
        again in the backward, with the fault's effect; out of place, so that autograd keeps
        the graph it saved (the corruption reaches what the backward reads, not the graph)."""
        if self.engine is None:
            return t
        call = simulate.CallInfo(
            op="train", method=self.model, dtype=self.dtype_name, on_device=True, variant=self.variant, direction="recompute"
        )
        fault = self.engine.decide(call)
        if fault is None:
            return t
        if fault.effect in ("exception", "crash", "hang", "oom"):
            self.engine.apply(fault, call, None)
        bad = self.engine.apply(fault, call, t.detach().clone())
        return t + (bad - t.detach())


def _peak_tracker() -> Any:
    """A dispatch mode that records the largest finite magnitude of every floating value
    computed inside it (None where this torch has no dispatch modes)."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves
    except ImportError:
        return None

    class PeakMagnitude(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.peak = 0.0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            for value in tree_leaves(out):
                if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
                    finite = value.detach().abs().nan_to_num(nan=0.0, posinf=0.0)
                    self.peak = max(self.peak, float(finite.max()))
            return out

    return PeakMagnitude()


#: The operations autocast computes in the half precision, as the float64 reference's
#: dispatcher sees them (matrix products, convolutions and their gradients, attention).
LOWERED_OPS = frozenset(
    {
        "mm",
        "addmm",
        "bmm",
        "baddbmm",
        "addbmm",
        "mv",
        "addmv",
        "dot",
        "convolution",
        "convolution_backward",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention_for_cpu_backward",
    }
)


def _rounding_emulator(dtype: torch.dtype) -> Any:
    """A dispatch mode that rounds the floating operands and results of ``LOWERED_OPS`` to
    ``dtype`` and back (float64 otherwise): autocast's rounding, computed exactly. The
    difference it makes to a float64 run is the error that rounding forces on any correct
    implementation of the mode, with the amplification of every cancelling sum downstream
    (None where this torch has no dispatch modes)."""
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_map
    except ImportError:
        return None

    class RoundingEmulator(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            #: The dtype the products round to now (``rounding_to`` changes it for a region).
            self.dtype = dtype

        @contextlib.contextmanager
        def rounding_to(self, region_dtype: torch.dtype) -> Any:
            saved, self.dtype = self.dtype, region_dtype
            try:
                yield
            finally:
                self.dtype = saved

        def rounded(self, value: Any) -> Any:
            if isinstance(value, torch.Tensor) and value.dtype == torch.float64:
                return value.to(self.dtype).to(torch.float64)
            return value

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func.overloadpacket.__name__ not in LOWERED_OPS:
                return func(*args, **kwargs)
            out = func(*tree_map(self.rounded, args), **tree_map(self.rounded, kwargs))
            return tree_map(self.rounded, out)

    return RoundingEmulator()


def _emulated_region(emulator: Any, dtype: torch.dtype) -> Callable[..., torch.Tensor]:
    """The vocabulary head of the emulated float64 run in a nested mode: its products (the
    forward's and, through a function of its own, the backward's) round to the inner
    region's ``dtype`` instead of the outer autocast's."""

    class EmulatedRegion(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(x, weight)
            with emulator.rounding_to(dtype):
                return F.linear(x, weight, bias)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> Any:
            x, weight = ctx.saved_tensors
            rows = grad.reshape(-1, grad.shape[-1])
            with emulator.rounding_to(dtype):
                return grad @ weight, rows.T @ x.reshape(-1, x.shape[-1]), rows.sum(0)

    return EmulatedRegion.apply


def _inner_region(mode: Mode, emulator: Any) -> Callable[..., torch.Tensor] | None:
    """The vocabulary head's computation in a nested mode (None: the plain head). On the
    device, an inner autocast region inside the outer one, as training code writes it:
    ``autocast(enabled=False)`` with the input cast to float32, or ``autocast(float16)``.
    In the emulated float64 run, the region's own rounding (``_emulated_region``); in the
    plain float64 reference, the plain head."""
    if mode.inner is None:
        return None
    inner = mode.inner
    if mode.autocast is not None:
        device_type = mode.device.type
        if inner == torch.float32:

            def disabled(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
                with torch.autocast(device_type=device_type, enabled=False):
                    return F.linear(x.float(), weight.float(), bias.float())

            return disabled

        def other_dtype(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
            with torch.autocast(device_type=device_type, dtype=inner):
                return F.linear(x, weight, bias)

        return other_dtype
    if emulator is not None:
        return _emulated_region(emulator, inner)
    return None


@dataclass
class Mode:
    """How one run computes: autocast dtype (None: none), the GradScaler's initial scale
    (None: no scaler), compiled or eager, and the device."""

    device: torch.device
    autocast: torch.dtype | None = None
    scale: float | None = None
    compiled: bool = False
    #: float64 runs only: round the operands and results of every matrix product to this
    #: dtype (``_RoundingEmulator``), scaling the loss by ``scale`` as the GradScaler does.
    emulate: torch.dtype | None = None
    #: Nested modes: the dtype the inner region (the vocabulary head) computes in (float32:
    #: autocast disabled there); None: no inner region.
    inner: torch.dtype | None = None
    #: Checkpoint modes' dropout runs: the RNG seed of each micro-batch's forward is derived
    #: from this (the caller forks the generators); None: the generators are not touched.
    dropout_seed: int | None = None


def train(
    model: nn.Module,
    kind: ModelKind,
    batches: list[Batch],
    mode: Mode,
    faults: _Faults | None = None,
    track_peak: bool = False,
    progress: str = "",
) -> Trajectory:
    """Runs the steps; an exception ends the run and is kept in the trajectory."""
    started = time.perf_counter()
    model.train()
    named = list(model.named_parameters())
    params = [p for _, p in named]
    run = Trajectory(names=[n for n, _ in named], initial=[_host64(p) for p in params])
    run.buffers_before = {n: _host64(b) for n, b in model.named_buffers()}
    optimizer = kind.optimizer(model)
    step_module: Callable[..., torch.Tensor] = torch.compile(model, **COMPILE_OPTIONS) if mode.compiled else model
    scaler = None
    if mode.scale is not None and mode.emulate is None:
        scaler = torch.amp.GradScaler(mode.device.type, init_scale=mode.scale)
    # float64 runs: the emulator rounds the matrix products of forward and backward, the
    # tracker watches the backward's magnitudes.
    emulator = _rounding_emulator(mode.emulate) if mode.emulate is not None else None
    tracker = _peak_tracker() if track_peak else None
    forward_context = emulator if emulator is not None else contextlib.nullcontext()
    backward_context = emulator if emulator is not None else tracker if tracker is not None else contextlib.nullcontext()
    manual_scale = mode.scale if mode.emulate is not None else None
    if mode.inner is not None:
        model.head_region = _inner_region(mode, emulator)
        # The device's runs expose the head's input and logits (the region check).
        model.expose_head = mode.autocast is not None
    region_params = [p for n, p in named if n in REGION_PARAMETERS] if mode.inner is not None else []
    for step, parts in enumerate(step_batches(batches)):
        run.error_step = step + 1
        if progress:
            print(f"gpuprobe train: {progress} step {step + 1}", file=sys.stderr, flush=True)
        try:
            optimizer.zero_grad(set_to_none=True)
            losses = []
            for micro, (inputs, targets) in enumerate(parts):
                if mode.dropout_seed is not None:
                    # Every run of the same steps draws the same dropout masks.
                    torch.manual_seed(mode.dropout_seed + 1000 * step + micro)
                if micro and faults is not None:
                    # The partial sum the next micro-batch's backward accumulates into.
                    faults.apply("accumulate", [p.grad for p in params if p.grad is not None])
                if mode.autocast is not None:
                    with torch.autocast(device_type=mode.device.type, dtype=mode.autocast):
                        out = step_module(inputs, targets)
                else:
                    with forward_context:
                        out = step_module(inputs, targets)
                loss, seen = (out[0], out[1:]) if isinstance(out, tuple) else (out, ())
                if step == 0 and seen:
                    run.head_seen = [_host64(t) for t in seen]
                if len(parts) > 1:
                    # Gradient accumulation: each micro-batch's share of the step's loss.
                    loss = loss / len(parts)
                if scaler is not None:
                    backward_of = scaler.scale(loss)
                elif manual_scale is not None:
                    backward_of = loss * manual_scale
                else:
                    backward_of = loss
                with backward_context:
                    backward_of.backward()
                losses.append(loss.detach())
            loss = losses[0] if len(losses) == 1 else torch.stack(losses).sum()
            if faults is not None:
                if region_params:
                    faults.apply("region", [p.grad for p in region_params if p.grad is not None])
                # What backward wrote (scaled, under the GradScaler, which then sees it).
                faults.apply("grad", [p.grad for p in params if p.grad is not None])
            if scaler is not None:
                scaler.unscale_(optimizer)
            elif manual_scale is not None:
                # A power of two: dividing by it is exact in float64.
                for p in params:
                    if p.grad is not None:
                        p.grad.div_(manual_scale)
            if step == 0:
                run.first_grads = [_host64(p.grad) if p.grad is not None else None for p in params]
            if step == ACCUMULATE_STEP:
                run.accumulated_grads = [_host64(p.grad) if p.grad is not None else None for p in params]
            norm = torch.nn.utils.clip_grad_norm_(params, MAX_NORM)
            if scaler is not None:
                before = scaler.get_scale()
                scaler.step(optimizer)
                scaler.update()
                run.skipped.append(scaler.get_scale() < before)
            else:
                optimizer.step()
            if faults is not None:
                faults.apply("update", params)
            run.losses.append(_host64(loss))
            run.grad_norms.append(_host64(norm))
            run.after.append([_host64(p) for p in params])
        except Exception as exc:  # noqa: BLE001 - the probe judges what ran and reports the rest
            run.error = _error_text(exc)
            run.compile_error = mode.compiled and _from_compiler(exc)
            break
    else:
        run.error_step = 0
    run.buffers_after = {n: _host64(b) for n, b in model.named_buffers()}
    if tracker is not None:
        run.peak_backward = tracker.peak
    if mode.compiled:
        run.graphs, run.graph_breaks = _dynamo_counts()
    run.seconds = time.perf_counter() - started
    return run


def _dynamo_counts() -> tuple[int | None, int | None]:
    try:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"]), int(sum(counters["graph_break"].values()))
    except Exception:  # noqa: BLE001 - counters are a report-only nicety
        return None, None


def _error_text(exc: BaseException, limit: int = 300) -> str:
    """``Type: first line``, and the root cause's where the compiler wrapped it."""

    def one(e: BaseException) -> str:
        text = str(e).strip()
        return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"

    root, seen = exc, {id(exc)}
    while (inner := getattr(root, "inner_exception", None) or root.__cause__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        root = inner
    text = one(exc) if root is exc else f"{one(exc)} ({one(root)})"
    return text[:limit]


def _from_compiler(exc: BaseException) -> bool:
    """Whether Dynamo or Inductor raised ``exc`` (tracing, lowering, code generation)."""
    return type(exc).__module__.startswith(("torch._dynamo", "torch._inductor"))


# ---------------------------------------------------------------------------------------------
# Judging.


class TrainTally(CaseTally):
    """The probe's cases, as the sweep counts them, and how much of each bound a passing
    case used."""

    def __init__(self) -> None:
        super().__init__()
        #: The largest error / bound seen per quantity (how much of each bound a healthy run uses).
        self.bound_used: dict[str, float] = {}

    def judge(
        self,
        variant: str,
        direction: str,
        step: int,
        output: str,
        found: torch.Tensor,
        expected: torch.Tensor,
        bound: float,
        *,
        absolute: float = 0.0,
        found_state: torch.Tensor | None = None,
        expected_state: torch.Tensor | None = None,
    ) -> None:
        """One case: ``found`` against ``expected`` norm-wise (``bound`` relative, plus
        ``absolute``); the states (the parameters an update produced) tell whether the wrong
        elements came back as zeros."""
        if not bool(torch.isfinite(expected).all()):
            self.unjudge("reference_nonfinite")
            return
        self.cases += 1
        failure = compare(found, expected, bound, absolute, found_state, expected_state)
        if failure is None:
            self.passed += 1
            scale = bound * float(expected.norm()) + absolute
            if scale > 0:
                used = float((found - expected).norm()) / scale
                self.bound_used[direction] = max(self.bound_used.get(direction, 0.0), used)
            return
        self.fail(variant, direction, step, output, failure)

    def decision(self, variant: str, step: int, skipped: bool, expected_skipped: bool, scale: float) -> None:
        """One case: the GradScaler's decision to take or skip a step."""
        self.cases += 1
        if skipped == expected_skipped:
            self.passed += 1
            return
        if skipped:
            failure = sweep_oracle.LeafFailure(
                sweep_oracle.NONFINITE_INVENTED,
                f"the GradScaler found Inf/NaN in the float16 gradients and skipped the step, at a scale of {scale:g} "
                f"chosen to leave {SCALER_HEADROOM:g}x headroom below float16's largest value",
                expected="step taken",
                found="step skipped",
            )
        else:
            failure = sweep_oracle.LeafFailure(
                sweep_oracle.WRONG_VALUE,
                "the GradScaler took a step its yardstick skipped",
                expected="step skipped",
                found="step taken",
            )
        self.fail(variant, "scaler", step, "found_inf", failure)


def compare(
    found: torch.Tensor,
    expected: torch.Tensor,
    bound: float,
    absolute: float = 0.0,
    found_state: torch.Tensor | None = None,
    expected_state: torch.Tensor | None = None,
) -> sweep_oracle.LeafFailure | None:
    """None when ``‖found − expected‖₂ ≤ bound·‖expected‖₂ + absolute``; else the failure.

    Shapes and non-finite values are the sweep's rules (``compare_leaf`` with an unbounded
    element tolerance: a NaN/Inf where the reference is finite is ``nonfinite_invented``)."""
    structural = sweep_oracle.compare_leaf(torch, found, expected, dtype_name="float32", atol=math.inf, rtol=0.0)
    if structural is not None:
        return structural
    diff = (found - expected).abs()
    err = float(diff.norm())
    reference_norm = float(expected.norm())
    allowed = bound * reference_norm + absolute
    if err <= allowed:
        return None
    flat = diff.reshape(-1)
    worst = int(flat.argmax())
    # An element is wrong when its error exceeds its even share of the allowed norm.
    share = allowed / math.sqrt(max(1, flat.numel()))
    bad = flat > share
    f_state = (found_state if found_state is not None else found).reshape(-1)
    e_state = (expected_state if expected_state is not None else expected).reshape(-1)
    zeros = bool(bad.any()) and bool(((f_state[bad] == 0) & (e_state[bad] != 0)).all())
    all_zero = bool((f_state == 0).all()) and bool((e_state != 0).any())
    relative = err / reference_norm if reference_norm > 0 else math.inf
    index = None
    if found.dim() > 0:
        index = [int(i) for i in torch.unravel_index(torch.tensor(worst), tuple(found.shape))]
    return sweep_oracle.LeafFailure(
        sweep_oracle.WRONG_VALUE,
        f"norm-wise relative error {relative:.3g} where {bound:.3g} is allowed",
        index=index,
        expected=f"{float(expected.reshape(-1)[worst]):.9g}",
        found=f"{float(found.reshape(-1)[worst]):.9g}",
        max_err=float(flat[worst]),
        allowed=allowed,
        zeros=zeros,
        all_zero=all_zero,
        bad_elements=int(bad.sum()),
        elements=flat.numel(),
    )


@dataclass(frozen=True)
class _Quantity:
    """One compared quantity: how to read it from a trajectory, the parameters (or
    buffers) it leaves behind, and how many float32 roundings of those it carries."""

    direction: str
    step: int
    output: str
    value: Callable[[Trajectory], torch.Tensor | None]
    state: Callable[[Trajectory], torch.Tensor] | None = None
    roundings: int = 0


def quantities(reference: Trajectory, steps: int, per_step_updates: bool = True) -> list[_Quantity]:
    """The cases of ``steps`` steps in judging order (the first failure names the verdict):
    step by step the loss, the gradient norm, step 1's and the accumulating step's gradients
    and the updates; then, after every step, the parameters and the running statistics."""
    out: list[_Quantity] = []
    names = reference.names
    for step in range(steps):
        label = step + 1
        out.append(_Quantity("loss", label, "loss", lambda t, s=step: t.losses[s]))
        out.append(_Quantity("grad_norm", label, "grad_norm", lambda t, s=step: t.grad_norms[s]))
        if step == 0:
            for i, name in enumerate(names):
                out.append(_Quantity("grad", label, name, lambda t, i=i: t.first_grads[i]))
        if step == ACCUMULATE_STEP and reference.accumulated_grads:
            for i, name in enumerate(names):
                out.append(
                    _Quantity(
                        "grad", label, name, lambda t, i=i: t.accumulated_grads[i] if t.accumulated_grads else None
                    )
                )
        if per_step_updates:
            for i, name in enumerate(names):
                out.append(
                    _Quantity(
                        "update",
                        label,
                        name,
                        lambda t, s=step, i=i: t.update(s, i),
                        lambda t, s=step, i=i: t.after[s][i],
                        ROUNDINGS_PER_STEP,
                    )
                )
    if steps < STEPS:
        return out
    for i, name in enumerate(names):
        out.append(
            _Quantity(
                "params",
                STEPS,
                name,
                lambda t, i=i: t.after[-1][i] - t.initial[i],
                lambda t, i=i: t.after[-1][i],
                ROUNDINGS_PER_STEP * STEPS,
            )
        )
    for name, after in reference.buffers_after.items():
        if after.is_floating_point():
            out.append(
                _Quantity(
                    "running_stats",
                    STEPS,
                    name,
                    lambda t, n=name: t.buffers_after[n] - t.buffers_before[n],
                    lambda t, n=name: t.buffers_after[n],
                    STEPS,
                )
            )
    return out


def _relative(found: torch.Tensor, expected: torch.Tensor) -> float:
    scale = float(expected.norm())
    err = float((found - expected).norm())
    if not math.isfinite(err):
        return math.inf
    return err / scale if scale > 0 else (0.0 if err == 0 else math.inf)


def judge_run(
    tally: TrainTally,
    variant: str,
    subject: Trajectory,
    yardstick: Trajectory,
    reference: Trajectory,
    noise: Trajectory | None,
    dtype_name: str,
    scale: float | None,
    per_step_updates: bool = True,
    recompute: bool = False,
) -> None:
    """Every case of ``subject`` against ``yardstick`` (the float64 ``reference`` itself,
    or eager on the device). Half-precision bounds come from ``noise``, the reference's
    steps with autocast's rounding emulated: each case's bound is the larger of the
    dtype's floor (``tolerance``) and ``NOISE_FACTOR`` times the error that rounding made
    in the same quantity; a case whose bound would pass ``BOUND_CAP`` is not judged.
    ``recompute``: the yardstick is the same steps without checkpointing on the device, every
    bound ``recompute_tolerance``."""
    half = dtype_name != "float32" and not recompute
    # Both sides of a device yardstick store float32 parameters.
    rounding_sides = 2.0 if variant == "eager" or recompute else 1.0
    steps = min(subject.steps_done, yardstick.steps_done)
    for step in range(steps):
        if scale is not None:
            expected_skip = yardstick.skipped[step] if yardstick.skipped else False
            tally.decision(variant, step + 1, subject.skipped[step], expected_skip, scale)
    for q in quantities(reference, steps, per_step_updates):
        found, expected = q.value(subject), q.value(yardstick)
        if found is None or expected is None:
            other = found if found is not None else expected
            tally.cases += 1
            if other is None or bool((other == 0).all()):
                tally.passed += 1
            else:
                tally.fail(
                    variant,
                    q.direction,
                    q.step,
                    q.output,
                    sweep_oracle.LeafFailure(sweep_oracle.STRUCTURE, "a gradient is missing on one side and non-zero on the other"),
                )
            continue
        bound = recompute_tolerance(dtype_name) if recompute else tolerance(dtype_name, q.direction)
        if half:
            if noise is None or noise.steps_done < steps:
                bound = max(bound, BOUND_CAP)
            else:
                truth, rounded = q.value(reference), q.value(noise)
                if truth is not None and rounded is not None:
                    bound = max(bound, NOISE_FACTOR * _relative(rounded, truth))
            if bound > BOUND_CAP:
                tally.unjudge("ill_conditioned")
                continue
        absolute = 0.0
        if q.state is not None:
            absolute = rounding_sides * q.roundings * PARAMETER_ROUNDOFF * float(q.state(yardstick).norm())
        tally.judge(
            variant,
            q.direction,
            q.step,
            q.output,
            found,
            expected,
            bound,
            absolute=absolute,
            found_state=q.state(subject) if q.state is not None else None,
            expected_state=q.state(yardstick) if q.state is not None else None,
        )
    if subject.steps_done < STEPS or yardstick.steps_done < STEPS:
        return
    for name, after in yardstick.buffers_after.items():
        got = subject.buffers_after.get(name)
        if after.is_floating_point() or got is None:
            continue
        # num_batches_tracked: an exact count.
        tally.cases += 1
        if int(got.item()) == int(after.item()):
            tally.passed += 1
        else:
            tally.fail(
                variant,
                "running_stats",
                STEPS,
                name,
                sweep_oracle.LeafFailure(
                    sweep_oracle.WRONG_VALUE,
                    "batch-norm counted a different number of batches",
                    expected=str(int(after.item())),
                    found=str(int(got.item())),
                ),
            )


def region_gradients(
    x: torch.Tensor, logits: torch.Tensor, targets: torch.Tensor, dtype: torch.dtype
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The gradients of the vocabulary head's weight and bias from the head's own input
    ``x`` and ``logits`` as the device computed them: exactly (float64), and with the
    region's operands and results rounded to ``dtype`` as a correct region in that dtype
    rounds them. The loss's gradient with respect to the logits is recomputed in float64
    from the device's logits (the loss is a float32 operation under autocast)."""
    logits64 = logits.to(torch.float64).requires_grad_(True)
    (dy,) = torch.autograd.grad(TinyTransformer.loss(logits64, targets), logits64)
    rows = dy.reshape(-1, dy.shape[-1])
    inputs = x.to(torch.float64).reshape(-1, x.shape[-1])

    def rounded(t: torch.Tensor) -> torch.Tensor:
        return t.to(dtype).to(torch.float64)

    rows_r = rounded(rows)
    return [rows.T @ inputs, rows.sum(0)], [rounded(rows_r.T @ rounded(inputs)), rounded(rows_r.sum(0))]


def judge_region(tally: TrainTally, subject: Trajectory, targets: torch.Tensor, dtype: torch.dtype) -> None:
    """The nested modes' region check: step 1's gradients of the inner region's parameters
    against ``region_gradients`` from the subject's own head input and logits (variant
    ``float64``, direction ``region_grad``). Bound: the float32 floor of a gradient, or
    ``REGION_NOISE_FACTOR`` times the error that rounding to the region's dtype makes,
    whichever is larger: float32-tight for a float32 region, however bf16 the rest of the
    model is."""
    if subject.steps_done < 1 or len(subject.head_seen) != 2:
        tally.unjudge("region_not_seen", count=len(REGION_PARAMETERS))
        return
    x, logits = subject.head_seen
    exact, rounded = region_gradients(x, logits, targets, dtype)
    for name, expected, emulated in zip(REGION_PARAMETERS, exact, rounded):
        found = subject.first_grads[subject.names.index(name)]
        if found is None:
            tally.cases += 1
            missing = sweep_oracle.LeafFailure(sweep_oracle.STRUCTURE, "the inner region's parameter got no gradient")
            tally.fail("float64", "region_grad", 1, name, missing)
            continue
        bound = max(tolerance("float32", "grad"), REGION_NOISE_FACTOR * _relative(emulated, expected))
        tally.judge("float64", "region_grad", 1, name, found, expected, bound)


# ---------------------------------------------------------------------------------------------
# What the device and the compiler support.


def _require_autocast(ctx: ProbeContext, dtype: torch.dtype, scaler: bool = True) -> None:
    """Skips when autocast in ``dtype`` does not exist on this device type (with
    ``scaler``, float16's GradScaler too)."""
    device_type = ctx.device.type
    if ctx.is_gpu and dtype == torch.bfloat16 and device_type == "cuda":
        try:
            if not torch.cuda.is_bf16_supported():
                raise SkipProbe(f"{torch.cuda.get_device_name(ctx.device)} does not support bfloat16")
        except (RuntimeError, AssertionError) as exc:
            raise SkipProbe(f"bfloat16 support cannot be told: {exc}") from None
    try:
        x = ops.stage(torch.ones(2, 2), ctx.device)
        with torch.autocast(device_type=device_type, dtype=dtype):
            y = x @ x
    except (RuntimeError, ValueError, AssertionError) as exc:
        raise SkipProbe(f"torch.autocast({device_type}, {dtype}) is not available: {_error_text(exc)}") from None
    if y.dtype != dtype:
        raise SkipProbe(f"torch.autocast({device_type}, {dtype}) leaves matrix products in {y.dtype} on {device_type}")
    if dtype == torch.float16 and scaler:
        try:
            torch.amp.GradScaler(device_type)
        except (RuntimeError, ValueError, AssertionError, TypeError) as exc:
            raise SkipProbe(f"torch.amp.GradScaler({device_type!r}) is not available: {_error_text(exc)}") from None


def _share_compile_cache(ctx: ProbeContext) -> None:
    """Inductor's caches in gpuprobe's cache directory, as the compile family keeps them
    (a second run loads what the first compiled)."""
    try:
        compile_run.use_cache(ctx)
    except Exception:  # noqa: BLE001 - a cache is an optimisation: compile without it
        pass


def _require_compiler(ctx: ProbeContext) -> None:
    """Skips when torch.compile cannot work here: no code generator, or one that cannot
    build a one-line function (an incomplete toolchain: headers, a linker), which says
    nothing about the model."""
    problem = compile_run.compiler_problem(torch, ctx.is_gpu)
    if problem:
        raise SkipProbe(problem)
    _share_compile_cache(ctx)
    try:
        x = ops.stage(torch.arange(7, dtype=torch.float32), ctx.device)
        y = torch.compile(lambda t: torch.sin(t) * 2.0 + 1.0)(x)
        ctx.sync()
        if not bool(torch.allclose(ops.readback(y), torch.sin(torch.arange(7, dtype=torch.float32)) * 2.0 + 1.0)):
            raise RuntimeError("the one-line function computed a wrong value")
    except Exception as exc:  # noqa: BLE001 - whatever stops the toolchain: not this probe's finding
        raise SkipProbe(f"torch.compile cannot build a one-line function on {ctx.device.type}: {_error_text(exc)}") from None
    torch._dynamo.reset()
    try:
        from torch._dynamo.utils import counters

        counters.clear()
    except Exception:  # noqa: BLE001 - counters are report-only
        pass


# ---------------------------------------------------------------------------------------------
# The probe.


@contextlib.contextmanager
def _one_thread() -> Any:
    """The CPU's intra-op threads set to one for the block (restored after): the models'
    tensors are a few thousand elements, so threads only add synchronisation; on a busy
    2-core host an eager probe took 3 s with two threads and 0.05 s with one."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def parse_nested(mode: str) -> tuple[str, str | None, bool]:
    """(precision, the inner region's dtype name or None, compiled) of a mode name
    (``bf16``, ``fp16.compile``, ``bf16.inner_fp32.compile``)."""
    compiled = mode.endswith(train_specs.COMPILE_SUFFIX)
    precision = mode[: -len(train_specs.COMPILE_SUFFIX)] if compiled else mode
    inner = None
    if precision in train_specs.nested_modes():
        precision, suffix = precision.split(".", 1)
        inner = dict(train_specs.INNER_REGIONS)[suffix]
    if precision not in dict(train_specs.PRECISIONS):
        raise ValueError(f"unknown train mode {mode!r}")
    return precision, inner, compiled


def parse_mode(mode: str) -> tuple[str, bool]:
    """(precision, compiled) of a mode without an inner region (``bf16``, ``fp16.compile``)."""
    precision, inner, compiled = parse_nested(mode)
    if inner is not None:
        raise ValueError(f"train mode {mode!r} has an inner autocast region")
    return precision, compiled


def parse_checkpoint(mode: str) -> tuple[str, bool]:
    """(the mode without ``.checkpoint``, whether it has it)."""
    if mode.endswith(train_specs.CHECKPOINT_SUFFIX):
        return mode[: -len(train_specs.CHECKPOINT_SUFFIX)], True
    return mode, False


def run_checkpoint(ctx: ProbeContext, *, model: str, mode: str) -> ProbeOutput:
    """The activation-checkpointing modes (``fp32.checkpoint``, ``bf16.checkpoint``): ``run``,
    which adds the recomputation's runs and comparisons (``judge_recomputation``)."""
    return run(ctx, model=model, mode=mode)


def run_nested(ctx: ProbeContext, *, model: str, mode: str) -> ProbeOutput:
    """The nested-autocast modes (``bf16.inner_fp32``, ``bf16.inner_fp16``, compiled or
    not): ``run``, which adds the inner region's check."""
    return run(ctx, model=model, mode=mode)


def run(ctx: ProbeContext, *, model: str, mode: str) -> ProbeOutput:
    """Runs ``STEPS`` training steps of ``model`` in ``mode`` on the device under test and
    judges them against float64 on the CPU (and, compiled, against eager; nested, the inner
    region against float64 from its own inputs)."""
    base_mode, checkpointed = parse_checkpoint(mode)
    precision, inner_name, compiled = parse_nested(base_mode)
    if checkpointed and (compiled or inner_name is not None or model not in train_specs.CHECKPOINT_MODELS):
        raise ValueError(f"train mode {mode!r} of {model!r}: checkpointing is an eager mode of the transformer")
    kind = MODELS[model]
    dtype_name = dict(train_specs.PRECISIONS)[precision] or "float32"
    autocast = getattr(torch, dtype_name) if precision != "fp32" else None
    inner = getattr(torch, inner_name) if inner_name is not None else None
    if autocast is not None:
        _require_autocast(ctx, autocast)
    if inner is not None and inner != torch.float32:
        _require_autocast(ctx, inner, scaler=False)
    if compiled:
        _require_compiler(ctx)

    # Seeds depend on the model, not the mode: every mode of a model starts from the same
    # weights and sees the same batches.
    def seed(tag: str) -> int:
        return derive_seed(ctx.seed, f"train.{model}", tag)

    initial = initial_model(kind, seed("weights"))
    batches = kind.batches(torch.Generator().manual_seed(seed("batches")))
    reference_batches = [(x.to(torch.float64) if x.is_floating_point() else x, y) for x, y in batches]
    device_batches = [(ops.stage(x, ctx.device), ops.stage(y, ctx.device)) for x, y in batches]
    tally = TrainTally()
    metrics: dict[str, Any] = {
        "model": model,
        "mode": mode,
        "dtype": dtype_name,
        "optimizer": kind.optimizer_name,
        "steps": STEPS,
        "accumulating_step": ACCUMULATE_STEP + 1,
        "micro_batches": MICRO_BATCHES,
        "parameters": sum(p.numel() for p in initial.parameters()),
        "max_norm": MAX_NORM,
    }
    if model == "transformer":
        metrics["adam_eps"] = adam_eps(metrics["parameters"])
    if inner_name is not None:
        metrics["inner_region"] = f"{'/'.join(REGION_PARAMETERS)} in {inner_name}"
    started = time.perf_counter()
    # float32 is judged as float32: TF32 is a documented reduced-precision mode. One
    # intra-op thread: the tensors are tiny, and more threads only wait for each other.
    with tf32_mode(torch, False), _one_thread():
        reference = train(
            copy.deepcopy(initial).to(torch.float64),
            kind,
            reference_batches,
            Mode(torch.device("cpu")),
            track_peak=precision == "fp16",
            progress=f"{model} {mode} float64 reference",
        )
        if reference.error is not None:
            # Not the device's doing: nothing can be judged.
            tally.unjudge("reference_failed")
            tally.notes.append(f"the float64 reference failed at step {reference.error_step}: {reference.error}")
            return _output(tally, model, mode, dtype_name, metrics, started)
        scale = grad_scaler_scale(reference.peak_backward) if precision == "fp16" else None
        if scale is not None:
            metrics["init_scale"] = scale
            if reference.peak_backward is None:
                tally.notes.append(f"the reference's backward could not be watched: the GradScaler starts at {scale:g}")
            else:
                metrics["reference_peak_backward"] = round(reference.peak_backward, 6)
        metrics["clipped_steps"] = sum(1 for n in reference.grad_norms if float(n) > MAX_NORM)
        noise = None
        if autocast is not None:
            noise = train(
                copy.deepcopy(initial).to(torch.float64),
                kind,
                reference_batches,
                Mode(torch.device("cpu"), scale=scale, emulate=autocast, inner=inner),
                progress=f"{model} {mode} float64 with {precision} rounding",
            )
            metrics["emulation_s"] = round(noise.seconds, 3)
            if noise.error is not None or _rounding_emulator(autocast) is None:
                tally.notes.append(
                    f"autocast's rounding could not be emulated ({noise.error or 'no dispatch modes in this torch'}): "
                    f"every case is judged with the bound {BOUND_CAP}"
                )
                noise = None
        device_mode = Mode(ctx.device, autocast=autocast, scale=scale, inner=inner)
        faults = _Faults(model, dtype_name, mode.removesuffix(train_specs.COMPILE_SUFFIX))
        device_model = copy.deepcopy(initial).to(ctx.device)
        eager = train(
            _checkpointed(device_model, False, faults) if checkpointed else device_model,
            kind,
            device_batches,
            device_mode,
            faults=faults,
            progress=f"{model} {mode.removesuffix(train_specs.COMPILE_SUFFIX)} eager",
        )
        metrics["eager_s"] = round(eager.seconds, 3)
        subject = eager
        if compiled:
            subject = train(
                copy.deepcopy(initial).to(ctx.device),
                kind,
                device_batches,
                Mode(ctx.device, autocast=autocast, scale=scale, compiled=True, inner=inner),
                faults=_Faults(model, dtype_name, mode),
                progress=f"{model} {mode}",
            )
            metrics["compiled_s"] = round(subject.seconds, 3)
            metrics["graphs"] = subject.graphs
            metrics["graph_breaks"] = subject.graph_breaks
            if subject.graph_breaks:
                tally.notes.append(f"Dynamo broke the compiled model into {subject.graphs} graphs ({subject.graph_breaks} graph breaks)")
        if checkpointed:
            runs = recomputation_runs(ctx, initial, kind, device_batches, device_mode, faults, seed("dropout"), model, mode)
    metrics["reference_s"] = round(reference.seconds, 3)
    judge_run(tally, "float64", subject, reference, reference, noise, dtype_name, scale)
    if checkpointed:
        judge_recomputation(tally, runs, reference, noise, dtype_name, metrics)
    if inner is not None:
        judge_region(tally, subject, batches[0][1], inner)
    _report_error(ctx, tally, subject, mode)
    if compiled:
        if eager.error is None:
            judge_run(tally, "eager", subject, eager, reference, noise, dtype_name, scale, per_step_updates=False)
        else:
            tally.unjudge("eager_failed")
            tally.notes.append(f"eager {precision} failed at step {eager.error_step} ({eager.error}): compiled not compared with it")
    if not ctx.is_gpu and compiled:
        tally.notes.append("on the CPU, torch.compile generates C++ (Inductor's CPU backend), not Triton")
    return _output(tally, model, mode, dtype_name, metrics, started)


def _checkpointed(model: nn.Module, reentrant: bool, faults: _Faults | None, dropout: float = 0.0) -> nn.Module:
    """The transformer with its block under ``checkpoint(use_reentrant=reentrant)``, dropout
    ``dropout``, and the ``recompute`` fault simulation where a fault is active."""
    model.checkpoint_reentrant = reentrant
    model.dropout = dropout
    if faults is not None and faults.engine is not None:
        model.on_recompute = faults.recomputed
    return model


@contextlib.contextmanager
def _forked_rng(device: torch.device) -> Any:
    """The host's and ``device``'s random generators restored after the block (the dropout
    runs seed them)."""
    devices = []
    if device.type == "cuda":
        devices = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=devices):
        yield


def recomputation_runs(
    ctx: ProbeContext,
    initial: nn.Module,
    kind: ModelKind,
    batches: list[Batch],
    device_mode: Mode,
    faults: _Faults,
    dropout_seed: int,
    model: str,
    mode: str,
) -> dict[str, Trajectory]:
    """The checkpoint modes' further runs on the device: ``reentrant`` (``use_reentrant=True``,
    no dropout; against float64); and, with dropout in the block and the generators seeded
    alike before every micro-batch, ``plain`` (no checkpointing), ``non_reentrant`` and
    ``reentrant_dropout`` (checkpointed: the recomputation must replay the masks)."""
    dropout_mode = Mode(
        device_mode.device, autocast=device_mode.autocast, scale=device_mode.scale, dropout_seed=dropout_seed
    )
    out = {
        "reentrant": train(
            _checkpointed(copy.deepcopy(initial).to(ctx.device), True, faults),
            kind,
            batches,
            device_mode,
            faults=faults,
            progress=f"{model} {mode} use_reentrant=True",
        )
    }
    with _forked_rng(ctx.device):
        plain = copy.deepcopy(initial).to(ctx.device)
        plain.dropout = CHECKPOINT_DROPOUT
        out["plain"] = train(plain, kind, batches, dropout_mode, progress=f"{model} {mode} dropout, not checkpointed")
        for name, reentrant in (("non_reentrant", False), ("reentrant_dropout", True)):
            out[name] = train(
                _checkpointed(copy.deepcopy(initial).to(ctx.device), reentrant, faults, CHECKPOINT_DROPOUT),
                kind,
                batches,
                dropout_mode,
                faults=faults,
                progress=f"{model} {mode} dropout, use_reentrant={reentrant}",
            )
    return out


#: The variants of the checkpoint modes' further comparisons: (run, yardstick run or None
#: for float64, variant).
RECOMPUTATION_CASES = (
    ("reentrant", None, "reentrant.float64"),
    ("non_reentrant", "plain", "no_checkpoint"),
    ("reentrant_dropout", "plain", "reentrant.no_checkpoint"),
)


def judge_recomputation(
    tally: TrainTally,
    runs: dict[str, Trajectory],
    reference: Trajectory,
    noise: Trajectory | None,
    dtype_name: str,
    metrics: dict[str, Any],
) -> None:
    """The reentrant run against float64 (as the subject is); the checkpointed dropout runs
    against the same steps without checkpointing on the device, within
    ``recompute_tolerance`` (variants ``no_checkpoint``, ``reentrant.no_checkpoint``)."""
    metrics["checkpoint"] = "use_reentrant=False,True"
    metrics["checkpoint_dropout"] = CHECKPOINT_DROPOUT
    metrics["recompute_bound"] = recompute_tolerance(dtype_name)
    for name, yardstick_name, variant in RECOMPUTATION_CASES:
        run, yardstick = runs[name], runs[yardstick_name] if yardstick_name else reference
        for what, failed in ((variant, run), (f"{variant} yardstick", yardstick)):
            if failed.error is not None:
                if is_device_fault(failed.error) and failed is run:
                    tally.device_error(variant, "step", failed.error_step, failed.error)
                tally.unjudge(f"{name}_failed" if failed is run else "no_checkpoint_failed")
                tally.notes.append(f"{what} failed at step {failed.error_step}: {failed.error}")
                break
        else:
            if yardstick_name is None:
                judge_run(tally, variant, run, reference, reference, noise, dtype_name, None)
            else:
                judge_run(tally, variant, run, yardstick, reference, None, dtype_name, None, recompute=True)


def _report_error(ctx: ProbeContext, tally: TrainTally, subject: Trajectory, mode: str) -> None:
    """A run that raised: a device error (ERROR), or, for an argument check that refused
    the model (not a fault of the stack), a refusal with its reason."""
    if subject.error is None:
        return
    skipped = STEPS - subject.steps_done
    if subject.compile_error:
        # Loud, not silent: the user's own training raises at once. Reported, not judged.
        tally.unjudge("compile_error")
        tally.notes.append(f"torch.compile failed on the model at step {subject.error_step}: {subject.error}")
    elif is_device_fault(subject.error):
        tally.device_error(mode, "step", subject.error_step, subject.error)
    else:
        tally.refuse()
        tally.notes.append(f"the device refused step {subject.error_step} with an argument check: {subject.error}")
    if skipped:
        tally.unjudge("not_run_after_error", count=skipped)
    if ctx.is_gpu:
        problem = device_context_problem(torch, ctx.device)
        if problem is not None:
            ctx.restart_worker = f"train {mode} step {subject.error_step}: {subject.error}; the device context is unusable ({problem})"


def _output(tally: TrainTally, model: str, mode: str, dtype_name: str, metrics: dict[str, Any], started: float) -> ProbeOutput:
    measurement = tally.measurement(f"train.{model}", dtype_name, variant_test_name=mode)
    for quantity, used in sorted(tally.bound_used.items()):
        if math.isfinite(used):
            metrics[f"bound_used_{quantity}"] = round(used, 4)
    metrics["seconds"] = round(time.perf_counter() - started, 3)
    notes = list(tally.notes)
    unjudged = tally.unjudged_note("not judged")
    if unjudged:
        notes.append(unjudged)
    return ProbeOutput(measurement=measurement, metrics=metrics, notes=notes)
