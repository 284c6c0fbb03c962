"""The case tally: the cases of one probe counted and reported in the sweep's observation
format (``SweepStats`` in ``gpuprobe-model``'s observation.rs).

A probe that judges many cases (the sweep's operators, the compile family's programs and
ambient states, the graph replays, the optimizer steps, the training runs) counts them in one
``CaseTally``: cases judged and passed, failures by class with the first ``MAX_REPORTED``
recorded (``failure_record``), device errors with the first ones recorded, and the cases it
could not judge (by reason), that the device refused with an argument check, that it accepted
although the CPU rejects them, or whose non-finite input came back finite, each with a few
examples. ``measurement`` is the observation; the notes each family writes from the tally are
its own (``unjudged_note`` and ``not_run_note`` write the common ones). A family keeps what
only it counts in a subclass (the sweep's variants, the train family's share of each bound).

The repro scripts of the compile, graph, optim and train families copy their family's tally,
and this class with it, into the script (``repro.families.copied``): it imports nothing.
"""

from __future__ import annotations

import math
from typing import Any

#: Failures and device errors recorded in full (the rest are counted).
MAX_REPORTED = 6

#: Examples kept of each kind of case that is counted, not judged wrong.
MAX_EXAMPLES = 3


def failure_record(failure: Any, *, variant: str, direction: str, sample: int, output: str) -> dict[str, Any]:
    """A wrong case as an observation's ``failures`` lists it (``SweepFailure``), from a
    ``LeafFailure`` (or anything with its fields). A non-finite error or bound is left out:
    JSON has no NaN or infinity."""
    entry: dict[str, Any] = {
        "class": failure.cls,
        "variant": variant,
        "direction": direction,
        "sample": sample,
        "output": output,
        "detail": failure.detail,
        "expected": failure.expected,
        "found": failure.found,
        "zeros": failure.zeros,
        "all_zero": failure.all_zero,
        "bad_elements": failure.bad_elements,
        "elements": failure.elements,
    }
    if failure.index is not None:
        entry["index"] = failure.index
    if failure.max_err is not None and math.isfinite(failure.max_err):
        entry["max_err"] = failure.max_err
    if failure.allowed is not None and math.isfinite(failure.allowed):
        entry["allowed"] = failure.allowed
    return entry


class CaseTally:
    """Counts one probe's cases and keeps the first failures, errors and examples.

    ``example_chars`` cuts each example kept (None: the caller cuts its own), ``message_chars``
    each device error's message (None: kept whole). Counters are plain attributes: a caller
    that passes a case without judging a value (both sides reject an input) adds to
    ``cases`` and ``passed`` itself."""

    def __init__(self, *, example_chars: int | None = 200, message_chars: int | None = None) -> None:
        self.example_chars = example_chars
        self.message_chars = message_chars
        self.cases = 0
        self.passed = 0
        #: Wrong cases by failure class, and the first ``MAX_REPORTED`` of them.
        self.failed: dict[str, int] = {}
        self.failures: list[dict[str, Any]] = []
        #: Cases the device raised on (a fault of the stack), and the first of them.
        self.device_error_count = 0
        self.errors: list[dict[str, Any]] = []
        #: Inputs the device refused with an argument check (stricter, not wrong math).
        self.refused = 0
        self.refused_examples: list[str] = []
        #: Inputs the device accepted although the CPU rejects them (not wrong math).
        self.invalid_accepted = 0
        self.invalid_examples: list[str] = []
        #: Cases whose NaN or infinity in the input came back as finite numbers.
        self.nonfinite_swallowed = 0
        self.swallowed_examples: list[str] = []
        #: Cases not judged, by reason.
        self.unjudged: dict[str, int] = {}
        self.unjudged_examples: list[str] = []
        #: Cases not run (the time budget spent, or the device context lost: ``context_lost``).
        self.not_run = 0
        self.context_lost: str | None = None
        self.notes: list[str] = []

    def _keep(self, examples: list[str], text: str | None) -> None:
        if text is not None and len(examples) < MAX_EXAMPLES:
            examples.append(text if self.example_chars is None else text[: self.example_chars])

    def unjudge(self, reason: str, example: str | None = None, count: int = 1) -> None:
        """``count`` cases not judged for ``reason`` (and an example of them)."""
        self.unjudged[reason] = self.unjudged.get(reason, 0) + count
        self._keep(self.unjudged_examples, example)

    def refuse(self, example: str | None = None) -> None:
        """An input the device refused with an argument check (not counted as a case)."""
        self.refused += 1
        self._keep(self.refused_examples, example)

    def accept_invalid(self, example: str | None = None) -> None:
        """An input the device accepted although the CPU rejects it (its case is counted
        by the caller: a pass)."""
        self.invalid_accepted += 1
        self._keep(self.invalid_examples, example)

    def swallow(self, example: str | None = None) -> None:
        """A non-finite input that came back finite (its case is counted by the caller)."""
        self.nonfinite_swallowed += 1
        self._keep(self.swallowed_examples, example)

    def fail(self, variant: str, direction: str, sample: int, output: str, failure: Any, *, cls: str | None = None) -> None:
        """A failure of a case already counted: by its class (``cls`` when the caller names
        another), recorded while fewer than ``MAX_REPORTED`` are."""
        cls = failure.cls if cls is None else cls
        self.failed[cls] = self.failed.get(cls, 0) + 1
        if len(self.failures) < MAX_REPORTED:
            entry = failure_record(failure, variant=variant, direction=direction, sample=sample, output=output)
            entry["class"] = cls
            self.failures.append(entry)

    def record(self, variant: str, direction: str, sample: int, output: str, failure: Any | None) -> None:
        """One judged case: passed when ``failure`` is None, else failed."""
        self.cases += 1
        if failure is None:
            self.passed += 1
        else:
            self.fail(variant, direction, sample, output, failure)

    def device_error(self, variant: str, direction: str, sample: int, message: str) -> None:
        """One case the device raised on (a fault of the stack, not an argument check)."""
        self.cases += 1
        self.device_error_count += 1
        if len(self.errors) < MAX_REPORTED:
            if self.message_chars is not None:
                message = message[: self.message_chars]
            self.errors.append({"variant": variant, "direction": direction, "sample": sample, "message": message})

    def measurement(self, op: str, dtype: str, *, variant_test_name: str = "", oracle: str = "value") -> dict[str, Any]:
        """The observation's measurement (``SweepStats``)."""
        return {
            "kind": "sweep",
            "op": op,
            "variant_test_name": variant_test_name,
            "dtype": dtype,
            "oracle": oracle,
            "cases": self.cases,
            "passed": self.passed,
            "failed": dict(sorted(self.failed.items())),
            "device_errors": self.device_error_count,
            "invalid_accepted": self.invalid_accepted,
            "refused": self.refused,
            "nonfinite_swallowed": self.nonfinite_swallowed,
            "unjudged": dict(sorted(self.unjudged.items())),
            "failures": self.failures,
            "errors": self.errors,
        }

    def unjudged_note(self, heading: str = "cases not judged") -> str | None:
        """``heading: reason count, ...; e.g. example | ...``, or None when every case was
        judged."""
        if not self.unjudged:
            return None
        return (
            f"{heading}: "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.unjudged.items()))
            + ("; e.g. " + " | ".join(self.unjudged_examples) if self.unjudged_examples else "")
        )

    def not_run_note(self) -> str | None:
        """How many cases were not run and why, or None when all ran."""
        if not self.not_run:
            return None
        reason = "the device context was lost" if self.context_lost else "the probe's time budget was spent"
        return f"{self.not_run} case(s) not run: {reason}"
