#!/usr/bin/env python3
"""Every sweep probe of the given dtypes, with the CPU as the device under test, in one
worker: what a CPU against itself shows of the sweep's rules (a difference here is a rule
or the harness, never a device). Prints each probe that fails, errors or whose notes name
the harness, a refused or an accepted input, then the counts.

usage: .venv/bin/python bench/sweep/cpu_sweep.py DTYPES [START STEP]
       e.g. bench/sweep/cpu_sweep.py i32,c64,bool      (DTYPES: short names, sweep_db.DTYPES)
"""

from __future__ import annotations

import collections
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(ROOT / "python"))
warnings.simplefilter("ignore")

import torch  # noqa: E402
from conftest import run_plan  # noqa: E402

from gpuprobe.worker.probes.sweep import db as sweep_db  # noqa: E402


def main() -> int:
    database = sweep_db.load(torch)
    dtypes = sys.argv[1].split(",")
    probes = [
        f"sweep.{key}.{short}"
        for key, info in database.ops.items()
        for short in dtypes
        if sweep_db.supports(info, torch, sweep_db.DTYPES[short], "cpu")
    ]
    if len(sys.argv) > 3:
        probes = probes[int(sys.argv[2]) :: int(sys.argv[3])]
    print(len(probes), "probes", flush=True)
    run = run_plan(probes, seed=4242, timeout=3000)
    print("worker exit", run.returncode, run.stderr[-1500:] if run.returncode else "")
    counts: collections.Counter[str] = collections.Counter()
    for probe, result in run.results().items():
        counts[result["outcome"]] += 1
        if result["outcome"] != "observed":
            if result["outcome"] == "error":
                print(probe, "error", str(result.get("message"))[:300])
            continue
        measurement = result["observation"]["measurement"]
        counts["cases"] += measurement["cases"]
        notes = [n for n in result["observation"]["notes"] if "harness" in n or "refused" in n or "accepted" in n]
        if measurement["failed"] or measurement["device_errors"] or notes:
            counts["not passing"] += 1
            print(probe, "failed", measurement["failed"], "errors", measurement["device_errors"])
            for failure in measurement["failures"][:3]:
                print("   ", failure["class"], failure["variant"], failure["direction"], failure["detail"][:150])
            for note in notes:
                print("    note:", note[:300])
    print(dict(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
