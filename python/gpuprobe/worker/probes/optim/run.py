"""optim family implementation: optimizer steps on the device against float64, and GradScaler.

``run_optimizer`` steps one ``torch.optim`` optimizer in one dtype on the device under test,
in each implementation it has (``forloop``: ``foreach=False``; ``foreach``: the multi-tensor
kernels; ``fused``: the fused kernel) and each configuration of ``CONFIGS`` (PyTorch's
optimizer database's: weight decay, ``amsgrad``, ``maximize``, ``nesterov``, ``centered``,
``capturable``, a tensor learning rate, ...), from the same initial parameters through the
same gradient sequence, and compares after every step:

- each implementation's parameters (and, after the last step, its state: ``exp_avg``,
  ``momentum_buffer``, ``step``, ...) with the same optimizer's for-loop implementation run in
  float64 on the CPU;
- the ``foreach`` and ``fused`` parameters with the device's own for-loop ones, in the same
  dtype (PyTorch's own tests expect them close), within the same bound.

Gradients are drawn per step from a seed, independently of the parameters, and rounded to the
parameter's dtype once; every implementation and the reference see the same values.

**Exactly-zero gradients and extreme hyperparameters.** In the full tier a short list whose
gradients hold exact zeros (``zero_grad_list``: zero rows, scattered zero elements, a tensor
zero at every step and one zero at the first step) is stepped in every configuration and in
the extreme valid ones ``edge_configurations`` derives from the constructor (``lr=0``, a
tensor ``lr`` of 0, averaging coefficients at 0 and next to 1, ``eps=1e-16``, a weight decay
of 10), named ``…+zero_grads`` in the observation. A zero gradient leaves float64's moments
exactly zero, so the right answer is computable: typically the element does not move.

``run_gradscaler`` runs ``torch.amp.GradScaler`` over a schedule of finite and non-finite
gradients with each implementation: a step with an infinity or a NaN in the gradients must
leave parameters and state bit for bit as they were and halve the scale; a finite step must
equal the same optimizer's step on the unscaled gradients; the scale doubles after
``growth_interval`` clean steps.

``run_clip`` drives ``torch.nn.utils.clip_grad_norm_`` and ``clip_grad_value_`` in each
implementation (``foreach`` False, True, None) on the same parameter lists: the returned total
norm against the float64 ``p``-norm of the per-tensor norms and the clipped gradients against
``g·min(max_norm/(total + 1e-6), 1)``, within ``clip_bounds`` (exact for the infinity norm, bit
for bit where nothing is clipped or a value is clamped); a NaN or an infinity in one gradient
must give a NaN or infinite norm, and ``error_if_nonfinite`` must raise where the CPU does.

**The bound.** An element of a parameter after step ``t`` may differ from the float64
reference by ``C·u·Σ_{s≤t} |R_s| + max(C·u, E)·Σ_{s≤t} M_s + t·tiny``, where ``u`` is the unit
roundoff of the parameter's dtype (fp32 2^-24, bf16 2^-8, fp16 2^-11), ``R_s`` the element's
float64 value after step ``s``, ``M_s`` the largest update of step ``s`` over the tensor
(``max |R_s − R_{s−1}|``), ``C`` = ``ROUNDING_FACTOR``, ``tiny`` the dtype's subnormal spacing
and ``E`` the float32 precision of the update's scalar coefficients (``coefficient_precision``).
Why: every step rounds the parameter to its dtype (``u·|R_s|`` a rounding, a few a step), and
computes the update through a chain of operations each rounded to the dtype (the for-loop and
foreach compute in the parameter's dtype, the fused kernels in float32), an error of a few ``u``
of the update's scale; the scale is the tensor's largest update, not the element's own,
because an update that cancels (a moment near zero) keeps the absolute error of its terms.
The fused kernels and capturable steps compute ``1 − β^t`` in float32 on the device, which
costs up to ``u_float32 / (1 − β)`` of the update (``E``; it matters in float32 only). Errors
of earlier steps carry into later ones, hence the sums. State tensors are judged against
``max(C·u, E)·t·max |R|`` of that state over the list; step counters exactly. An element the
float64 reference has not moved from its initial value (a parameter without a gradient, a
learning rate of 0, a gradient that has been exactly zero) must stay unchanged bit for bit:
an update of exactly zero rounds to nothing in any dtype.

**Half precision.** In bfloat16 and float16 the for-loop and foreach implementations keep
their state and compute in the dtype, where some terms leave its resolution (an epsilon of
1e-6 is a float16 subnormal held to 1%): where a case fails the bound, the same for-loop and
foreach steps on the CPU in the same dtype are the yardstick, and an element may differ from
float64 by ``YARDSTICK_FACTOR`` times what either of them does there (unbounded where either
is not finite). Gradients are at least ``GRAD_FLOOR`` in magnitude, so that the second moments
stay normal float16 numbers (exact zeros apart). The fused kernel, where the CPU has it, is a
yardstick too: it computes in float32 but keeps its state in the dtype, where a weight-decayed
zero gradient's second moment is a float16 subnormal. A NaN is accepted only where the same
implementation in the same dtype on the CPU is not finite (float16 cannot hold an epsilon of
1e-8: where a gradient has been zero, the for-loop and foreach steps divide 0 by 0 on every
device; the fused kernel, computing in float32, does not), never by another implementation's.
"""

from __future__ import annotations

import bisect
import copy
import inspect
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from gpuprobe.worker import simulate
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe, device_context_problem
from gpuprobe.worker.faults import is_device_fault
from gpuprobe.worker.probes.sweep import oracle as sweep_oracle
from gpuprobe.worker.tally import CaseTally

#: Optimizer steps per case (each judged).
STEPS = 3
#: ``C`` of the rounding bound (module docstring). On the H200 (torch 2.11) every correct
#: implementation in every configuration used at most 0.37 of the bound (bf16 for-loop
#: Adam; 0.36 in fp32, 0.33 in fp16), apart from half-precision cases the yardstick judges;
#: the planted bugs of ``tests/python/test_optim.py`` (a skipped step, a stale tensor, a wrong
#: bias correction, swapped state, an odd tail left out) cost many times the bound.
ROUNDING_FACTOR = 16.0
#: Half-precision parameters may also differ from float64 by this many times what the
#: for-loop or foreach implementation in their own dtype on the CPU does at the same element.
YARDSTICK_FACTOR = 2.0
#: Dtypes judged with those yardsticks where the bound alone fails them.
YARDSTICK_DTYPES = ("bfloat16", "float16")
#: Scale of the initial parameters (standard normal × this): comparable to one step's update of
#: most optimizers at their default learning rates, so that an update moves a parameter by many
#: units of a half-precision dtype (a step the dtype cannot resolve would hide a skipped one).
PARAM_SCALE = 1e-3
#: Smallest gradient magnitude. The second-moment statistics of half-precision state,
#: (1 − β2)·g² with β2 = 0.999, leave float16's normal range (smallest normal 6.1e-5) below
#: |g| = 0.25; a statistic that underflows makes every implementation divide by a subnormal or
#: by zero, each differently. Gradients of at least this size keep the state normal.
GRAD_FLOOR = 0.25
#: Wall-clock budget of one probe's cases; the rest are counted as not run.
DEFAULT_BUDGET_S = 60.0

#: Probe dtype names → torch dtype attribute names.
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp64": "float64"}
#: Unit roundoff of each dtype (half the distance from 1 to the next number).
UNIT_ROUNDOFF = {"float32": 2.0**-24, "bfloat16": 2.0**-8, "float16": 2.0**-11, "float64": 2.0**-53}
#: The implementations, in the order they run (the for-loop first: the others are compared
#: with it too).
IMPLEMENTATIONS = ("forloop", "foreach", "fused")
#: Failure class of a wrong value (``sweep_oracle``'s classes; the judge maps them).
WRONG_VALUE = sweep_oracle.WRONG_VALUE
NONFINITE_INVENTED = sweep_oracle.NONFINITE_INVENTED
STRUCTURE = sweep_oracle.STRUCTURE


