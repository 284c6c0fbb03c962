"""Runs the optim family's probes directly on one device and prints each one's outcome.

Usage (from the repository root, with the interpreter whose torch is to be checked):

    python3 bench/training/optim_probes.py [--device cuda:0] [--tier full] [--only adamw.fp32 ...]
        [--without-zero-grads]

Each probe runs in this process, in catalogue order, through its implementation function;
the outcome follows the judge's sweep rule (any failed case: FAIL with the first failure,
else any device error: ERROR, else PASS). ``--tier standard`` runs the standard probes with
their standard subset (as ``gpuprobe check --tier standard`` does). ``worst`` is the probe's
``worst_ratio`` metric: the largest error of a comparison with float64 in units of the
allowed error (how close a correct implementation came to the bound). The observation is
checked to be valid JSON (no NaN/Inf), as the worker's event stream requires.
``--without-zero-grads`` leaves out the full tier's zero-gradient list and its extreme
configurations (``optim_run.zero_grad_list``): what they add to each probe's time is the
difference of the two runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from probe_runner import print_details, run_probe, verdict  # noqa: E402

from gpuprobe.worker.probes.optim import specs as optim_specs  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tier", default="full", choices=("standard", "full"))
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--only", nargs="*", default=[], help="substrings of probe ids")
    parser.add_argument("--verbose", action="store_true", help="print metrics and notes")
    parser.add_argument(
        "--without-zero-grads",
        action="store_true",
        help="leave out the zero-gradient list and the extreme configurations",
    )
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
        if args.without_zero_grads and spec.impl.endswith(":run_optimizer"):
            spec = dataclasses.replace(spec, params=dict(spec.params, zero_grads=False))
        kind, output, seconds = run_probe(spec, args.device, args.seed, args.tier)
        if kind != "ran":
            print(f"{spec.id:24s} {spec.tier:8s} {kind.upper()} {output}", flush=True)
            status = status or (1 if kind == "error" else 0)
            continue
        total += seconds
        m = output.measurement
        outcome = verdict(m)
        status = status or (0 if outcome == "PASS" else 1)
        print(
            f"{spec.id:24s} {spec.tier:8s} {seconds:6.2f}s cases {m['cases']:4d} passed {m['passed']:4d} "
            f"refused {m['refused']:3d} unjudged {m['unjudged'] or '-'} worst {output.metrics.get('worst_ratio', '-')} {outcome}",
            flush=True,
        )
        print_details(output, outcome, args.verbose)
    print(f"total {total:.2f}s", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
