"""Runs the sweep family's probe code over every database entry outside the engine, in
parallel shards, and writes one JSON line per (op, dtype): the calibration tool for the
sweep's oracles (which ops differ on a healthy stack, and why).

    python3 bench/sweep/calibrate.py --device cuda:0 --shards 4 --out sweep.jsonl [--ops a,b] [--dtypes fp32,bf16]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))


def shard_main(args: argparse.Namespace) -> int:
    import torch

    from gpuprobe.worker.context import ProbeContext, SkipProbe
    from gpuprobe.worker.probes.sweep import db as sweep_db
    from gpuprobe.worker.probes.sweep import run as sweep_run

    database = sweep_db.load(torch)
    keys = args.ops.split(",") if args.ops else list(database.ops)
    dtypes = args.dtypes.split(",")
    done = set()
    if os.path.exists(args.out):
        with open(args.out, encoding="utf-8") as previous:
            for line in previous:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                done.add((row["key"], row["dtype"]))
    in_flight = args.out + ".inflight"
    if os.path.exists(in_flight):
        # The last shard process died inside this probe: record it as a crash and move on.
        with open(in_flight, encoding="utf-8") as handle:
            key, dtype = handle.read().split("\t")
        with open(args.out, "a", encoding="utf-8") as out:
            out.write(json.dumps({"key": key, "dtype": dtype, "outcome": "crash", "seconds": 0}) + "\n")
        done.add((key, dtype))
        os.remove(in_flight)
    with open(args.out, "a", encoding="utf-8") as out:
        for key in keys:
            if zlib.crc32(key.encode()) % args.shards != args.shard:
                continue
            for dtype in dtypes:
                if (key, dtype) in done:
                    continue
                with open(in_flight, "w", encoding="utf-8") as handle:
                    handle.write(f"{key}\t{dtype}")
                ctx = ProbeContext(torch, args.device, 20261124, f"sweep.{key}.{dtype}", {})
                started = time.monotonic()
                record = {"key": key, "dtype": dtype}
                try:
                    result = sweep_run.run_op(ctx, key, dtype)
                    record.update(outcome="observed", m=result.measurement, notes=result.notes, metrics=result.metrics)
                except SkipProbe as exc:
                    record.update(outcome="skip", reason=str(exc))
                except Exception as exc:  # noqa: BLE001
                    record.update(outcome="error", error=f"{type(exc).__name__}: {exc}"[:500])
                record["seconds"] = round(time.monotonic() - started, 3)
                if ctx.restart_worker:
                    record["restart"] = ctx.restart_worker
                out.write(json.dumps(record) + "\n")
                out.flush()
                os.remove(in_flight)
                if ctx.restart_worker or (record["outcome"] == "error" and "context is unusable" in record.get("error", "")):
                    return 3
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--shard", type=int, default=-1)
    parser.add_argument("--out", required=True)
    parser.add_argument("--ops", default="")
    parser.add_argument("--dtypes", default="fp32,bf16,fp16,fp64")
    parser.add_argument("--deadline-s", type=float, default=1e9, help="stop every shard after this long")
    args = parser.parse_args()
    if args.shard >= 0:
        return shard_main(args)
    started = time.monotonic()
    threads = max(1, (os.cpu_count() or 4) // args.shards)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    procs = []
    for shard in range(args.shards):
        cmd = [sys.executable, __file__, "--device", args.device, "--shards", str(args.shards), "--shard", str(shard),
               "--out", f"{args.out}.{shard}", "--ops", args.ops, "--dtypes", args.dtypes]
        log = open(f"{args.out}.{shard}.log", "w")
        procs.append([subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log, cmd, 0])
    # A shard whose device context died (exit 3) or that crashed is restarted where it stopped.
    while any(p[0].poll() is None or (p[0].returncode != 0 and p[3] < 40) for p in procs):
        if time.monotonic() - started > args.deadline_s:
            for entry in procs:
                if entry[0].poll() is None:
                    entry[0].kill()
                    entry[0].wait()
                entry[3] = 10**6
            print("deadline reached: shards stopped")
            break
        for entry in procs:
            proc, log, cmd, restarts = entry
            if proc.poll() is not None and proc.returncode != 0 and restarts < 40:
                entry[0] = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
                entry[3] = restarts + 1
        time.sleep(0.5)
    for entry in procs:
        entry[1].close()
    print("restarts per shard", [p[3] for p in procs])
    with open(args.out, "w", encoding="utf-8") as out:
        for shard in range(args.shards):
            try:
                with open(f"{args.out}.{shard}", encoding="utf-8") as part:
                    out.write(part.read())
            except OSError:
                pass
    print(f"wall {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