# ---------------------------------------------------------------------------------------------
# Parameter lists.


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a list: its shape, how it is laid out, whether it gets gradients."""

    shape: tuple[int, ...]
    #: ``contiguous``; ``transposed``: ``.t()`` of a contiguous 2-D tensor (dense, not
    #: contiguous); ``strided``: every other column of a tensor twice as wide (not dense).
    layout: str = "contiguous"
    has_grad: bool = True
    #: The parameter's dtype (torch attribute name); None: the probe's.
    dtype: str | None = None
    #: ``param``: the layout autograd gives a gradient (the parameter's strides when it is
    #: dense, contiguous otherwise); ``transposed``: a 2-D gradient stored transposed (strides
    #: other than the parameter's, as a gradient assigned by hand or a bucket view may have).
    grad_layout: str = "param"
    #: Which gradient elements are exactly zero (``ZERO_GRADIENTS``); empty: none.
    grad_zeros: str = ""

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def stress_list(many: int = 112) -> tuple[ParamSpec, ...]:
    """The parameter list every optimizer probe steps: sizes at the kernels' edges (1, 3, 257 and
    65537 elements, one past a 65536-element chunk), an empty parameter, a transposed one
    (dense, not contiguous; its gradient transposed alike, as autograd makes it), 2-D and 3-D
    shapes (factored optimizers), a second parameter of 257 elements (state applied to the
    wrong parameter of the same shape shows), two parameters that never get a gradient
    (skipped by every implementation), and ``many`` small parameters of sizes 1 to 211, so
    that the list (123 parameters) has more tensors than one multi-tensor launch takes (110
    at most, PyTorch's ``depth_to_max_tensors``)."""
    fixed = (
        ParamSpec((1,)),
        ParamSpec((3,)),
        ParamSpec((257,)),
        ParamSpec((65537,)),
        ParamSpec((0,)),
        ParamSpec((33, 17), "transposed"),
        ParamSpec((16, 31)),
        ParamSpec((3, 5, 7)),
        ParamSpec((257,)),
        ParamSpec((5,), has_grad=False),
        ParamSpec((129,), has_grad=False),
    )
    return fixed + tuple(ParamSpec(((i * 53) % 211 + 1,)) for i in range(many))


def grad_layout_list() -> tuple[ParamSpec, ...]:
    """Parameters whose gradient has other strides than the parameter: a strided (not dense)
    parameter with the contiguous gradient autograd gives it, and a contiguous parameter with a
    transposed gradient; beside two ordinary ones. Implementations that need equal layouts must
    refuse them (an argument check), never step them wrongly."""
    return (
        ParamSpec((3,)),
        ParamSpec((8, 33), "strided"),
        ParamSpec((33, 17), grad_layout="transposed"),
        ParamSpec((257,)),
    )


def mixed_list() -> tuple[ParamSpec, ...]:
    """Parameters of float32, bfloat16 and float16 in one group, interleaved (the multi-tensor
    and fused implementations group them by dtype)."""
    out: list[ParamSpec] = []
    for shape, layout in (
        ((3,), "contiguous"),
        ((257,), "contiguous"),
        ((4097,), "contiguous"),
        ((9, 5), "transposed"),
    ):
        for dtype in ("float32", "bfloat16", "float16"):
            out.append(ParamSpec(shape, layout, dtype=dtype))
    out.append(ParamSpec((7,), has_grad=False, dtype="bfloat16"))
    return tuple(out)


#: The classes of exactly-zero gradient elements (``ParamSpec.grad_zeros``), by the step ``s``
#: (from 0) whose gradient they zero: ``rows``: rows (first-dimension slices) 0, 4, 8, ... at
#: every step and the rows ≡ 1 + (s mod 3) (mod 4) at step ``s`` (an embedding row no token
#: used, a unit that stayed inactive); ``elements``: flat elements ≡ 0 (mod 7) at every step
#: and those with ``(i + s)`` ≡ 0 (mod 3) at step ``s``; ``all``: the whole tensor at every
#: step (a parameter whose gradient exists but is zero); ``first``: the whole tensor at the
#: first step only (state born from a zero gradient). A zeroed element keeps the sign of the
#: value drawn for it (``±0``, as a product with zero does).
ZERO_GRADIENTS = ("rows", "elements", "all", "first")


def zero_grad_list() -> tuple[ParamSpec, ...]:
    """Parameters whose gradients hold exact zeros, one of each class of ``ZERO_GRADIENTS``
    (rows in a contiguous and in a transposed 2-D parameter, the whole tensor in a 2-D and a
    3-D one, scattered elements over 4099), beside two ordinary ones. Every nonzero element
    keeps ``GRAD_FLOOR``. The list is short: its cases are about arithmetic, not launches."""
    return (
        ParamSpec((3,)),
        ParamSpec((16, 33), grad_zeros="rows"),
        ParamSpec((33, 17), "transposed", grad_zeros="rows"),
        ParamSpec((4099,), grad_zeros="elements"),
        ParamSpec((5, 7), grad_zeros="all"),
        ParamSpec((3, 4, 5), grad_zeros="first"),
        ParamSpec((257,)),
    )


def zero_mask(torch: Any, shape: tuple[int, ...], pattern: str, step: int) -> Any:
    """Where the gradient of ``step`` (from 0) is exactly zero under ``pattern``
    (``ZERO_GRADIENTS``), as a boolean tensor of ``shape``."""
    count = math.prod(shape)
    if pattern in ("all", "first"):
        return torch.full(shape, pattern == "all" or step == 0, dtype=torch.bool)
    if pattern == "rows":
        rows = torch.arange(shape[0]) % 4
        mask = (rows == 0) | (rows == 1 + step % 3)
        return mask.reshape((shape[0],) + (1,) * (len(shape) - 1)).expand(shape).clone()
    if pattern == "elements":
        index = torch.arange(count)
        return ((index % 7 == 0) | ((index + step) % 3 == 0)).reshape(shape)
    raise ValueError(f"unknown gradient class {pattern!r}")


@dataclass
class ParamSet:
    """The initial values and the gradient sequence of one parameter list, on the host, in each
    parameter's dtype (their float64 copies feed the reference)."""

    specs: tuple[ParamSpec, ...]
    dtypes: list[str]
    initial: list[Any]
    #: ``grads[step][i]``: the gradient of parameter ``i`` at step ``step`` (None without one).
    grads: list[list[Any]]
    #: Offsets of each parameter in the flat float64 vectors the judge compares.
    offsets: list[int]
    _flats: dict[Any, Any] = field(default_factory=dict, repr=False)
    _segments: Any = field(default=None, repr=False)

    def segment_ids(self, torch: Any) -> Any:
        """Each flat element's parameter index."""
        if self._segments is None:
            counts = torch.tensor([spec.numel for spec in self.specs], dtype=torch.int64)
            self._segments = torch.repeat_interleave(torch.arange(len(self.specs)), counts)
        return self._segments

    def per_element(self, torch: Any, per_param: list[float] | list[bool]) -> Any:
        """A per-parameter value spread over the parameter's flat elements."""
        dtype = torch.bool if per_param and isinstance(per_param[0], bool) else torch.float64
        return torch.tensor(per_param, dtype=dtype)[self.segment_ids(torch)]

    def segment_max(self, torch: Any, values: Any) -> Any:
        """Each parameter's largest value (of non-negative ``values``) over its elements."""
        largest = torch.zeros(len(self.specs), dtype=values.dtype)
        largest.scatter_reduce_(0, self.segment_ids(torch), values, reduce="amax", include_self=False)
        return largest[self.segment_ids(torch)]

    def uploads(self, torch: Any, which: Any, device: Any, float64: bool) -> list[Any]:
        """The initial values (``which`` = ``"initial"``) or the gradients of step ``which``
        on ``device``, contiguous in each parameter's shape (None where a parameter has no
        gradient): the host values are joined per dtype once and moved in one copy each."""
        values = self.initial if which == "initial" else self.grads[which]
        key = (which, float64)
        if key not in self._flats:
            groups: dict[Any, list[int]] = {}
            for index, value in enumerate(values):
                if value is not None:
                    groups.setdefault(torch.float64 if float64 else value.dtype, []).append(index)
            joined = []
            for dtype, indices in groups.items():
                joined.append((torch.cat([values[i].reshape(-1).to(dtype) for i in indices]), indices))
            self._flats[key] = joined
        out: list[Any] = [None] * len(values)
        for flat, indices in self._flats[key]:
            moved = flat.to(device, copy=True)
            offset = 0
            for index in indices:
                count = self.specs[index].numel
                out[index] = moved[offset : offset + count].view(self.specs[index].shape)
                offset += count
        return out


def make_param_set(torch: Any, specs: tuple[ParamSpec, ...], dtype_name: str, seed: int, steps: int) -> ParamSet:
    """Initial parameters (standard normal × ``PARAM_SCALE``) and ``steps`` gradients
    (``_gradient``), drawn in float64 from ``seed`` and rounded to each parameter's dtype."""
    generator = torch.Generator().manual_seed(seed)
    dtypes = [spec.dtype or dtype_name for spec in specs]
    initial = [
        (torch.randn(spec.shape, generator=generator, dtype=torch.float64) * PARAM_SCALE).to(getattr(torch, d))
        for spec, d in zip(specs, dtypes)
    ]
    grads = []
    for step in range(steps):
        row = []
        for spec, d in zip(specs, dtypes):
            if not spec.has_grad:
                row.append(None)
                continue
            value = _gradient(torch, spec.shape, generator)
            if spec.grad_zeros:
                value = torch.where(zero_mask(torch, spec.shape, spec.grad_zeros, step), value * 0.0, value)
            row.append(value.to(getattr(torch, d)))
        grads.append(row)
    offsets = [0]
    for spec in specs:
        offsets.append(offsets[-1] + spec.numel)
    return ParamSet(specs, dtypes, initial, grads, offsets)


def _gradient(torch: Any, shape: tuple[int, ...], generator: Any) -> Any:
    """Gradient values ``sign(z) · (GRAD_FLOOR + |z|)`` for standard normal ``z`` (float64)."""
    z = torch.randn(shape, generator=generator, dtype=torch.float64)
    return torch.where(z < 0, -1.0, 1.0).to(torch.float64) * (GRAD_FLOOR + z.abs())


def without_empty(param_set: ParamSet) -> ParamSet:
    """The same parameter set without its empty parameters."""
    keep = [i for i, spec in enumerate(param_set.specs) if spec.numel > 0]
    specs = tuple(param_set.specs[i] for i in keep)
    offsets = [0]
    for spec in specs:
        offsets.append(offsets[-1] + spec.numel)
    return ParamSet(
        specs,
        [param_set.dtypes[i] for i in keep],
        [param_set.initial[i] for i in keep],
        [[grads[i] for i in keep] for grads in param_set.grads],
        offsets,
    )


def make_params(torch: Any, param_set: ParamSet, device: Any, float64: bool = False) -> list[Any]:
    """New leaf parameters on ``device`` holding the initial values, each in its spec's
    layout (``ParamSpec.layout``)."""
    params = []
    for spec, values in zip(param_set.specs, param_set.uploads(torch, "initial", device, float64)):
        if spec.layout == "transposed":
            data = values.t().contiguous().t()
        elif spec.layout == "strided":
            rows, cols = spec.shape
            wide = torch.zeros((rows, 2 * cols), dtype=values.dtype, device=values.device)
            wide[:, ::2] = values
            data = wide[:, ::2]
        else:
            # A new tensor: the upload is a view of one buffer shared by the list.
            data = values.clone()
        params.append(data.requires_grad_(True))
    return params


def _flat(torch: Any, tensors: list[Any]) -> Any:
    """The tensors' values, in order, as one flat float64 CPU vector: always a copy (one
    transfer), never a view of a live parameter. Mixed dtypes are joined in the widest."""
    if not tensors:
        return torch.zeros(0, dtype=torch.float64)
    with torch.no_grad():
        return torch.cat([t.detach().reshape(-1) for t in tensors]).cpu().double()


def set_grads(
    torch: Any,
    params: list[Any],
    param_set: ParamSet,
    step: int,
    device: Any,
    float64: bool = False,
    scale: float = 1.0,
) -> None:
    """Gives each parameter the gradient of ``step`` (times ``scale``, a power of two) in its
    spec's gradient layout (``ParamSpec.grad_layout``); a gradient tensor of the last step is
    reused, as a training loop that zeroes gradients instead of freeing them does."""
    sources = param_set.uploads(torch, step, device, float64)
    holders, values = [], []
    for param, source, spec in zip(params, sources, param_set.specs):
        if source is None:
            param.grad = None
            continue
        holder = param.grad
        if holder is None:
            if spec.grad_layout == "transposed":
                holder = torch.empty(tuple(reversed(param.shape)), dtype=param.dtype, device=param.device).t()
            else:
                # empty_like keeps a dense tensor's strides and makes a non-dense one's
                # contiguous: autograd's layout contract for gradients.
                holder = torch.empty_like(param, memory_format=torch.preserve_format)
            param.grad = holder
        holders.append(holder)
        values.append(source)
    with torch.no_grad():
        for holder, source in zip(holders, values):
            holder.copy_(source)
        if scale != 1.0 and holders:
            for holder in holders:
                holder.mul_(scale)


# ---------------------------------------------------------------------------------------------
# Configurations and implementations.


@dataclass(frozen=True)
class Config:
    """One optimizer configuration: keyword arguments (without the implementation flags)."""

    name: str
    kwargs: dict[str, Any] = field(hash=False, compare=False)


def config_name(kwargs: dict[str, Any], tensor_values: bool = False) -> str:
    """A short, stable name from the keyword arguments: ``default``, or the arguments joined by
    ``+`` (``weight_decay=0.1+amsgrad``; ``lr=tensor`` for a tensor learning rate, or with
    ``tensor_values`` ``lr=tensor(0)``)."""
    parts = []
    for key, value in kwargs.items():
        if value is True:
            parts.append(key)
        elif value is False:
            parts.append(f"no_{key}")
        elif tensor_values and isinstance(value, TensorArg):
            parts.append(f"{key}=tensor({value.value:g})")
        elif _tensorlike(value) or (isinstance(value, tuple) and any(_tensorlike(v) for v in value)):
            parts.append(f"{key}=tensor")
        elif isinstance(value, tuple):
            parts.append(f"{key}=" + ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value))
        elif isinstance(value, float):
            parts.append(f"{key}={value:g}")
        else:
            parts.append(f"{key}={value}")
    return "+".join(parts) or "default"


def _is_tensor(value: Any) -> bool:
    return type(value).__name__ in ("Tensor", "Parameter") and hasattr(value, "dtype")


def _tensorlike(value: Any) -> bool:
    return _is_tensor(value) or isinstance(value, TensorArg)


@dataclass(frozen=True)
class TensorArg:
    """A hyperparameter given as a tensor (``lr=torch.tensor(1e-3)``), of this value and shape."""

    value: float
    shape: tuple[int, ...] = ()

    def make(self, torch: Any) -> Any:
        return torch.full(self.shape, self.value)


#: Every configuration each optimizer is stepped in: the ``optim_inputs_func`` of PyTorch's
#: optimizer database (``torch.testing._internal.common_optimizers.optim_db``) for CUDA, as
#: data (importing the database costs about 12 s of a host core; ``tests/python/test_optim.py``
#: checks that this table still equals the installed database). Configurations with
#: ``capturable`` run only on a GPU (the database offers them for CUDA only); the
#: implementation flags (``foreach``, ``fused``) are added per case, ``differentiable`` stays off.
CONFIGS: dict[str, tuple[dict[str, Any], ...]] = {
    "Adadelta": (
        {},
        {"lr": 0.01},
        {"weight_decay": 0.1},
        {"maximize": True},
        {"weight_decay": 0.1, "maximize": True},
        {"rho": 0.95, "weight_decay": 0.9},
        {"capturable": True},
        {"weight_decay": 0.1, "capturable": True},
        {"lr": TensorArg(1e-3), "capturable": True},
    ),
    "Adafactor": (
        {},
        {"weight_decay": 0.1, "lr": 0.01},
        {"weight_decay": 0.1, "maximize": True},
        {"beta2_decay": -1.0},
        {"d": 1.5},
    ),
    "Adagrad": (
        {},
        {"weight_decay": 0.1},
        {"weight_decay": 0.1, "maximize": True},
        {"lr": 0.1},
        {"initial_accumulator_value": 0.1, "weight_decay": 0.1},
        {"lr": 0.1, "lr_decay": 0.5, "weight_decay": 0.1},
        {"lr": TensorArg(1e-3)},
    ),
    "Adam": (
        {},
        {"lr": 0.01},
        {"weight_decay": 0.1},
        {"weight_decay": 0.1, "maximize": True},
        {"weight_decay": 0.1, "amsgrad": True},
        {"capturable": True},
        {"weight_decay": 0.1, "amsgrad": True, "capturable": True},
        {"lr": TensorArg(1e-3), "amsgrad": True, "capturable": True},
        {
            "lr": TensorArg(1e-3),
            "betas": (TensorArg(0.9, (1, 1, 1)), TensorArg(0.99, (1, 1))),
            "amsgrad": True,
            "capturable": True,
        },
        {"lr": TensorArg(1e-3), "betas": (TensorArg(0.9), TensorArg(0.99)), "amsgrad": False, "capturable": True},
    ),
    "Adamax": (
        {},
        {"lr": 0.1},
        {"weight_decay": 0.1},
        {"maximize": True},
        {"weight_decay": 0.1, "maximize": True},
        {"capturable": True},
        {"weight_decay": 0.9, "maximize": True, "capturable": True},
        {"weight_decay": 0, "maximize": True, "capturable": True},
        {"weight_decay": 0.9, "maximize": False, "capturable": True},
        {"lr": TensorArg(1e-3), "weight_decay": 0.9, "maximize": False, "capturable": True},
    ),
    "AdamW": (
        {},
        {"lr": 0.01},
        {"weight_decay": 0.1},
        {"weight_decay": 0.1, "maximize": True},
        {"weight_decay": 0.1, "amsgrad": True},
        {"capturable": True},
        {"weight_decay": 0.1, "amsgrad": True, "capturable": True},
        {"lr": TensorArg(1e-3), "amsgrad": True, "capturable": True},
        {
            "lr": TensorArg(1e-3),
            "betas": (TensorArg(0.9, (1, 1, 1)), TensorArg(0.99, (1, 1))),
            "amsgrad": True,
            "capturable": True,
        },
        {"lr": TensorArg(1e-3), "betas": (TensorArg(0.9), TensorArg(0.99)), "amsgrad": False, "capturable": True},
    ),
    "ASGD": (
        {},
        {"lambd": 0.1},
        {"lr": 0.02},
        {"t0": 100},
        {"maximize": True},
        {"weight_decay": 0.1},
        {"weight_decay": 0.1, "maximize": True},
        {"capturable": True},
        {"maximize": True, "capturable": True},
        {"weight_decay": 0.1, "capturable": True},
        {"weight_decay": 0.1, "maximize": True, "capturable": True},
        {"lr": TensorArg(1e-3), "weight_decay": 0.1, "maximize": True, "capturable": True},
    ),
    "NAdam": (
        {},
        {"lr": 0.001},
        {"momentum_decay": 0.006},
        {"weight_decay": 0.1},
        {"weight_decay": 0.1, "momentum_decay": 0.006},
        {"weight_decay": 0.1, "momentum_decay": 0.006, "decoupled_weight_decay": True},
        {"weight_decay": 0.1, "maximize": True},
        {"capturable": True},
        {"weight_decay": 0.9, "momentum_decay": 0.006, "capturable": True},
        {"weight_decay": 0.9, "momentum_decay": 0.006, "decoupled_weight_decay": True, "capturable": True},
        {
            "lr": TensorArg(1e-3),
            "weight_decay": 0.9,
            "momentum_decay": 0.006,
            "decoupled_weight_decay": True,
            "capturable": True,
        },
    ),
    "RAdam": (
        {},
        {"lr": 0.002},
        {"eps": 1e-06},
        {"weight_decay": 0.1},
        {"weight_decay": 0.1, "decoupled_weight_decay": True},
        {"weight_decay": 0.1, "maximize": True},
        {"capturable": True},
        {"capturable": True, "weight_decay": 0.1},
        {"capturable": True, "weight_decay": 0.1, "decoupled_weight_decay": True},
        {"lr": TensorArg(1e-3), "capturable": True, "weight_decay": 0.1, "decoupled_weight_decay": True},
    ),
    "RMSprop": (
        {},
        {"lr": 0.001},
        {"weight_decay": 0.1},
        {"maximize": True},
        {"weight_decay": 0.1, "centered": True},
        {"maximize": True, "weight_decay": 0.1},
        {"weight_decay": 0.1, "centered": True, "momentum": 0.1},
        {"weight_decay": 0.1, "centered": True, "momentum": 0.1, "maximize": True},
        {"capturable": True},
        {"weight_decay": 0.1, "maximize": True, "capturable": True},
        {"lr": TensorArg(1e-3), "capturable": True},
    ),
    "Rprop": (
        {},
        {"lr": 0.0002},
        {"etas": (0.5, 1.5)},
        {"step_sizes": (2e-06, 100)},
        {"maximize": True},
        {"capturable": True},
        {"lr": TensorArg(1e-3), "capturable": True},
    ),
    "SGD": (
        {},
        {"lr": 0.01},
        {"lr": TensorArg(1e-3)},
        {"weight_decay": 0.5},
        {"momentum": 0.9},
        {"weight_decay": 0.1, "maximize": True},
        {"momentum": 0.9, "dampening": 0.5},
        {"momentum": 0.9, "weight_decay": 0.1},
        {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1},
    ),
}


