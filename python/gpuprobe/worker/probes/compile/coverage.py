"""What the compile family drives: the coverage table of ``docs/probes.md`` (section
"compile").

``python -m gpuprobe.worker.probes.compile.coverage`` prints the table (Markdown) for the
installed torch; ``tests/python/test_compile.py`` checks that ``docs/probes.md`` holds the
table this code produces for the torch the tests pin. Counts come from the database's
metadata for CUDA devices (ROCm builds report theirs as CUDA too), with the compile family's
own exclusions (``compile_specs.exclusion``) and backward rule (``compile_run``).
"""

from __future__ import annotations

import sys
from typing import Any

from gpuprobe.worker.probes.compile import specs as compile_specs
from gpuprobe.worker.probes.sweep import db as sweep_db


def counts(torch: Any, dev_type: str = "cuda") -> dict[str, Any]:
    """Per full-tier dtype: entries compiled, with backward, with an ``out=`` and an in-place
    entry point, and entries left out by reason."""
    database = sweep_db.load(torch)
    out: dict[str, Any] = {"torch": database.torch_version, "entries": len(database.ops), "dtypes": {}}
    for short in compile_specs.FULL_DTYPES:
        name = sweep_db.DTYPES[short]
        row = {"compiled": 0, "backward": 0, "out": 0, "inplace": 0, "excluded": {}}
        for info in database.ops.values():
            if not sweep_db.supports(info, torch, name, dev_type):
                continue
            reason = compile_specs.exclusion(info, name) or ("excluded by the sweep" if sweep_db.exclusion(info) else None)
            if reason:
                row["excluded"][reason] = row["excluded"].get(reason, 0) + 1
                continue
            row["compiled"] += 1
            backward = not sweep_db.is_exact_dtype(name) and sweep_db.supports_backward(info, torch, name, dev_type)
            row["backward"] += backward
            row["out"] += bool(getattr(info, "supports_out", False))
            row["inplace"] += getattr(info, "inplace_variant", None) is not None
        out["dtypes"][short] = row
    return out


def markdown(torch: Any) -> str:
    """The coverage table, as ``docs/probes.md`` holds it between its markers."""
    numbers = counts(torch)
    lines = [
        f"Torch {numbers['torch']}, {numbers['entries']} database entries, declarations for CUDA devices, in "
        f"{compile_specs.CHUNKS} programs a dtype:",
        "",
        "| dtype | passes it may run (the full tier runs `compiled` in every dtype, each other pass in one dtype a program) | entries compiled | with backward | with `out=` | with in-place | left out (why) |",
        "|---|---|---|---|---|---|---|",
    ]
    from gpuprobe.worker.probes.compile import run as compile_run

    for short, row in numbers["dtypes"].items():
        passes = compile_run.dtype_passes(short)
        left = "; ".join(f"{count} {reason}" for reason, count in sorted(row["excluded"].items())) or "none"
        lines.append(
            f"| `{short}` | {', '.join(passes)} | {row['compiled']} | {row['backward']} | {row['out']} | "
            f"{row['inplace']} | {left} |"
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    import torch

    sys.stdout.write(markdown(torch))
