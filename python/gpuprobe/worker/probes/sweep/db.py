"""The sweep's view of PyTorch's operator database (``op_db``): loading, naming, rules.

PyTorch ships a private database of its operators for its own tests,
``torch.testing._internal.common_methods_invocations.op_db``: one ``OpInfo`` per operator
variant, with sample inputs, the dtypes each device type supports, whether it is
differentiable, and PyTorch's own tolerance overrides. The sweep drives every entry it can;
nothing of the database is copied here, only the rules that decide how an entry is judged.

The module is private and drifts between releases, so everything here degrades: a database
that cannot be imported is a reason (``load`` never raises), an entry whose attributes are
missing is treated as unsupported. Its import needs ``expecttest`` (PyTorch's test
dependency); ordinary environments lack it, so a stand-in module whose ``TestCase`` is
``unittest.TestCase`` is registered first, and only when the real one is absent.

Probe ids: ``sweep.<op name>[.<variant>].<dtype>``, the name and variant with every
character outside ``[A-Za-z0-9_.]`` replaced by ``_`` (``nn.functional.interpolate`` has a
variant ``nearest-exact``).
"""

from __future__ import annotations

import re
import sys
import types
from dataclasses import dataclass
from typing import Any

#: Dtypes the sweep drives, by the short name used in probe ids: every floating, integer,
#: boolean and complex dtype an entry can declare for a device type (the float8 and 32-bit
#: complex types are not driven: the database declares them for a handful of entries and
#: their CPU kernels are the same upcasts the device's are).
DTYPES: dict[str, str] = {
    "fp32": "float32",
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp64": "float64",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "bool": "bool",
    "c64": "complex64",
    "c128": "complex128",
}
#: Each dtype's kind: how its reference is computed and its outputs judged.
#: ``float``: against float64 on the CPU; ``complex``: against complex128 on the CPU;
#: ``integer`` and ``bool``: exactly against the CPU in the same dtype (integer arithmetic
#: is exact), floating outputs of them (``sqrt`` of an integer tensor) against float64.
COMPLEX_DTYPES = ("complex64", "complex128")
INTEGER_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def dtype_kind(dtype_name: str) -> str:
    """``float``, ``complex``, ``integer`` or ``bool``."""
    if dtype_name in COMPLEX_DTYPES:
        return "complex"
    if dtype_name in INTEGER_DTYPES:
        return "integer"
    if dtype_name == "bool":
        return "bool"
    return "float"


def is_exact_dtype(dtype_name: str) -> bool:
    """Whether the dtype's own outputs are judged exactly (integers and booleans)."""
    return dtype_kind(dtype_name) in ("integer", "bool")


#: The real dtype whose range and tolerance bound a complex dtype's parts.
COMPLEX_PARTS = {"complex64": "float32", "complex128": "float64"}

#: Operators whose results are random: compared by the structure oracle (shape, dtype,
#: finiteness), never by value. A name matches when it equals an entry or starts with it
#: followed by ``_`` (``nn.functional.dropout2d`` by ``nn.functional.dropout``).
RANDOM_OPS = (
    "bernoulli",
    "normal",
    "log_normal",
    "cauchy",
    "exponential",
    "geometric",
    "uniform",
    "multinomial",
    "poisson",
    "rand_like",
    "randn",
    "randn_like",
    "randint",
    "randint_like",
    "randperm",
    "nn.functional.dropout",
    "nn.functional.dropout1d",
    "nn.functional.dropout2d",
    "nn.functional.dropout3d",
    "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu",
    "native_dropout",
    "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d",
)

#: Operators with a dropout argument: a sample is random (structure oracle) when it asks for
#: dropout (``dropout_p > 0``; for multi-head attention, ``training=True``, the only mode in
#: which it applies its dropout), and judged by value otherwise.
DROPOUT_ARGUMENT_OPS = (
    "nn.functional.multi_head_attention_forward",
    "nn.functional.scaled_dot_product_attention",
)