def configurations(torch: Any, class_name: str, device_type: str) -> list[Config]:
    """The configurations of ``class_name`` on ``device_type``, tensors made."""
    out = []
    for raw in CONFIGS.get(class_name, ({},)):
        if raw.get("capturable") and device_type == "cpu":
            continue
        kwargs = {key: _materialize(torch, value) for key, value in raw.items()}
        out.append(Config(config_name(raw), kwargs))
    return _unique(out)


#: Extreme valid hyperparameters (``edge_configurations``): a learning rate of 0, averaging
#: coefficients at 0 and next to 1, an epsilon below float16's smallest subnormal (5.96e-8; a
#: normal number in float32 and bfloat16), a weight decay of 10.
ZERO_LR = 0.0
NEAR_ONE = 0.999999
TINY_EPS = 1e-16
LARGE_WEIGHT_DECAY = 10.0
#: The learning rate the large weight decay is stepped with. It keeps ``weight_decay·|p|``
#: (parameters of about 1e-3 moving by at most about ten learning rates a step) far below
#: ``GRAD_FLOOR``: where the decay term cancels most of a gradient, the step is ill-conditioned
#: (an error of one rounding in the parameter comes back multiplied by
#: ``weight_decay·lr/sqrt(v)``; RMSprop at its default learning rate of 0.01 in float32
#: amplifies it about 50 times a step), which no bound of a few roundings can judge.
LARGE_WEIGHT_DECAY_LR = 1e-4


def edge_configurations(torch: Any, cls: Any, class_name: str, device_type: str) -> list[Config]:
    """Configurations beyond PyTorch's database, derived from the constructor's signature: each
    is one class of extreme valid hyperparameters, the others left at their defaults.

    - ``lr=0`` where the constructor takes ``lr``;
    - ``lr=tensor(0)`` where the database steps a tensor learning rate, with ``capturable``
      where its tensor configuration has it (a GPU's);
    - every averaging coefficient the constructor takes (``betas``, ``alpha``, ``rho``) at 0,
      and next to 1 (``NEAR_ONE``);
    - ``eps=1e-16`` where the default epsilon is a number;
    - ``weight_decay=10`` with a learning rate of 1e-4 (``LARGE_WEIGHT_DECAY_LR``);
    - ``maximize`` joins the epsilon's configuration, or ``lr=0`` where there is no epsilon
      (a maximized zero gradient is a negative zero).
    """
    try:
        signature = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return []
    defaults = {name: parameter.default for name, parameter in signature.items()}
    maximize: dict[str, Any] = {"maximize": True} if "maximize" in defaults else {}
    float_eps = isinstance(defaults.get("eps"), float)
    raw: list[dict[str, Any]] = []
    if "lr" in defaults:
        raw.append(dict({"lr": ZERO_LR}, **({} if float_eps else maximize)))
        tensor = next((c for c in CONFIGS.get(class_name, ()) if isinstance(c.get("lr"), TensorArg)), None)
        if tensor is not None:
            raw.append(dict({"lr": TensorArg(ZERO_LR)}, **{k: v for k, v in tensor.items() if k == "capturable"}))
    for value in (0.0, NEAR_ONE):
        entry: dict[str, Any] = {}
        for key in AVERAGING_HYPERPARAMETERS:
            default = defaults.get(key)
            if isinstance(default, tuple) and all(isinstance(v, float) for v in default):
                entry[key] = tuple(value for _ in default)
            elif isinstance(default, float):
                entry[key] = value
        if entry:
            raw.append(entry)
    if float_eps:
        raw.append(dict({"eps": TINY_EPS}, **maximize))
    if isinstance(defaults.get("weight_decay"), (int, float)):
        raw.append(
            dict({"lr": LARGE_WEIGHT_DECAY_LR} if "lr" in defaults else {}, weight_decay=LARGE_WEIGHT_DECAY)
        )
    out = []
    for entry in raw:
        if entry.get("capturable") and device_type == "cpu":
            continue
        kwargs = {key: _materialize(torch, value) for key, value in entry.items()}
        out.append(Config(config_name(entry, tensor_values=True), kwargs))
    return out


#: Averaging coefficients above this leave ``(1 − β)·GRAD_FLOOR²`` below float16's smallest
#: normal number (6.1e-5): the second moment of the first step is a float16 subnormal.
FLOAT16_LARGEST_AVERAGING = 0.999


def state_stays_normal_in_float16(config: Config) -> bool:
    """Whether a configuration keeps float16 optimizer state in the normal range when
    gradients hold exact zeros (the ``GRAD_FLOOR`` rule's reason, for the zero-gradient
    list): not with a weight decay (a zero gradient plus ``weight_decay·p``, about 1e-4 for
    parameters of about 1e-3, is a gradient whose moments are subnormal), nor with an
    averaging coefficient next to 1. On the H200 such cases of Adam, AdamW (fused,
    ``betas=0.999999``) and Adamax (for-loop, ``weight_decay=0.1``) differed from float64 by
    1.07-1.2 times the bound, where every implementation rounds subnormal state its own way."""
    decay = config.kwargs.get("weight_decay", 0)
    if isinstance(decay, (int, float)) and decay > 0:
        return False
    for key in AVERAGING_HYPERPARAMETERS:
        value = config.kwargs.get(key)
        values = value if isinstance(value, tuple) else (value,)
        if any(isinstance(v, float) and v > FLOAT16_LARGEST_AVERAGING for v in values):
            return False
    return True


def _materialize(torch: Any, value: Any) -> Any:
    if isinstance(value, TensorArg):
        return value.make(torch)
    if isinstance(value, tuple):
        return tuple(_materialize(torch, item) for item in value)
    return value


def implementations(cls: Any) -> tuple[str, ...]:
    """The implementations ``cls`` offers: the for-loop, and foreach and fused where its
    constructor takes the flag (whether the device has the fused kernel is the device's to
    say: a refusal is reported as not applicable)."""
    try:
        signature = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return ("forloop",)
    return tuple(name for name in IMPLEMENTATIONS if name == "forloop" or name in signature)


def _unique(configs: list[Config]) -> list[Config]:
    """Configurations with distinct names (two entries with the same arguments would run
    twice under one name)."""
    seen: dict[str, int] = {}
    out = []
    for config in configs:
        count = seen.get(config.name, 0)
        seen[config.name] = count + 1
        out.append(config if count == 0 else Config(f"{config.name}#{count + 1}", config.kwargs))
    return out


def implementation_flags(cls: Any, implementation: str) -> dict[str, Any]:
    """The constructor flags that select an implementation."""
    try:
        signature = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        signature = {}
    flags: dict[str, Any] = {}
    if implementation == "forloop":
        if "foreach" in signature:
            flags["foreach"] = False
        if "fused" in signature:
            flags["fused"] = False
    elif implementation == "foreach":
        flags["foreach"] = True
    elif implementation == "fused":
        flags["fused"] = True
    return flags


def reference_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The configuration as the float64 CPU reference runs it: tensors as Python numbers (same
    values), not capturable (capturable changes where the state lives, not the arithmetic)."""

    def plain(value: Any) -> Any:
        if _is_tensor(value):
            return float(value.detach().cpu().reshape(-1)[0])
        if isinstance(value, tuple):
            return tuple(plain(v) for v in value)
        return value

    out = {k: plain(v) for k, v in kwargs.items() if k != "capturable"}
    return out


def _fresh_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A copy of the configuration whose tensors are new (an optimizer may keep or move them)."""
    return {k: copy.deepcopy(v) for k, v in kwargs.items()}


# ---------------------------------------------------------------------------------------------
# Trajectories.


@dataclass
class Trajectory:
    """What one implementation did: its parameters (flat float64) after each step and its state
    after the last."""

    params: list[Any]
    #: ``state[key]``: (flat float64 values of that state over the parameters that have it,
    #: the parameter indices, each one's element count); ``step`` values separately.
    state: dict[str, tuple[Any, list[int], list[int]]]
    steps: dict[int, float]
    #: Parameter indices with no state although they had gradients (skipped), for the judge.
    stateless: list[int]
    #: The optimizer's hyperparameters as its parameter group holds them (defaults included).
    hyper: dict[str, Any] = field(default_factory=dict)


#: Called after each step with (step number from 1, optimizer, parameters); the tests use it to
#: plant the faults the probe must catch (a skipped step, swapped state, ...).
Tamper = Callable[[int, Any, list[Any]], None]


def run_trajectory(
    torch: Any,
    cls: Any,
    kwargs: dict[str, Any],
    param_set: ParamSet,
    device: Any,
    steps: int,
    *,
    float64: bool = False,
    after_step: Callable[[int, list[Any]], None] | None = None,
    tamper: Tamper | None = None,
    sync: Callable[[], None] | None = None,
) -> Trajectory:
    """Steps ``cls(**kwargs)`` over the parameter set; ``float64`` runs it on float64 copies
    (the reference). Exceptions propagate (the caller classifies them)."""
    params = make_params(torch, param_set, device, float64)
    optimizer = cls(params, **kwargs)
    flats = []
    for step in range(steps):
        set_grads(torch, params, param_set, step, device, float64)
        optimizer.step()
        if tamper is not None:
            with torch.no_grad():
                tamper(step + 1, optimizer, params)
        if after_step is not None:
            with torch.no_grad():
                after_step(step + 1, params)
        if sync is not None:
            sync()
        flats.append(_flat(torch, params))
    return _trajectory(torch, optimizer, params, flats)


def _trajectory(torch: Any, optimizer: Any, params: list[Any], flats: list[Any]) -> Trajectory:
    state: dict[str, tuple[list[Any], list[int], list[int]]] = {}
    step_values: dict[int, float] = {}
    stateless = []
    for index, param in enumerate(params):
        entry = optimizer.state.get(param) if hasattr(optimizer.state, "get") else None
        if not entry:
            if param.grad is not None:
                stateless.append(index)
            continue
        for key, value in entry.items():
            if key == "step":
                step_values[index] = float(value.detach().cpu()) if _is_tensor(value) else float(value)
                continue
            if not _is_tensor(value):
                if isinstance(value, (int, float)):
                    value = torch.tensor(float(value), dtype=torch.float64)
                else:
                    continue
            tensors, indices, counts = state.setdefault(key, ([], [], []))
            tensors.append(value)
            indices.append(index)
            counts.append(value.numel())
    flat_state = {key: (_flat(torch, tensors), indices, counts) for key, (tensors, indices, counts) in state.items()}
    hyper = {k: v for k, v in optimizer.param_groups[0].items() if k != "params"} if optimizer.param_groups else {}
    return Trajectory(flats, flat_state, step_values, stateless, hyper)


# ---------------------------------------------------------------------------------------------
# The judge.


