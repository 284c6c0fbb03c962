"""The sweep's oracles: is one device output right, given the float64 reference?

Every rule that keeps a benign difference from failing is here, and each is documented in
``docs/probes.md`` (section "sweep"):

- **values:** an element passes when ``|found − ref| ≤ atol + rtol·|ref|`` (the dtype's base
  bound widened by PyTorch's own per-op overrides, ``sweep_db.tolerance``). A tensor also
  passes when its largest error is within ``atol + rtol·max|ref|`` (norm-wise: the error of
  a sum of terms of mixed sign is relative to the terms, not to the small result), and when
  its largest normalized error is at most twice that of the CPU computing the same op in the
  same dtype (an error the dtype itself forces on any correct implementation; the CPU's
  low-precision result is used only as this yardstick, never as the truth).
- **non-finite values:** a NaN of the reference must be NaN on the device ("NaN lost"
  otherwise); an infinity must be the same infinity; a NaN or infinity on the device where
  the reference is finite fails ("NaN/Inf invented"), unless the reference lies beyond the
  dtype's largest finite value (an overflow the dtype cannot avoid) or the CPU in the same
  dtype overflows at that element too.
- **integers and booleans:** equal (integer and boolean dtypes against the CPU in the
  same dtype, every other against float64), except where the reference's value lies
  outside the range of the dtype written (a narrowing ``out=`` wraps it, implementation
  defined), and except the positions returned by order statistics
  (``sweep_db.ORDER_OPS``) where ties are possible: low-precision dtypes, and transforms
  that repeat values (``broadcast``, ``tail*``). Those positions are not compared; the values
  they select are.
- **indeterminate forms:** under an injected infinity, when the reference output itself
  holds a NaN (it met inf/inf, 0·inf or inf − inf), a NaN on the device where the reference
  resolved a limit to 0 or ±Inf is accepted (another order of operations meets the same
  indeterminate form there).
- **structure** (random ops, uninitialized outputs, ops PyTorch marks non-deterministic):
  shape and kind of dtype equal, and no NaN/Inf where the reference has none (unless NaN or
  Inf was injected into the input).
- **non-finite input of a decomposition or solver** (``swallowed_nonfinite``): where a NaN
  spreads is the algorithm's choice and no library promises to propagate it, so only an
  output whose reference holds NaN or Inf coming back entirely finite is a finding
  (``nonfinite_swallowed``, reported, not a wrong value), unless the CPU in the same dtype
  returns it entirely finite too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from gpuprobe.worker.probes.sweep.cases import dense_on_host

#: Failure classes (``SweepFailure.class`` in the observation).
WRONG_VALUE = "wrong_value"
NONFINITE_INVENTED = "nonfinite_invented"
NAN_LOST = "nan_lost"
STRUCTURE = "structure"
#: A NaN or infinity in the input of a decomposition or solver vanished: an output whose
#: reference holds NaN/Inf came back entirely finite. Reported as a finding of its own
#: (``SweepStats.nonfinite_swallowed``), below a wrong value: no library promises NaN
#: propagation, but the result looks valid and is meaningless.
NONFINITE_SWALLOWED = "nonfinite_swallowed"


@dataclass
class LeafFailure:
    """How one output (or gradient) differs from its reference."""

    cls: str
    detail: str
    index: list[int] | None = None
    expected: str = ""
    found: str = ""
    max_err: float | None = None
    allowed: float | None = None
    #: Every element that is wrong came back as zero (``zeros``) and the whole output is
    #: zero where the reference is not (``all_zero``): the classes of dropped writes.
    zeros: bool = False
    all_zero: bool = False
    bad_elements: int = 0
    elements: int = 0


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.9g}"


def _unravel(flat_index: int, shape: tuple[int, ...]) -> list[int]:
    out: list[int] = []
    for size in reversed(shape):
        size = max(int(size), 1)
        out.append(flat_index % size)
        flat_index //= size
    return list(reversed(out))


def _first(torch: Any, mask: Any) -> int:
    return int(torch.nonzero(mask.reshape(-1))[0, 0])


def masked_failure(torch: Any, cls: str, mask: Any, found: Any, expected: Any, detail: str) -> LeafFailure:
    """The failure of the elements in ``mask`` (a boolean tensor shaped like ``found`` and
    ``expected``, with at least one element set): their count (``{count}`` in ``detail``),
    the first one's index and both values there."""
    i = _first(torch, mask)
    count = int(mask.sum())
    return LeafFailure(
        cls,
        detail.format(count=count),
        index=_unravel(i, tuple(mask.shape)),
        expected=_fmt(float(expected.reshape(-1)[i])),
        found=_fmt(float(found.reshape(-1)[i])),
        bad_elements=count,
        elements=mask.numel(),
    )