#: Operators whose outputs are unique only up to a choice the implementation makes
#: (singular and eigen vectors up to sign or phase, eigenvalues of a general matrix up to
#: order): structure oracle. A reconstruction oracle would judge them; until then they are
#: checked for shape, dtype kind and finiteness.
NON_UNIQUE_OPS = (
    "svd",
    "linalg.svd",
    "svd_lowrank",
    "pca_lowrank",
    "linalg.eig",
    "linalg.eigh",
    "linalg.eigvals",
    "eig",
)

#: Operators that PyTorch documents as non-deterministic on CUDA
#: (``torch.use_deterministic_algorithms``): writes to duplicate indices land in any order.
NONDETERMINISTIC_OPS = ("nn.functional.max_unpool1d", "nn.functional.max_unpool2d", "nn.functional.max_unpool3d")

#: Inputs outside an operator's domain that CUDA rejects with a device-side assert (by
#: design: the check runs in the kernel), which ends the process's device context; the CPU
#: rejects them with an exception. The sweep does not feed these transforms to these ops:
#: the outcome is known and each would cost a new worker.
_OUTSIDE_UNIT_INTERVAL = ("nan", "posinf", "neginf", "negnan", "huge", "max", "lowest")
DEVICE_ASSERT_DOMAINS: dict[str, tuple[str, ...]] = {
    # Probabilities: values outside [0, 1] (the value classes beyond it too).
    "nn.functional.binary_cross_entropy": _OUTSIDE_UNIT_INTERVAL,
    "bernoulli": _OUTSIDE_UNIT_INTERVAL,
    "multinomial": _OUTSIDE_UNIT_INTERVAL,
    "__getitem__": ("empty", "size1"),
    "index_put": ("empty", "size1"),
}

#: Operators whose output grows combinatorially with the input length: no ``tail*``.
COMBINATORIAL_OPS = ("combinations", "cartesian_prod")

#: Operators whose output is uninitialized memory (``empty`` and friends): structure oracle.
UNINITIALIZED_OPS = (
    "empty",
    "empty_like",
    "empty_strided",
    "empty_permuted",
    "new_empty",
    "new_empty_strided",
    # Growing a tensor leaves the new elements uninitialized (documented for ``resize_``).
    "resize_",
    "resize_as_",
)

#: Operators whose result for NaN input is unspecified: they count or merge equal values,
#: and NaN is unequal to itself, so whether a NaN "repeats" is the implementation's choice
#: (``torch.unique`` has no ``equal_nan``; a sort whose comparisons meet a NaN leaves equal
#: values apart: the CPU's ``unique(dim=-1)`` of ``[1, nan, 0, 1, 0]`` returns
#: ``[0, 1, nan, 0, 1]``). They get no injected NaN.
NAN_UNDEFINED_OPS = ("mode", "unique", "unique_consecutive")

#: Operators whose CUDA backward accumulates contended gradients with atomic adds (PyTorch
#: lists their backward as non-deterministic under ``torch.use_deterministic_algorithms``).
#: In float16/bfloat16 every atomic add rounds the running sum to the dtype, so an element
#: that many grid points clamp to (``padding_mode="border"``) collects an error that grows
#: with their number and the order of arrival: their half-precision gradients are judged by
#: the structure oracle (shape, finiteness). An entry needs an observed case on a healthy
#: stack (grid_sampler_3d float16 on the H100: bench/RESULTS.md).
HALF_ATOMIC_BACKWARD_OPS = ("grid_sampler_2d", "grid_sampler_3d", "nn.functional.grid_sample")

#: Operators built on discrete Fourier transforms: every output mixes every input, so where
#: an injected NaN/Inf lands depends on the transform's order of operations. Under those
#: transforms only elements finite on both sides are compared.
FOURIER_PREFIXES = ("fft.",)
FOURIER_OPS = ("stft", "istft")

