"""What the family runners of this folder share (``graph_probes.py``, ``optim_probes.py``,
``train_probes.py``): one probe run in this process through its implementation function,
its outcome by the judge's sweep rule, and the lines printed after a failing or verbose one.
"""

from __future__ import annotations

import json
import time
from typing import Any

import torch

from gpuprobe.worker.context import ProbeContext, SkipProbe


def verdict(measurement: dict, with_step: bool = False) -> str:
    """The judge's sweep rule: any failed case is FAIL (the first failure), else any device
    error is ERROR, else PASS. ``with_step`` names the failing case's step (its ``sample``)."""
    if sum(measurement["failed"].values()):
        first = measurement["failures"][0]
        step = f" step {first['sample']}" if with_step else ""
        return (
            f"FAIL {first['class']}: {first['variant']} {first['direction']}{step} {first['output']}"
            f"{first.get('index', '')} found {first['found']} reference {first['expected']}: {first['detail']}"
        )
    if measurement["device_errors"]:
        return f"ERROR {measurement['errors'][0]}"
    return "PASS"


def run_probe(spec: Any, device: str, seed: int, tier: str) -> tuple[str, Any, float]:
    """Runs one catalogued probe: ``("ran", output, seconds)``, ``("skip", reason, 0)`` or
    ``("error", text, 0)``. An observation must be valid JSON (no NaN/Inf), as the worker's
    event stream requires: that is checked here."""
    ctx = ProbeContext(torch, device, seed, spec.id, {"tier": tier})
    started = time.perf_counter()
    try:
        output = spec.resolve()(ctx, **spec.params)
    except SkipProbe as skip:
        return "skip", str(skip), 0.0
    except Exception as exc:  # noqa: BLE001 - reported as the probe's error
        return "error", f"{type(exc).__name__}: {exc}", 0.0
    seconds = time.perf_counter() - started
    json.dumps({"m": output.measurement, "x": output.metrics, "n": output.notes}, allow_nan=False)
    return "ran", output, seconds


def print_details(output: Any, outcome: str, verbose: bool) -> None:
    """The metrics, notes and further failures of a failing (or, ``verbose``, any) probe."""
    if not verbose and outcome == "PASS":
        return
    print(f"      metrics {output.metrics}", flush=True)
    print(f"      notes {output.notes}", flush=True)
    for failure in output.measurement["failures"][1:]:
        print(f"      also {failure['class']} {failure['variant']} {failure['direction']} {failure['output']}: {failure['detail']}")