def bits_differ(torch: Any, a: Any, b: Any) -> Any:
    """The elements of two tensors of one dtype and shape that differ bit for bit (a mask of
    their shape): NaN equal to NaN whatever its payload, the sign of zero told apart."""
    if not (a.is_floating_point() or a.is_complex()):
        return a != b
    real_a = torch.view_as_real(a.resolve_conj()) if a.is_complex() else a
    real_b = torch.view_as_real(b.resolve_conj()) if b.is_complex() else b
    differ = ((real_a != real_b) | (torch.signbit(real_a) != torch.signbit(real_b))) & ~(torch.isnan(real_a) & torch.isnan(real_b))
    return differ.any(-1) if a.is_complex() else differ


def same_bits(torch: Any, a: Any, b: Any) -> bool:
    """Whether two tensors have one dtype and shape and no element that ``bits_differ``."""
    return a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and not bool(bits_differ(torch, a, b).any())


def as_comparable(torch: Any, value: Any) -> Any:
    """A dense, real, CPU tensor for a tensor leaf (sparse → dense, complex → real pairs)."""
    value = dense_on_host(torch, value)
    if value.is_complex():
        value = torch.view_as_real(value.resolve_conj())
    return value


def compare_leaf(
    torch: Any,
    found: Any,
    expected: Any,
    *,
    dtype_name: str,
    atol: float,
    rtol: float,
    oracle: str = "value",
    compare_integers: bool = True,
    same_dtype_cpu: Callable[[], Any] | None = None,
    nonfinite_pattern: bool = True,
    inf_input: bool = False,
    nonfinite_input: bool = False,
    wrap_dtype: Any = None,
    rounding_slack: int = 0,
) -> LeafFailure | None:
    """Judges one output leaf; None when it is right.

    ``wrap_dtype`` (an integer probe's dtype) lets integer elements differ by a multiple
    of 2^bits where one side lies outside that dtype's range: one side computed the
    overflow in a wider type, the other wrapped (signed overflow is undefined).
    ``rounding_slack`` lets integer elements differ by that much (an integer result
    truncated from a floating intermediate whose precision the backend chooses).

    ``nonfinite_pattern`` False compares only elements finite on both sides (transforms of
    NaN input); ``inf_input`` accepts an infinity where the reference has NaN (how ``inf −
    inf`` arises depends on the algorithm: a Welford mean of +Inf is NaN on the CPU) and,
    where the reference itself shows an indeterminate form (a NaN), a NaN where it resolved
    a limit (0 or ±Inf); ``nonfinite_input`` (any injected NaN/Inf) lets the structure
    oracle's outputs hold NaN/Inf.
    """
    if not isinstance(expected, torch.Tensor) or not isinstance(found, torch.Tensor):
        return _compare_plain(torch, found, expected, atol=atol, rtol=rtol)
    complex_pair = found.is_complex() and expected.is_complex()
    found = as_comparable(torch, found)
    expected = as_comparable(torch, expected)
    if tuple(found.shape) != tuple(expected.shape):
        return LeafFailure(
            STRUCTURE, f"shape {tuple(found.shape)} where the reference has {tuple(expected.shape)}"
        )
    if complex_pair and found.numel():
        found = _complex_nonfinite_as_one(torch, found, expected)
    if found.dtype.is_floating_point != expected.dtype.is_floating_point:
        return LeafFailure(STRUCTURE, f"dtype {found.dtype} where the reference has {expected.dtype}")
    if found.numel() == 0 or oracle == "shape":
        return None
    if oracle == "structure":
        # Which value lands where is undefined for these ops, so an injected NaN/Inf may
        # reach an output the reference's arrangement kept it out of.
        if not nonfinite_input and found.dtype.is_floating_point and bool(torch.isfinite(expected).all()):
            invented = ~torch.isfinite(found)
            if bool(invented.any()):
                i = _first(torch, invented)
                return LeafFailure(
                    NONFINITE_INVENTED,
                    "NaN/Inf in the output of a random or undefined-valued op whose reference has none",
                    index=_unravel(i, tuple(found.shape)),
                    found=_fmt(float(found.reshape(-1)[i])),
                    bad_elements=int(invented.sum()),
                    elements=found.numel(),
                )
        return None
    if not expected.dtype.is_floating_point:
        if not compare_integers:
            return None
        wanted = expected.to(torch.int64)
        differ = (found.to(torch.int64) - wanted).abs() > rounding_slack
        if bool(differ.any()) and found.dtype != torch.bool:
            differ &= ~_undefined_integers(torch, found, wanted, wrap_dtype)
        if bool(differ.any()):
            i = _first(torch, differ)
            return LeafFailure(
                WRONG_VALUE,
                f"{int(differ.sum())} of {differ.numel()} integer/boolean elements differ",
                index=_unravel(i, tuple(found.shape)),
                expected=str(int(expected.reshape(-1)[i])),
                found=str(int(found.reshape(-1)[i])),
                bad_elements=int(differ.sum()),
                elements=differ.numel(),
            )
        return None
    return _compare_float(torch, found, expected, dtype_name, atol, rtol, same_dtype_cpu, nonfinite_pattern, inf_input)