#: Decompositions, solvers and other matrix functions. Their result on singular input is
#: undefined (LAPACK and cuSOLVER document garbage, an error code or a NaN, each as
#: correct), and transforms that change values (broadcast rows, finite value classes,
#: resized tails) make matrices singular or ill-conditioned; these operators get the
#: transforms that keep values (layout, empty and size-1 batches and arguments, tiled
#: batches, the samples as given) and the non-finite ones, judged by their own rule
#: (``takes_nonfinite``: only a NaN or infinity that vanishes is a finding).
MATRIX_FUNCTION_PREFIXES = ("linalg.", "_linalg", "torch.ops.aten._linalg")
MATRIX_FUNCTION_OPS = (
    "cholesky",
    "cholesky_inverse",
    "cholesky_solve",
    "inverse",
    "det",
    "logdet",
    "slogdet",
    "svd",
    "svd_lowrank",
    "pca_lowrank",
    "qr",
    "lu",
    "lu_solve",
    "lu_unpack",
    "geqrf",
    "ormqr",
    "pinverse",
    "matrix_exp",
    "triangular_solve",
    "lstsq",
    "eig",
    "symeig",
    "matrix_power",
    "nn.functional.pdist",
    "norm.nuc",
)

#: Operators whose integer outputs are positions chosen among equal values (the order of
#: ties is unspecified, and low-precision inputs tie often). Their index outputs are judged
#: by the values they select, not compared as numbers.
ORDER_OPS = (
    "sort",
    "argsort",
    "msort",
    "topk",
    "kthvalue",
    "median",
    "nanmedian",
    "mode",
    "max",
    "min",
    "argmax",
    "argmin",
    "cummax",
    "cummin",
    "nn.functional.max_pool1d",
    "nn.functional.max_pool2d",
    "nn.functional.max_pool3d",
    "nn.functional.adaptive_max_pool1d",
    "nn.functional.adaptive_max_pool2d",
    "nn.functional.adaptive_max_pool3d",
    "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d",
    "unique",
    "unique_consecutive",
)

#: Entries that are not operators on dense tensors the sweep can move to a device, each
#: with the documented reason (shown in the coverage table and as the SKIP reason).
EXCLUDED: dict[str, str] = {}

#: Default tolerances against the float64 reference, by dtype: (atol, rtol). Deliberately not
#: the judge's normwise table (``gpuprobe/worker/tolerances.json``): the sweep compares
#: element by element, as PyTorch's own tests do, with an absolute and a relative part that
#: PyTorch's ``toleranceOverride`` decorators then replace per op. The device
#: result of a low-precision dtype is compared with the exact result of its own (rounded)
#: inputs, so the bound covers the dtype's internal roundings: about 4 units in the last
#: place for bfloat16 and float16, and 1e-5 (about 80 units) for float32, whose kernels
#: accumulate over the samples' sizes. float64 uses PyTorch's own float64 defaults.
BASE_TOLERANCE: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1e-5),
    "float16": (1e-3, 4e-3),
    "bfloat16": (1e-2, 3.2e-2),
    # Complex dtypes: their real and imaginary parts, each compared like the real dtype.
    "complex128": (1e-7, 1e-7),
    "complex64": (1e-5, 1e-5),
}
#: Floating outputs of integer and boolean inputs are computed in the default dtype
#: (float32: ``sqrt`` of an int32 tensor), judged by its bound against float64.
INTEGER_FLOAT_TOLERANCE = BASE_TOLERANCE["float32"]


class DatabaseUnavailable(Exception):
    """The operator database cannot be loaded here; the message says why."""


@dataclass(frozen=True)
class Database:
    """The loaded database: the torch version and its entries, by probe-id key."""

    torch_version: str
    ops: dict[str, Any]

    def entry(self, key: str) -> Any | None:
        """The OpInfo for an op key (``sweep.<key>.<dtype>``), or None."""
        return self.ops.get(key)


_LOADED: Database | None = None
_FAILURE: str | None = None


def _install_expecttest_stand_in() -> None:
    if "expecttest" in sys.modules:
        return
    try:
        import expecttest  # noqa: F401 - the real one, when installed
    except ImportError:
        import unittest

        stand_in = types.ModuleType("expecttest")
        stand_in.TestCase = unittest.TestCase  # type: ignore[attr-defined]
        sys.modules["expecttest"] = stand_in


