"""Sweep cases: which samples, which input transforms, and how one case is computed.

A case is (sample index, transform, direction). The same code builds it in the worker (the
device run) and in the reference process (``sweep_ref``), from the op, the dtype and a seed,
so only a few numbers cross between them; a digest of the inputs proves both built the same.

Transforms (the input classes; each is a variant in the report):

| transform | applied to | what the kernel sees |
|---|---|---|
| ``base`` | nothing | the database's samples as given |
| ``noncontig`` | every floating tensor | a view with stride 2 in the last dimension |
| ``transposed`` | floating tensors of ≥ 2 dims | column-major strides (same shape and values) |
| ``channels_last`` | floating tensors of 4 dims | the ``channels_last`` memory format |
| ``broadcast`` | the first floating tensor, ≥ 1 dim, size(0) > 1 | ``x[:1].expand_as(x)``: stride 0 |
| ``nan`` / ``posinf`` / ``neginf`` | the first floating tensor | one element (seeded) replaced |
| ``empty`` | tensors sharing the first tensor's dim 0 | that dimension sliced to 0 |
| ``size1`` | tensors sharing the first tensor's dim 0 | that dimension sliced to 1 |
| ``arg_empty`` / ``arg_size1`` | one other subject tensor (``Case.argument``: each one's first and last dimension) | that dimension sliced to 0 / 1 |
| ``tail257`` / ``tail192`` | floating tensors sharing its last dim | last dim 257 (≡ 1 mod 32) or 192 (≡ 64 mod 128), values repeated |
| ``negzero`` / ``negnan`` / ``subnormal`` | the first floating tensor | one element (seeded) −0.0, NaN with its sign bit set, half the smallest normal |
| ``huge`` / ``max`` / ``lowest`` | the first floating tensor | one element √max/16 (its square still finite), the dtype's largest, its lowest |
| ``intmax`` / ``intmin`` | the first integer tensor | one element the dtype's largest / smallest value |
| ``negative`` | the first integer tensor | every positive element negated |
| ``out`` / ``out_noncontig`` / ``out_resize`` | the call | ``out=`` a tensor of the result's shape (contiguous, every other element of a wider one, or empty to be resized), filled with a sentinel |
| ``out_wide`` / ``out_narrow`` | the call | ``out=`` of a wider / narrower dtype of the same kind (the cast into ``out``) |
| ``inplace`` / ``inplace_noncontig`` | the call | the in-place variant (``x.add_``), on the input as given or as a stride-2 view |
| ``method`` | the call | the method variant (``x.add(...)``) |
| ``large_batch`` | tensors sharing the first tensor's dim 0 (reductions, normalizations, batched products and matrix functions) | dim 0 tiled to ``LARGE_BATCH`` rows |
| ``large_reduced`` | floating tensors sharing its last dim (reductions, softmax) | last dim ``LARGE_REDUCED``, values repeated |
| ``large_rhs`` | a solver's right-hand side (``Case.argument``) | ``LARGE_RHS`` right-hand sides, values repeated |

For integer and boolean dtypes the subject tensors are the tensors of the probe's dtype
(floating arguments keep their values), for floating and complex dtypes the floating and
complex tensors, as before. The ``large_*`` transforms run in the full tier only, forward
only, within ``LARGE_ELEMENTS`` a tensor; each size is just past a threshold where a
kernel or library changes how it works (``LARGE_BATCH``).

Every transform is a differentiable function of the sample's tensors, so gradients land on
the same leaves on the device and in the reference. The reference applies it to float64
copies and then makes the result contiguous: the reference never depends on a strided
kernel.

The probe-side framework switch ``gpuprobe.inputs.contiguous`` (``gpuprobe.switches``; a
``fix`` trial applies it in the worker) makes the device side of the layout transforms
(``LAYOUT_TRANSFORMS``) dense: the transformed tensor is copied into plain contiguous memory
before the call, so the same values reach the kernel without the layout. A layout failure
that passes with it is shown to be the layout's, with the same values.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from dataclasses import dataclass
from typing import Any, Callable

from gpuprobe import switches
from gpuprobe.worker.probes.sweep import db as sweep_db

#: Transforms in the order a probe runs them (layout first, then values, then shapes).
TRANSFORMS = (
    "base",
    "noncontig",
    "transposed",
    "channels_last",
    "broadcast",
    "nan",
    "posinf",
    "neginf",
    "empty",
    "size1",
    # per-argument shapes: one other tensor argument with a zero-size or size-1 dimension
    "arg_empty",
    "arg_size1",
    "tail257",
    "tail192",
    # value classes: one element (or every positive one) at an edge of the dtype
    "negzero",
    "negnan",
    "subnormal",
    "huge",
    "max",
    "lowest",
    "intmax",
    "intmin",
    "negative",
    # call variants: the same sample through another entry point of the operator
    "out",
    "out_noncontig",
    "out_resize",
    "out_wide",
    "out_narrow",
    "inplace",
    "inplace_noncontig",
    "method",
    # large shapes (full tier, forward only): past the sizes where kernels change algorithm
    "large_batch",
    "large_reduced",
    "large_rhs",
)
#: Transforms that change only where the values lie in memory (strides, memory format).
LAYOUT_TRANSFORMS = ("noncontig", "inplace_noncontig", "transposed", "channels_last", "broadcast")
#: The probe-side switch that makes the device's layout-transformed inputs contiguous.
DENSE_INPUTS_SWITCH = "gpuprobe.inputs.contiguous"
#: Value classes of floating and complex dtypes (one element replaced).
FLOAT_VALUE_CLASSES = ("negzero", "negnan", "subnormal", "huge", "max", "lowest")
#: Value classes of integer dtypes.
INTEGER_VALUE_CLASSES = ("intmax", "intmin", "negative")
#: Classes whose values are at the dtype's range: arithmetic on them may overflow.
MAGNITUDE_CLASSES = frozenset({"huge", "max", "lowest"})
#: Transforms that put a NaN or an infinity into the input.
NONFINITE_TRANSFORMS = frozenset({"nan", "posinf", "neginf", "negnan"})
#: Entry points other than the functional call; forward only.
CALL_VARIANTS = ("out", "out_noncontig", "out_resize", "out_wide", "out_narrow", "inplace", "inplace_noncontig", "method")
#: Transforms that give one tensor argument other than the first subject tensor a dimension
#: of size 0 or 1 (a weight, a bias, the other operand, a right-hand side), each of its
#: first and last dimensions in turn (``argument_targets``).
ARGUMENT_TRANSFORMS = ("arg_empty", "arg_size1")
#: Transforms past the sizes where kernels and libraries change algorithm: run in the full
#: tier only (a standard-subset probe skips them below it), forward only.
LARGE_TRANSFORMS = ("large_batch", "large_reduced", "large_rhs")
#: Transforms whose case names the tensor it changes (``Case.argument``).
TARGETED_TRANSFORMS = (*ARGUMENT_TRANSFORMS, "large_rhs")
#: Transforms added to the sweep's input classes after the first ones: value classes, call
#: variants and per-argument shapes. The standard tier runs a covering subset of them
#: (``sweep_specs.subset_new_axes``).
NEW_AXES = FLOAT_VALUE_CLASSES + INTEGER_VALUE_CLASSES + CALL_VARIANTS + ARGUMENT_TRANSFORMS
#: The sizes the ``large_*`` transforms reach, each just past a threshold where a kernel or
#: library changes how it works (sources in ``docs/probes.md``, "Large shapes"):
#:
#: - ``LARGE_BATCH`` (2^16 + 1) rows or matrices of a batch: past 65,535, the largest y and
#:   z dimension of a CUDA grid (a kernel that puts the batch there must split it), the
#:   size PyTorch cuts MAGMA's batched calls into (``batch_limit = 65535``) and the cap of
#:   its reduction kernel's blocks per output;
#: - ``LARGE_REDUCED`` (2^19 + 1) elements along the last dimension: past the point where
#:   PyTorch's reduction kernel (``Reduce.cuh``, ``setReduceConfig``: up to 512 threads a
#:   block, 4-element vector loads of float32) splits one output over several blocks (at
#:   256 values a thread), reducing through global memory with semaphores; past softmax's
#:   warp-per-row kernel (rows of at most 1,024 elements) and any row that fits in shared
#:   memory;
#: - ``LARGE_RHS`` (2^16 + 1) right-hand sides: past MAGMA's limit of 1,024 for batched
#:   ``getrs`` (``lu_solve_kernel`` then takes cuBLAS's batched solve or two triangular
#:   solves) and the grid's 65,535.
#:
#: ``_transform_fn`` spells the first two as literals: the repro script copies it alone.
LARGE_BATCH = 65537
LARGE_REDUCED = 524289
LARGE_RHS = 65537
#: Largest tensor a ``large_*`` transform builds, in elements: 32 MiB in the float64
#: reference, whose largest case on the database's samples the CPU computes within a second.
LARGE_ELEMENTS = 1 << 22
#: Tensor arguments (each with its first and last dimension) a per-argument transform
#: changes at most, one case each.
MAX_ARGUMENT_TARGETS = 4
#: The dtype an ``out_wide`` / ``out_narrow`` output of the probe's dtype is written into:
#: one step wider or narrower in the same kind, a cast ``torch.can_cast`` allows.
WIDER = {
    "float16": "float32",
    "bfloat16": "float32",
    "float32": "float64",
    "complex64": "complex128",
    "int8": "int64",
    "int16": "int64",
    "int32": "int64",
    "uint8": "int64",
}
NARROWER = {
    "float64": "float32",
    "float32": "float16",
    "complex128": "complex64",
    "int64": "int32",
    "int32": "int16",
    "int16": "int8",
}
#: PyTorch's "barebones" unsigned dtypes: advanced indexing, which the ``tail*`` transforms
#: use to repeat values, has no CUDA kernel for them (``"index_cuda" not implemented for
#: 'UInt16'`` on torch 2.11), so those transforms would test themselves, not the operator.
BAREBONES_UNSIGNED = ("uint16", "uint32", "uint64")
#: Transforms that keep every value (allowed for decompositions and solvers; the non-finite
#: ones reach them too, judged by their own rule: ``Judging.swallow_only``).
VALUE_KEEPING = frozenset(
    {"base", "noncontig", "transposed", "channels_last", "empty", "size1"}
    | set(CALL_VARIANTS)
    | set(ARGUMENT_TRANSFORMS)
    | set(LARGE_TRANSFORMS)
)
#: Transforms after which equal values are likely (order-statistic positions may tie).
REPEATS_VALUES = frozenset({"broadcast", "tail257", "tail192"} | set(LARGE_TRANSFORMS))
#: Transforms that make a tie of their own: −0.0 equals 0.0.
MAKES_TIES = REPEATS_VALUES | {"negzero"}
#: Samples read from the database's generator before choosing (some generate hundreds).
MAX_SAMPLES_SCAN = 48
#: Samples run as given (``base``), spread over the generated ones.
BASE_SAMPLES = 4
#: Samples each other transform is applied to.
TRANSFORM_SAMPLES = 1


class CaseError(Exception):
    """A case cannot be built (the sample generator failed, a transform does not apply)."""


@dataclass(frozen=True)
class Judging:
    """How a case's outputs are compared, from its transform (``judging``): the probe's
    judge and the repro script it writes take these from one place."""

    nonfinite_input: bool
    inf_input: bool
    compare_integers: bool
    mixing: bool
    #: A decomposition or solver under a non-finite input: only a NaN or infinity of the
    #: reference that vanishes from an output (``sweep_oracle.swallowed_nonfinite``) is a
    #: finding, and a lesser one than a wrong value; every other difference is undefined.
    swallow_only: bool = False


def judging(
    name: str, dtype_name: str, transform: str, held: tuple[bool, bool] = (False, False), variant: str = ""
) -> Judging:
    """The comparison flags of a case of operator ``name`` in ``dtype_name``.

    Integers converted from NaN/Inf, or from floats beyond the integer's range, are
    undefined (C++ float-to-integer conversion). Positions among ties are unspecified: ties
    are common in half precision, in integer and boolean samples (a few distinct values),
    and after transforms that repeat values or add a −0.0 beside 0.0. Transforms mix every
    input into every output: where a NaN/Inf input (or an overflow of the dtype's
    extremes) lands depends on the algorithm's order of operations, so only elements finite
    on both sides are compared (``mixing``). Complex arithmetic is the same: with an
    infinite part, |z|² is ∞ by ``abs`` and ∞ + NaN·j by ``z·conj(z)``, so a NaN reaches
    other outputs or not by the formula (and a NaN or infinite complex number is judged as
    a whole everywhere: ``sweep_oracle._complex_nonfinite_as_one``).

    ``held`` (``held_nonfinite``: a NaN, an infinity) is what the sample itself holds:
    reference inputs carry extremal values of their own, judged as if injected.

    A decomposition or solver (``sweep_db.takes_nonfinite``; ``variant`` is the entry's)
    under a non-finite input is judged by ``swallow_only``: LAPACK, cuSOLVER and MAGMA do
    not promise to propagate a NaN, and where one spreads depends on the algorithm (pivot
    searches, blocked updates), so the values are undefined; only an output whose
    reference holds NaN or Inf coming back entirely finite (the result looks valid) is
    reported.
    """
    has_nan, has_inf = held
    nonfinite_input = transform in NONFINITE_TRANSFORMS or has_nan or has_inf
    magnitude_input = transform in MAGNITUDE_CLASSES
    ties = sweep_db.is_order_op(name) and (
        dtype_name in ("float16", "bfloat16") or sweep_db.is_exact_dtype(dtype_name) or transform in MAKES_TIES
    )
    mixing = (sweep_db.is_fourier(name) or sweep_db.dtype_kind(dtype_name) == "complex") and (
        nonfinite_input or magnitude_input
    )
    return Judging(
        nonfinite_input=nonfinite_input,
        inf_input=transform in ("posinf", "neginf") or has_inf,
        compare_integers=not nonfinite_input and not magnitude_input and not ties,
        mixing=mixing,
        swallow_only=nonfinite_input and sweep_db.takes_nonfinite(name, variant),
    )


@dataclass(frozen=True)
class Case:
    """One case of a sweep probe."""

    sample: int
    transform: str
    backward: bool
    #: The tensor a targeted transform (``TARGETED_TRANSFORMS``) changes: its position among
    #: the sample's tensors (``tensors_of``) and the dimension (0 or -1); None otherwise.
    argument: tuple[int, int] | None = None

    @property
    def direction(self) -> str:
        return "backward" if self.backward else "forward"


def seed_everything(torch: Any, seed: int) -> None:
    """Seeds every generator a sample function may use."""
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed % (2**32))
    except ImportError:
        pass


def generate_samples(
    torch: Any, info: Any, dtype_name: str, seed: int, requires_grad: bool, reference: bool = False
) -> list[Any]:
    """The op's samples on the CPU in ``dtype_name`` (deterministic for ``seed``): its
    ``sample_inputs``, or with ``reference`` its ``reference_inputs`` (the database's larger
    set: the samples, then inputs of its own, extremal values among them) where it has any."""
    seed_everything(torch, seed)
    dtype = getattr(torch, dtype_name)
    reference = reference and has_reference_inputs(info)
    try:
        generate = info.reference_inputs if reference else info.sample_inputs
        return list(itertools.islice(generate("cpu", dtype, requires_grad=requires_grad), MAX_SAMPLES_SCAN))
    except Exception as exc:  # noqa: BLE001 - the database's own generator failed
        raise CaseError(f"the database's sample generator failed: {type(exc).__name__}: {exc}") from exc


def has_reference_inputs(info: Any) -> bool:
    """Whether the entry has reference inputs of its own (``reference_inputs_func``)."""
    return getattr(info, "reference_inputs_func", None) is not None


#: Samples of an entry's reference inputs beyond its sample inputs that a full-tier probe
#: runs as base cases (spread over them, none holding values the entry cannot take).
REFERENCE_SAMPLES = 2


@dataclass
class ProbeSamples:
    """The samples a sweep probe runs, as ``probe_samples`` decided."""

    samples: list[Any]
    #: Whether the samples were generated with ``requires_grad`` (backward cases possible).
    with_grad: bool
    #: How many of ``samples`` are the entry's ``sample_inputs``; the rest are its
    #: reference inputs' own.
    plain: int
    #: Why backward cases are not run although the database declares them, or None.
    forward_only: str | None = None

    @property
    def reference(self) -> int:
        return len(self.samples) - self.plain


def probe_samples(torch: Any, info: Any, dtype_name: str, seed: int, backward: bool, reference: bool) -> ProbeSamples:
    """The samples of one sweep probe (``sweep_run.run_op``; the repro script rebuilds them
    by the same decisions): with gradients where the dtype is differentiable and the
    generator allows it, without where every sample asks for dropout; with ``reference``
    (the full tier), the entry's reference inputs when they begin with its sample inputs.
    Raises ``CaseError`` when the database gives no sample."""
    with_grad = backward
    try:
        plain = generate_samples(torch, info, dtype_name, seed, requires_grad=with_grad)
    except CaseError:
        if not with_grad:
            raise
        with_grad = False
        plain = generate_samples(torch, info, dtype_name, seed, requires_grad=False)
    forward_only = None
    if with_grad and plain and all(sweep_db.sample_is_random(info.name, s) for s in plain):
        # Every differentiable sample asks for dropout (random values): judge the forward
        # samples by value instead of every case by structure alone.
        with_grad = False
        plain = generate_samples(torch, info, dtype_name, seed, requires_grad=False)
        forward_only = "backward not run: every differentiable sample of the database asks for dropout"
    if not plain:
        raise CaseError("the database generated no samples for this dtype")
    if reference and has_reference_inputs(info) and len(plain) < MAX_SAMPLES_SCAN:
        try:
            richer = generate_samples(torch, info, dtype_name, seed, requires_grad=with_grad, reference=True)
        except CaseError:
            richer = []
        same_start = len(richer) > len(plain) and all(
            digest(torch, a) == digest(torch, b) for a, b in zip(plain, richer[: len(plain)])
        )
        if same_start:
            return ProbeSamples(richer, with_grad, len(plain), forward_only)
    return ProbeSamples(plain, with_grad, len(plain), forward_only)


def held_nonfinite(torch: Any, sample: Any, dtype_name: str = "float32") -> tuple[bool, bool]:
    """Whether the sample's own subject tensors hold a NaN, and an infinity (reference
    inputs carry extremal values of their own)."""
    has_nan = has_inf = False
    for t in subjects(torch, sample, dtype_name):
        if not (t.is_floating_point() or t.is_complex()) or t.numel() == 0:
            continue
        values = t.detach()
        has_nan = has_nan or bool(torch.isnan(values).any())
        has_inf = has_inf or bool(torch.isinf(values).any())
    return has_nan, has_inf


def base_indices(count: int) -> list[int]:
    """Up to ``BASE_SAMPLES`` sample indices spread evenly over ``count`` samples."""
    if count <= BASE_SAMPLES:
        return list(range(count))
    step = (count - 1) / (BASE_SAMPLES - 1)
    return sorted({round(i * step) for i in range(BASE_SAMPLES)})


def tensors_of(torch: Any, sample: Any) -> list[Any]:
    """The sample's tensors in a fixed order (input, args, kwargs by key)."""
    from torch.utils._pytree import tree_leaves  # type: ignore

    leaves = tree_leaves([sample.input, list(sample.args), dict(sorted(sample.kwargs.items()))])
    return [t for t in leaves if isinstance(t, torch.Tensor)]