def swallowed_nonfinite(
    torch: Any, found: Any, expected: Any, same_dtype_cpu: Callable[[], Any] | None = None
) -> LeafFailure | None:
    """``NONFINITE_SWALLOWED`` when the reference output holds a NaN or an infinity and the
    device's is entirely finite (a non-finite input that vanished: the result looks valid);
    None when some NaN or infinity is left (where it lands is the algorithm's choice), when
    the output is not floating, or when the CPU in the same dtype returns it entirely finite
    too (the library's behaviour on every device)."""
    if not isinstance(found, torch.Tensor) or not isinstance(expected, torch.Tensor):
        return None
    if not (found.is_floating_point() or found.is_complex()) or not (expected.is_floating_point() or expected.is_complex()):
        return None
    found = as_comparable(torch, found)
    expected = as_comparable(torch, expected)
    if tuple(found.shape) != tuple(expected.shape) or found.numel() == 0:
        return None
    reference_nonfinite = ~torch.isfinite(expected)
    if not bool(reference_nonfinite.any()) or not bool(torch.isfinite(found).all()):
        return None
    if same_dtype_cpu is not None:
        try:
            cpu = same_dtype_cpu()
        except Exception:  # noqa: BLE001 - no yardstick then
            cpu = None
        if isinstance(cpu, torch.Tensor):
            cpu = as_comparable(torch, cpu)
            if tuple(cpu.shape) == tuple(found.shape) and bool(torch.isfinite(cpu).all()):
                return None
    return masked_failure(
        torch,
        NONFINITE_SWALLOWED,
        reference_nonfinite,
        found,
        expected,
        "{count} NaN/Inf of the reference came back as finite numbers and none is left in the output: "
        "it looks valid but is meaningless",
    )


def _compare_plain(torch: Any, found: Any, expected: Any, *, atol: float, rtol: float) -> LeafFailure | None:
    if isinstance(expected, torch.Tensor) or isinstance(found, torch.Tensor):
        return LeafFailure(STRUCTURE, f"a {type(found).__name__} where the reference has a {type(expected).__name__}")
    if isinstance(expected, bool) or isinstance(found, bool):
        ok = found == expected
    elif isinstance(expected, (int, float)) and isinstance(found, (int, float)):
        ok = _plain_close(float(expected), float(found), atol, rtol)
    elif isinstance(expected, (int, float, complex)) and isinstance(found, (int, float, complex)):
        # A complex number: its real and imaginary parts, each like a real number (NaN
        # matches NaN, an infinity the same infinity).
        e, f = complex(expected), complex(found)
        ok = _plain_close(e.real, f.real, atol, rtol) and _plain_close(e.imag, f.imag, atol, rtol)
    else:
        try:
            ok = bool(found == expected)
        except Exception:  # noqa: BLE001 - incomparable values: judged different
            ok = False
    if ok:
        return None
    return LeafFailure(WRONG_VALUE, "the returned value differs", expected=repr(expected)[:80], found=repr(found)[:80])


