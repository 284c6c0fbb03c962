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
| ``tail257`` / ``tail192`` | floating tensors sharing its last dim | last dim 257 (≡ 1 mod 32) or 192 (≡ 64 mod 128), values repeated |

Every transform is a differentiable function of the sample's tensors, so gradients land on
the same leaves on the device and in the reference. The reference applies it to float64
copies and then makes the result contiguous: the reference never depends on a strided
kernel.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from dataclasses import dataclass
from typing import Any, Callable

from gpuprobe.worker.probes import sweep_db

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
    "tail257",
    "tail192",
)
#: Transforms that keep every value (allowed for decompositions and solvers).
VALUE_KEEPING = frozenset({"base", "noncontig", "transposed", "channels_last", "empty", "size1"})
#: Transforms after which equal values are likely (order-statistic positions may tie).
REPEATS_VALUES = frozenset({"broadcast", "tail257", "tail192"})
#: Samples read from the database's generator before choosing (some generate hundreds).
MAX_SAMPLES_SCAN = 48
#: Samples run as given (``base``), spread over the generated ones.
BASE_SAMPLES = 4
#: Samples each other transform is applied to.
TRANSFORM_SAMPLES = 1


class CaseError(Exception):
    """A case cannot be built (the sample generator failed, a transform does not apply)."""


@dataclass(frozen=True)
class Case:
    """One case of a sweep probe."""

    sample: int
    transform: str
    backward: bool

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


def generate_samples(torch: Any, info: Any, dtype_name: str, seed: int, requires_grad: bool) -> list[Any]:
    """The op's samples on the CPU in ``dtype_name`` (deterministic for ``seed``)."""
    seed_everything(torch, seed)
    dtype = getattr(torch, dtype_name)
    try:
        generator = info.sample_inputs("cpu", dtype, requires_grad=requires_grad)
        return list(itertools.islice(generator, MAX_SAMPLES_SCAN))
    except Exception as exc:  # noqa: BLE001 - the database's own generator failed
        raise CaseError(f"the database's sample generator failed: {type(exc).__name__}: {exc}") from exc


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
_PRECISION_ORDER = ("float64", "float32", "float16", "bfloat16")


def least_precise_float(torch: Any, sample: Any) -> str | None:
    """The least precise floating dtype among the sample's tensors (a float64 input with
    float32 weights computes partly in float32: type promotion), or None."""
    names = {str(t.dtype).replace("torch.", "") for t in tensors_of(torch, sample) if t.is_floating_point()}
    ranked = [n for n in _PRECISION_ORDER if n in names]
    return ranked[-1] if ranked else None


def primary(torch: Any, sample: Any) -> Any | None:
    """The first floating tensor of the sample with at least one element."""
    for t in tensors_of(torch, sample):
        if (t.is_floating_point() or t.is_complex()) and t.numel() > 0:
            return t
    return None


def applicable(torch: Any, info: Any, sample: Any, transform: str) -> bool:
    """Whether ``transform`` changes anything for this sample (and is allowed for the op)."""
    if transform == "base":
        return True
    if transform not in VALUE_KEEPING and sweep_db.is_matrix_function(info.name, str(info.variant_test_name or "")):
        return False
    if not sweep_db.transform_allowed(info, transform):
        return False
    if any(t.layout != torch.strided for t in tensors_of(torch, sample)):
        return transform == "base"
    floats = [t for t in tensors_of(torch, sample) if t.is_floating_point() or t.is_complex()]
    first = primary(torch, sample)
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
    if transform in ("nan", "posinf", "neginf"):
        return True
    if transform in ("empty", "size1") and any(
        not (t.is_floating_point() or t.is_complex()) for t in tensors_of(torch, sample)
    ):
        # Index values would point past the sliced tensor: the CPU rejects that, and CUDA
        # answers an out-of-range index with a device-side assert (by design), which ends
        # the process's device context.
        return False
    if transform == "empty":
        return first.dim() >= 1 and first.shape[0] >= 1
    if transform == "size1":
        return first.dim() >= 1 and first.shape[0] > 1
    if transform in ("tail257", "tail192"):
        return first.dim() >= 1 and 1 <= first.shape[-1] < 64
    raise CaseError(f"unknown transform {transform!r}")


def choose_cases(
    torch: Any, info: Any, samples: list[Any], seed: int, backward: bool, dtype_name: str = "float32"
) -> list[Case]:
    """The cases of one probe: base samples, then each transform on the samples it fits.

    In bfloat16 and float16, order statistics get no backward cases (their gradients go to
    positions chosen among ties, which are frequent at that precision), and neither do the
    transforms that repeat values (many equal contributions accumulate, by atomics in any
    order, at the dtype's precision).
    """
    low_precision = dtype_name in ("float16", "bfloat16")
    if low_precision and sweep_db.is_order_op(info.name):
        backward = False
    cases: list[Case] = []
    count = len(samples)
    order = list(range(count))
    random.Random(seed).shuffle(order)
    for index in base_indices(count):
        cases.append(Case(index, "base", False))
        if backward:
            cases.append(Case(index, "base", True))
    for transform in TRANSFORMS[1:]:
        chosen = [i for i in order if applicable(torch, info, samples[i], transform)][:TRANSFORM_SAMPLES]
        for index in chosen:
            cases.append(Case(index, transform, False))
            if backward and transform != "empty" and not (low_precision and transform in REPEATS_VALUES):
                cases.append(Case(index, transform, True))
    return cases