#: Floating dtypes from the most to the least precise (by significand bits).
PRECISION_ORDER = ("float64", "float32", "float16", "bfloat16")


def least_precise_float(torch: Any, sample: Any) -> str | None:
    """The least precise floating dtype among the sample's tensors (a float64 input with
    float32 weights computes partly in float32: type promotion), or None."""
    names = {str(t.dtype).replace("torch.", "") for t in tensors_of(torch, sample) if t.is_floating_point()}
    ranked = [n for n in PRECISION_ORDER if n in names]
    return ranked[-1] if ranked else None


def is_subject(torch: Any, t: Any, dtype_name: str) -> bool:
    """Whether ``t`` is one of the tensors a probe of ``dtype_name`` transforms: floating
    and complex tensors for floating and complex dtypes, tensors of the probe's own dtype
    for integer and boolean ones (their other tensors are indices, counts or masks)."""
    if sweep_db.is_exact_dtype(dtype_name):
        return t.dtype == getattr(torch, dtype_name)
    return bool(t.is_floating_point() or t.is_complex())


def subjects(torch: Any, sample: Any, dtype_name: str = "float32") -> list[Any]:
    """The sample's subject tensors (``is_subject``), in ``tensors_of`` order."""
    return [t for t in tensors_of(torch, sample) if is_subject(torch, t, dtype_name)]