@dataclass
class Finding:
    """How one implementation's result differs from what it should be."""

    cls: str
    output: str
    detail: str
    index: list[int] | None = None
    expected: str = ""
    found: str = ""
    max_err: float | None = None
    allowed: float | None = None
    zeros: bool = False
    all_zero: bool = False
    bad_elements: int = 0
    elements: int = 0


class Bounds:
    """The allowed error of every parameter element after each step (module docstring), from
    the float64 reference trajectory and, for half-precision parameters, the yardsticks (the
    for-loop and foreach implementations in the parameters' own dtype on the CPU). An element
    the reference has not moved from its initial value is allowed no error at all.

    ``yardsticks`` given by implementation (``forloop``, ``foreach``, ``fused``) also say
    where that implementation may be non-finite (``nonfinite_ok``)."""

    def __init__(
        self,
        torch: Any,
        param_set: ParamSet,
        reference: Trajectory,
        factor: float = ROUNDING_FACTOR,
        yardsticks: list[Trajectory] | dict[str, Trajectory] | None = None,
    ) -> None:
        self.torch = torch
        self.param_set = param_set
        self.reference = reference
        self.factor = factor
        self.by_implementation = dict(yardsticks) if isinstance(yardsticks, dict) else {}
        self.yardsticks = list(yardsticks.values()) if isinstance(yardsticks, dict) else list(yardsticks or [])
        unit = param_set.per_element(torch, [UNIT_ROUNDOFF[d] for d in param_set.dtypes])
        self.tiny = param_set.per_element(torch, [_subnormal_spacing(torch, d) for d in param_set.dtypes])
        exact = param_set.per_element(torch, [not spec.has_grad for spec in param_set.specs])
        self.coefficients = coefficient_precision(reference.hyper)
        self.rounding = factor * unit
        # The update's relative error: the dtype's rounding through the update's chain of
        # operations, or the float32 precision of its scalar coefficients, whichever is larger.
        self.update = torch.clamp(self.rounding, min=self.coefficients)
        previous = _flat(torch, param_set.initial)
        initial = previous
        magnitudes = torch.zeros_like(previous)
        updates = torch.zeros_like(previous)
        #: Elements the reference has left at their initial value in every step so far (a
        #: parameter without a gradient, a learning rate of 0, a gradient that has been
        #: exactly zero): every implementation must leave them so, bit for bit.
        unmoved = torch.ones_like(exact)
        self.allowed: list[Any] = []
        for step, values in enumerate(reference.params):
            magnitudes = magnitudes + values.abs()
            updates = updates + param_set.segment_max(torch, (values - previous).abs())
            unmoved = unmoved & (values == initial)
            allowed = self.rounding * magnitudes + self.update * updates + (step + 1) * self.tiny
            for yardstick in self.yardsticks:
                allowed = torch.maximum(allowed, _yardstick_allowance(torch, yardstick.params[step], values))
            self.allowed.append(torch.where(exact | unmoved, torch.zeros_like(allowed), allowed))
            previous = values
        self._state: dict[str, Any] = {}

    def state_allowed(self, key: str, steps: int) -> Any:
        """The allowed error of the reference state ``key`` (flat, over the parameters that
        keep it): the update's relative error times ``t`` times the state's largest magnitude
        over every parameter that keeps it, plus ``t`` subnormal spacings; at least
        ``YARDSTICK_FACTOR`` times the error of the yardstick's same state. The scale is the
        list's, not each tensor's: a state of one element that cancels (RMSprop's centred
        average of gradients of opposite signs, 400 times smaller than its terms) keeps the
        absolute error of its terms and has no larger element of its own."""
        if key in self._state:
            return self._state[key]
        torch = self.torch
        values, indices, counts = self.reference.state[key]
        segments = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts, dtype=torch.int64))
        largest = values.abs().max() if values.numel() else torch.zeros((), dtype=torch.float64)
        dtypes = [self.param_set.dtypes[i] for i in indices]
        unit = torch.tensor([UNIT_ROUNDOFF[d] for d in dtypes], dtype=torch.float64)[segments]
        tiny = torch.tensor([_subnormal_spacing(torch, d) for d in dtypes], dtype=torch.float64)[segments]
        relative = torch.clamp(self.factor * unit, min=self.coefficients)
        allowed = relative * steps * largest + steps * tiny
        for yardstick in self.yardsticks:
            if key in yardstick.state:
                own_values, own_indices, own_counts = yardstick.state[key]
                if own_indices == indices and own_counts == counts:
                    allowed = torch.maximum(allowed, _yardstick_allowance(torch, own_values, values))
        self._state[key] = allowed
        return allowed


    def nonfinite_ok(self, implementation: str | None, step: int) -> Any:
        """Where ``implementation`` may hold a NaN or an infinity after ``step`` (from 0): where
        the same implementation in the same dtype on the CPU does (None: nowhere)."""
        own = self.by_implementation.get(implementation or "")
        return None if own is None else ~self.torch.isfinite(own.params[step])

    def state_nonfinite_ok(self, implementation: str | None, key: str) -> Any:
        """``nonfinite_ok`` for the state ``key`` after the last step."""
        own = self.by_implementation.get(implementation or "")
        if own is None or key not in own.state or key not in self.reference.state:
            return None
        values, indices, counts = own.state[key]
        _ref_values, ref_indices, ref_counts = self.reference.state[key]
        if indices != ref_indices or counts != ref_counts:
            return None
        return ~self.torch.isfinite(values)


def _yardstick_allowance(torch: Any, yardstick: Any, reference: Any) -> Any:
    """``YARDSTICK_FACTOR`` times the yardstick's own error; unbounded where the yardstick is
    not finite (the dtype cannot hold that step at all: not judged)."""
    own = (yardstick - reference).abs()
    return torch.where(torch.isfinite(own), YARDSTICK_FACTOR * own, torch.full_like(own, math.inf))


#: Hyperparameters that are averaging coefficients (an exponential average's decay).
AVERAGING_HYPERPARAMETERS = ("betas", "alpha", "rho")


def coefficient_precision(hyper: dict[str, Any]) -> float:
    """The relative precision of an update whose scalar coefficients are computed in float32
    on the device (the fused kernels and capturable steps compute ``1 − β^t`` there): one unit
    of float32 roundoff in an averaging coefficient β, relative to ``1 − β`` (with β2 = 0.999,
    ``1 − β2`` keeps about 14 of float32's 24 bits)."""
    worst = 1.0
    for key in AVERAGING_HYPERPARAMETERS:
        value = hyper.get(key)
        for item in value if isinstance(value, (tuple, list)) else (value,):
            try:
                beta = float(item.item() if _is_tensor(item) else item)
            except (TypeError, ValueError, RuntimeError):
                continue
            if 0.0 < beta < 1.0:
                worst = max(worst, 1.0 / (1.0 - beta))
    return UNIT_ROUNDOFF["float32"] * worst


def _subnormal_spacing(torch: Any, dtype_name: str) -> float:
    info = torch.finfo(getattr(torch, dtype_name))
    return float(info.smallest_normal) * float(info.eps)


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.9g}"


def _locate(offsets: list[int], flat_index: int) -> tuple[int, int]:
    """(parameter index, element index within it) of a flat index."""
    tensor = bisect.bisect_right(offsets, flat_index) - 1
    return tensor, flat_index - offsets[tensor]


def compare_flat(
    torch: Any,
    found: Any,
    expected: Any,
    allowed: Any,
    offsets: list[int],
    describe: Callable[[int], str],
    shapes: list[tuple[int, ...]],
    what: str,
    worst: list[float] | None = None,
    nonfinite_ok: Any = None,
) -> Finding | None:
    """Judges flat float64 values against the reference within ``allowed`` (per element): None
    when every element is within it. NaN/Inf where the reference is finite is its own class,
    accepted only where ``nonfinite_ok`` (a boolean mask, when given) is set.
    ``worst`` collects the largest error in units of the allowed one (finite bounds only)."""
    if tuple(found.shape) != tuple(expected.shape):
        return Finding(STRUCTURE, what, f"{found.numel()} values where the reference has {expected.numel()}")
    if found.numel() == 0:
        return None
    # The references are finite (finite gradients); a NaN in ``found`` makes ``err`` NaN,
    # which no bound admits (``<=`` is false), an infinity only the unbounded allowance.
    err = (found - expected).abs()
    within = err <= allowed
    if nonfinite_ok is not None:
        within = within | (nonfinite_ok & ~torch.isfinite(found))
    if worst is not None:
        ratio = torch.where(allowed > 0, err / allowed, torch.zeros_like(err))
        ratio = ratio[torch.isfinite(ratio)]
        if ratio.numel():
            worst.append(float(ratio.max()))
    if bool(within.all()):
        return None
    finite_ref = torch.isfinite(expected)
    invented = finite_ref & ~torch.isfinite(found) & ~within
    err = torch.where(torch.isfinite(err), err, torch.full_like(err, math.inf))
    bad = ~within & finite_ref
    if not bool(bad.any()):
        return None
    count = int(bad.sum())
    if bool(invented.any()):
        first = int(torch.nonzero(invented)[0, 0])
        cls = NONFINITE_INVENTED
        detail = f"{int(invented.sum())} NaN/Inf where the reference is finite"
    else:
        ratio = torch.where(bad, err / torch.clamp(allowed, min=1e-300), torch.zeros_like(err))
        first = int(ratio.argmax())
        cls = WRONG_VALUE
        worst = float(ratio[first])
        detail = f"{count} of {found.numel()} elements beyond the bound ({worst:.3g}× the allowed at the worst)"
    tensor, element = _locate(offsets, first)
    zeros_where_nonzero = bad & (found == 0) & (expected != 0)
    all_zero = bool((found == 0).all()) and bool((expected != 0).any())
    finite_err = err[torch.isfinite(err)]
    return Finding(
        cls,
        describe(tensor),
        detail,
        index=_unravel(element, shapes[tensor]) if shapes[tensor] else [element],
        expected=_fmt(float(expected[first])),
        found=_fmt(float(found[first])),
        max_err=float(finite_err.max()) if finite_err.numel() else None,
        allowed=float(allowed[first]),
        zeros=bool(int(zeros_where_nonzero.sum()) == count),
        all_zero=all_zero,
        bad_elements=count,
        elements=found.numel(),
    )


def _unravel(flat_index: int, shape: tuple[int, ...]) -> list[int]:
    out: list[int] = []
    for size in reversed(shape):
        size = max(int(size), 1)
        out.append(flat_index % size)
        flat_index //= size
    return list(reversed(out))


def judge_state(
    torch: Any,
    found: Trajectory,
    reference: Trajectory,
    bounds: Bounds,
    param_set: ParamSet,
    steps: int,
    implementation: str | None = None,
) -> Finding | None:
    """The state after the last step: every state the reference keeps, for the same
    parameters, within the state bound; step counters exactly; no state for a parameter
    without gradients. NaN/Inf is accepted where ``implementation``'s own yardstick has it
    (``Bounds.state_nonfinite_ok``)."""
    for index, value in sorted(reference.steps.items()):
        got = found.steps.get(index)
        if got is None:
            return Finding(
                STRUCTURE, f"state[{index}].step", "the parameter has no step counter where the reference has one"
            )
        if got != value:
            return Finding(
                WRONG_VALUE,
                f"state[{index}].step",
                f"step counter {got:g} where the reference counted {value:g}",
                expected=_fmt(value),
                found=_fmt(got),
            )
    for key, (ref_values, ref_indices, ref_counts) in sorted(reference.state.items()):
        if key not in found.state:
            return Finding(STRUCTURE, key, f"no state {key!r} where the reference keeps one")
        values, indices, counts = found.state[key]
        if indices != ref_indices or counts != ref_counts:
            return Finding(
                STRUCTURE,
                key,
                f"state {key!r} is kept for parameters {indices[:8]} (sizes {counts[:8]}) where the reference keeps it "
                f"for {ref_indices[:8]} (sizes {ref_counts[:8]})",
            )
        allowed = bounds.state_allowed(key, steps)
        offsets = [0]
        for count in ref_counts:
            offsets.append(offsets[-1] + count)
        finding = compare_flat(
            torch,
            values,
            ref_values,
            allowed,
            offsets,
            lambda k, key=key: f"state[{ref_indices[k]}].{key}",
            [(c,) for c in ref_counts],
            key,
            nonfinite_ok=bounds.state_nonfinite_ok(implementation, key),
        )
        if finding is not None:
            return finding
    # State the reference does not keep (an implementation's cached value) is not judged.
    return None


# ---------------------------------------------------------------------------------------------
# The tally (the sweep's observation format).


class OptimTally(CaseTally):
    """Counts cases and keeps the first failures, errors and reasons, as ``SweepStats``, and
    the largest error of each comparison against float64."""

    def __init__(self) -> None:
        super().__init__(message_chars=300)
        #: Largest error of each comparison against float64, in units of the allowed error.
        self.worst: list[float] = []

    def record_finding(self, variant: str, direction: str, sample: int, finding: Finding | None) -> None:
        """Counts one judged case: passed when ``finding`` is None."""
        self.record(variant, direction, sample, finding.output if finding is not None else "", finding)

    def output(
        self, op: str, variant_test_name: str, dtype_name: str, oracle: str, metrics: dict[str, Any]
    ) -> ProbeOutput:
        measurement = self.measurement(op, dtype_name, variant_test_name=variant_test_name, oracle=oracle)
        notes = list(self.notes)
        if self.refused:
            notes.append(
                f"{self.refused} case(s) refused by an argument check of the implementation (not wrong math): "
                + "; ".join(self.refused_examples)
            )
        unjudged = self.unjudged_note()
        if unjudged:
            notes.append(unjudged)
        if self.context_lost:
            notes.append(self.context_lost)
        not_run = self.not_run_note()
        if not_run:
            notes.append(not_run)
        worst = round(max(self.worst), 4) if self.worst else None
        return ProbeOutput(
            measurement=measurement, metrics=dict(metrics, not_run=self.not_run, worst_ratio=worst), notes=notes
        )


