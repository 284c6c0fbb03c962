"""`check --device all` on identical GPUs: the full tier's catalog listing names torch's
GPUs, every GPU is planned up front and each sweep and width probe runs on one of them.

CI has no GPU. The end-to-end test fakes two identical GPUs where the supervisor learns of
them, the catalog listing: the interpreter it is given is a wrapper that, for a
``catalog`` plan only, puts a ``sitecustomize`` on the path that makes torch report two
GPUs. The probe workers run the real CPU-only torch, see no GPU and report every probe
run NOT-TESTED, which is enough to read the plan and the report's note.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from conftest import gpuprobe_binary, run_worker
from gpuprobe.worker import catalog

FAKE_GPUS = """\
import types

import torch

_PROPS = types.SimpleNamespace(name="Fake GPU", major=9, minor=0, total_memory=8 << 30, multi_processor_count=4)
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 2
torch.cuda.get_device_properties = lambda index: _PROPS
"""

WRAPPER = """\
#!/bin/sh
# The real interpreter; for a catalog listing, with two fake identical GPUs.
plan=""; prev=""
for a in "$@"; do [ "$prev" = "--plan" ] && plan="$a"; prev="$a"; done
if [ -n "$plan" ] && grep -q '"mode":"catalog"' "$plan"; then
  PYTHONPATH={fake}${{PYTHONPATH:+:$PYTHONPATH}}; export PYTHONPATH
fi
exec {python} "$@"
"""


def fake_torch(count: int, props: Any = None, available: bool = True) -> Any:
    """A stand-in for torch's device queries (``envinfo.gpu_devices`` reads no more)."""
    props = props or types.SimpleNamespace(name="Fake GPU", major=9, minor=0, total_memory=1 << 33)

    def properties(index: int) -> Any:
        if isinstance(props, Exception):
            raise props
        return props

    cuda = types.SimpleNamespace(
        is_available=lambda: available, device_count=lambda: count, get_device_properties=properties
    )
    return types.SimpleNamespace(cuda=cuda, version=types.SimpleNamespace(hip=None))


def test_the_listing_names_the_gpus_torch_sees() -> None:
    devices = catalog.framework_devices(fake_torch(2))
    assert devices == [
        {"index": i, "name": "Fake GPU", "arch": "sm_90", "total_memory": 1 << 33} for i in range(2)
    ]
    assert catalog.framework_devices(fake_torch(4, available=False)) == []
    # One unreadable device keeps its index and is grouped with none (no memory, no arch).
    unreadable = catalog.framework_devices(fake_torch(1, props=RuntimeError("bad")))
    assert unreadable == [{"index": 0, "name": "(unreadable: bad)"}]
    # torch that cannot even say: unknown, never an exception.
    broken = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: 1 / 0))
    assert catalog.framework_devices(broken) is None


def test_the_cheap_listing_names_no_gpus() -> None:
    # Without a family to expand the framework is not imported, and no device list is sent.
    run = run_worker({"protocol": 1, "mode": "catalog"}, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "devices" not in run.of("catalog")[0]


@pytest.fixture(scope="module")
def binary() -> str:
    path = gpuprobe_binary()
    if path is None:
        pytest.skip("no gpuprobe binary (set GPUPROBE_BIN, or build one with cargo)")
    return path


def test_two_identical_gpus_share_the_stack_probes(binary: str, tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "sitecustomize.py").write_text(FAKE_GPUS)
    wrapper = tmp_path / "python"
    wrapper.write_text(WRAPPER.format(fake=fake, python=sys.executable))
    wrapper.chmod(0o755)
    run_dir = tmp_path / "run"
    only = ["sweep.add.fp32", "sweep.add.bf16", "copy.h2d.pageable.tiny.blocking"]
    done = subprocess.run(
        [binary, "check", "--tier", "full", "--device", "all", "--no-native", "--python", str(wrapper)]
        + [arg for probe in only for arg in ("--only", probe)]
        + ["--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    # The workers' torch sees no GPU: nothing could be tested (exit 4), as without a spread.
    assert done.returncode == 4, done.stdout + done.stderr
    plan = json.loads((run_dir / "plan.json").read_text())
    assert plan["spread"] == {"gpus": [0, 1], "groups": [{"gpus": [0, 1], "name": "Fake GPU"}]}
    planned = sorted((t["spec"]["id"], t["device"]) for t in plan["tasks"])
    on = {probe: [device for p, device in planned if p == probe] for probe in only}
    assert on["copy.h2d.pageable.tiny.blocking"] == ["cuda:0", "cuda:1"], planned
    assert len(on["sweep.add.fp32"]) == 1 and len(on["sweep.add.bf16"]) == 1, planned
    assert on["sweep.add.fp32"] != on["sweep.add.bf16"], "balanced: one each"
    report = json.loads((run_dir / "report.json").read_text())
    assert sorted((r["probe"], r["device"]) for r in report["results"]) == planned
    assert any(
        note.startswith("spread: 2 sweep and width probe runs over GPUs 0,1 (identical Fake GPU)")
        for note in report["notes"]
    ), report["notes"]