def _complex_nonfinite_as_one(torch: Any, found: Any, expected: Any) -> Any:
    """A complex number is infinite or NaN as a whole when any of its parts is (C99 Annex
    G): which parts of a non-finite result hold NaN or an infinity follows the formula an
    implementation uses ((inf + 0j)·(a + bj) is NaN + NaN·j by the schoolbook product, an
    infinity by Annex G's recovery; a complex 0/0 is NaN + NaN·j or NaN + 0j). Where both
    sides are non-finite numbers, the device's parts are taken as the reference's; a
    non-finite number on one side only is still judged (NaN lost, NaN/Inf invented)."""
    both = ~torch.isfinite(found).all(-1) & ~torch.isfinite(expected).all(-1)
    if not bool(both.any()):
        return found
    return torch.where(both.unsqueeze(-1), expected.to(found.dtype), found)


def _undefined_integers(torch: Any, found: Any, wanted: Any, wrap_dtype: Any) -> Any:
    """Elements whose integer value is undefined by the language, so any value is right:

    - the reference's value lies outside the range of the dtype written (an ``out=`` of a
      narrower integer dtype wraps it, implementation defined);
    - either side holds the written dtype's smallest or largest value: what converting a
      float beyond an integer's range gives (x86 returns the smallest, CUDA saturates);
      the conversion is undefined in C++;
    - with ``wrap_dtype``, the two differ by a multiple of 2^bits of that dtype and one
      lies outside its range: an overflow one side computed wider.
    """
    found64 = found.to(torch.int64)
    undefined = torch.zeros_like(found64, dtype=torch.bool)
    if found.dtype.itemsize < 8 or found.dtype.is_signed:
        limits = torch.iinfo(found.dtype)
        if found.dtype.itemsize < 8:
            undefined |= (wanted < limits.min) | (wanted > limits.max)
        undefined |= (found64 == limits.max) | (wanted == limits.max)
        if found.dtype.is_signed:
            # An unsigned dtype's smallest value is 0, an ordinary result.
            undefined |= (found64 == limits.min) | (wanted == limits.min)
    if wrap_dtype is not None and wrap_dtype.itemsize < 8:
        limits = torch.iinfo(wrap_dtype)
        outside = (found64 < limits.min) | (found64 > limits.max) | (wanted < limits.min) | (wanted > limits.max)
        undefined |= outside & ((found64 - wanted) % (1 << (8 * wrap_dtype.itemsize)) == 0)
    return undefined


def _plain_close(e: float, f: float, atol: float, rtol: float) -> bool:
    if math.isnan(e) or math.isnan(f):
        return math.isnan(e) and math.isnan(f)
    if math.isinf(e) or math.isinf(f):
        return e == f
    return abs(e - f) <= atol + rtol * abs(e)


def _normalized_errors(torch: Any, found: Any, ref: Any, atol: float, rtol: float) -> tuple[Any, Any]:
    """(error, error / allowed) on elements finite in both."""
    both = torch.isfinite(found) & torch.isfinite(ref)
    err = torch.where(both, (found - ref).abs(), torch.zeros_like(ref))
    allowed = atol + rtol * ref.abs()
    return err, torch.where(both, err / allowed, torch.zeros_like(ref))