def _error_text(exc: BaseException, limit: int = 300) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:limit]


# ---------------------------------------------------------------------------------------------
# Simulation.


#: Effects that corrupt values (others raise, crash or hang where they are applied).
_CORRUPTING = ("zeros", "partial_zeros", "nan", "bitflip", "stale", "wrap")


def _simulation_hook(
    torch: Any, optimizer_name: str, dtype_name: str, implementation: str
) -> Callable[[int, list[Any]], None] | None:
    """A function that, under fault simulation, corrupts the parameters after a step the fault
    selects (by optimizer ``methods``, implementation ``variants`` or ``step<N>``); None when
    simulation is off or no fault is about this family."""
    engine = simulate.engine()
    if engine is None or not engine.wants("optim"):
        return None

    def hook(step: int, params: list[Any]) -> None:
        call = simulate.CallInfo(
            op="optim",
            method=optimizer_name,
            dtype=dtype_name,
            on_device=True,
            variant=implementation,
            direction=f"step{step}",
        )
        _apply_fault(engine, call, [param.data for param in params])

    return hook


def _apply_fault(engine: Any, call: Any, tensors: list[Any]) -> None:
    """Applies the fault ``engine`` decides for ``call``, if any: one that corrupts values to
    each non-empty tensor in place, any other where it is (it raises, crashes or hangs)."""
    fault = engine.decide(call)
    if fault is None:
        return
    if fault.effect not in _CORRUPTING:
        engine.apply(fault, call, None)  # raises, crashes or hangs as the effect says
        return
    for tensor in tensors:
        if tensor.numel() > 0:
            engine.apply(fault, call, tensor)


# ---------------------------------------------------------------------------------------------
# The optimizer probe.


def _optimizer_class(torch: Any, class_name: str) -> Any:
    cls = getattr(torch.optim, class_name, None)
    if cls is None:
        raise SkipProbe(f"torch {torch.__version__} has no torch.optim.{class_name}")
    return cls


def _device_type(ctx: ProbeContext) -> str:
    return ctx.device.type


def below_full_tier(ctx: ProbeContext) -> bool:
    """Whether the run's tier is below ``full`` (a run that names no tier runs everything)."""
    return ctx.options.get("tier") not in (None, "full")


def run_optimizer(
    ctx: ProbeContext,
    optimizer: str,
    class_name: str,
    dtype: str,
    mixed: bool = False,
    layouts: bool = False,
    many: int = 112,
    configs: list[str] | None = None,
    zero_grads: bool = True,
) -> ProbeOutput:
    """Steps ``torch.optim.<class_name>`` in ``dtype`` in every implementation and
    configuration (``CONFIGS``); ``mixed`` also steps a list of float32, bfloat16 and float16
    parameters in one group, ``layouts`` one whose gradients have other strides than their
    parameters (``grad_layout_list``), ``zero_grads`` one whose gradients hold exact zeros
    (``zero_grad_list``) in every configuration and in the extreme ones
    (``edge_configurations``). Below the full tier a probe that names ``configs`` runs only
    those, on the main list."""
    torch = ctx.torch
    dtype_name = DTYPES[dtype]
    cls = _optimizer_class(torch, class_name)
    device_type = _device_type(ctx)
    subset = configs if configs is not None and below_full_tier(ctx) else None
    chosen = [c for c in configurations(torch, class_name, device_type) if subset is None or c.name in subset]
    if not chosen:
        raise SkipProbe(f"no configuration of {class_name} applies on {device_type}")
    impls = implementations(cls)
    lists: list[tuple[str, tuple[ParamSpec, ...], list[Config]]] = [("", stress_list(many), chosen)]
    if mixed and subset is None:
        lists.append(("+mixed_dtypes", mixed_list(), chosen))
    if layouts and subset is None:
        lists.append(("+grad_layouts", grad_layout_list(), chosen))
    edges: list[Config] = []
    if zero_grads and subset is None:
        # The extreme configurations' indices follow the database's (a case's ``sample``).
        edges = edge_configurations(torch, cls, class_name, device_type)
        zero_configs = [c for c in _unique(chosen + edges) if dtype_name != "float16" or state_stays_normal_in_float16(c)]
        lists.append(("+zero_grads", zero_grad_list(), zero_configs))
    tally = OptimTally()
    if "foreach" in impls and device_type == "cpu":
        tally.notes.append(
            "on the CPU, foreach=True runs the multi-tensor code path with the per-tensor fallback kernels"
        )
    budget = float(ctx.options.get("optim_budget_s", DEFAULT_BUDGET_S))
    started = time.monotonic()
    seed = ctx.derive_seed("trajectory") % (2**31)
    for list_suffix, specs, list_configs in lists:
        param_set = make_param_set(torch, specs, dtype_name, seed, STEPS)
        for config_index, config in enumerate(list_configs):
            if tally.context_lost or time.monotonic() - started > budget:
                tally.not_run += len(impls)
                continue
            print(f"gpuprobe optim: {optimizer} {dtype} {config.name}{list_suffix}", file=sys.stderr, flush=True)
            _run_config(ctx, tally, optimizer, cls, impls, config, config_index, list_suffix, param_set, dtype_name)
    if tally.context_lost:
        ctx.restart_worker = tally.context_lost
    _skip_when_nothing_judged(tally, class_name)
    metrics = {
        "optimizer": class_name,
        "dtype": dtype_name,
        "configurations": len(chosen),
        "edge_configurations": len(edges),
        "implementations": ",".join(impls),
        "parameters": len(stress_list(many)),
        "lists": ",".join(suffix.lstrip("+") or "main" for suffix, _, _ in lists),
        "steps": STEPS,
        "rounding_factor": ROUNDING_FACTOR,
        "seed": seed,
        "seconds": round(time.monotonic() - started, 3),
    }
    return tally.output(class_name, "", dtype_name, "float64", metrics)


def _reference(
    torch: Any, cls: Any, config: Config, param_set: ParamSet, tally: OptimTally
) -> tuple[Trajectory | None, ParamSet, str]:
    """The float64 for-loop trajectory on the CPU (and the parameter set it could step), or
    None and why."""
    reference_config = dict(reference_kwargs(config.kwargs), foreach=False)
    cpu = torch.device("cpu")
    try:
        return run_trajectory(torch, cls, reference_config, param_set, cpu, STEPS, float64=True), param_set, ""
    except Exception as exc:  # noqa: BLE001 - no reference: not judged, never blamed on the device
        reason = _error_text(exc)
    if any(spec.numel == 0 for spec in param_set.specs):
        # The for-loop itself cannot step an empty parameter (a framework defect on every
        # device, reported in the notes); the rest of the list is still judged.
        param_set = without_empty(param_set)
        try:
            reference = run_trajectory(torch, cls, reference_config, param_set, cpu, STEPS, float64=True)
        except Exception as retry:  # noqa: BLE001
            return None, param_set, _error_text(retry)
        note = f"the for-loop implementation raises on an empty parameter ({reason}); empty parameters are left out"
        if note not in tally.notes:
            tally.notes.append(note)
        return reference, param_set, ""
    return None, param_set, reason


def _run_config(
    ctx: ProbeContext,
    tally: OptimTally,
    optimizer: str,
    cls: Any,
    impls: tuple[str, ...],
    config: Config,
    config_index: int,
    list_suffix: str,
    param_set: ParamSet,
    dtype_name: str,
) -> None:
    torch = ctx.torch
    reference, param_set, reason = _reference(torch, cls, config, param_set, tally)
    if reference is None:
        for implementation in impls:
            tally.unjudge("no_float64_reference", f"{implementation}+{config.name}{list_suffix}: {reason}")
        return
    bounds = Bounds(torch, param_set, reference)
    # The yardstick only widens the bound, so it is computed only when a half-precision
    # case fails without it (most pass by the rounding bound alone).
    needs_yardstick = any(d in YARDSTICK_DTYPES for d in param_set.dtypes)
    shapes = [spec.shape for spec in param_set.specs]
    forloop: Trajectory | None = None
    for implementation in impls:
        variant = f"{implementation}+{config.name}{list_suffix}"
        kwargs = dict(_fresh_kwargs(config.kwargs), **implementation_flags(cls, implementation))
        hook = _simulation_hook(torch, optimizer, dtype_name, implementation)
        try:
            found = _device_trajectory(ctx, cls, kwargs, param_set, hook)
        except _NotApplicable as exc:
            tally.unjudge("not_applicable", f"{variant}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - classified: refused, device error or lost context
            _classify_step_error(ctx, tally, variant, config_index, exc)
            continue
        forloop_params = forloop.params if forloop is not None else None
        worst: list[float] = []
        finding, step = judge_trajectory(
            torch, found, reference, bounds, param_set, forloop_params, shapes, worst, implementation
        )
        if finding is not None and needs_yardstick and not bounds.yardsticks:
            yardsticks = _yardsticks(torch, cls, impls, config, param_set, tally, list_suffix)
            if yardsticks:
                bounds = Bounds(torch, param_set, reference, yardsticks=yardsticks)
                worst = []
                finding, step = judge_trajectory(
                    torch, found, reference, bounds, param_set, forloop_params, shapes, worst, implementation
                )
        tally.worst.extend(worst)
        tally.record_finding(variant, f"step{step}", config_index, finding)
        if implementation == "forloop" and finding is None:
            forloop = found


def _yardsticks(
    torch: Any, cls: Any, impls: tuple[str, ...], config: Config, param_set: ParamSet, tally: OptimTally, list_suffix: str
) -> dict[str, Trajectory]:
    """Each implementation in the parameters' own dtypes on the CPU (module docstring), by
    implementation: the for-loop and foreach compute in the dtype, each in its own order of
    operations; the fused kernel computes in float32 but keeps its state in the dtype. An
    implementation the CPU lacks has no yardstick of its own."""
    out = {}
    for implementation in impls:
        flags = implementation_flags(cls, implementation)
        try:
            out[implementation] = run_trajectory(
                torch,
                cls,
                dict(reference_kwargs(config.kwargs), **flags),
                param_set,
                torch.device("cpu"),
                STEPS,
            )
        except Exception as exc:  # noqa: BLE001 - judged without that yardstick then
            tally.notes.append(
                f"{config.name}{list_suffix}: no same-dtype yardstick ({implementation}: {_error_text(exc)})"
            )
    return out


class _NotApplicable(Exception):
    """The optimizer rejects the configuration for this implementation when it is built (a
    combination PyTorch does not offer): not judged."""


def _device_trajectory(
    ctx: ProbeContext, cls: Any, kwargs: dict[str, Any], param_set: ParamSet, hook: Any, tamper: Tamper | None = None
) -> Trajectory:
    torch = ctx.torch
    _check_construction(torch, cls, kwargs, ctx.device, param_set.dtypes[0])
    return run_trajectory(
        torch, cls, kwargs, param_set, ctx.device, STEPS, after_step=hook, tamper=tamper, sync=ctx.sync
    )


def _check_construction(torch: Any, cls: Any, kwargs: dict[str, Any], device: Any, dtype_name: str) -> None:
    """Raises ``_NotApplicable`` when the optimizer refuses the configuration itself (an
    argument combination or a device it does not offer), before any parameter is stepped."""
    try:
        cls(
            [torch.zeros(1, device=device, dtype=getattr(torch, dtype_name), requires_grad=True)],
            **_fresh_kwargs(kwargs),
        )
    except (ValueError, TypeError, RuntimeError) as exc:
        raise _NotApplicable(_error_text(exc)) from None


def judge_trajectory(
    torch: Any,
    found: Trajectory,
    reference: Trajectory,
    bounds: Bounds,
    param_set: ParamSet,
    forloop_params: list[Any] | None,
    shapes: list[tuple[int, ...]],
    worst: list[float] | None = None,
    implementation: str | None = None,
) -> tuple[Finding | None, int]:
    """The first step whose parameters are wrong (against float64, then against the device's
    for-loop implementation), else the state after the last step: (finding, step).
    ``implementation`` names the implementation judged, whose own yardstick says where it may
    be non-finite (``Bounds.nonfinite_ok``)."""
    dtypes = param_set.dtypes

    def describe(index: int) -> str:
        spec = param_set.specs[index]
        layout = "" if spec.layout == "contiguous" else f" {spec.layout}"
        zeros = f" zero_grads={spec.grad_zeros}" if spec.grad_zeros else ""
        return f"param[{index}] {tuple(spec.shape)}{layout} {dtypes[index]}{zeros}"

    for step, (values, expected) in enumerate(zip(found.params, reference.params)):
        nonfinite_ok = bounds.nonfinite_ok(implementation, step)
        finding = compare_flat(
            torch,
            values,
            expected,
            bounds.allowed[step],
            param_set.offsets,
            describe,
            shapes,
            "params",
            worst,
            nonfinite_ok=nonfinite_ok,
        )
        if finding is not None:
            return finding, step + 1
        if forloop_params is not None:
            # Where the for-loop in this dtype cannot stay finite (the yardstick allows
            # anything there), the two implementations are not compared.
            allowed = torch.where(
                torch.isfinite(forloop_params[step]), bounds.allowed[step], torch.full_like(values, math.inf)
            )
            finding = compare_flat(
                torch,
                values,
                forloop_params[step],
                allowed,
                param_set.offsets,
                describe,
                shapes,
                "params",
                nonfinite_ok=nonfinite_ok,
            )
            if finding is not None:
                finding.detail = "differs from the for-loop implementation on the device: " + finding.detail
                return finding, step + 1
    if found.stateless and not reference.stateless:
        index = found.stateless[0]
        return Finding(
            STRUCTURE, describe(index), "the parameter had gradients but the optimizer kept no state for it"
        ), len(found.params)
    steps = len(found.params)
    return judge_state(torch, found, reference, bounds, param_set, steps, implementation), steps


def _skip_when_nothing_judged(tally: OptimTally, what: str) -> None:
    """A probe none of whose cases could be judged (every implementation refused, or the
    backend has no kernel for the dtype) skips with the reason instead of passing empty."""
    if tally.cases or tally.context_lost or tally.not_run:
        return
    reasons = tally.unjudged_examples + tally.refused_examples
    raise SkipProbe(f"{what}: no case applies here" + (f" ({reasons[0]})" if reasons else ""))


def _classify_step_error(ctx: ProbeContext, tally: OptimTally, variant: str, sample: int, exc: BaseException) -> None:
    message = _error_text(exc)
    if isinstance(exc, NotImplementedError):
        # The backend has no kernel for this dtype (GradScaler's CUDA unscale of bfloat16
        # gradients): a documented gap, neither wrong math nor a fault.
        tally.unjudge("unsupported_on_device", f"{variant}: {message}")
        return
    if not is_device_fault(message):
        # An argument check refused the parameters (a dtype, layout or device the
        # implementation does not take): stricter, not wrong math.
        tally.refuse(f"{variant}: {message}")
        return
    tally.device_error(variant, "step", sample, message)
    if ctx.is_gpu:
        problem = device_context_problem(ctx.torch, ctx.device)
        if problem is not None:
            tally.context_lost = (
                f"{variant}: the device raised {message} and its context is unusable afterwards ({problem})"
            )


# ---------------------------------------------------------------------------------------------
# GradScaler.

#: GradScaler's schedule: which steps get finite gradients and which an infinity or a NaN.
SCALER_SCHEDULE = ("finite", "inf", "finite", "finite", "nan", "finite")
#: Clean steps before the scale grows (small, so that the schedule sees a growth).
SCALER_GROWTH_INTERVAL = 2
#: The optimizers GradScaler is checked with: those with a fused kernel (which take the scale
#: and the found-inf flag themselves), with momentum for SGD so that state is kept.
SCALER_OPTIMIZERS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("adam", "Adam", {}),
    ("adamw", "AdamW", {"weight_decay": 0.1}),
    ("sgd", "SGD", {"lr": 0.01, "momentum": 0.9}),
    ("adagrad", "Adagrad", {}),
)
#: Initial scale: GradScaler's default 2^16, and 2^8 for float16 gradients (a standard normal
#: gradient times 2^16 overflows float16 by itself).
SCALER_INIT = {"float16": 2.0**8}
DEFAULT_SCALER_INIT = 2.0**16
#: GradScaler's refusal to unscale float16 gradients outside a fused optimizer.
FP16_UNSCALE_REFUSAL = "Attempting to unscale FP16 gradients"
#: A finite scaled step may differ from the unscaled one by this many units of the rounding
#: bound (unscaling by a power of two is exact, so both see the same gradients).
SCALER_FACTOR = 1.0


