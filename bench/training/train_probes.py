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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from probe_runner import print_details, run_probe, verdict  # noqa: E402

from gpuprobe.worker.probes.train import specs as train_specs  # noqa: E402


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
                kind, output, seconds = run_probe(spec, args.device, seed, "full")
                if kind != "ran":
                    print(f"[{round_index}] {spec.id:32s} {spec.tier:8s} {kind.upper()} {output}", flush=True)
                    status = status or (1 if kind == "error" else 0)
                    continue
                total += seconds
                m = output.measurement
                outcome = verdict(m, with_step=True)
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
                print_details(output, outcome, args.verbose)
        print(f"[{round_index}] total {total:.2f}s", flush=True)
    if len(seeds) > 1 or args.repeat > 1:
        print("largest share of a bound used, per probe and quantity:")
        for key, value in sorted(worst.items(), key=lambda item: -item[1]):
            print(f"  {value:6.3f}  {key}")
    return status


if __name__ == "__main__":
    sys.exit(main())
