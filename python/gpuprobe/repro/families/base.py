"""What every family's recipe shares: the case it reads, ``NoRepro``, and the helpers that
copy gpuprobe's own input builders into a script.

Each recipe receives the probe's catalog definition (its implementation's parameters), the
plan seed and the observation, and returns a ``script.Recipe``. Seeds are computed here with
the worker's own ``ProbeContext.derive_seed`` rule and written into the script as numbers;
the input builders the probe used (``patterns.pattern``, ``dtype_run.build_inputs`` and
their helpers) are copied into the script with ``inspect.getsource``, so the script builds
bit for bit the same input without importing gpuprobe.

A recipe raises ``NoRepro`` for a case it cannot rebuild exactly (the message is the reason
printed as ``no repro: WHY``).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable

from gpuprobe.worker import patterns
from gpuprobe.worker.catalog import ProbeDef
from gpuprobe.worker.patterns import derive_seed


class NoRepro(Exception):
    """This result cannot be turned into a script; the message says why."""


@dataclass
class Case:
    """Everything a recipe reads."""

    probe: str
    definition: ProbeDef
    seed: int
    verdict: str
    measurement: dict[str, Any]
    metrics: dict[str, Any]
    device: str = "cuda:0"
    #: The worker's last stderr lines (crash and hang verdicts).
    stderr_tail: tuple[str, ...] = ()

    @property
    def device_type(self) -> str:
        return self.device.split(":", 1)[0]

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.definition.params)

    def derive(self, tag: str) -> int:
        return derive_seed(self.seed, self.probe, tag)

    @property
    def crash_or_hang(self) -> bool:
        return self.verdict in ("crash", "hang")

    def chosen(self, count: int, what: str, *, by: str = "trial") -> list[int]:
        """The indices of the cases the script runs: every one of the probe's ``count``
        cases for a crash or hang (the observation names none), else the one that failed,
        named by the measurement's ``first_mismatch.trial`` (``by="trial"``) or by the
        ``worst_case`` metric (``by="worst"``). ``NoRepro`` when the observation lacks it."""
        if self.crash_or_hang:
            return list(range(count))
        if by == "trial":
            found = self.failing_trial()
            missing = f"the observation does not say which {what} failed (no first_mismatch.trial)"
        else:
            worst = self.metrics.get("worst_case")
            found = worst if isinstance(worst, int) and not isinstance(worst, bool) else None
            missing = f"the observation does not say which {what} failed (no worst_case metric; rerun with this gpuprobe)"
        if found is None or not 0 <= found < count:
            raise NoRepro(missing)
        return [found]

    def failing_trial(self) -> int | None:
        """The trial of the first mismatch the probe recorded, or None."""
        first = self.measurement.get("first_mismatch")
        if isinstance(first, dict) and isinstance(first.get("trial"), int) and first["trial"] >= 0:
            return int(first["trial"])
        return None


def _sources(*functions: Callable[..., Any]) -> str:
    return "\n\n\n".join(inspect.getsource(f).rstrip() for f in functions)


def _constants(module: Any, *names: str) -> str:
    return "\n".join(f"{name} = {getattr(module, name)!r}" for name in names)


def pattern_helpers(largest: int) -> str:
    """The source of ``patterns.pattern`` and what it calls, for buffers of up to ``largest``
    elements (the block fill of large buffers only when one is that large)."""
    return _pattern_helpers(largest > patterns.BLOCK)


@functools.cache
def _pattern_helpers(blocks: bool) -> str:
    header = [
        "# Copied from gpuprobe's input patterns (gpuprobe/worker/patterns.py): a murmur3 hash of",
        "# the element index, so every value is finite, non-zero and not periodic.",
        "from typing import Any",
    ]
    functions: list[Callable[..., Any]] = [patterns._s32, patterns._lsr, patterns.hash32, patterns._bits_for]
    constants = ["CHUNK", "BLOCK", "_VIEW", "_SAFE_XOR"]
    if blocks:
        header.append("import zlib")
        constants.append("_MASK64")
        functions += [patterns.derive_seed, patterns._block_key, patterns._fill_blocks]
    functions.append(patterns.pattern)
    return "\n".join(header) + "\n\n" + _constants(patterns, *constants) + "\n\n\n" + _sources(*functions)


@functools.cache
def canary_helpers() -> str:
    """``canary_value`` / ``fill_canary``: a destination prefilled with a value the pattern
    never produces, so an element the copy never wrote is seen as such."""
    return _constants(patterns, "CANARY_BITS") + "\n\n\n" + _sources(patterns.canary_value, patterns.fill_canary)
