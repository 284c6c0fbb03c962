#!/usr/bin/env python3
"""Summarises compile-family JSON lines (``bench/compile/measure.py --out``): per program its
wall time, cases, passed, failures (pass, entry, output, detail) and unjudged counts; and the
seconds per pass summed over programs.

usage: python3 bench/axes/compile_summary.py FILE.jsonl [FILE.jsonl ...]
"""

from __future__ import annotations

import json
import sys
from collections import Counter


def main(paths: list[str]) -> int:
    per_pass: Counter[str] = Counter()
    for path in paths:
        try:
            lines = open(path, encoding="utf-8").read().splitlines()
        except OSError as exc:
            print(f"{path}: {exc}")
            continue
        print(f"== {path}")
        for line in lines:
            record = json.loads(line)
            probe = record.get("probe")
            if "skip" in record or "error" in record:
                print(f"{probe}: {record.get('skip') or record.get('error')}")
                continue
            m, metrics = record["measurement"], record["metrics"]
            for key, value in metrics.items():
                if key.startswith("seconds_"):
                    per_pass[key[8:]] += float(value)
            print(
                f"{probe} {m['dtype']}: {record['wall_s']} s, {m['cases']} cases, {m['passed']} passed, "
                f"failed {m['failed']}, unjudged {m['unjudged']}"
            )
            for failure in m["failures"]:
                print(f"   FAIL {failure['variant']} {failure['direction']} {failure['output']}: {failure['detail'][:160]}")
            for note in record.get("notes", []):
                if "compile error" in note:
                    print(f"   NOTE {note[:300]}")
    print("seconds per pass:", ", ".join(f"{k} {v:.0f}" for k, v in per_pass.most_common()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