def expected_scales(init: float, schedule: tuple[str, ...], growth_interval: int) -> list[float]:
    """GradScaler's documented scale after each step's ``update()``: halved after a step with
    non-finite gradients, doubled after ``growth_interval`` clean steps in a row."""
    scale, clean, out = init, 0, []
    for kind in schedule:
        if kind == "finite":
            clean += 1
            if clean == growth_interval:
                scale, clean = scale * 2.0, 0
        else:
            scale, clean = scale * 0.5, 0
        out.append(scale)
    return out


def scaler_param_specs() -> tuple[ParamSpec, ...]:
    """A short list with the kernels' edges: 1, 3, 257 and 65537 elements, a transposed
    parameter and one without gradients."""
    return (
        ParamSpec((1,)),
        ParamSpec((3,)),
        ParamSpec((257,)),
        ParamSpec((65537,)),
        ParamSpec((33, 17), "transposed"),
        ParamSpec((0,)),
        ParamSpec((5,), has_grad=False),
    )


def run_gradscaler(ctx: ProbeContext, dtype: str, optimizers: list[str] | None = None) -> ProbeOutput:
    """GradScaler with each optimizer of ``SCALER_OPTIMIZERS`` and each of its
    implementations, parameters and gradients in ``dtype``; below the full tier only the
    named ``optimizers``."""
    torch = ctx.torch
    dtype_name = DTYPES[dtype]
    amp = getattr(torch, "amp", None)
    scaler_cls = getattr(amp, "GradScaler", None) if amp is not None else None
    if scaler_cls is None:
        raise SkipProbe(f"torch {torch.__version__} has no torch.amp.GradScaler")
    device_type = _device_type(ctx)
    init = SCALER_INIT.get(dtype_name, DEFAULT_SCALER_INIT)
    try:
        probe_scaler = scaler_cls(device_type, init_scale=init)
    except Exception as exc:  # noqa: BLE001 - no scaler for this device type
        raise SkipProbe(f"torch.amp.GradScaler({device_type!r}) is not available: {_error_text(exc)}") from None
    if not probe_scaler.is_enabled():
        raise SkipProbe(f"torch.amp.GradScaler({device_type!r}) disables itself on this machine")
    tally = OptimTally()
    seed = ctx.derive_seed("scaler") % (2**31)
    specs = scaler_param_specs()
    finite_steps = sum(1 for kind in SCALER_SCHEDULE if kind == "finite")
    param_set = make_param_set(torch, specs, dtype_name, seed, finite_steps)
    scales = expected_scales(init, SCALER_SCHEDULE, SCALER_GROWTH_INTERVAL)
    started = time.monotonic()
    subset = optimizers if optimizers is not None and below_full_tier(ctx) else None
    for sample, (name, class_name, kwargs) in enumerate(SCALER_OPTIMIZERS):
        if subset is not None and name not in subset:
            continue
        cls = getattr(torch.optim, class_name, None)
        if cls is None:
            tally.unjudge("not_applicable", f"torch.optim.{class_name} is missing")
            continue
        for implementation in implementations(cls):
            if tally.context_lost:
                tally.not_run += 1
                continue
            variant = f"{implementation}+{name}"
            print(f"gpuprobe optim: gradscaler {dtype} {variant}", file=sys.stderr, flush=True)
            flags = implementation_flags(cls, implementation)
            try:
                _scaler_case(
                    ctx,
                    tally,
                    scaler_cls,
                    cls,
                    dict(kwargs, **flags),
                    name,
                    implementation,
                    variant,
                    sample,
                    param_set,
                    init,
                    scales,
                )
            except _NotApplicable as exc:
                tally.unjudge("not_applicable", f"{variant}: {exc}")
            except Exception as exc:  # noqa: BLE001 - classified: refused, device error or lost context
                if FP16_UNSCALE_REFUSAL in str(exc):
                    # GradScaler unscales float16 gradients only inside the fused kernels
                    # (documented): on every device, not this one's limitation.
                    tally.unjudge("not_applicable", f"{variant}: {_error_text(exc)}")
                else:
                    _classify_step_error(ctx, tally, variant, sample, exc)
    if tally.context_lost:
        ctx.restart_worker = tally.context_lost
    _skip_when_nothing_judged(tally, f"GradScaler with {dtype_name} gradients")
    metrics = {
        "dtype": dtype_name,
        "schedule": ",".join(SCALER_SCHEDULE),
        "init_scale": init,
        "growth_interval": SCALER_GROWTH_INTERVAL,
        "seed": seed,
        "seconds": round(time.monotonic() - started, 3),
    }
    return tally.output("GradScaler", "", dtype_name, "unscaled step", metrics)


def _scaler_case(
    ctx: ProbeContext,
    tally: OptimTally,
    scaler_cls: Any,
    cls: Any,
    kwargs: dict[str, Any],
    name: str,
    implementation: str,
    variant: str,
    sample: int,
    param_set: ParamSet,
    init: float,
    scales: list[float],
) -> None:
    """One optimizer and implementation through the schedule, against the same optimizer
    stepping the unscaled gradients of the finite steps without a scaler."""
    torch = ctx.torch
    device = ctx.device
    dtype_name = param_set.dtypes[0]
    _check_construction(torch, cls, kwargs, device, dtype_name)
    unscaled = run_trajectory(torch, cls, _fresh_kwargs(kwargs), param_set, device, len(param_set.grads), sync=ctx.sync)
    params = make_params(torch, param_set, device)
    optimizer = cls(params, **_fresh_kwargs(kwargs))
    scaler = scaler_cls(
        ctx.device.type, init_scale=init, growth_factor=2.0, backoff_factor=0.5, growth_interval=SCALER_GROWTH_INTERVAL
    )
    hook = _simulation_hook(torch, name, dtype_name, implementation)
    reference = Trajectory(unscaled.params, {}, {}, [])
    bounds = Bounds(torch, param_set, reference, factor=SCALER_FACTOR)
    shapes = [spec.shape for spec in param_set.specs]
    describe = lambda i: f"param[{i}] {tuple(param_set.specs[i].shape)}"  # noqa: E731
    finite_index = 0
    previous = _flat(torch, params)
    previous_state = _state_snapshot(torch, optimizer, params)
    scale = init
    for position, kind in enumerate(SCALER_SCHEDULE):
        direction = f"step{position + 1}"
        if kind == "finite":
            set_grads(torch, params, param_set, finite_index, device, scale=scale)
        else:
            # The last step's gradients again, with one element made non-finite (scaled, as a
            # backward pass that overflowed would leave them).
            set_grads(torch, params, param_set, max(finite_index - 1, 0), device, scale=scale)
            target = next(p for p, spec in zip(params, param_set.specs) if spec.has_grad and spec.numel > 2)
            with torch.no_grad():
                target.grad.view(-1)[1] = math.inf if kind == "inf" else math.nan
        # What a training step does first: scale the loss (which also creates the scale
        # tensor on the device); the gradients stand for that loss's backward pass.
        scaler.scale(torch.ones((), device=device))
        scaler.step(optimizer)
        scaler.update()
        if hook is not None:
            with torch.no_grad():
                hook(position + 1, params)
        ctx.sync()
        values = _flat(torch, params)
        got_scale = float(scaler.get_scale())
        if kind == "finite":
            finding = compare_flat(
                torch,
                values,
                unscaled.params[finite_index],
                bounds.allowed[finite_index],
                param_set.offsets,
                describe,
                shapes,
                "params",
                tally.worst,
            )
            if finding is not None:
                finding.detail = "the scaled step differs from the unscaled one: " + finding.detail
            finite_index += 1
        else:
            finding = _unchanged(torch, values, previous, param_set, describe, shapes, f"a step with {kind} gradients")
            if finding is None:
                state = _state_snapshot(torch, optimizer, params)
                for key in sorted(previous_state):
                    before, after = previous_state[key], state.get(key)
                    if after is None or not torch.equal(before, after):
                        finding = Finding(
                            WRONG_VALUE,
                            f"state.{key}",
                            f"a step with {kind} gradients changed the optimizer state {key!r}",
                        )
                        break
        if finding is None and got_scale != scales[position]:
            finding = Finding(
                WRONG_VALUE,
                "scale",
                f"the scale after {kind} gradients is {got_scale:g}; GradScaler's rule gives {scales[position]:g}",
                expected=_fmt(scales[position]),
                found=_fmt(got_scale),
            )
        if finding is not None:
            tally.record_finding(variant, direction, sample, finding)
            return
        previous = values
        previous_state = _state_snapshot(torch, optimizer, params)
        scale = got_scale
    tally.record_finding(variant, f"step{len(SCALER_SCHEDULE)}", sample, None)


def _unchanged(
    torch: Any, values: Any, previous: Any, param_set: ParamSet, describe: Any, shapes: Any, what: str
) -> Finding | None:
    """Bit-for-bit equality with the values before the step (NaN compares equal to NaN)."""
    same = (values == previous) | (torch.isnan(values) & torch.isnan(previous))
    if bool(same.all()):
        return None
    changed = ~same
    first = int(torch.nonzero(changed)[0, 0])
    tensor, element = _locate(param_set.offsets, first)
    return Finding(
        WRONG_VALUE if bool(torch.isfinite(values).all()) else NONFINITE_INVENTED,
        describe(tensor),
        f"{what} changed {int(changed.sum())} parameter elements (the step must be skipped)",
        index=_unravel(element, shapes[tensor]) if shapes[tensor] else [element],
        expected=_fmt(float(previous[first])),
        found=_fmt(float(values[first])),
        zeros=bool(((values == 0) & changed).sum() == changed.sum()),
        bad_elements=int(changed.sum()),
        elements=values.numel(),
    )


def _state_snapshot(torch: Any, optimizer: Any, params: list[Any]) -> dict[str, Any]:
    """Every state tensor of the optimizer, flat float64 on the host, by ``key[index]``."""
    out: dict[str, Any] = {}
    for index, param in enumerate(params):
        for key, value in (optimizer.state.get(param) or {}).items():
            if _is_tensor(value):
                out[f"{key}[{index}]"] = value.detach().reshape(-1).double().cpu()
            elif isinstance(value, (int, float)):
                out[f"{key}[{index}]"] = torch.tensor([float(value)], dtype=torch.float64)
    return out