def primary(torch: Any, sample: Any, dtype_name: str = "float32") -> Any | None:
    """The first subject tensor of the sample with at least one element."""
    for t in subjects(torch, sample, dtype_name):
        if t.numel() > 0:
            return t
    return None


def injected_value(torch: Any, transform: str, dtype: Any) -> Any:
    """The value a value class puts into a tensor of ``dtype`` (None where the class does
    not exist for it: ``huge`` in float16, whose √max/16 is 16; ``intmin`` of an unsigned
    dtype, which is 0)."""
    if transform in ("nan", "posinf", "neginf"):
        return {"nan": float("nan"), "posinf": float("inf"), "neginf": float("-inf")}[transform]
    if transform in FLOAT_VALUE_CLASSES:
        if not (dtype.is_floating_point or dtype.is_complex):
            return None
        info = torch.finfo(dtype)
        if transform == "negzero":
            return -0.0
        if transform == "negnan":
            return float("nan")  # its sign bit is set by the transform (``neg``)
        if transform == "subnormal":
            return float(info.smallest_normal) / 2
        if transform == "huge":
            return None if dtype == torch.float16 else float(info.max) ** 0.5 / 16
        return float(info.max) if transform == "max" else float(info.min)
    if transform in ("intmax", "intmin"):
        if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
            return None
        info = torch.iinfo(dtype)
        if transform == "intmin" and info.min == 0:
            return None
        return int(info.max) if transform == "intmax" else int(info.min)
    return None