#: Packages PyTorch's test modules import behind the database when they find them, for tests
#: that are not the database's: ``numba`` (with ``numba.cuda``, whose availability check
#: starts its own CUDA driver binding) for the CUDA array interface tests, and
#: ``hypothesis`` for property-based tests' settings. No entry, sample or reference input
#: of the database uses either; the test modules look both up with ``find_spec`` or import
#: them under ``try/except ImportError``, so withheld they read as absent, as on a host
#: without them. On the H200 host they were
#: 2 of the 19 s an uncached database import took there (``python -X importtime``), in every
#: sweep lane. (``scipy`` stays: one sample generator's reference uses it.)
WITHHELD_WHILE_LOADING = ("numba", "hypothesis")


class _Withheld:
    """A ``sys.meta_path`` finder that answers "no such module" for ``WITHHELD_WHILE_LOADING``."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.partition(".")[0] in WITHHELD_WHILE_LOADING:
            raise ModuleNotFoundError(f"No module named {name!r} (not needed by the operator database)", name=name)
        return None


def _import_op_db() -> Any:
    """The database's entries, imported with ``WITHHELD_WHILE_LOADING`` withheld (only for
    the import: a later import of either in this process finds it as usual)."""
    # The compiler's tracing rules look every known package up once, at their import (which
    # the database's own imports trigger): imported first, they see the packages as they are.
    try:
        import torch._dynamo  # noqa: F401
    except Exception:  # noqa: BLE001 - the database import below reports a broken torch
        pass
    finder = _Withheld()
    sys.meta_path.insert(0, finder)
    try:
        from torch.testing._internal.common_methods_invocations import op_db  # type: ignore

        return op_db
    finally:
        sys.meta_path.remove(finder)


def op_key(name: str, variant: str) -> str:
    """The id part of an entry: its name and variant, sanitized."""
    raw = f"{name}.{variant}" if variant else name
    return re.sub(r"[^A-Za-z0-9_.]", "_", raw)


def load(torch: Any) -> Database:
    """Imports the database once per process; raises ``DatabaseUnavailable`` with the reason."""
    global _LOADED, _FAILURE
    if _LOADED is not None:
        return _LOADED
    if _FAILURE is not None:
        raise DatabaseUnavailable(_FAILURE)
    version = str(getattr(torch, "__version__", "unknown"))
    try:
        _install_expecttest_stand_in()
        op_db = _import_op_db()
    except BaseException as exc:  # noqa: BLE001 - any import failure is a reason, never a crash
        if isinstance(exc, KeyboardInterrupt):
            raise
        _FAILURE = (
            f"PyTorch's operator database (torch.testing._internal.common_methods_invocations) "
            f"cannot be loaded on torch {version}: {type(exc).__name__}: {exc}"
        )
        raise DatabaseUnavailable(_FAILURE) from exc
    ops: dict[str, Any] = {}
    for info in op_db:
        name = getattr(info, "name", None)
        if not isinstance(name, str):
            continue
        key = op_key(name, str(getattr(info, "variant_test_name", "") or ""))
        ops.setdefault(key, info)
    if not ops:
        _FAILURE = f"PyTorch's operator database on torch {version} holds no entries"
        raise DatabaseUnavailable(_FAILURE)
    _LOADED = Database(torch_version=version, ops=ops)
    return _LOADED


def _matches(name: str, names: tuple[str, ...]) -> bool:
    return any(name == n or name.startswith(n + "_") for n in names)


def is_random(name: str) -> bool:
    """Whether the op's values are random (structure oracle)."""
    return _matches(name, RANDOM_OPS)


def is_uninitialized(name: str) -> bool:
    """Whether the op returns uninitialized memory (structure oracle)."""
    return name in UNINITIALIZED_OPS


def is_matrix_function(name: str, variant: str = "") -> bool:
    """Whether the op is a decomposition or solver (only value-keeping transforms)."""
    return (
        name.startswith(MATRIX_FUNCTION_PREFIXES)
        or name in MATRIX_FUNCTION_OPS
        or op_key(name, variant) in MATRIX_FUNCTION_OPS
        or is_orthogonal_polynomial(name)
    )


