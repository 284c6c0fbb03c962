"""Runs the optim family's probes directly on one device and prints each one's outcome.

Usage (from the repository root, with the interpreter whose torch is to be checked):

    python3 bench/training/optim_probes.py [--device cuda:0] [--tier full] [--only adamw.fp32 ...]

Each probe runs in this process, in catalogue order, through its implementation function;
the outcome follows the judge's sweep rule (any failed case: FAIL with the first failure,
else any device error: ERROR, else PASS). ``--tier standard`` runs the standard probes with
their standard subset (as ``gpuprobe check --tier standard`` does). ``worst`` is the probe's
``worst_ratio`` metric: the largest error of a comparison with float64 in units of the
allowed error (how close a correct implementation came to the bound). The observation is
checked to be valid JSON (no NaN/Inf), as the worker's event stream requires.
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
from gpuprobe.worker.probes import optim_specs  # noqa: E402


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
    parser.add_argument("--tier", default="full", choices=("standard", "full"))
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--only", nargs="*", default=[], help="substrings of probe ids")
    parser.add_argument("--verbose", action="store_true", help="print metrics and notes")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, device {args.device}, tier {args.tier}", flush=True)
    # The device's context is created before the first probe's clock starts, as in a worker.
    started = time.perf_counter()
    (torch.zeros(1, device=args.device) + 1).cpu()
    print(f"device ready in {time.perf_counter() - started:.2f}s", flush=True)
    status = 0
    total = 0.0
    for spec in optim_specs.specs():
        if args.tier == "standard" and spec.tier != "standard":
            continue
        if args.only and not any(o in spec.id for o in args.only):
            continue
        ctx = ProbeContext(torch, args.device, args.seed, spec.id, {"tier": args.tier})
        started = time.perf_counter()
        try:
            output = spec.resolve()(ctx, **spec.params)
        except SkipProbe as skip:
            print(f"{spec.id:24s} {spec.tier:8s} SKIP {skip}", flush=True)
            continue
        except Exception as exc:  # noqa: BLE001
            print(f"{spec.id:24s} {spec.tier:8s} ERROR {type(exc).__name__}: {exc}", flush=True)
            status = 1
            continue
        seconds = time.perf_counter() - started
        total += seconds
        json.dumps({"m": output.measurement, "x": output.metrics, "n": output.notes}, allow_nan=False)
        m = output.measurement
        outcome = verdict(m)
        status = status or (0 if outcome == "PASS" else 1)
        print(
            f"{spec.id:24s} {spec.tier:8s} {seconds:6.2f}s cases {m['cases']:4d} passed {m['passed']:4d} "
            f"refused {m['refused']:3d} unjudged {m['unjudged'] or '-'} worst {output.metrics.get('worst_ratio', '-')} {outcome}",
            flush=True,
        )
        if args.verbose or outcome != "PASS":
            print(f"      metrics {output.metrics}", flush=True)
            print(f"      notes {output.notes}", flush=True)
            for failure in m["failures"][1:]:
                print(
                    f"      also {failure['class']} {failure['variant']} {failure['direction']} {failure['output']}: {failure['detail']}"
                )
    print(f"total {total:.2f}s", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