def _in_domain(info: Any, value: float) -> bool:
    """Whether ``value`` lies in the operator's declared domain (``OpInfo.domain`` of unary
    functions: ``log`` is defined on (0, ∞)); any value when none is declared."""
    domain = getattr(info, "domain", None)
    if not isinstance(domain, tuple) or len(domain) != 2:
        return True
    low, high = domain
    if value != value:  # NaN: outside every declared domain
        return False
    return (low is None or value >= low) and (high is None or value < high)


def _declares_floats(torch: Any, info: Any) -> bool:
    try:
        return any(d.is_floating_point for d in info.supported_dtypes("cpu"))
    except Exception:  # noqa: BLE001 - drifted API: treated as integer-only
        return False


def variant_available(torch: Any, info: Any, sample: Any, transform: str, dtype_name: str) -> bool:
    """Whether the database gives this call variant for the entry, and it fits the sample."""
    tensor_input = isinstance(sample.input, torch.Tensor)
    if transform.startswith("out"):
        if not bool(getattr(info, "supports_out", False)):
            return False
        if transform == "out_wide":
            return dtype_name in WIDER
        if transform == "out_narrow":
            return dtype_name in NARROWER
        return True
    if transform.startswith("inplace"):
        if getattr(info, "inplace_variant", None) is None or not tensor_input:
            return False
        if bool(getattr(sample, "broadcasts_input", False)):
            # The database marks samples whose input would have to grow to the result's
            # shape: an in-place call rejects them on every device.
            return False
        if transform == "inplace_noncontig":
            return sample.input.dim() >= 1 and sample.input.numel() > 0 and is_subject(torch, sample.input, dtype_name)
        return True
    if transform == "method":
        return getattr(info, "method_variant", None) is not None and tensor_input
    raise CaseError(f"unknown call variant {transform!r}")


def applicable(torch: Any, info: Any, sample: Any, transform: str, dtype_name: str = "float32") -> bool:
    """Whether ``transform`` changes anything for this sample (and is allowed for the op)."""
    if transform == "base":
        return True
    variant = str(getattr(info, "variant_test_name", "") or "")
    if (
        transform not in VALUE_KEEPING
        and sweep_db.is_matrix_function(info.name, variant)
        and not (transform in NONFINITE_TRANSFORMS and sweep_db.takes_nonfinite(info.name, variant))
    ):
        return False
    if not sweep_db.transform_allowed(info, transform):
        return False
    if any(t.layout != torch.strided for t in tensors_of(torch, sample)):
        return transform == "base"
    if transform in CALL_VARIANTS:
        return variant_available(torch, info, sample, transform, dtype_name)
    if transform in ARGUMENT_TRANSFORMS:
        return sweep_db.checks_its_arguments(info.name) and bool(argument_targets(torch, sample, transform, dtype_name))
    if transform == "large_rhs":
        return right_hand_side(torch, info, sample, dtype_name) is not None
    floats = subjects(torch, sample, dtype_name)
    first = primary(torch, sample, dtype_name)
    if transform == "noncontig":
        return any(t.dim() >= 1 and t.numel() > 0 for t in floats)
    if transform == "transposed":
        return any(t.dim() >= 2 and t.shape[-1] > 1 and t.shape[-2] > 1 for t in floats)
    if transform == "channels_last":
        return any(t.dim() == 4 and t.numel() > 0 for t in floats)
    if first is None:
        return False
    if transform == "broadcast":
        return first.dim() >= 1 and first.shape[0] > 1
    if transform in ("nan", "posinf", "neginf") or transform in FLOAT_VALUE_CLASSES:
        if not (first.is_floating_point() or first.is_complex()):
            return False
        if transform == "negzero" and first.is_complex():
            # The sign of a complex zero picks a side of a branch cut (``angle``, ``log``):
            # CPU and device implementations follow C99's Annex G to different degrees, and
            # no float64 reference settles it.
            return False
        value = injected_value(torch, transform, first.dtype)
        if value is None:
            return False
        # NaN and the infinities reach every op (a NaN result is their answer outside a
        # domain); the finite classes only where the op is defined for them.
        return transform in NONFINITE_TRANSFORMS or _in_domain(info, value)
    if transform in INTEGER_VALUE_CLASSES:
        # Only where the integer tensor carries values of an arithmetic op: an entry that
        # declares no floating dtype takes its integer input as indices, counts or shifts
        # (``bincount``, ``one_hot``, ``bitwise_left_shift``), where the dtype's extremes
        # allocate without bound or are undefined.
        if not sweep_db.dtype_kind(dtype_name) == "integer" or not _declares_floats(torch, info):
            return False
        if transform == "negative":
            return bool(first.dtype.is_signed) and _in_domain(info, -1.0)
        value = injected_value(torch, transform, first.dtype)
        return value is not None and _in_domain(info, float(value))
    if transform in ("empty", "size1", "large_batch", "large_reduced") and _holds_indices(torch, sample, dtype_name):
        # Index values would point past the sliced tensor: the CPU rejects that, and CUDA
        # answers an out-of-range index with a device-side assert (by design), which ends
        # the process's device context. An integer probe's other tensors may be indices of
        # its own dtype: its samples are sliced only when they hold one tensor. The large
        # shapes keep to the same samples: an index tensor batched like the data (an
        # ``offsets`` vector) would be tiled with it and no longer describe it.
        return False
    if transform == "empty":
        return first.dim() >= 1 and first.shape[0] >= 1
    if transform == "size1":
        return first.dim() >= 1 and first.shape[0] > 1
    if transform in ("tail257", "tail192"):
        if dtype_name in BAREBONES_UNSIGNED:
            return False
        return first.dim() >= 1 and 1 <= first.shape[-1] < 64
    if transform == "large_batch":
        return _large_batch_fits(torch, info, sample, first, dtype_name)
    if transform == "large_reduced":
        if dtype_name in BAREBONES_UNSIGNED or not sweep_db.is_reduction(info) or first.dim() < 1:
            return False
        if info.name in sweep_db.RANGE_LEAVING_REDUCTIONS:
            return False
        widened = [t for t in subjects(torch, sample, dtype_name) if t.dim() >= 1 and t.shape[-1] == first.shape[-1]]
        return first.shape[-1] < LARGE_REDUCED and all(_rows(t, -1) * LARGE_REDUCED <= LARGE_ELEMENTS for t in widened)
    raise CaseError(f"unknown transform {transform!r}")