def is_orthogonal_polynomial(name: str) -> bool:
    """Whether the op evaluates an orthogonal polynomial of a degree given as a tensor
    (``special.chebyshev_polynomial_t(x, n)``): its kernels loop up to the degree, so only
    the samples' own values reach it."""
    return name.startswith("special.") and "_polynomial_" in name


#: Matrix functions whose host-side LAPACK path dies on a NaN or infinity: the general
#: eigenvalue problem (``geev``) balances the matrix first, and MKL's ``sgebal``/``dgebal``
#: reports an illegal parameter for non-finite input and the process then dies with SIGSEGV
#: (on torch 2.15's CPU build; a CUDA build that takes MAGMA's ``geev`` runs the same
#: balancing on the host). A crash of the worker there would tell nothing of the device.
NONFINITE_CRASHES_HOST = ("linalg.eig", "linalg.eigvals", "eig")
#: Matrix functions whose device path never returns on a non-finite input: PyTorch documents
#: a NaN or infinity in a ``torch.linalg`` input as undefined (its numerical-accuracy notes:
#: "may return a tensor with non-finite values, or raise an exception, or even segfault"; a
#: maintainer on pytorch/pytorch#134334, ``linalg.inv`` deadlocking on NaN: "passing in any
#: matrix with a NaN or inf is undefined behaviour, so yes"), and a kernel that spins cannot
#: be stopped without the worker. On the H200 (torch 2.11) ``matrix_exp`` of a 4×4 float32
#: matrix holding one +Inf did not return within 25 s (``bench/sweep/candidates.py --only
#: matrix_exp_infinity``); its scaling-and-squaring takes its step count from the norm.
NONFINITE_HANGS_DEVICE = ("matrix_exp", "linalg.matrix_exp")


def takes_nonfinite(name: str, variant: str = "") -> bool:
    """Whether a NaN or infinity is injected into a matrix function's input: every
    decomposition and solver (judged by ``sweep_cases.Judging.swallow_only``), not the
    orthogonal polynomials, whose degree argument is a loop bound, nor those whose host
    LAPACK crashes on it (``NONFINITE_CRASHES_HOST``) or whose device path never returns
    (``NONFINITE_HANGS_DEVICE``)."""
    return (
        is_matrix_function(name, variant)
        and not is_orthogonal_polynomial(name)
        and name not in NONFINITE_CRASHES_HOST
        and name not in NONFINITE_HANGS_DEVICE
    )


def transform_allowed(info: Any, transform: str) -> bool:
    """Whether the rules let ``transform`` reach this op (see the tables above)."""
    name = info.name
    if transform in DEVICE_ASSERT_DOMAINS.get(name, ()):
        return False
    if transform.startswith("tail") and name in COMBINATORIAL_OPS:
        return False
    if transform in ("nan", "negnan") and name in NAN_UNDEFINED_OPS:
        return False
    return True


def is_fourier(name: str) -> bool:
    """Whether every output of the op mixes every input (discrete Fourier transforms)."""
    return name.startswith(FOURIER_PREFIXES) or name in FOURIER_OPS


def is_order_op(name: str) -> bool:
    """Whether the op's integer outputs are tie-dependent positions."""
    return name in ORDER_OPS


#: Operators whose integer results truncate a floating intermediate (``start + i·step``,
#: ``base ** x``) computed at a precision the backend chooses (float on CUDA, double on the
#: CPU): in integer dtypes their elements may differ by 1.
TRUNCATED_FLOAT_OPS = ("linspace", "logspace")

#: Operators whose value is one of several equally right ones when counts tie: the most
#: frequent value (``mode``) in integer and boolean samples, whose few distinct values make
#: equal counts common. Judged by the structure oracle in those dtypes.
COUNT_TIE_OPS = ("mode",)


def sample_is_random(name: str, sample: Any) -> bool:
    """Whether this sample of an op with a dropout argument asks for dropout."""
    if name not in DROPOUT_ARGUMENT_OPS:
        return False
    kwargs = getattr(sample, "kwargs", None) or {}
    dropout = kwargs.get("dropout_p", 0.0)
    return bool(kwargs.get("training", False)) or (isinstance(dropout, (int, float)) and dropout > 0)


