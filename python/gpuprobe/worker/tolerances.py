"""The judge's base tolerances by rule dtype, read from ``tolerances.json`` beside this file.

That file is the one copy of the table: the Rust judge (``crates/gpuprobe-doctor/src/verdict/judge.rs``,
``dtype_tolerance``) embeds it at build time, and every probe that computes the judge's bound
(the dtype's tolerance times the probe's scale) reads it from here, so the two can never
disagree. ``tests/python/test_tolerances.py`` fails on a hand-copied table.
"""

from __future__ import annotations

import json
from pathlib import Path

_TABLE = json.loads(Path(__file__).with_name("tolerances.json").read_text(encoding="utf-8"))

#: Base tolerance by dtype name (``float32``, ``tf32``, ...): the normwise relative error
#: against a float64 reference that the judge allows before the probe's scale.
DTYPE_TOLERANCE: dict[str, float] = {str(name): float(value) for name, value in _TABLE["dtype_tolerance"].items()}

#: Short names a rule may use (``fp32``, ``bf16``, ...) and the dtype each stands for.
ALIASES: dict[str, str] = {str(alias): str(name) for alias, name in _TABLE["aliases"].items()}


def dtype_tolerance(dtype: str) -> float | None:
    """The base tolerance of ``dtype`` (a name or an alias), as the judge looks it up."""
    return DTYPE_TOLERANCE.get(ALIASES.get(dtype, dtype))
