#!/usr/bin/env python3
"""What each family's ``TYPICAL_SECONDS`` should say, from GPU runs' reports.

The lane planner balances its pieces by the seconds each probe's catalog publishes
(``typical_s``: a family's ``TYPICAL_SECONDS`` by longest id prefix, in its ``specs.py``;
the native catalog's in ``crates/gpuprobe-gpu/src/probes.rs``). This prints, per table
entry, the value it holds and the mean that the given runs measured for the probes it
covers, and the probes far heavier than their entry (candidates for a whole-id entry).

A probe's seconds are taken from every run where it was not the first probe of its worker:
a worker's first probe also pays the device context and the first kernel loads (about
0.7 s on the H200 host), which every piece pays alike and the planner does not balance by.

usage: bench/typical-seconds.py RUN_DIR [RUN_DIR...]
  RUN_DIR: a `gpuprobe check --run-dir` directory from the GPU host (report.json and
  workers/plan-*.json). Run from the repository root (the catalog is read from python/).
"""

from __future__ import annotations

import collections
import glob
import importlib
import json
import os
import statistics
import sys


def measured(run_dirs: list[str]) -> dict[str, list[float]]:
    seconds: dict[str, list[float]] = collections.defaultdict(list)
    for run_dir in run_dirs:
        firsts = set()
        for plan in glob.glob(os.path.join(run_dir, "workers", "plan-*.json")):
            with open(plan) as f:
                probes = json.load(f).get("probes") or []
            if probes:
                firsts.add(probes[0])
        with open(os.path.join(run_dir, "report.json")) as f:
            results = json.load(f)["results"]
        for result in results:
            elapsed = result.get("elapsed_s")
            if elapsed is not None and result["probe"] not in firsts:
                seconds[result["probe"]].append(elapsed)
    return seconds


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    sys.path.insert(0, "python")
    from gpuprobe.worker import catalog

    seconds = measured(argv[1:])
    means = {probe: statistics.mean(values) for probe, values in seconds.items()}
    tables: dict[str, dict[str, float]] = {}
    for specs in catalog.FAMILY_SPECS:
        module = specs.partition(":")[0]
        table = getattr(importlib.import_module(module), "TYPICAL_SECONDS", {})
        if table:
            tables[module] = table
    for module, table in tables.items():
        covered: dict[str, list[str]] = collections.defaultdict(list)
        for probe in means:
            prefix = catalog.typical_prefix(table, probe)
            if prefix is not None:
                covered[prefix].append(probe)
        print(module)
        for prefix in sorted(table):
            probes = covered.get(prefix, [])
            if not probes:
                print(f"  {prefix:<45} {table[prefix]:7.3f}  (not measured)")
                continue
            mean = statistics.mean(means[p] for p in probes)
            print(f"  {prefix:<45} {table[prefix]:7.3f} -> {mean:7.3f}  ({len(probes)} probes)")
            for probe in sorted(probes):
                if probe != prefix and means[probe] > max(0.5, 3 * mean):
                    print(f"    heavy: {probe:<41} {means[probe]:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