def _compare_float(
    torch: Any,
    found: Any,
    expected: Any,
    dtype_name: str,
    atol: float,
    rtol: float,
    same_dtype_cpu: Callable[[], Any] | None,
    nonfinite_pattern: bool = True,
    inf_input: bool = False,
) -> LeafFailure | None:
    shape = tuple(found.shape)
    d = found.double()
    r = expected.double()
    fmax = float(torch.finfo(getattr(torch, dtype_name)).max)
    cpu_cache: list[Any] = []

    def cpu_same() -> Any | None:
        if not cpu_cache:
            value = None
            if same_dtype_cpu is not None and dtype_name != "float64":
                try:
                    value = same_dtype_cpu()
                except Exception:  # noqa: BLE001 - no yardstick then
                    value = None
                if isinstance(value, torch.Tensor):
                    value = as_comparable(torch, value)
                    value = value.double() if tuple(value.shape) == shape else None
                else:
                    value = None
            cpu_cache.append(value)
        return cpu_cache[0]

    def flagged(cls: str, mask: Any, cpu_has_it_too: Callable[[Any], Any], detail: str) -> LeafFailure | None:
        """A failure for the elements in ``mask``, less those where the CPU in the same dtype
        shows the same thing (``cpu_has_it_too``): the dtype's doing, not the device's."""
        if bool(mask.any()):
            cpu = cpu_same()
            if cpu is not None:
                mask = mask & ~cpu_has_it_too(cpu)
        if not bool(mask.any()):
            return None
        return masked_failure(torch, cls, mask.reshape(shape), d, r, detail)

    def not_nan(cpu: Any) -> Any:
        return ~torch.isnan(cpu)

    def not_finite(cpu: Any) -> Any:
        return ~torch.isfinite(cpu)

    finite_r = torch.isfinite(r)
    overflow = finite_r & (r.abs() > fmax)
    # Under an injected infinity the reference may meet an indeterminate form (inf/inf,
    # 0·inf, inf − inf: a NaN in its output) and resolve the neighbouring limits as 0 or
    # ±Inf (x·rsqrt(inf) = 0); an algorithm that meets the same infinity in another order
    # (a variance-style pass) gets NaN there instead. Accepted only when the reference
    # output holds a NaN of its own, so a NaN in a row the infinity leaves well defined
    # (softmax of a row holding -inf) still fails.
    indeterminate = (
        torch.isnan(d) & ((r == 0) | torch.isinf(r))
        if inf_input and bool(torch.isnan(r).any())
        else torch.zeros_like(finite_r)
    )
    if nonfinite_pattern:
        lost = torch.isnan(r) & ~torch.isnan(d)
        if inf_input:
            lost = lost & ~torch.isinf(d)
        failure = flagged(NAN_LOST, lost, not_nan, "{count} NaN of the reference came back as numbers")
        if failure is not None:
            return failure
    inf_wrong = torch.isinf(r) & (d != r) & ~indeterminate
    if not nonfinite_pattern:
        inf_wrong = inf_wrong & torch.isfinite(d)
    failure = flagged(WRONG_VALUE, inf_wrong, not_finite, "{count} infinities of the reference differ")
    if failure is not None:
        return failure
    if nonfinite_pattern:
        invented = finite_r & ~torch.isfinite(d) & ~overflow & ~indeterminate
        failure = flagged(NONFINITE_INVENTED, invented, not_finite, "{count} NaN/Inf where the reference is finite")
        if failure is not None:
            return failure
    # Values beyond the dtype's range: any value at or past the largest finite one is right.
    saturated = overflow & ((d.abs() >= fmax * (1 - rtol)) | torch.isinf(d))
    comparable = finite_r & torch.isfinite(d) & ~saturated & ~indeterminate
    err, ratio = _normalized_errors(torch, torch.where(comparable, d, r), r, atol, rtol)
    worst = float(ratio.max()) if ratio.numel() else 0.0
    if worst <= 1.0:
        return None
    scale = float(r[finite_r].abs().max()) if bool(finite_r.any()) else 0.0
    max_err = float(err.max())
    if max_err <= atol + rtol * scale:
        return None
    cpu = cpu_same()
    if cpu is not None:
        cpu_ok = torch.isfinite(cpu) & comparable
        _cerr, cratio = _normalized_errors(torch, torch.where(cpu_ok, cpu, r), r, atol, rtol)
        cpu_worst = float(cratio.max()) if cratio.numel() else 0.0
        if worst <= 2.0 * cpu_worst:
            return None
    over = ratio > 1.0
    i = int(ratio.reshape(-1).argmax())
    zeros_where_nonzero = over & (d == 0) & (r != 0)
    all_zero = bool((d == 0).all()) and bool((r != 0).any())
    return LeafFailure(
        WRONG_VALUE,
        f"{int(over.sum())} of {d.numel()} elements beyond the bound (largest error {_fmt(max_err)}, "
        f"{worst:.3g}× the allowed)",
        index=_unravel(i, shape),
        expected=_fmt(float(r.reshape(-1)[i])),
        found=_fmt(float(d.reshape(-1)[i])),
        max_err=max_err,
        allowed=float(atol + rtol * abs(float(r.reshape(-1)[i]))),
        zeros=bool(zeros_where_nonzero.sum() == over.sum()),
        all_zero=all_zero,
        bad_elements=int(over.sum()),
        elements=d.numel(),
    )
