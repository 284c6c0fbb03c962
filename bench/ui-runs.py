#!/usr/bin/env python3
"""The runs page of ``gpuprobe ui`` over many runs: wall time of each page asked for and the
server's peak RSS.

Makes N synthetic run directories (default 3,000) from one real finished check (its
``plan.json``, ``results.jsonl`` and ``report.json`` hard-linked into each, so the disk holds
one copy; every 50th run's report is corrupt, every 7th has no report and a free writer
lock, as a killed check leaves it), starts ``gpuprobe ui --port 0`` on them, and times:
the first page, a middle page, the last page, and a filtered page (which must read every
run's plan and report). Peak RSS is the server's ``VmHWM`` after the requests.

    bench/ui-runs.py --binary target/debug/gpuprobe --from RUN_DIR [--runs 3000]

RUN_DIR is a finished check (``gpuprobe check --device cpu --run-dir RUN_DIR``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path


def make_runs(source: Path, root: Path, count: int) -> None:
    """`count` run directories under `root`, one a minute, newest last."""
    start = time.mktime((2026, 1, 1, 0, 0, 0, 0, 0, 0))
    corrupt = root / "corrupt-report.json"
    corrupt.write_text('{"schema_version": 1, "results": [')
    for i in range(count):
        stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime(start + 60 * i))
        run = root / f"check-{stamp}-1"
        (run / "workers").mkdir(parents=True)
        os.link(source / "plan.json", run / "plan.json")
        os.link(source / "results.jsonl", run / "results.jsonl")
        if i % 7 == 3:
            (run / "writer.lock").touch()
        elif i % 50 == 0:
            os.link(corrupt, run / "report.json")
        else:
            os.link(source / "report.json", run / "report.json")
    corrupt.unlink()


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--from", dest="source", required=True, type=Path)
    parser.add_argument("--runs", type=int, default=3000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuprobe-ui-bench-") as tmp:
        root = Path(tmp) / "runs"
        root.mkdir()
        began = time.monotonic()
        make_runs(args.source, root, args.runs)
        print(f"{args.runs} runs made in {time.monotonic() - began:.1f} s")
        proc = subprocess.Popen(
            [args.binary, "ui", "--port", "0", "--runs-dir", str(root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip()
            base = url.split("?")[0].rstrip("/")
            token = url.split("?token=")[1]
            port = base.rsplit(":", 1)[1]
            cookie = f"gpuprobe_ui_{port}={token}"
            pages = args.runs // 100 + (1 if args.runs % 100 else 0)
            asks = [
                ("page 1", "/"),
                (f"page {pages // 2}", f"/?page={pages // 2}"),
                (f"page {pages} (the last)", f"/?page={pages}"),
                ("filtered: verdict=fail", "/?verdict=fail"),
                ("filtered: stack=torch, page 2", "/?stack=torch&page=2"),
            ]
            print("| page | wall | rows | bytes |\n|---|---|---|---|")
            for label, path in asks:
                request = urllib.request.Request(base + path, headers={"Cookie": cookie})
                began = time.monotonic()
                with urllib.request.urlopen(request, timeout=600) as answer:
                    body = answer.read().decode()
                wall = time.monotonic() - began
                rows = body.count('<tr class="run"')
                print(f"| {label} | {wall:.2f} s | {rows} | {len(body):,} |")
            print(f"server peak RSS: {peak_rss_mb(proc.pid):.1f} MB")
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
