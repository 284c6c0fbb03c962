"""Runs the train family's probes directly on one device and prints each one's outcome.

Usage (from the repository root, with the interpreter whose torch is to be checked):

    python3 bench/training/train_probes.py [--device cuda:0] [--seeds 1,2,3] [--repeat 2] [--eager] [--only bf16 ...]

Each probe runs in this process, in catalogue order, through its implementation function,
once per seed; the outcome follows the judge's sweep rule (any failed case: FAIL with the
first failure, else any device error: ERROR, else PASS). Each line shows the share of its
bound the worst case of each compared quantity used (``bound_used_*``: 1.0 would fail), so
a run over several seeds shows the margins. ``--repeat 2`` runs the list twice (the second
is warm: kernels loaded, Inductor's caches filled). Observations are checked to be valid
JSON (no NaN/Inf), as the worker's event stream requires.
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
from gpuprobe.worker.probes import train_specs  # noqa: E402


def verdict(measurement: dict) -> str:
    if sum(measurement["failed"].values()):
        first = measurement["failures"][0]
        return (
            f"FAIL {first['class']}: {first['variant']} {first['direction']} step {first['sample']} {first['output']}"
            f"{first.get('index', '')} found {first['found']} reference {first['expected']}: {first['detail']}"
        )
    if measurement["device_errors"]:
        return f"ERROR {measurement['errors'][0]}"
    return "PASS"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seeds", default="20261122", help="comma-separated plan seeds")
    parser.add_argument("--only", nargs="*", default=[], help="substrings of probe ids")
    parser.add_argument("--verbose", action="store_true", help="print metrics and notes")
    parser.add_argument("--eager", action="store_true", help="leave out the compiled modes")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"torch {torch.__version__}, device {args.device}", flush=True)
    status = 0
    worst: dict[str, float] = {}
    for round_index in range(args.repeat):
        total = 0.0
        for spec in train_specs.specs():
            if args.only and not any(o in spec.id for o in args.only):
                continue
            if args.eager and spec.id.endswith(train_specs.COMPILE_SUFFIX):
                continue
            for seed in seeds:
                ctx = ProbeContext(torch, args.device, seed, spec.id, {"tier": "full"})
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
                used = {k[len("bound_used_") :]: v for k, v in output.metrics.items() if k.startswith("bound_used_")}
                for quantity, value in used.items():
                    key = f"{spec.id} {quantity}"
                    worst[key] = max(worst.get(key, 0.0), value)
                print(
                    f"[{round_index}] {spec.id:32s} seed {seed} {seconds:7.2f}s cases {m['cases']:4d} passed {m['passed']:4d} "
                    f"unjudged {m['unjudged'] or '-'} {outcome} used {used}",
                    flush=True,
                )
                if args.verbose or outcome != "PASS":
                    print(f"      metrics {output.metrics}", flush=True)
                    print(f"      notes {output.notes}", flush=True)
                    for failure in m["failures"][1:]:
                        print(f"      also {failure['class']} {failure['variant']} {failure['direction']} {failure['output']}: {failure['detail']}")
        print(f"[{round_index}] total {total:.2f}s", flush=True)
    if len(seeds) > 1 or args.repeat > 1:
        print("largest share of a bound used, per probe and quantity:")
        for key, value in sorted(worst.items(), key=lambda item: -item[1]):
            print(f"  {value:6.3f}  {key}")
    return status


if __name__ == "__main__":
    sys.exit(main())