def _holds_indices(torch: Any, sample: Any, dtype_name: str) -> bool:
    """Whether the sample holds a tensor whose values may be indices: any tensor that is
    not a subject, and in an integer or boolean probe any tensor but the first. Slicing or
    tiling the tensors they index could leave index values pointing past them: the CPU
    rejects that, and CUDA answers an out-of-range index with a device-side assert (by
    design), which ends the process's device context."""
    first = primary(torch, sample, dtype_name)
    return any(
        not is_subject(torch, t, dtype_name) or (sweep_db.is_exact_dtype(dtype_name) and t is not first)
        for t in tensors_of(torch, sample)
    )


def _rows(t: Any, dim: int) -> int:
    """The elements of ``t`` per index of dimension ``dim`` (its other dimensions' product)."""
    return t.numel() // t.shape[dim] if t.shape[dim] else 0


def _large_batch_fits(torch: Any, info: Any, sample: Any, first: Any, dtype_name: str) -> bool:
    """Whether ``large_batch`` applies: an entry whose leading dimension is a batch
    (``sweep_db.takes_large_batch``; a matrix function's only when the sample is batched
    beyond the matrix), no shape argument spanning dimension 0, every tensor of the batch's
    length of the same rank (so that each is tiled), and each tiled tensor and the outputs
    within ``LARGE_ELEMENTS``."""
    if dtype_name in BAREBONES_UNSIGNED or not sweep_db.takes_large_batch(info):
        return False
    batched_only = info.name in sweep_db.BATCHED_OPS or sweep_db.is_reduction(info)
    if first.dim() < (1 if batched_only else 3) or not 1 <= first.shape[0] < LARGE_BATCH:
        return False
    if any(len(shape) >= first.dim() and shape == tuple(first.shape[-len(shape) :]) for shape in _shape_arguments(sample)):
        # A shape argument that spans dimension 0 too (``layer_norm``'s normalized_shape of
        # the whole tensor): it is not a batch.
        return False
    mates = [t for t in tensors_of(torch, sample) if t.dim() >= 1 and t.shape[0] == first.shape[0]]
    if not all(t.dim() == first.dim() and _rows(t, 0) * LARGE_BATCH <= LARGE_ELEMENTS for t in mates):
        return False
    # The outputs grow with the batch too, and may be far larger than the inputs (an outer
    # product of two columns, a 50 x 50 pseudo-inverse of them): the sample as given, on the
    # CPU, says by how much.
    produced = _output_elements(torch, info, sample)
    return produced is not None and produced // first.shape[0] * LARGE_BATCH <= LARGE_ELEMENTS


def _output_elements(torch: Any, info: Any, sample: Any) -> int | None:
    """The elements of every output of the sample as given, computed on the CPU, or None
    where the CPU does not compute it. The call takes copies: an op that updates an
    argument in place (``native_batch_norm``'s running statistics in training) would
    otherwise change the sample, whose digest the reference then no longer finds."""
    from torch.utils._pytree import tree_leaves, tree_map  # type: ignore

    def copy(value: Any) -> Any:
        return value.detach().clone() if isinstance(value, torch.Tensor) else value

    try:
        with torch.no_grad():
            result = info(tree_map(copy, sample.input), *tree_map(copy, list(sample.args)), **tree_map(copy, dict(sample.kwargs)))
    except Exception:  # noqa: BLE001 - not a sample the CPU computes: no large shape of it
        return None
    return sum(t.numel() for t in tree_leaves(result) if isinstance(t, torch.Tensor))


def _shape_arguments(sample: Any) -> list[tuple[int, ...]]:
    """The sample's plain arguments that are shapes (tuples or lists of ints)."""
    values = list(sample.args) + list(sample.kwargs.values())
    return [
        tuple(v)
        for v in values
        if isinstance(v, (tuple, list)) and v and all(isinstance(n, int) and not isinstance(n, bool) for n in v)
    ]


def argument_targets(torch: Any, sample: Any, transform: str, dtype_name: str = "float32") -> list[tuple[int, int]]:
    """(position in ``tensors_of``, dimension) of each tensor argument a per-argument
    transform changes, one case each, at most ``MAX_ARGUMENT_TARGETS``: every non-empty
    subject tensor other than the first (``primary``; and not the same tensor passed
    twice), its first and its last dimension, where slicing it to 0 (``arg_empty``) or 1
    (``arg_size1``) changes it. Floating and complex probes only, in samples without index
    tensors (``_holds_indices``): an integer probe's other tensors may be indices of its
    own dtype."""
    if sweep_db.is_exact_dtype(dtype_name) or _holds_indices(torch, sample, dtype_name):
        return []
    tensors = tensors_of(torch, sample)
    first = primary(torch, sample, dtype_name)
    if first is None:
        return []
    targets: list[tuple[int, int]] = []
    for position, t in enumerate(tensors):
        if t is first or t.dim() == 0 or t.numel() == 0 or sum(1 for u in tensors if u is t) > 1:
            continue
        for dim in (0, -1) if t.dim() > 1 else (0,):
            if t.shape[dim] > (1 if transform == "arg_size1" else 0):
                targets.append((position, dim))
    return targets[:MAX_ARGUMENT_TARGETS]


def right_hand_side(torch: Any, info: Any, sample: Any, dtype_name: str = "float32") -> tuple[int, int] | None:
    """(position, -1) of a solver's right-hand side B that ``large_rhs`` gives
    ``LARGE_RHS`` columns (``sweep_db.RIGHT_HAND_SIDES``), or None: B a matrix (of the
    coefficient matrix's rank; a batch of vectors would change its length), the system
    solved from the left, within ``LARGE_ELEMENTS``, in a sample without index tensors."""
    position = sweep_db.RIGHT_HAND_SIDES.get(info.name)
    if position is None or dtype_name in BAREBONES_UNSIGNED or _holds_indices(torch, sample, dtype_name):
        return None
    tensors = tensors_of(torch, sample)
    if position >= len(tensors) or len(tensors) < 2 or sample.kwargs.get("left", True) is not True:
        return None
    rhs = tensors[position]
    matrix = next(t for i, t in enumerate(tensors) if i != position)
    if rhs.dim() < 2 or rhs.dim() != matrix.dim() or rhs.numel() == 0 or rhs.shape[-1] >= LARGE_RHS:
        return None
    if _rows(rhs, -1) * LARGE_RHS > LARGE_ELEMENTS:
        return None
    return position, -1


def argument_label(torch: Any, sample: Any, argument: tuple[int, int]) -> str:
    """The tensor a targeted case changes, in words (``args[0] dim -1``)."""
    position, dim = argument
    try:
        from torch.utils._pytree import keystr, tree_flatten_with_path  # type: ignore

        leaves, _spec = tree_flatten_with_path([sample.input, list(sample.args), dict(sorted(sample.kwargs.items()))])
        paths = [path for path, leaf in leaves if isinstance(leaf, torch.Tensor)]
        path = paths[position]
        head = ("input", "args", "kwargs")[getattr(path[0], "idx", 0)]
        return f"{head}{keystr(path[1:])} dim {dim}"
    except Exception:  # noqa: BLE001 - an older pytree: the position says it
        return f"tensor {position} dim {dim}"


