#!/usr/bin/env python3
"""Where a command's host CPU goes: runs it, samples /proc every INTERVAL seconds for the
command and every process below it, and prints the CPU seconds per kind of process (the
lanes' workers, their children: references, allocator children, compile pools, data-loader
workers), the busy cores over time, and how many processes imported torch.

A tier whose wall time is bound by host throughput gets faster only by doing less host work;
this says which work. Linux only (reads /proc).

usage: bench/cpu-profile.py [--interval S] [--json FILE] -- COMMAND [ARGS...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict

TICKS = os.sysconf("SC_CLK_TCK")


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = defaultdict(list)
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children[int(fields[1])].append(int(name))
    return children


def _descendants(root: int) -> list[int]:
    children = _children_map()
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _cpu_ticks(pid: int) -> tuple[int, int, int] | None:
    """The process's own CPU ticks, those of its children it has waited for, its parent."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]), int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def _kind(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return "gone"
    argv = [" ".join(a.split()) for a in argv]
    text = " ".join(argv)
    if not argv:
        return "other"
    if "sweep_ref" in text:
        return "sweep reference"
    if "gpuprobe.worker.main" in text:
        return "python lane worker"
    if "importlib.import_module(sys.argv[2])" in text and len(argv) > 4:
        return "probe child: " + argv[4][:50]
    if "compile_worker" in text or "subproc_pool" in text or "_worker_compile" in text:
        return "inductor compile pool"
    if "multiprocessing" in text or "spawn_main" in text or "forkserver" in text:
        return "multiprocessing child"
    if "native-worker" in text or "native_worker" in text:
        return "native lane worker"
    base = os.path.basename(argv[0])
    if base.startswith("python"):
        return "python child: " + " ".join(argv[1:3])[:60]
    return base[:40]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--json")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    start = time.monotonic()
    proc = subprocess.Popen(command)
    last: dict[int, int] = {}
    last_waited: dict[int, int] = {}
    parent_of: dict[int, int] = {}
    gone: set[int] = set()
    kinds: dict[int, str] = {}
    per_kind: dict[str, float] = defaultdict(float)
    pids_per_kind: dict[str, set[int]] = defaultdict(set)
    timeline: list[tuple[float, float]] = []
    prev_t = start
    while True:
        done = proc.poll() is not None
        now = time.monotonic()
        busy = 0.0
        samples = {}
        for pid in _descendants(proc.pid):
            sample = _cpu_ticks(pid)
            if sample is not None:
                samples[pid] = sample
        vanished = [pid for pid in last if pid not in samples and pid not in gone]
        for pid, (ticks, waited, parent) in samples.items():
            parent_of[pid] = parent
            # Read each time: a process forked by a shell or a pool execs into another.
            kinds[pid] = _kind(pid)
            delta = ticks - last.get(pid, 0)
            last[pid] = ticks
            per_kind[kinds[pid]] += delta / TICKS
            pids_per_kind[kinds[pid]].add(pid)
            busy += delta / TICKS
            # Children that lived and were reaped between two samples (or ran on after
            # their last one) show only in the parent's waited-for ticks.
            waited_delta = waited - last_waited.get(pid, 0)
            last_waited[pid] = waited
            seen = sum(last[c] for c in vanished if parent_of.get(c) == pid)
            unseen = max(0, waited_delta - seen)
            if unseen:
                per_kind["exited between samples, under " + kinds[pid]] += unseen / TICKS
                busy += unseen / TICKS
        gone.update(vanished)
        if now > prev_t:
            timeline.append((round(now - start, 2), round(busy / (now - prev_t), 2)))
        prev_t = now
        if done:
            break
        time.sleep(args.interval)
    wall = time.monotonic() - start
    total = sum(per_kind.values())
    print(f"wall {wall:.2f} s, CPU {total:.1f} s (children that exited between samples are "
          f"counted only up to their last sample), {len(kinds)} processes", file=sys.stderr)
    for kind, secs in sorted(per_kind.items(), key=lambda kv: -kv[1]):
        print(f"{secs:8.1f} s  {len(pids_per_kind[kind]):4d} proc  {kind}", file=sys.stderr)
    # busy cores per second of wall time
    buckets: dict[int, list[float]] = defaultdict(list)
    for t, cores in timeline:
        buckets[int(t)].append(cores)
    line = " ".join(f"{s}:{sum(v) / len(v):.1f}" for s, v in sorted(buckets.items()))
    print(f"busy cores per second: {line}", file=sys.stderr)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"wall_s": wall, "cpu_s": per_kind,
                       "processes": {k: len(v) for k, v in pids_per_kind.items()},
                       "timeline": timeline}, f)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