def _transform_fn(torch: Any, transform: str, seed: int) -> Callable[[Any], Any]:
    if transform == "noncontig":
        return lambda x: torch.stack([x, x], dim=-1)[..., 0] if x.dim() >= 1 and x.numel() > 0 else x
    if transform == "transposed":
        return lambda x: x.transpose(-1, -2).contiguous().transpose(-1, -2) if x.dim() >= 2 else x
    if transform == "channels_last":
        return lambda x: x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x
    if transform == "broadcast":
        return lambda x: x[:1].expand_as(x)
    if transform in ("nan", "posinf", "neginf"):
        special = {"nan": float("nan"), "posinf": float("inf"), "neginf": float("-inf")}[transform]

        def inject(x: Any) -> Any:
            position = random.Random(seed).randrange(x.numel())
            mask = torch.zeros(x.numel(), dtype=torch.bool)
            mask[position] = True
            mask = mask.reshape(x.shape).to(x.device)
            return torch.where(mask, torch.full_like(x, special), x)

        return inject
    if transform == "empty":
        return lambda x: x[:0]
    if transform == "size1":
        return lambda x: x[:1]
    if transform in ("tail257", "tail192"):
        length = 257 if transform == "tail257" else 192

        def widen(x: Any) -> Any:
            index = torch.arange(length, device=x.device) % x.shape[-1]
            return x[..., index]

        return widen
    return lambda x: x


def _targets(torch: Any, sample: Any, transform: str) -> set[int]:
    """ids of the sample's tensors the transform applies to."""
    tensors = tensors_of(torch, sample)
    floats = [t for t in tensors if t.is_floating_point() or t.is_complex()]
    first = primary(torch, sample)
    if transform in ("noncontig", "transposed", "channels_last"):
        return {id(t) for t in floats}
    if first is None:
        return set()
    if transform in ("broadcast", "nan", "posinf", "neginf"):
        return {id(first)}
    if transform in ("empty", "size1"):
        # Tensors batched like the first (same rank, same leading size); a parameter vector
        # whose length happens to equal the batch (running statistics) keeps its size.
        return {id(t) for t in tensors if t.dim() == first.dim() and t.shape[0] == first.shape[0]}
    if transform in ("tail257", "tail192"):
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
) -> tuple[Any, list[Any], Any]:
    """The call's (input, args, kwargs) on ``device``, and the leaves gradients are taken for.

    ``upcast`` makes the reference: floating tensors become float64 (complex become
    complex128) and dtype arguments equal to the sample's dtype become float64.
    ``contiguous`` copies every transformed tensor into a contiguous one (the second
    reference, which tells a layout-dependent CPU result from a device bug).
    """
    from torch.utils._pytree import tree_map  # type: ignore

    targets = _targets(torch, sample, case.transform)
    fn = _transform_fn(torch, case.transform, seed)
    leaves: list[Any] = []
    first = primary(torch, sample)
    sample_dtype = first.dtype if first is not None else None

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
                if contiguous:
                    data = data.contiguous()
            return data
        if upcast and sample_dtype is not None and isinstance(value, torch.dtype) and value == sample_dtype:
            return torch.float64 if sample_dtype.is_floating_point else value
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


def run_case(
    torch: Any, info: Any, sample: Any, case: Case, seed: int, *, device: Any, upcast: bool, contiguous: bool = False
) -> list[Any]:
    """Computes one case; returns the flat list of results (outputs, or gradients).

    Forward: the op's outputs, flattened. Backward: the gradient of ``Σ⟨w, out⟩`` for every
    leaf that requires grad (None where the op does not depend on a leaf).
    """
    from torch.utils._pytree import tree_leaves  # type: ignore

    (call_input, args, kwargs), leaves, sample_dtype = materialize(
        torch, sample, case, seed, device=device, upcast=upcast, contiguous=contiguous
    )
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
    weights = projection_weights(torch, outs, seed)
    loss = None
    for out, weight in zip(outs, weights):
        real = torch.view_as_real(out) if out.is_complex() else out
        if sample_dtype is not None and sample_dtype.is_floating_point:
            # Both sides use the weights rounded to the sample's dtype: the reference then
            # differs from the device only by the device's arithmetic.
            weight = weight.to(sample_dtype)
        term = (real * weight.to(device=real.device, dtype=real.dtype)).sum()
        loss = term if loss is None else loss + term
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return list(grads)