#: Pivoted LU factorizations: P, L and U are unique only given the pivot each column takes,
#: and the libraries behind them (LAPACK on the CPU; cuSOLVER and MAGMA on CUDA) break
#: near-ties between complex candidates differently. On the H200, complex ``lu`` and
#: ``linalg.lu`` differed from the CPU on 2 of 10 and 2 of 15 samples in every layout
#: (each layout equal to the device's own contiguous result; float64 equal on all), which
#: only a reconstruction oracle (P·L·U = A) can judge: complex dtypes get the structure
#: oracle until it exists (bench/RESULTS.md).
PIVOTED_LU_OPS = ("lu", "linalg.lu", "linalg.lu_factor", "linalg.lu_factor_ex", "lu_unpack")


def oracle_for(info: Any, dtype_name: str = "float32") -> str:
    """``value`` (compare with the reference), ``structure`` (shape, dtype kind,
    finiteness) or ``shape`` (shape and dtype kind: uninitialized memory may hold anything)."""
    name = info.name
    if is_uninitialized(name):
        return "shape"
    if (
        is_random(name)
        or name in NON_UNIQUE_OPS
        or name in NONDETERMINISTIC_OPS
        or bool(getattr(info, "has_nondeterministic_output", False))
        or (name in PIVOTED_LU_OPS and dtype_kind(dtype_name) == "complex")
    ):
        return "structure"
    return "value"


def exclusion(info: Any) -> str | None:
    """Why the sweep does not drive this entry at all, or None."""
    key = op_key(info.name, str(getattr(info, "variant_test_name", "") or ""))
    return EXCLUDED.get(key) or EXCLUDED.get(info.name)


def device_type(device: str) -> str:
    """``cuda`` for ``cuda:N`` (ROCm builds too), else ``cpu``."""
    return "cuda" if device.startswith("cuda") else "cpu"


def supports(info: Any, torch: Any, dtype_name: str, dev_type: str) -> bool:
    """Whether the database says the op supports ``dtype_name`` on ``dev_type``."""
    try:
        return getattr(torch, dtype_name) in info.supported_dtypes(dev_type)
    except Exception:  # noqa: BLE001 - drifted API: unsupported
        return False


def supports_backward(info: Any, torch: Any, dtype_name: str, dev_type: str) -> bool:
    """Whether the op is differentiable in ``dtype_name`` on ``dev_type``."""
    if not bool(getattr(info, "supports_autograd", False)):
        return False
    try:
        return getattr(torch, dtype_name) in info.supported_backward_dtypes(dev_type)
    except Exception:  # noqa: BLE001
        return False


def tolerance(info: Any, torch: Any, dtype_name: str) -> tuple[float, float]:
    """(atol, rtol) for this op and dtype: the base bound widened by PyTorch's own overrides.

    PyTorch declares per-op tolerances as ``toleranceOverride`` decorators on its tests;
    every override for this dtype that applies to CUDA or to all device types widens the
    bound (the largest wins). Overrides for compilers (``TestInductor*``) and other
    device types are not evidence about eager CUDA kernels and are ignored.
    """
    atol, rtol = BASE_TOLERANCE.get(dtype_name, INTEGER_FLOAT_TOLERANCE)
    dtype = getattr(torch, dtype_name)
    try:
        from torch.testing._internal.common_device_type import toleranceOverride  # type: ignore
    except Exception:  # noqa: BLE001
        return atol, rtol
    for decorate in getattr(info, "decorators", ()) or ():
        cls_name = str(getattr(decorate, "cls_name", "") or "")
        if cls_name.startswith("TestInductor"):
            continue
        dev = getattr(decorate, "device_type", None)
        if dev not in (None, "cuda"):
            continue
        for decorator in getattr(decorate, "decorators", ()) or ():
            if isinstance(decorator, toleranceOverride):
                tol = getattr(decorator, "d", {}).get(dtype)
                if tol is not None:
                    atol = max(atol, float(tol.atol))
                    rtol = max(rtol, float(tol.rtol))
    return atol, rtol