def choose_cases(
    torch: Any,
    info: Any,
    samples: list[Any],
    seed: int,
    backward: bool,
    dtype_name: str = "float32",
    only_new: tuple[str, ...] | None = None,
    plain: int | None = None,
) -> list[Case]:
    """The cases of one probe: base samples, then each transform on the samples it fits.

    In bfloat16 and float16, order statistics get no backward cases (their gradients go to
    positions chosen among ties, which are frequent at that precision), and neither do the
    transforms that repeat values (many equal contributions accumulate, by atomics in any
    order, at the dtype's precision). Call variants run forward only (their gradients are
    the functional call's), and value classes run no backward in half precision (what its
    gradient does with the dtype's extremes is the forward's overflow again). ``only_new``
    limits the value classes, call variants and per-argument shapes to those named (the
    standard tier's subset) and leaves out the large shapes; None runs them all. A
    per-argument transform runs one case for each tensor argument and dimension
    (``argument_targets``) of the sample it picks, without backward for ``arg_empty``; the
    large shapes run forward only. ``plain`` is how many samples
    are the entry's sample inputs: base cases spread over those, plus ``REFERENCE_SAMPLES``
    of the reference inputs' own after them (``reference_indices``), run as given;
    transforms pick among the sample inputs.
    """
    low_precision = dtype_name in ("float16", "bfloat16")
    if low_precision and sweep_db.is_order_op(info.name):
        backward = False
    cases: list[Case] = []
    count = len(samples)
    plain = count if plain is None else plain
    # The same draw as without the reference inputs' own samples: a transform picks the
    # same sample either way.
    order = list(range(plain))
    random.Random(seed).shuffle(order)
    for index in base_indices(plain) + reference_indices(torch, info, samples, plain, dtype_name):
        cases.append(Case(index, "base", False))
        if backward:
            cases.append(Case(index, "base", True))
    for transform in TRANSFORMS[1:]:
        if only_new is not None and transform in NEW_AXES and transform not in only_new:
            continue
        if only_new is not None and transform in LARGE_TRANSFORMS:
            continue
        # Transforms take the entry's sample inputs only: the reference inputs' own samples
        # (extremal values among them) run as given.
        chosen = [i for i in order if applicable(torch, info, samples[i], transform, dtype_name)][:TRANSFORM_SAMPLES]
        for index in chosen:
            arguments: list[tuple[int, int] | None] = [None]
            if transform in ARGUMENT_TRANSFORMS:
                arguments = list(argument_targets(torch, samples[index], transform, dtype_name))
            elif transform == "large_rhs":
                arguments = [right_hand_side(torch, info, samples[index], dtype_name)]
            for argument in arguments:
                cases.append(Case(index, transform, False, argument))
                if (
                    backward
                    and transform not in ("empty", "arg_empty")
                    and transform not in CALL_VARIANTS
                    and transform not in LARGE_TRANSFORMS
                    and not (transform == "negzero" and sweep_db.is_order_op(info.name))
                    and not (low_precision and (transform in REPEATS_VALUES or transform in FLOAT_VALUE_CLASSES))
                ):
                    cases.append(Case(index, transform, True, argument))
    return cases


def reference_indices(torch: Any, info: Any, samples: list[Any], plain: int, dtype_name: str = "float32") -> list[int]:
    """Up to ``REFERENCE_SAMPLES`` indices spread over the reference inputs' own samples
    (``samples[plain:]``), leaving out those whose values the entry cannot be judged on:
    non-finite values for a decomposition or solver (undefined, the rule that keeps their
    transforms to the value-keeping ones) or for an entry whose device kernel asserts on
    them (``sweep_db.DEVICE_ASSERT_DOMAINS``), a NaN for an entry whose result on NaN is
    undefined (``sweep_db.NAN_UNDEFINED_OPS``). Decompositions and solvers take them
    (``sweep_db.takes_nonfinite``, judged like an injected NaN), the orthogonal polynomials
    do not."""
    name = info.name
    variant = str(getattr(info, "variant_test_name", "") or "")
    asserts = sweep_db.DEVICE_ASSERT_DOMAINS.get(name, ())
    usable = []
    for index in range(plain, len(samples)):
        has_nan, has_inf = held_nonfinite(torch, samples[index], dtype_name)
        undefined_on_it = sweep_db.is_matrix_function(name, variant) and not sweep_db.takes_nonfinite(name, variant)
        if (has_nan or has_inf) and (undefined_on_it or "nan" in asserts or "posinf" in asserts):
            continue
        if has_nan and name in sweep_db.NAN_UNDEFINED_OPS:
            continue
        usable.append(index)
    if len(usable) <= REFERENCE_SAMPLES:
        return usable
    step = (len(usable) - 1) / (REFERENCE_SAMPLES - 1) if REFERENCE_SAMPLES > 1 else 0
    return sorted({usable[round(i * step)] for i in range(REFERENCE_SAMPLES)})


def _transform_fn(torch: Any, transform: str, seed: int, dtype: Any = None, length: Any = None) -> Callable[[Any], Any]:
    """The transform as a function of one tensor; ``dtype`` is the sample's own dtype, whose
    extremes the value classes inject (the reference's tensor is float64 by then).
    ``length`` replaces a large shape's size (the device-time estimate's smaller run)."""
    if transform in ("noncontig", "inplace_noncontig"):
        return lambda x: torch.stack([x, x], dim=-1)[..., 0] if x.dim() >= 1 and x.numel() > 0 else x
    if transform == "transposed":
        return lambda x: x.transpose(-1, -2).contiguous().transpose(-1, -2) if x.dim() >= 2 else x
    if transform == "channels_last":
        return lambda x: x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x
    if transform == "broadcast":
        return lambda x: x[:1].expand_as(x)
    if transform == "negative":
        return lambda x: torch.where(x > 0, -x, x)
    if transform in ("nan", "posinf", "neginf", "negzero", "negnan", "subnormal", "huge", "max", "lowest", "intmax", "intmin"):

        def inject(x: Any) -> Any:
            special = injected_value(torch, transform, dtype if dtype is not None else x.dtype)
            position = random.Random(seed).randrange(x.numel())
            mask = torch.zeros(x.numel(), dtype=torch.bool)
            mask[position] = True
            mask = mask.reshape(x.shape).to(x.device)
            fill = torch.full_like(x, special)
            if transform == "negnan":
                fill = fill.neg()  # NaN with its sign bit set
            return torch.where(mask, fill, x)

        return inject
    if transform == "empty":
        return lambda x: x[:0]
    if transform == "size1":
        return lambda x: x[:1]
    if transform in ("tail257", "tail192", "large_reduced"):
        # large_reduced: LARGE_REDUCED, a literal because the repro script copies this alone.
        length = length or {"tail257": 257, "tail192": 192, "large_reduced": 524289}[transform]

        def widen(x: Any) -> Any:
            index = torch.arange(length, device=x.device) % x.shape[-1]
            return x[..., index]

        return widen
    if transform == "large_batch":

        def tile(x: Any) -> Any:
            # LARGE_BATCH rows (a literal, as above), the sample's rows repeated.
            index = torch.arange(length or 65537, device=x.device) % x.shape[0]
            return x[index]

        return tile
    return lambda x: x


