#!/usr/bin/env python3
"""Summarizes `gpuprobe check --json` reports of full-tier runs: the wall time, the verdicts,
the sweep's seconds per dtype and per lane, and every result that is not PASS or SKIP with
the sweep's first failure or device error (the false-alarm review of `bench/RESULTS.md`).

usage: python3 bench/sweep/report_summary.py REPORT.json [REPORT.json ...]
"""

from __future__ import annotations

import collections
import json
import sys
from typing import Any


def _dtype(probe: str) -> str:
    return probe.rsplit(".", 1)[-1]


def _sweep_detail(result: dict[str, Any]) -> str:
    observation = result.get("observation") or {}
    measurement = observation.get("measurement") or {}
    if not isinstance(measurement, dict) or measurement.get("kind") != "sweep":
        return ""
    sweep = measurement
    parts = []
    for failure in (sweep.get("failures") or [])[:2]:
        parts.append(
            f"{failure.get('class')} {failure.get('variant')} {failure.get('direction')} sample {failure.get('sample')} "
            f"{failure.get('output')}: {failure.get('detail')} (expected {failure.get('expected')} got {failure.get('found')})"
        )
    for error in (sweep.get("errors") or [])[:2]:
        parts.append(f"error {error.get('variant')} {error.get('direction')} sample {error.get('sample')}: {error.get('message')}")
    return " | ".join(parts)


def summarize(path: str) -> list[str]:
    report = json.load(open(path))
    results = report.get("results", [])
    lines = [f"== {path}: tier {report.get('tier')}, exit {report.get('exit_code')}, wall {report.get('wall_s', 0):.1f} s, {len(results)} results"]
    verdicts = collections.Counter(r["verdict"]["verdict"] for r in results)
    lines.append("verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())))
    sweep = [r for r in results if r["probe"].startswith("sweep.")]
    by_dtype: dict[str, float] = collections.defaultdict(float)
    for r in sweep:
        by_dtype[_dtype(r["probe"])] += r.get("elapsed_s") or 0.0
    sweep_verdicts = collections.Counter(r["verdict"]["verdict"] for r in sweep)
    lines.append(
        f"sweep: {len(sweep)} probes ("
        + ", ".join(f"{k} {v}" for k, v in sorted(sweep_verdicts.items()))
        + "); probe seconds per dtype: "
        + ", ".join(f"{k} {v:.1f}" for k, v in sorted(by_dtype.items()))
    )
    families: dict[str, float] = collections.defaultdict(float)
    for r in results:
        families[r["probe"].split(".")[0]] += r.get("elapsed_s") or 0.0
    lines.append("probe seconds per family: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(families.items(), key=lambda kv: -kv[1])))
    for r in results:
        verdict = r["verdict"]
        if verdict["verdict"] in ("pass", "skip"):
            continue
        text = verdict.get("detail") or verdict.get("reason") or verdict.get("message") or ""
        extra = _sweep_detail(r)
        tail = " / ".join((r.get("stderr_tail") or [])[-2:]) if verdict["verdict"] in ("crash", "hang", "error") else ""
        lines.append(f"  {verdict['verdict'].upper():6} {r['probe']}: {text} {('| ' + extra) if extra else ''} {('| ' + tail) if tail else ''}"[:900])
    return lines


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    for path in argv:
        try:
            print("\n".join(summarize(path)))
        except (OSError, ValueError, KeyError) as exc:
            print(f"== {path}: unreadable report ({exc})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
