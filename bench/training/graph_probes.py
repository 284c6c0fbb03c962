"""Runs the graph family's probes directly on one device and prints each one's outcome.

Usage (from the repository root, with the interpreter whose torch is to be checked):

    python3 bench/training/graph_probes.py [--device cuda:0] [--repeat 2] [--only capture ...]

Each probe runs in this process, in catalogue order, through its implementation function;
the outcome follows the judge's sweep rule (any failed case: FAIL with the first failure,
else any device error: ERROR, else PASS). ``--repeat 2`` runs the list twice and reports
both timings (the second is warm: kernels loaded, Inductor's caches filled). The observation
is checked to be valid JSON (no NaN/Inf), as the worker's event stream requires.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

import torch  # noqa: E402

from gpuprobe.worker.context import ProbeContext, SkipProbe  # noqa: E402
from gpuprobe.worker.probes import graph_specs  # noqa: E402


def verdict(measurement: dict) -> str:
    if sum(measurement["failed"].values()):
        first = measurement["failures"][0]
        return (
            f"FAIL {first['class']}: {first['variant']} {first['direction']} {first['output']}"
            f"{first.get('index', '')} found {first['found']} reference {first['expected']}: {first['detail']}"
        )
    if measurement["device_errors"]:
        return f"ERROR {measurement['errors'][0]}"
    return "PASS"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--only", nargs="*", default=[], help="substrings of probe ids")
    parser.add_argument("--verbose", action="store_true", help="print metrics and notes")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, device {args.device}", flush=True)
    status = 0
    for round_index in range(args.repeat):
        total = 0.0
        for spec in graph_specs.specs():
            if args.only and not any(o in spec.id for o in args.only):
                continue
            ctx = ProbeContext(torch, args.device, args.seed, spec.id, {"tier": "full"})
            started = time.perf_counter()
            try:
                output = spec.resolve()(ctx, **spec.params)
            except SkipProbe as skip:
                print(f"[{round_index}] {spec.id:32s} {spec.tier:8s} SKIP {skip}", flush=True)
                continue
            except Exception as exc:  # noqa: BLE001
                print(f"[{round_index}] {spec.id:32s} {spec.tier:8s} ERROR {type(exc).__name__}: {exc}", flush=True)
                status = 1
                continue
            seconds = time.perf_counter() - started
            total += seconds
            json.dumps({"m": output.measurement, "x": output.metrics, "n": output.notes}, allow_nan=False)
            m = output.measurement
            outcome = verdict(m)
            status = status or (0 if outcome == "PASS" else 1)
            print(
                f"[{round_index}] {spec.id:32s} {spec.tier:8s} {seconds:7.2f}s cases {m['cases']:4d} passed {m['passed']:4d} "
                f"unjudged {m['unjudged'] or '-'} {outcome}",
                flush=True,
            )
            if args.verbose or outcome != "PASS":
                print(f"      metrics {output.metrics}", flush=True)
                print(f"      notes {output.notes}", flush=True)
                for failure in m["failures"][1:]:
                    print(f"      also {failure['class']} {failure['variant']} {failure['direction']} {failure['output']}: {failure['detail']}")
        print(f"[{round_index}] total {total:.2f}s", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
