#!/usr/bin/env python3
"""When each lane of a `gpuprobe check` run works: a landing timeline per lane.

Runs `GPUPROBE check --json --run-dir RUN_DIR ARGS...`, watches `RUN_DIR/results.jsonl`
every 50 ms and notes when each result lands, then groups the results by the lane that ran
them (from the run's `workers/plan-<backend>-<device>-<lane>-<worker>.json` files) and
prints, per lane: its probes, when its first probe began (landing time minus the probe's
own seconds), when its last result landed, and its summed probe seconds. Times are seconds
from the start of the command. The lanes run side by side, so the last landing of the
slowest lane, not the sum, is what the wall time follows.

Each landing is also written to RUN_DIR/landings.jsonl as it is seen. Interrupted (SIGINT,
e.g. by `timeout -s INT`), it interrupts the check, prints the timeline of what landed and,
per lane, the probes that had not landed: where a run that ran out of time was.

usage: bench/lane-timeline.py GPUPROBE RUN_DIR [CHECK ARGS...]
       e.g. bench/lane-timeline.py target/release/gpuprobe /tmp/lanes --tier standard
"""

from __future__ import annotations

import collections
import glob
import json
import os
import signal
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    binary, run_dir, extra = argv[1], argv[2], argv[3:]
    started = time.time()
    with open(os.devnull, "w") as sink:
        check = subprocess.Popen([binary, "check", "--json", "--run-dir", run_dir, *extra], stdout=sink)
        landed: list[tuple[float, str, str, float]] = []
        seen = 0
        results = os.path.join(run_dir, "results.jsonl")
        interrupted = False
        log = None
        while True:
            try:
                finished = check.poll() is not None
                try:
                    with open(results, encoding="utf-8") as handle:
                        lines = handle.read().splitlines()
                except OSError:
                    lines = []
                if log is None and os.path.isdir(run_dir):
                    log = open(os.path.join(run_dir, "landings.jsonl"), "a", encoding="utf-8")
                for line in lines[seen:]:
                    try:
                        result = json.loads(line)
                    except ValueError:
                        break  # a line still being written; read it next time
                    at = time.time() - started
                    landed.append((at, result["probe"], result["device"], result.get("elapsed_s") or 0.0))
                    if log is not None:
                        log.write(json.dumps({"at": round(at, 2), "probe": result["probe"], "elapsed_s": result.get("elapsed_s")}) + "\n")
                        log.flush()
                    seen += 1
                if finished:
                    break
                time.sleep(0.05)
            except KeyboardInterrupt:
                interrupted = True
                check.send_signal(signal.SIGINT)
                try:
                    check.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    check.kill()
                    check.wait()
                break
    wall = time.time() - started

    lane_of: dict[tuple[str, str], str] = {}
    planned: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(run_dir, "workers", "plan-*.json"))):
        backend, device, lane = os.path.basename(path)[len("plan-") : -len(".json")].split("-")[:3]
        with open(path, encoding="utf-8") as handle:
            plan = json.load(handle)
        for probe in plan.get("probes", []):
            key = (probe, plan.get("device", device))
            if key not in lane_of:
                lane_of[key] = f"{backend}-{device}-{lane}"
                planned[lane_of[key]].append(probe)

    lanes: dict[str, dict[str, float]] = collections.defaultdict(lambda: {"n": 0, "first": 1e18, "last": 0.0, "sum": 0.0})
    for at, probe, device, seconds in landed:
        lane = lanes[lane_of.get((probe, device), "unknown")]
        lane["n"] += 1
        lane["first"] = min(lane["first"], at - seconds)
        lane["last"] = max(lane["last"], at)
        lane["sum"] += seconds
    print(f"exit {check.returncode}, wall {wall:.2f} s, {len(landed)} results")
    print(f"{'lane':24} {'probes':>6} {'first begins':>12} {'last lands':>10} {'probe s':>8}")
    for name, lane in sorted(lanes.items(), key=lambda item: item[1]["first"]):
        print(f"{name:24} {int(lane['n']):6} {lane['first']:12.1f} {lane['last']:10.1f} {lane['sum']:8.1f}")
    if interrupted:
        done = {probe for _, probe, _, _ in landed}
        print("interrupted; probes that had not landed, per lane (the first is the one running):")
        for name, probes in sorted(planned.items()):
            left = [p for p in probes if p not in done]
            if left:
                print(f"  {name}: {len(left)}: {', '.join(left[:6])}{' ...' if len(left) > 6 else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
