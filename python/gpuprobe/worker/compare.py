"""Element-wise comparison of outputs with references, as ``CompareStats`` (observation.rs).

Comparison is bitwise (raw bits viewed as integers), except that two NaNs compare equal when
``nan_equal`` is set: conversions may legitimately produce different NaN payloads. The counts
let the judge classify a failure:

- ``zeros_where_nonzero``: mismatching elements that are zero where the reference is not;
- ``nonfinite_where_finite``: mismatching elements that are NaN/Inf where the reference is
  finite;
- ``unchanged``: mismatching elements still holding the canary the destination was filled with;
- ``all_zero_trials``: trials whose whole output is zero while the reference is not.

All arithmetic happens on the CPU on tensors already read back; large buffers are compared in
chunks so the temporaries stay small.
"""

from __future__ import annotations

from typing import Any

_CHUNK = 1 << 24
_INT_VIEW = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}
_NARROW_FLOATS = {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"}


def _name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def is_float(dtype: Any) -> bool:
    """Whether ``dtype`` is a floating-point type (fp8 included)."""
    name = _name(dtype)
    return name.startswith("float") or name == "bfloat16"


def bits_of(torch: Any, t: Any) -> Any:
    """Raw bits of a flat CPU tensor as an integer tensor of the same width."""
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    return t.view(getattr(torch, _INT_VIEW[t.element_size()]))


def values_of(torch: Any, t: Any) -> Any:
    """Values in a type where zero/NaN/Inf tests are exact (fp16/bf16/fp8 widen to float32)."""
    if _name(t.dtype) in _NARROW_FLOATS:
        return t.float()
    return t


def format_value(torch: Any, t: Any, index: int) -> str:
    """One element as text: value, and the hex bits for floats."""
    element = t[index : index + 1]
    if is_float(t.dtype):
        value = float(values_of(torch, element)[0].item())
        width = 2 * t.element_size()
        raw = int(bits_of(torch, element)[0].item()) & ((1 << (8 * t.element_size())) - 1)
        return f"{value!r} (0x{raw:0{width}x})"
    return str(element[0].item())


class CompareCounts:
    """The counters of a ``CompareStats`` measurement, shared by the bit-exact and the
    tolerance accumulators; ``stats()`` returns the JSON object."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.n = 0
        self.mismatches = 0
        self.zeros_where_nonzero = 0
        self.nonfinite_where_finite = 0
        self.unchanged = 0
        self.trials = 0
        self.failed_trials = 0
        self.all_zero_trials = 0
        self.first_mismatch: dict[str, Any] | None = None

    def extra_stats(self) -> dict[str, Any]:
        """Fields a subclass adds to the measurement (errors, ULPs)."""
        return {}

    def stats(self) -> dict[str, Any]:
        """The ``CompareStats`` measurement object (``kind: compare``)."""
        out: dict[str, Any] = {
            "kind": "compare",
            "n": self.n,
            "mismatches": self.mismatches,
            "zeros_where_nonzero": self.zeros_where_nonzero,
            "nonfinite_where_finite": self.nonfinite_where_finite,
            "unchanged": self.unchanged,
            "trials": max(self.trials, 1),
            "failed_trials": self.failed_trials,
            "all_zero_trials": self.all_zero_trials,
            **self.extra_stats(),
        }
        if self.first_mismatch is not None:
            out["first_mismatch"] = self.first_mismatch
        return out


class CompareAccumulator(CompareCounts):
    """Accumulates bit-exact ``CompareStats`` over trials."""

    # -- single trial ------------------------------------------------------------------------

    def add(
        self,
        out: Any,
        ref: Any,
        *,
        canary: int | None = None,
        previous: Any = None,
        nan_equal: bool = False,
    ) -> int:
        """Compares one trial's output with its reference (same dtype, same element count);
        returns the number of mismatching elements.

        ``canary`` is the bit pattern the destination was filled with; ``previous`` is what it
        held before this trial (a tensor like ``ref``), for successive copies into one buffer.
        Mismatching elements equal to either count as ``unchanged``."""
        torch = self.torch
        if out.dtype != ref.dtype:
            raise ValueError(f"output dtype {out.dtype} differs from reference dtype {ref.dtype}")
        trial = self.trials
        self.trials += 1
        out_flat, ref_flat = out.reshape(-1), ref.reshape(-1)
        if out_flat.numel() != ref_flat.numel():
            # A wrong shape is a failed trial in which every element mismatches.
            self.n += ref_flat.numel()
            self.mismatches += ref_flat.numel()
            self.failed_trials += 1
            if self.first_mismatch is None:
                self.first_mismatch = {
                    "index": 0,
                    "trial": trial,
                    "expected": f"{ref_flat.numel()} elements",
                    "found": f"{out_flat.numel()} elements",
                }
            return int(ref_flat.numel())
        total = ref_flat.numel()
        if all(
            torch.equal(
                bits_of(torch, out_flat[start : start + _CHUNK]), bits_of(torch, ref_flat[start : start + _CHUNK])
            )
            for start in range(0, total, _CHUNK)
        ):
            # Fast path for the common case: identical bits (equal under either NaN policy),
            # nothing more to count.
            self.n += total
            return 0
        mism_total = 0
        out_zero_total = 0
        ref_nonzero_total = 0
        for start in range(0, max(total, 1), _CHUNK):
            end = min(total, start + _CHUNK)
            if end <= start:
                break
            o, r = out_flat[start:end], ref_flat[start:end]
            ov, rv = values_of(torch, o), values_of(torch, r)
            mism = bits_of(torch, o) != bits_of(torch, r)
            if nan_equal and is_float(o.dtype):
                mism &= ~(torch.isnan(ov) & torch.isnan(rv))
            out_zero = ov == 0
            ref_nonzero = rv != 0
            out_zero_total += int(out_zero.sum())
            ref_nonzero_total += int(ref_nonzero.sum())
            count = int(mism.sum())
            if count == 0:
                continue
            mism_total += count
            self.zeros_where_nonzero += int((mism & out_zero & ref_nonzero).sum())
            if is_float(o.dtype):
                self.nonfinite_where_finite += int((mism & ~torch.isfinite(ov) & torch.isfinite(rv)).sum())
            if previous is not None:
                old = bits_of(torch, previous.reshape(-1)[start:end])
                self.unchanged += int((mism & (bits_of(torch, o) == old)).sum())
            elif canary is not None:
                self.unchanged += int((mism & (bits_of(torch, o) == canary)).sum())
            if self.first_mismatch is None:
                index = int(mism.nonzero()[0, 0])
                self.first_mismatch = {
                    "index": start + index,
                    "trial": trial,
                    "expected": format_value(torch, r, index),
                    "found": format_value(torch, o, index),
                }
        self.n += total
        self.mismatches += mism_total
        if mism_total:
            self.failed_trials += 1
            if out_zero_total == total and ref_nonzero_total > 0:
                self.all_zero_trials += 1
        return mism_total

    # -- many small trials at once -----------------------------------------------------------

    def add_segmented(self, out: Any, ref: Any, sizes: Any, *, canary: int | None = None) -> None:
        """Compares many trials laid end to end (``sizes[i]`` elements each) in one pass; for
        the thousands of tiny copies of the RKB-001 probe."""
        torch = self.torch
        out_flat, ref_flat = out.reshape(-1), ref.reshape(-1)
        if out_flat.numel() != ref_flat.numel():
            raise ValueError("segmented comparison needs equal lengths")
        sizes = sizes.to(torch.int64)
        count = int(sizes.numel())
        trial_of = torch.repeat_interleave(torch.arange(count, dtype=torch.int64), sizes)
        ov, rv = values_of(torch, out_flat), values_of(torch, ref_flat)
        mism = bits_of(torch, out_flat) != bits_of(torch, ref_flat)
        out_zero = ov == 0
        ref_nonzero = rv != 0
        base = self.trials
        self.trials += count
        self.n += int(ref_flat.numel())
        mism_count = int(mism.sum())
        if mism_count == 0:
            return
        self.mismatches += mism_count
        self.zeros_where_nonzero += int((mism & out_zero & ref_nonzero).sum())
        if is_float(out_flat.dtype):
            self.nonfinite_where_finite += int((mism & ~torch.isfinite(ov) & torch.isfinite(rv)).sum())
        if canary is not None:
            self.unchanged += int((mism & (bits_of(torch, out_flat) == canary)).sum())
        per_trial_mism = torch.bincount(trial_of, weights=mism.double(), minlength=count)
        per_trial_zero = torch.bincount(trial_of, weights=out_zero.double(), minlength=count)
        per_trial_ref_nonzero = torch.bincount(trial_of, weights=ref_nonzero.double(), minlength=count)
        failed = per_trial_mism > 0
        self.failed_trials += int(failed.sum())
        all_zero = failed & (per_trial_zero == sizes.double()) & (per_trial_ref_nonzero > 0)
        self.all_zero_trials += int(all_zero.sum())
        if self.first_mismatch is None:
            index = int(mism.nonzero()[0, 0])
            trial = int(trial_of[index])
            starts = torch.cumsum(sizes, 0) - sizes
            self.first_mismatch = {
                "index": index - int(starts[trial]),
                "trial": base + trial,
                "expected": format_value(torch, ref_flat, index),
                "found": format_value(torch, out_flat, index),
            }

