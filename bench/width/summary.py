#!/usr/bin/env python3
"""Summarizes the width probes of `gpuprobe check --json` reports: per probe its verdict,
seconds, cases run / not run / refused, the slowest cases, the notes and the first
violations or the error (the false-alarm review and the timing table of bench/RESULTS.md).

usage: python3 bench/width/summary.py REPORT.json [REPORT.json ...]
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _line(result: dict[str, Any]) -> str:
    probe = result.get("probe", "?")
    raw = result.get("verdict") or {}
    verdict = raw.get("verdict", "?") if isinstance(raw, dict) else str(raw)
    detail = {k: v for k, v in raw.items() if k != "verdict"} if isinstance(raw, dict) else {}
    elapsed = result.get("elapsed_s")
    observation = result.get("observation") or {}
    metrics = observation.get("metrics") or {}
    measurement = observation.get("measurement") or {}
    parts = [f"{probe:32s} {str(verdict):10s} {elapsed if elapsed is not None else '-':>8}"]
    if metrics:
        parts.append(
            f"run {metrics.get('cases_run')} not-run {metrics.get('cases_not_run')} refused {metrics.get('cases_refused')} "
            f"free {metrics.get('free_device_gib')} GiB"
        )
        cases = sorted(metrics.get("cases") or [], key=lambda c: -float(c.get("seconds") or 0))
        parts.append("slowest " + ", ".join(f"{c['case']} {c['seconds']}s" for c in cases[:3]))
    if measurement.get("violations"):
        parts.append(f"VIOLATIONS {measurement['violations']}/{measurement.get('checked')}: {measurement.get('example', '')[:400]}")
    for note in (observation.get("notes") or [])[:6]:
        parts.append(f"note: {note[:240]}")
    if detail:
        parts.append(f"verdict detail: {json.dumps(detail)[:500]}")
    return "\n    ".join(parts)


def main(argv: list[str]) -> int:
    for path in argv[1:]:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
        results = [r for r in report.get("results", []) if str(r.get("probe", "")).startswith("width.")]
        print(f"# {path}: {len(results)} width results")
        for result in results:
            print(_line(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
