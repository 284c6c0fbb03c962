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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from probe_runner import print_details, run_probe, verdict  # noqa: E402

from gpuprobe.worker.probes.graph import specs as graph_specs  # noqa: E402


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
            kind, output, seconds = run_probe(spec, args.device, args.seed, "full")
            if kind != "ran":
                print(f"[{round_index}] {spec.id:32s} {spec.tier:8s} {kind.upper()} {output}", flush=True)
                status = status or (1 if kind == "error" else 0)
                continue
            total += seconds
            m = output.measurement
            outcome = verdict(m)
            status = status or (0 if outcome == "PASS" else 1)
            print(
                f"[{round_index}] {spec.id:32s} {spec.tier:8s} {seconds:7.2f}s cases {m['cases']:4d} passed {m['passed']:4d} "
                f"unjudged {m['unjudged'] or '-'} {outcome}",
                flush=True,
            )
            print_details(output, outcome, args.verbose)
        print(f"[{round_index}] total {total:.2f}s", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