# --------------------------------------------------------------------------- large shapes
# Which entries the ``large_*`` transforms reach (their sizes: ``sweep_cases.LARGE_BATCH``
# and its neighbours).

#: Operators that reduce along a dimension (besides the database's ``ReductionOpInfo``
#: entries): ``large_reduced`` widens their last dimension (the reduced one, or the one
#: beside it), ``large_batch`` tiles their rows.
#: Scans (``cumsum``, ``cumprod``, ...) are not among them: their CUDA kernel carries the
#: running total from chunk to chunk of a row in the dtype's accumulation type, an error
#: that grows with the row's length and that the CPU (which accumulates in double) has no
#: yardstick for.
REDUCING_OPS = (
    "softmax",
    "log_softmax",
    "nn.functional.softmin",
    "_softmax_backward_data",
    "torch.ops.aten._safe_softmax.default",
    "logsumexp",
    "var_mean",
    "std_mean",
    "aminmax",
    "max",
    "min",
    "norm",
)
#: Reductions whose result over ``large_reduced``'s 2^19 + 1 elements leaves every dtype's
#: range: a product of that many values is 0, Inf or NaN by the order of its factors (the
#: H200's tree of partial products reached 0 where the CPU's running product met Inf·0 = NaN).
RANGE_LEAVING_REDUCTIONS = ("prod", "masked.prod")
#: Operators whose leading dimension is a batch of independent rows or matrices:
#: normalizations (statistics per row, or over the batch for batch norm) and batched matrix
#: products (cuBLAS's strided-batched GEMM). ``large_batch`` tiles it.
BATCHED_OPS = (
    "nn.functional.layer_norm",
    "nn.functional.rms_norm",
    "nn.functional.group_norm",
    "nn.functional.batch_norm",
    "nn.functional.instance_norm",
    "nn.functional.normalize",
    "native_layer_norm",
    "native_group_norm",
    "native_batch_norm",
    "bmm",
    "baddbmm",
    "matmul",
)
#: Solvers and the position of their right-hand side B among the sample's tensors
#: (``sweep_cases.tensors_of``): its last dimension counts the right-hand sides, which
#: ``large_rhs`` makes many. Solvers whose samples hold pivots (``lu_solve``) are left out
#: with every sample that holds an index tensor.
RIGHT_HAND_SIDES: dict[str, int] = {
    "linalg.solve": 1,
    "linalg.solve_ex": 1,
    "linalg.lstsq": 1,
    "linalg.solve_triangular": 1,
    "cholesky_solve": 0,
    "triangular_solve": 0,
}


def checks_its_arguments(name: str) -> bool:
    """Whether the entry is public API, which checks its tensor arguments' shapes against
    each other. A private operator (``_softmax_backward_data``,
    ``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu``) takes them as its
    public caller made them: on torch 2.15 the CPU's flash-attention kernel reads a key of
    batch 0 beside a query of batch 4 without complaint and corrupts the heap with a value
    of batch 1. The per-argument shapes (``arg_empty``, ``arg_size1``) reach public entries
    only."""
    private = name.startswith("_") and not name.startswith("__")
    return not (private or name.startswith("torch.ops.aten._"))


def is_reduction(info: Any) -> bool:
    """Whether the entry reduces along a dimension (``large_reduced`` widens it): the
    database's reduction entries (``ReductionOpInfo``) and ``REDUCING_OPS``."""
    if info.name in REDUCING_OPS:
        return True
    return any(cls.__name__ == "ReductionOpInfo" for cls in type(info).__mro__)


def takes_large_batch(info: Any) -> bool:
    """Whether ``large_batch`` tiles the entry's leading dimension: reductions, batched
    operators and matrix functions (for those, only samples batched beyond the matrix)."""
    name = info.name
    if is_orthogonal_polynomial(name):
        return False
    return is_reduction(info) or name in BATCHED_OPS or is_matrix_function(name, str(getattr(info, "variant_test_name", "") or ""))