# ---------------------------------------------------------------------------------------------
# Gradient clipping.

#: ``clip_grad_norm_``'s norm types: the Euclidean norm training scripts clip by, the 1-norm,
#: the infinity norm (a maximum, reduced by kernels of its own) and a fractional one (p < 1 is
#: not a norm, but the function takes it, and its power 1/p doubles the sum's relative error).
CLIP_NORM_TYPES = (2.0, 1.0, math.inf, 0.5)
#: ``max_norm`` as a multiple of the float64 total norm: below it (every gradient is scaled by
#: about a quarter) and above it (the coefficient clamps to 1: no gradient may change).
CLIP_MAX_NORMS: tuple[tuple[str, float], ...] = (("clip", 0.25), ("noclip", 2.0))
#: The implementations, by the ``foreach`` argument: a kernel per tensor
#: (``linalg.vector_norm``, ``mul_``, ``clamp_``), the multi-tensor kernels (``_foreach_norm``,
#: ``_foreach_mul_``, ``_foreach_clamp_min_``/``_max_``), and PyTorch's choice for the device.
CLIP_IMPLEMENTATIONS: tuple[tuple[str, bool | None], ...] = (("forloop", False), ("foreach", True), ("default", None))
#: ``clip_grad_value_``'s limit: exact in every dtype, above ``GRAD_FLOOR`` and below most
#: gradients (``|g| = 1/4 + |z|`` exceeds it with probability 0.62), so that it both clips
#: and leaves elements alone.
CLIP_VALUE = 0.75
#: ``C`` of the clipping bounds (``clip_bounds``).
CLIP_ROUNDING_FACTOR = 8.0
#: The non-finite values planted in one gradient element: the returned norm must be NaN for
#: a NaN and +Inf for an infinity (of either sign), and ``error_if_nonfinite=True`` must raise.
CLIP_NONFINITE: tuple[tuple[str, float], ...] = (("nan", math.nan), ("-inf", -math.inf))
#: PyTorch's message when ``error_if_nonfinite`` refuses to clip.
NONFINITE_REFUSAL = "non-finite"


@dataclass
class ClipList:
    """One parameter list of the clipping probe: its values, the device parameters (made once,
    their gradients reset for every case) and which of them carry a gradient."""

    suffix: str
    param_set: ParamSet
    params: list[Any]
    #: Indices of the parameters with a gradient, in order.
    with_grad: list[int]
    #: The float64 gradients of those parameters (the same values as the device's).
    grads64: list[Any]
    #: The unit roundoff of the gradients' dtypes: each element's, and the largest.
    unit: Any
    largest_unit: float
    #: The dtype ``clip_grad_norm_`` returns the total norm in (the promoted dtype of the
    #: per-tensor norms, each in its gradient's dtype).
    result_dtype: Any
    offsets: list[int]
    shapes: list[tuple[int, ...]]


def clip_bounds(norm_type: float, largest_unit: float, largest_numel: int) -> float:
    """The relative error allowed in a finite total norm: ``max(1, 1/p)·C·(u + u₃₂·√N)``.

    ``u`` is the largest unit roundoff among the gradients' dtypes: each per-tensor norm is
    returned in its gradient's dtype (one rounding) and the total in the promoted dtype (one
    more). ``u₃₂·√N`` is the float32 accumulation of the largest tensor's N terms (the kernels
    accumulate half-precision sums in float32): non-negative terms, summed in blocks whose
    serial runs are far shorter than √N on every backend. ``1/p`` for a fractional norm: the
    sum's relative error is raised to the power 1/p. An infinity norm is a maximum of values
    the dtype holds: exact (bound 0)."""
    if math.isinf(norm_type):
        return 0.0
    growth = max(1.0, 1.0 / norm_type)
    return growth * CLIP_ROUNDING_FACTOR * (largest_unit + UNIT_ROUNDOFF["float32"] * math.sqrt(max(1, largest_numel)))


def _overflow_edge(torch: Any, dtype: Any) -> float:
    """The smallest magnitude that rounds to infinity in ``dtype`` (round to nearest: the
    largest finite value plus half its spacing)."""
    info = torch.finfo(dtype)
    return float(info.max) * (1.0 + float(info.eps) / 2.0)


@dataclass
class ClipExpectation:
    """The float64 answer of one ``clip_grad_norm_`` case."""

    #: The total norm as the dtypes hold it: +inf where a per-tensor norm or the total
    #: overflows its dtype.
    total: float
    #: The relative error allowed in the total norm.
    relative: float
    #: The clipping coefficient ``min(max_norm / (total + 1e-6), 1)``.
    coefficient: float
    #: Some norm lies within its bound of its dtype's overflow edge: whether it overflows is
    #: a rounding's choice; not judged.
    near_overflow: bool = False


def clip_expectation(
    torch: Any, clip_list: ClipList, keep: list[int], norm_type: float, max_norm: float
) -> ClipExpectation:
    """The total norm of the gradients ``keep`` (positions in ``clip_list.with_grad``) in
    float64, the formula PyTorch documents (the ``norm_type``-norm of the per-tensor norms),
    and the clipping coefficient for ``max_norm``."""
    grads = [clip_list.grads64[k] for k in keep]
    dtypes = [getattr(torch, clip_list.param_set.dtypes[clip_list.with_grad[k]]) for k in keep]
    largest_numel = max((g.numel() for g in grads), default=1)
    relative = clip_bounds(norm_type, clip_list.largest_unit, max(largest_numel, len(grads)))
    norms = [float(torch.linalg.vector_norm(g, norm_type)) if g.numel() else 0.0 for g in grads]
    near = False
    overflow = False
    for norm, dtype in zip(norms, dtypes):
        edge = _overflow_edge(torch, dtype)
        near = near or abs(norm - edge) <= relative * edge
        overflow = overflow or norm >= edge
    total = float(torch.linalg.vector_norm(torch.tensor(norms, dtype=torch.float64), norm_type)) if norms else 0.0
    edge = _overflow_edge(torch, clip_list.result_dtype)
    near = near or abs(total - edge) <= relative * edge
    if overflow or total >= edge:
        total = math.inf
    coefficient = min(max_norm / (total + 1e-6), 1.0)
    return ClipExpectation(total, relative, coefficient, near)


def _clip_list(torch: Any, suffix: str, specs: tuple[ParamSpec, ...], dtype_name: str, seed: int, device: Any) -> ClipList:
    param_set = make_param_set(torch, specs, dtype_name, seed, 1)
    params = make_params(torch, param_set, device)
    with_grad = [i for i, spec in enumerate(param_set.specs) if spec.has_grad]
    grads64 = [param_set.grads[0][i].double() for i in with_grad]
    dtypes = [param_set.dtypes[i] for i in with_grad]
    result_dtype = getattr(torch, dtypes[0])
    for name in dtypes[1:]:
        result_dtype = torch.promote_types(result_dtype, getattr(torch, name))
    offsets = [0]
    for i in with_grad:
        offsets.append(offsets[-1] + param_set.specs[i].numel)
    counts = torch.tensor([param_set.specs[i].numel for i in with_grad], dtype=torch.int64)
    unit = torch.repeat_interleave(torch.tensor([UNIT_ROUNDOFF[d] for d in dtypes], dtype=torch.float64), counts)
    return ClipList(
        suffix,
        param_set,
        params,
        with_grad,
        grads64,
        unit,
        max(UNIT_ROUNDOFF[d] for d in dtypes),
        result_dtype,
        offsets,
        [param_set.specs[i].shape for i in with_grad],
    )


def _clip_simulation(
    torch: Any, method: str, dtype_name: str, implementation: str, direction: str, grads: list[Any]
) -> None:
    """Under fault simulation, corrupts the clipped gradients in place for a fault about op
    ``optim`` with ``method`` ``clip_grad_norm`` or ``clip_grad_value``, ``variants`` the
    implementation (``forloop``, ``foreach``, ``default``) or the direction (``norm_type=2``,
    ``value``)."""
    engine = simulate.engine()
    if engine is None or not engine.wants("optim"):
        return
    call = simulate.CallInfo(
        op="optim", method=method, dtype=dtype_name, on_device=True, variant=implementation, direction=direction
    )
    with torch.no_grad():
        _apply_fault(engine, call, grads)


def _norm_label(norm_type: float) -> str:
    return "inf" if math.isinf(norm_type) else f"{norm_type:g}"


def run_clip(ctx: ProbeContext, dtype: str, mixed: bool = False, layouts: bool = False, many: int = 112) -> ProbeOutput:
    """``torch.nn.utils.clip_grad_norm_`` and ``clip_grad_value_`` on gradients in ``dtype``,
    in each implementation, against float64 (module docstring of the section, docs/probes.md):
    the optimizer probes' main list and zero-gradient list (``mixed``: also the mixed-dtype list,
    ``layouts``: the gradient-layout list), each norm type, ``max_norm`` below and above the
    total norm, ``error_if_nonfinite`` on finite gradients; then a NaN and an infinity in one
    gradient, with and without ``error_if_nonfinite``."""
    torch = ctx.torch
    dtype_name = DTYPES[dtype]
    tally = OptimTally()
    seed = ctx.derive_seed("clip") % (2**31)
    budget = float(ctx.options.get("optim_budget_s", DEFAULT_BUDGET_S))
    started = time.monotonic()
    lists = [("", stress_list(many)), ("+zero_grads", zero_grad_list())]
    if mixed:
        lists.append(("+mixed_dtypes", mixed_list()))
    if layouts:
        lists.append(("+grad_layouts", grad_layout_list()))
    empty_inf = _empty_inf_norm_refused(torch)
    if empty_inf:
        tally.notes.append(
            f"clip_grad_norm_ with norm_type=inf raises on an empty gradient on the CPU too ({empty_inf}): "
            "empty gradients are left out of the infinity-norm cases"
        )
    sample = 0
    for suffix, specs in lists:
        if tally.context_lost:
            break
        clip_list = _clip_list(torch, suffix, specs, dtype_name, seed, ctx.device)
        print(f"gpuprobe optim: clip_grad {dtype}{suffix}", file=sys.stderr, flush=True)
        for norm_type in CLIP_NORM_TYPES:
            keep = list(range(len(clip_list.with_grad)))
            if math.isinf(norm_type) and empty_inf:
                keep = [k for k in keep if clip_list.grads64[k].numel() > 0]
            total64 = clip_expectation(torch, clip_list, keep, norm_type, 1.0).total
            for limit_name, ratio in CLIP_MAX_NORMS:
                # An overflowed norm has no finite multiple: the limit is then the float64 norm's.
                finite_total = total64 if math.isfinite(total64) else _float64_total(torch, clip_list, keep, norm_type)
                max_norm = ratio * finite_total
                expectation = clip_expectation(torch, clip_list, keep, norm_type, max_norm)
                flags = [False, True] if (norm_type, limit_name) == (2.0, "clip") else [False]
                for implementation, foreach in CLIP_IMPLEMENTATIONS:
                    for error_if_nonfinite in flags:
                        if tally.context_lost or time.monotonic() - started > budget:
                            tally.not_run += 1
                            continue
                        variant = f"{implementation}+norm_type={_norm_label(norm_type)}+{limit_name}"
                        variant += ("+error_if_nonfinite" if error_if_nonfinite else "") + suffix
                        _clip_norm_case(
                            ctx, tally, clip_list, keep, norm_type, max_norm, expectation,
                            implementation, foreach, error_if_nonfinite, variant, sample,
                        )  # fmt: skip
                sample += 1
        for implementation, foreach in CLIP_IMPLEMENTATIONS:
            if tally.context_lost or time.monotonic() - started > budget:
                tally.not_run += 1
                continue
            _clip_value_case(ctx, tally, clip_list, implementation, foreach, f"{implementation}+value{suffix}", sample)
        sample += 1
    nonfinite = _clip_list(torch, "+nonfinite", scaler_param_specs(), dtype_name, seed, ctx.device)
    for kind, value in CLIP_NONFINITE:
        for norm_type in CLIP_NORM_TYPES:
            for implementation, foreach in CLIP_IMPLEMENTATIONS:
                for error_if_nonfinite in (False, True) if norm_type == 2.0 else (False,):
                    if tally.context_lost or time.monotonic() - started > budget:
                        tally.not_run += 1
                        continue
                    variant = f"{implementation}+norm_type={_norm_label(norm_type)}+{kind}"
                    variant += "+error_if_nonfinite" if error_if_nonfinite else ""
                    _clip_nonfinite_case(
                        ctx, tally, nonfinite, norm_type, value, implementation, foreach, error_if_nonfinite,
                        empty_inf, variant, sample,
                    )  # fmt: skip
            sample += 1
    if tally.context_lost:
        ctx.restart_worker = tally.context_lost
    _skip_when_nothing_judged(tally, f"gradient clipping of {dtype_name} gradients")
    metrics = {
        "dtype": dtype_name,
        "implementations": ",".join(name for name, _ in CLIP_IMPLEMENTATIONS),
        "norm_types": ",".join(_norm_label(p) for p in CLIP_NORM_TYPES),
        "lists": ",".join(suffix.lstrip("+") or "main" for suffix, _ in lists) + ",nonfinite",
        "rounding_factor": CLIP_ROUNDING_FACTOR,
        "seed": seed,
        "seconds": round(time.monotonic() - started, 3),
    }
    return tally.output("clip_grad", "", dtype_name, "float64", metrics)