def _argument_fn(torch: Any, transform: str, dim: int, poisoned: bool = False, length: int | None = None) -> Callable[[Any], Any]:
    """A targeted transform (``TARGETED_TRANSFORMS``) as a function of its one tensor.

    ``poisoned``: a per-argument view keeps its own elements, while the rest of its base
    (what a kernel reading past the view's end finds) is ``poison_value``. A plain view
    keeps its storage, so a CPU kernel that reads past its end reads the original values in
    every dtype and agrees with itself; only a changed neighbourhood shows the read."""
    if transform in ARGUMENT_TRANSFORMS:
        kept_length = 0 if transform == "arg_empty" else 1
        if not poisoned:
            return lambda x: x.narrow(dim, 0, kept_length)

        def poison(x: Any) -> Any:
            kept = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
            kept.narrow(dim, 0, kept_length).fill_(True)
            # ``where`` keeps the view's elements bit for bit, and a gradient reaches the leaf.
            return torch.where(kept, x, torch.full_like(x, poison_value(torch, x.dtype))).narrow(dim, 0, kept_length)

        return poison
    if transform == "large_rhs":
        return lambda x: x.index_select(dim, torch.arange(length or LARGE_RHS, device=x.device) % x.shape[dim])
    raise CaseError(f"transform {transform!r} does not target one argument")


def poison_value(torch: Any, dtype: Any) -> Any:
    """What ``_argument_fn`` writes beside a poisoned view: NaN in floating and complex
    dtypes, the dtype's largest value in integer ones (far from any sample's), True in bool."""
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    if dtype == torch.bool:
        return True
    return int(torch.iinfo(dtype).max)


def dense_inputs() -> bool:
    """Whether the worker applied ``gpuprobe.inputs.contiguous`` in this process."""
    return switches.probe_side_on(DENSE_INPUTS_SWITCH)


def dense_input_notes(variants: set[str]) -> list[str]:
    """The observation's note when ``dense_inputs`` changed some of the ``variants`` run."""
    changed = [t for t in LAYOUT_TRANSFORMS if t in variants]
    if not changed or not dense_inputs():
        return []
    return [
        f"framework switch {DENSE_INPUTS_SWITCH}=True: the inputs of the layout variants ({', '.join(changed)}) were "
        "made contiguous before the call (same values, plain memory format)"
    ]


def transform_targets(torch: Any, sample: Any, transform: str, dtype_name: str = "float32") -> set[int]:
    """The ids of the sample's tensors that ``transform`` changes (none for a call variant).
    The compile family and the sweep's repro scripts apply transforms by the same rule."""
    tensors = tensors_of(torch, sample)
    floats = subjects(torch, sample, dtype_name)
    first = primary(torch, sample, dtype_name)
    if transform in ("noncontig", "transposed", "channels_last"):
        return {id(t) for t in floats}
    if transform == "inplace_noncontig":
        return {id(sample.input)} if isinstance(sample.input, torch.Tensor) else set()
    if transform in CALL_VARIANTS:
        return set()
    if first is None:
        return set()
    if transform in ("broadcast", "nan", "posinf", "neginf") or transform in FLOAT_VALUE_CLASSES + INTEGER_VALUE_CLASSES:
        return {id(first)}
    if transform in ("empty", "size1", "large_batch"):
        # Tensors batched like the first (same rank, same leading size); a parameter vector
        # whose length happens to equal the batch (running statistics) keeps its size.
        return {id(t) for t in tensors if t.dim() == first.dim() and t.shape[0] == first.shape[0]}
    if transform in ("tail257", "tail192", "large_reduced"):
        return {id(t) for t in floats if t.dim() >= 1 and t.shape[-1] == first.shape[-1]}
    return set()


def dense_on_host(torch: Any, value: Any) -> Any:
    """A tensor detached, dense (sparse layouts expanded) and on the CPU; other values as they are."""
    if not isinstance(value, torch.Tensor):
        return value
    value = value.detach()
    if value.layout != torch.strided:
        value = value.to_dense()
    return value.cpu()


def digest(torch: Any, sample: Any) -> str:
    """A digest of the sample's tensor values and shapes and of its plain arguments (proves
    both sides built the same; the database's generators may iterate over sets of strings,
    whose order differs between processes)."""
    from torch.utils._pytree import tree_leaves  # type: ignore

    h = hashlib.sha256()
    h.update(",".join(sorted(sample.kwargs)).encode())
    for leaf in tree_leaves([sample.input, list(sample.args), dict(sorted(sample.kwargs.items()))]):
        if isinstance(leaf, (str, int, float, bool, complex, type(None))) or isinstance(leaf, torch.dtype):
            h.update(repr(leaf).encode())
    for t in tensors_of(torch, sample):
        t = dense_on_host(torch, t)
        h.update(str((tuple(t.shape), str(t.dtype))).encode())
        if t.numel():
            data = t.contiguous()
            if data.is_complex():
                data = torch.view_as_real(data.resolve_conj())
            if data.dtype == torch.bfloat16:
                data = data.view(torch.int16)
            h.update(data.numpy().tobytes())
    return h.hexdigest()[:16]


