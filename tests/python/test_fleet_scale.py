"""``gpuprobe fleet`` at scale: thousands of small synthetic reports (two stacks, a corrupt
file among them) merge, flag exactly the nodes whose digests differ, and the process's peak
memory does not grow with the volume of reports read (they are read one at a time and only
interned digests are kept)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import gpuprobe_binary

PROBES = [f"ops.synthetic.p{i}" for i in range(8)]
#: Passing results without a digest that make each report weigh about 25 kB, as a real
#: quick-tier report's results do.
PADDING = 40


def _report(host: str, torch: str, corrupt: bool) -> dict[str, Any]:
    results = []
    for probe in PROBES:
        value = "bad0bad0bad0bad0" if corrupt and probe.endswith("p3") else "600d600d600d600d"
        results.append(
            {
                "probe": probe,
                "device": "cpu",
                "layer": "framework",
                "verdict": {"verdict": "pass"},
                "observation": {
                    "probe": probe,
                    "device": "cpu",
                    "measurement": {"kind": "metrics"},
                    "output_digest": {"value": value, "seed": 1, "outputs": 1},
                },
            }
        )
    for i in range(PADDING):
        results.append(
            {
                "probe": f"copy.synthetic.p{i}",
                "device": "cpu",
                "layer": "framework",
                "verdict": {"verdict": "pass"},
                "observation": {
                    "probe": f"copy.synthetic.p{i}",
                    "device": "cpu",
                    "measurement": {"kind": "metrics"},
                    "notes": ["x" * 500],
                },
            }
        )
    total = len(results)
    return {
        "schema_version": 1,
        "tool_version": "0.1.0",
        "command": "check",
        "started_at": "2026-01-01T00:00:00Z",
        "wall_s": 1.0,
        "tier": "quick",
        "fingerprint": {"source": "live", "host": {"hostname": host}, "python": {"executable": "p", "torch": {"version": torch}}},
        "results": results,
        "findings": [],
        "summary": {"total": total, "passed": total, "failed": 0, "crashed": 0, "hung": 0, "errors": 0, "skipped": 0, "not_tested": 0},
        "exit_status": "all_passed",
        "exit_code": 0,
    }


def _write_nodes(root: Path, count: int) -> None:
    for i in range(count):
        node = root / f"rack{i % 10}" / f"node{i:05d}"
        node.mkdir(parents=True)
        report = _report(f"node{i:05d}", "2.11" if i % 2 else "2.12", corrupt=i in (0, 1))
        (node / "report.json").write_text(json.dumps(report))
    (root / "rack0" / "broken.json").write_text('{"schema_version": 1, "results": [')


def _fleet(binary: str, root: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """Runs ``gpuprobe fleet ROOT --json`` in a fresh process and returns its peak RSS (kB)."""
    measure = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stdout.write(done.stdout)\n"
        "sys.stderr.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
        "sys.exit(done.returncode)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", measure, binary, "fleet", str(root), "--json", str(root / "fleet.json")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done, int(done.stderr.strip().splitlines()[-1])


def test_thousands_of_reports_merge_in_bounded_memory(tmp_path: Path) -> None:
    binary = gpuprobe_binary()
    if binary is None:
        pytest.skip("no gpuprobe binary and no cargo to build one")
    small, large = tmp_path / "small", tmp_path / "large"
    _write_nodes(small, 200)
    _write_nodes(large, 3000)
    done_small, rss_small = _fleet(binary, small)
    done, rss_large = _fleet(binary, large)
    assert done.returncode == 1, done.stdout[-3000:]
    view = json.loads((large / "fleet.json").read_text())
    assert [f["node"] for f in view["flagged"]] == ["node00000", "node00001"]
    assert len(view["nodes"]) == 3000 and len(view["groups"]) == 2
    assert all(g["compared"] == len(PROBES) for g in view["groups"])
    assert len(view["unreadable"]) == 1
    # 2800 more reports of about 25 kB each (70 MB read) may cost only the kept state.
    read_mb = sum(p.stat().st_size for p in large.rglob("report.json")) / 2**20
    assert read_mb > 50
    assert rss_large - rss_small < 30 * 1024, (rss_small, rss_large, read_mb)
    assert done_small.returncode == 1