def _float64_total(torch: Any, clip_list: ClipList, keep: list[int], norm_type: float) -> float:
    grads = [clip_list.grads64[k] for k in keep]
    norms = [float(torch.linalg.vector_norm(g, norm_type)) if g.numel() else 0.0 for g in grads]
    return float(torch.linalg.vector_norm(torch.tensor(norms, dtype=torch.float64), norm_type))


def _empty_inf_norm_refused(torch: Any) -> str:
    """Why ``clip_grad_norm_`` with the infinity norm refuses an empty gradient on the CPU
    (every implementation: a maximum has no identity), or "" when it takes one."""
    param = torch.zeros(0, requires_grad=True)
    param.grad = torch.zeros(0)
    try:
        torch.nn.utils.clip_grad_norm_([param], 1.0, norm_type=math.inf, foreach=False)
    except RuntimeError as exc:
        return _error_text(exc, 120)
    return ""


def _clip_grads(clip_list: ClipList, keep: list[int] | None = None) -> list[Any]:
    """The gradient tensors of ``keep`` (positions in ``with_grad``; default: every one)."""
    indices = clip_list.with_grad if keep is None else [clip_list.with_grad[k] for k in keep]
    return [clip_list.params[i].grad for i in indices]


def _clip_structure(clip_list: ClipList) -> Finding | None:
    """A parameter without a gradient must still have none after clipping."""
    for index, (param, spec) in enumerate(zip(clip_list.params, clip_list.param_set.specs)):
        if not spec.has_grad and param.grad is not None:
            return Finding(STRUCTURE, f"param[{index}].grad", "clipping gave a gradient to a parameter that had none")
    return None


def _clip_describe(clip_list: ClipList, keep: list[int]) -> Callable[[int], str]:
    def describe(position: int) -> str:
        index = clip_list.with_grad[keep[position]]
        spec = clip_list.param_set.specs[index]
        layout = "" if spec.layout == "contiguous" else f" {spec.layout}"
        grad_layout = "" if spec.grad_layout == "param" else f" grad_{spec.grad_layout}"
        zeros = f" zero_grads={spec.grad_zeros}" if spec.grad_zeros else ""
        return f"param[{index}].grad {tuple(spec.shape)}{layout}{grad_layout} {clip_list.param_set.dtypes[index]}{zeros}"

    return describe


def _keep_layout(torch: Any, clip_list: ClipList, keep: list[int]) -> tuple[list[int], list[tuple[int, ...]], Any]:
    """Offsets, shapes and per-element unit roundoff of the gradients ``keep``."""
    offsets = [0]
    shapes = []
    units = []
    for k in keep:
        start, stop = clip_list.offsets[k], clip_list.offsets[k + 1]
        offsets.append(offsets[-1] + stop - start)
        shapes.append(clip_list.shapes[k])
        units.append(clip_list.unit[start:stop])
    return offsets, shapes, torch.cat(units) if units else torch.zeros(0, dtype=torch.float64)


def _clip_norm_case(
    ctx: ProbeContext,
    tally: OptimTally,
    clip_list: ClipList,
    keep: list[int],
    norm_type: float,
    max_norm: float,
    expectation: ClipExpectation,
    implementation: str,
    foreach: bool | None,
    error_if_nonfinite: bool,
    variant: str,
    sample: int,
) -> None:
    """One ``clip_grad_norm_`` call on finite gradients: the returned total norm within its
    bound (exactly for the infinity norm), every clipped gradient within the coefficient's
    bound, and bit for bit unchanged where the coefficient clamps to 1."""
    torch = ctx.torch
    param_set = clip_list.param_set
    params = [clip_list.params[i] for i in range(len(clip_list.params)) if i not in _left_out(clip_list, keep)]
    try:
        set_grads(torch, clip_list.params, param_set, 0, ctx.device)
        total = torch.nn.utils.clip_grad_norm_(
            params, max_norm, norm_type=norm_type, error_if_nonfinite=error_if_nonfinite, foreach=foreach
        )
        grads = _clip_grads(clip_list, keep)
        direction = f"norm_type={_norm_label(norm_type)}"
        _clip_simulation(torch, "clip_grad_norm", param_set.dtypes[0], implementation, direction, grads)
        ctx.sync()
        found = _flat(torch, grads)
        total_found = float(total.detach().double().cpu())
    except Exception as exc:  # noqa: BLE001 - classified: refused, device error or lost context
        _classify_step_error(ctx, tally, variant, sample, exc)
        return
    if expectation.near_overflow:
        tally.unjudge("near_overflow", f"{variant}: a norm within its bound of the dtype's largest value")
        return
    finding = _judge_total(torch, total_found, expectation, "total_norm")
    direction = "total_norm"
    if finding is None and math.isfinite(expectation.total):
        finding = _judge_clipped(torch, clip_list, keep, found, expectation, tally.worst)
        direction = "grads"
    elif finding is None:
        # The norm overflowed the dtype, as it must (judged above): the coefficient is then
        # max_norm over an infinity in half precision, whose rounding is the dtype's affair.
        note = "where the total norm overflows the gradients' dtype, only the norm (+Inf) is judged, not the gradients"
        if note not in tally.notes:
            tally.notes.append(note)
    if finding is None:
        finding = _clip_structure(clip_list)
        direction = "grads"
    tally.record_finding(variant, direction, sample, finding)


def _left_out(clip_list: ClipList, keep: list[int]) -> set[int]:
    """Parameters with a gradient that ``keep`` leaves out of a call (empty gradients of the
    infinity norm)."""
    kept = {clip_list.with_grad[k] for k in keep}
    return {i for i in clip_list.with_grad if i not in kept}


def _judge_total(torch: Any, found: float, expectation: ClipExpectation, what: str) -> Finding | None:
    expected = expectation.total
    if math.isinf(expected):
        if found == math.inf:
            return None
        return Finding(
            WRONG_VALUE, what, "the total norm overflows the dtype in float64 but came back finite or NaN",
            expected=_fmt(expected), found=_fmt(found),
        )  # fmt: skip
    allowed = expectation.relative * abs(expected)
    return compare_flat(
        torch,
        torch.tensor([found], dtype=torch.float64),
        torch.tensor([expected], dtype=torch.float64),
        torch.tensor([allowed], dtype=torch.float64),
        [0, 1],
        lambda _i: what,
        [()],
        what,
    )


def _judge_clipped(
    torch: Any, clip_list: ClipList, keep: list[int], found: Any, expectation: ClipExpectation, worst: list[float]
) -> Finding | None:
    """The clipped gradients against ``g·coefficient`` in float64: each element may be off by
    ``(relative + C·u)·|g·coefficient|`` (the coefficient inherits the total norm's error and
    is rounded twice in the total's dtype; the product rounds to the element's dtype). Where
    the coefficient clamps to 1 (``max_norm`` above the norm by more than that error), the
    gradients must come back bit for bit."""
    offsets, shapes, unit = _keep_layout(torch, clip_list, keep)
    original = torch.cat([clip_list.grads64[k].reshape(-1) for k in keep]) if keep else torch.zeros(0, dtype=torch.float64)
    expected = original * expectation.coefficient
    if expectation.coefficient >= 1.0:
        allowed = torch.zeros_like(expected)
    else:
        allowed = (expectation.relative + CLIP_ROUNDING_FACTOR * unit) * expected.abs()
    return compare_flat(torch, found, expected, allowed, offsets, _clip_describe(clip_list, keep), shapes, "grads", worst)


def _clip_value_case(
    ctx: ProbeContext,
    tally: OptimTally,
    clip_list: ClipList,
    implementation: str,
    foreach: bool | None,
    variant: str,
    sample: int,
) -> None:
    """One ``clip_grad_value_`` call: a clamp to ±``CLIP_VALUE``, exact in every dtype (the
    limit is a dtype value), so the gradients must equal float64's clamp bit for bit."""
    torch = ctx.torch
    keep = list(range(len(clip_list.with_grad)))
    try:
        set_grads(torch, clip_list.params, clip_list.param_set, 0, ctx.device)
        torch.nn.utils.clip_grad_value_(clip_list.params, CLIP_VALUE, foreach=foreach)
        grads = _clip_grads(clip_list, keep)
        _clip_simulation(torch, "clip_grad_value", clip_list.param_set.dtypes[0], implementation, "value", grads)
        ctx.sync()
        found = _flat(torch, grads)
    except Exception as exc:  # noqa: BLE001 - classified: refused, device error or lost context
        _classify_step_error(ctx, tally, variant, sample, exc)
        return
    offsets, shapes, _unit = _keep_layout(torch, clip_list, keep)
    original = torch.cat([g.reshape(-1) for g in clip_list.grads64])
    expected = original.clamp(-CLIP_VALUE, CLIP_VALUE)
    finding = compare_flat(
        torch, found, expected, torch.zeros_like(expected), offsets, _clip_describe(clip_list, keep), shapes, "grads"
    )
    if finding is None:
        finding = _clip_structure(clip_list)
    tally.record_finding(variant, "grads", sample, finding)


def _clip_nonfinite_case(
    ctx: ProbeContext,
    tally: OptimTally,
    clip_list: ClipList,
    norm_type: float,
    value: float,
    implementation: str,
    foreach: bool | None,
    error_if_nonfinite: bool,
    empty_inf: str,
    variant: str,
    sample: int,
) -> None:
    """One gradient element made ``value`` (NaN or −Inf): the returned norm must be NaN for a
    NaN and +Inf for an infinity; with ``error_if_nonfinite`` the call must raise, as it does on
    the CPU, and leave every gradient as it was."""
    torch = ctx.torch
    keep = list(range(len(clip_list.with_grad)))
    if math.isinf(norm_type) and empty_inf:
        keep = [k for k in keep if clip_list.grads64[k].numel() > 0]
    params = [clip_list.params[i] for i in range(len(clip_list.params)) if i not in _left_out(clip_list, keep)]
    target = next(i for i in clip_list.with_grad if clip_list.param_set.specs[i].numel > 2)

    def plant(grads_of: list[Any]) -> None:
        with torch.no_grad():
            grads_of[target].view(-1)[1] = value

    raised: str | None = None
    try:
        set_grads(torch, clip_list.params, clip_list.param_set, 0, ctx.device)
        plant([p.grad for p in clip_list.params])
        before = _flat(torch, _clip_grads(clip_list, keep))
        try:
            total = torch.nn.utils.clip_grad_norm_(
                params, 1.0, norm_type=norm_type, error_if_nonfinite=error_if_nonfinite, foreach=foreach
            )
            ctx.sync()
            total_found = float(total.detach().double().cpu())
        except RuntimeError as exc:
            if NONFINITE_REFUSAL not in str(exc):
                raise
            raised = _error_text(exc)
            total_found = math.nan
        after = _flat(torch, _clip_grads(clip_list, keep))
    except Exception as exc:  # noqa: BLE001 - classified: refused, device error or lost context
        _classify_step_error(ctx, tally, variant, sample, exc)
        return
    finding: Finding | None = None
    direction = "total_norm"
    if error_if_nonfinite:
        cpu_raises = _cpu_refuses_nonfinite(torch, clip_list, keep, target, value, norm_type, foreach)
        if raised is None and not cpu_raises:
            tally.unjudge("cpu_does_not_raise", f"{variant}: error_if_nonfinite does not raise on the CPU either")
            return
        if raised is None:
            finding = Finding(
                WRONG_VALUE, "error_if_nonfinite",
                f"clip_grad_norm_ clipped gradients holding {_fmt(value)} (total norm {_fmt(total_found)}) where "
                "error_if_nonfinite=True must raise, as it does on the CPU",
                expected="RuntimeError", found=_fmt(total_found),
            )  # fmt: skip
        else:
            same = (after == before) | (torch.isnan(after) & torch.isnan(before))
            if not bool(same.all()):
                finding = Finding(
                    WRONG_VALUE, "grads",
                    f"clip_grad_norm_ raised ({raised}) but changed {int((~same).sum())} gradient elements",
                    bad_elements=int((~same).sum()), elements=after.numel(),
                )  # fmt: skip
                direction = "grads"
    else:
        want_nan = math.isnan(value)
        ok = math.isnan(total_found) if want_nan else total_found == math.inf
        if not ok:
            finding = Finding(
                WRONG_VALUE if math.isfinite(total_found) else NONFINITE_INVENTED,
                "total_norm",
                f"the total {_norm_label(norm_type)}-norm of gradients holding {_fmt(value)} came back {_fmt(total_found)}",
                expected="nan" if want_nan else "inf",
                found=_fmt(total_found),
            )
    tally.record_finding(variant, direction, sample, finding)


def _cpu_refuses_nonfinite(
    torch: Any, clip_list: ClipList, keep: list[int], target: int, value: float, norm_type: float, foreach: bool | None
) -> bool:
    """Whether the same call on the CPU, in the same dtypes, raises for a non-finite norm."""
    grads = []
    for k in keep:
        index = clip_list.with_grad[k]
        grad = clip_list.param_set.grads[0][index].clone()
        if index == target:
            grad.view(-1)[1] = value
        param = torch.zeros_like(grad, requires_grad=True)
        param.grad = grad
        grads.append(param)
    try:
        torch.nn.utils.clip_grad_norm_(grads, 1.0, norm_type=norm_type, error_if_nonfinite=True, foreach=foreach)
    except RuntimeError as exc:
        return NONFINITE_REFUSAL in str(exc)
    return False