def materialize(
    torch: Any,
    sample: Any,
    case: Case,
    seed: int,
    *,
    device: Any,
    upcast: bool,
    contiguous: bool = False,
    dtype_name: str = "float32",
    poisoned: bool = False,
    large_length: int | None = None,
) -> tuple[Any, list[Any], Any]:
    """The call's (input, args, kwargs) on ``device``, and the leaves gradients are taken for.

    ``upcast`` makes the reference: floating tensors become float64 (complex become
    complex128) and dtype arguments equal to the sample's dtype become float64.
    ``contiguous`` copies every transformed tensor into a contiguous one (the second
    reference, which tells a layout-dependent CPU result from a device bug).
    ``poisoned`` builds a per-argument case's view from a poisoned base
    (``_argument_fn``); ``large_length`` gives a ``large_*`` case another size.
    """
    from torch.utils._pytree import tree_map  # type: ignore

    first = primary(torch, sample, dtype_name)
    sample_dtype = first.dtype if first is not None else None
    if case.argument is not None:
        position, dim = case.argument
        tensors = tensors_of(torch, sample)
        if position >= len(tensors):
            raise CaseError(f"the sample has no tensor {position}")
        targets = {id(tensors[position])}
        fn = _argument_fn(torch, case.transform, dim, poisoned, large_length)
    else:
        targets = transform_targets(torch, sample, case.transform, dtype_name)
        fn = _transform_fn(torch, case.transform, seed, sample_dtype, large_length)
    # The device side only: the reference keeps the layout, which decides whether a view is
    # valid input at all.
    dense = not upcast and case.transform in LAYOUT_TRANSFORMS and dense_inputs()
    leaves: list[Any] = []

    def move(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            grad = bool(case.backward and value.requires_grad)
            data = value.detach()
            if upcast and data.is_floating_point():
                data = data.double()
            elif upcast and data.is_complex():
                data = data.to(torch.complex128)
            data = data.to(device).clone()
            if grad:
                data.requires_grad_(True)
                leaves.append(data)
            if id(value) in targets:
                # The reference sees the same layout: whether a view is valid input (an
                # in-place write into a broadcast view, ``view`` of a transposed tensor,
                # ``as_strided`` reading storage) is decided by the layout, not the device.
                data = fn(data)
                if contiguous or dense:
                    data = data.contiguous()
            return data
        if upcast and sample_dtype is not None and isinstance(value, torch.dtype) and value == sample_dtype:
            if sample_dtype.is_floating_point:
                return torch.float64
            return torch.complex128 if sample_dtype.is_complex else value
        if isinstance(value, torch.device):
            return torch.device(device)
        return value

    call_input = tree_map(move, sample.input)
    args = tree_map(move, list(sample.args))
    kwargs = {}
    for key, value in sample.kwargs.items():
        kwargs[key] = _device_kwarg(torch, value, device) if key == "device" else tree_map(move, value)
    return (call_input, args, kwargs), leaves, sample_dtype


def _device_kwarg(torch: Any, value: Any, device: Any) -> Any:
    if isinstance(value, torch.device):
        return torch.device(device)
    if isinstance(value, str):
        return str(device)
    return value


def projection_weights(torch: Any, outputs: list[Any], seed: int) -> list[Any]:
    """Fixed float64 weights, one per differentiable output, for ``loss = Σ⟨w, out⟩``."""
    generator = torch.Generator().manual_seed(seed)
    weights = []
    for out in outputs:
        shape = tuple(torch.view_as_real(out).shape) if out.is_complex() else tuple(out.shape)
        weights.append(torch.randn(shape, generator=generator, dtype=torch.float64))
    return weights


def differentiable_outputs(torch: Any, result: Any) -> list[Any]:
    """The output tensors a gradient flows from."""
    from torch.utils._pytree import tree_leaves  # type: ignore

    return [
        t
        for t in tree_leaves(result)
        if isinstance(t, torch.Tensor) and t.requires_grad and (t.is_floating_point() or t.is_complex())
    ]


def _sentinel_fill(torch: Any, out: Any) -> Any:
    """Fills an ``out=`` tensor with a value the operator must overwrite: NaN, or one below
    an integer dtype's largest value (the largest itself is a value the oracle cannot
    judge: ``sweep_oracle._undefined_integers``), or True."""
    if out.numel() == 0:
        return out
    if out.is_floating_point() or out.is_complex():
        return out.fill_(float("nan"))
    if out.dtype == torch.bool:
        return out.fill_(True)
    return out.fill_(int(torch.iinfo(out.dtype).max) - 1)


def _out_like(torch: Any, like: Any, variant: str, dtype_name: str, upcast: bool) -> Any:
    """The tensor an ``out=`` variant writes into, for a functional result ``like``.

    The device's out takes the variant's dtype for results of the probe's own dtype; the
    reference's keeps its own result's dtype (float64), so the reference of every ``out=``
    variant is the functional result computed through the CPU's ``out=`` path.
    """
    dtype = like.dtype
    if not upcast and like.dtype == getattr(torch, dtype_name):
        if variant == "out_wide":
            dtype = getattr(torch, WIDER[dtype_name])
        elif variant == "out_narrow":
            dtype = getattr(torch, NARROWER[dtype_name])
    if variant == "out_resize":
        return torch.empty(0, dtype=dtype, device=like.device)
    shape = tuple(like.shape)
    if variant == "out_noncontig" and like.dim() >= 1 and like.numel() > 0:
        wide = torch.empty(shape[:-1] + (2 * shape[-1],), dtype=dtype, device=like.device)
        return _sentinel_fill(torch, wide)[..., ::2]
    return _sentinel_fill(torch, torch.empty(shape, dtype=dtype, device=like.device))


def call_variant(torch: Any, info: Any, variant: str, call: tuple[Any, list[Any], Any], dtype_name: str, upcast: bool) -> Any:
    """Runs one call variant of the entry; returns what it produced (for ``out=``, the out
    tensors; for in-place, the tensor written)."""
    from torch.utils._pytree import tree_flatten  # type: ignore

    call_input, args, kwargs = call
    if variant == "method":
        return info.method_variant(call_input, *args, **kwargs)
    if variant.startswith("inplace"):
        return info.inplace_variant(call_input, *args, **kwargs)
    functional = info.op(call_input, *args, **kwargs)
    results, _spec = tree_flatten(functional)
    if not results or not all(isinstance(r, torch.Tensor) for r in results):
        raise CaseError("the functional call returns values that are not tensors: no out= to give")
    outs = [_out_like(torch, r, variant, dtype_name, upcast) for r in results]
    info.op(call_input, *args, **kwargs, out=outs[0] if isinstance(functional, torch.Tensor) else tuple(outs))
    return outs


def run_case(
    torch: Any,
    info: Any,
    sample: Any,
    case: Case,
    seed: int,
    *,
    device: Any,
    upcast: bool,
    contiguous: bool = False,
    dtype_name: str = "float32",
    functional: bool = False,
    poisoned: bool = False,
) -> list[Any]:
    """Computes one case; returns the flat list of results (outputs, or gradients).

    Forward: the op's outputs, flattened. Backward: the gradient of ``Σ⟨w, out⟩`` for every
    leaf that requires grad (None where the op does not depend on a leaf). A call variant
    returns what its entry point produced (the ``out=`` tensors, the tensor written in
    place, the method's result), or with ``functional`` what the functional call gives for
    the same inputs: the variant's truth.
    """
    from torch.utils._pytree import tree_leaves  # type: ignore

    (call_input, args, kwargs), leaves, sample_dtype = materialize(
        torch, sample, case, seed, device=device, upcast=upcast, contiguous=contiguous, dtype_name=dtype_name, poisoned=poisoned
    )
    if case.transform in CALL_VARIANTS and not functional:
        with torch.no_grad():
            result = call_variant(torch, info, case.transform, (call_input, args, kwargs), dtype_name, upcast)
        return list(tree_leaves(result))
    if not case.backward:
        with torch.no_grad():
            result = info(call_input, *args, **kwargs)
        return list(tree_leaves(result))
    result = info(call_input, *args, **kwargs)
    process = getattr(sample, "output_process_fn_grad", None)
    if callable(process):
        result = process(result)
    outs = differentiable_outputs(torch, result)
    if not outs or not leaves:
        raise CaseError("no differentiable output or input for this sample")
    loss = projection_loss(torch, outs, seed, sample_dtype)
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return list(grads)


def projection_loss(torch: Any, outs: list[Any], seed: int, sample_dtype: Any) -> Any:
    """``Σ⟨w, out⟩`` over the differentiable outputs, with ``projection_weights``."""
    loss = None
    for out, weight in zip(outs, projection_weights(torch, outs, seed)):
        real = torch.view_as_real(out) if out.is_complex() else out
        if sample_dtype is not None and sample_dtype.is_floating_point:
            # Both sides use the weights rounded to the sample's dtype: the reference then
            # differs from the device only by the device's arithmetic.
            weight = weight.to(sample_dtype)
        term = (real * weight.to(device=real.device, dtype=real.dtype)).sum()
        loss = term if loss is None else loss + term
    return loss
