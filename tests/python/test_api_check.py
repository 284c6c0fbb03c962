"""gpuprobe.check(): the real binary on the CPU (healthy, under a simulated fault, without
torch) and fake binaries for the error paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gpuprobe
from conftest import PACKAGE_DIR, gpuprobe_binary

# An interpreter without torch: the base one under this venv, when it lacks torch.
BASE_PYTHON = os.path.join(sys.base_prefix, "bin", "python3")


@pytest.fixture(scope="module")
def binary() -> str:
    path = gpuprobe_binary()
    if path is None:
        pytest.skip("no gpuprobe binary (set GPUPROBE_BIN, or build one with cargo)")
    return path


def test_import_does_not_import_torch() -> None:
    code = (
        "import sys; import gpuprobe, gpuprobe.guard, gpuprobe.report, gpuprobe.pytest_plugin; "
        "assert 'torch' not in sys.modules, 'torch imported'; print(gpuprobe.check, gpuprobe.guard.tensors)"
    )
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr


def test_healthy_cpu_check(binary: str, tmp_path: Path) -> None:
    result = gpuprobe.check(device="cpu", only="copy.h2d.pageable.4x4", gpuprobe_bin=binary, run_dir=tmp_path / "run")
    assert result.ok and result.exit_code == 0 and result.exit_status == "all_passed"
    assert not result.failures and not result.simulated
    assert result.results and all(r.device == "cpu" for r in result.results)
    assert {r.probe for r in result.results} >= {"copy.h2d.pageable.4x4.blocking"}
    assert all(r.verdict in ("pass", "skip") for r in result.results)
    assert result.summary.passed >= 1 and result.summary.failed == 0
    assert result.raw["command"] == "check" and result.tier == "quick"
    assert "all passed" in result.describe()


def test_simulated_fault_is_a_failing_result(binary: str, tmp_path: Path) -> None:
    result = gpuprobe.check(
        device="cpu", only=["copy.h2d"], simulate="h2d-zeros", gpuprobe_bin=binary, run_dir=tmp_path / "run"
    )
    assert not result.ok and result.exit_code == 1 and result.exit_status == "problems_found"
    assert result.simulated
    failing = {f.probe: f for f in result.failures}
    tiny = failing["copy.h2d.pageable.tiny.blocking"]
    assert tiny.verdict == "fail" and tiny.fail_class == "all_zeros" and tiny.device == "cpu"
    assert "trials came back entirely zero" in tiny.detail and tiny.simulated
    assert all(f.problem for f in result.failures) and len(result.failures) == result.summary.failed
    diagnosis = [f for f in result.findings if f.id == "DIAG-COPY"]
    assert diagnosis and diagnosis[0].severity == "error" and "copy.h2d.pageable.tiny.blocking" in diagnosis[0].probes
    assert all(f.known_issue == (f.source == "kb") for f in result.findings)
    text = result.describe()
    assert text.startswith("SIMULATED") and "copy.h2d.pageable.tiny" in text and "all_zeros" in text


def test_interpreter_without_torch_is_nothing_tested(binary: str, tmp_path: Path) -> None:
    probe = subprocess.run([BASE_PYTHON, "-c", "import torch"], capture_output=True)
    if probe.returncode == 0 or not os.path.exists(BASE_PYTHON):
        pytest.skip(f"{BASE_PYTHON} has torch or is missing: no interpreter without torch here")
    with pytest.raises(gpuprobe.NothingTestedError) as caught:
        gpuprobe.check(device="cpu", only="copy.h2d.pageable.4x4", python=BASE_PYTHON, gpuprobe_bin=binary, run_dir=tmp_path / "r")
    err = caught.value
    assert err.exit_code == 4 and err.result.exit_status == "nothing_tested"
    assert "import torch failed" in str(err)
    assert all(r.verdict == "not_tested" for r in err.result.results)


def test_bad_argument_is_a_usage_error(binary: str) -> None:
    with pytest.raises(gpuprobe.CheckUsageError) as caught:
        gpuprobe.check(tier="bogus", gpuprobe_bin=binary)
    assert caught.value.exit_code == 2 and "bogus" in str(caught.value)


def test_missing_binary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GPUPROBE_BIN", raising=False)
    monkeypatch.setattr(gpuprobe, "_candidate_dirs", lambda: [str(tmp_path)])
    with pytest.raises(gpuprobe.GpuprobeNotFoundError) as caught:
        gpuprobe.check()
    assert isinstance(caught.value, gpuprobe.GpuprobeError) and str(tmp_path) in str(caught.value)


def fake_binary(tmp_path: Path, body: str) -> str:
    """A stand-in for the binary: a Python script that records its argv and runs ``body``."""
    path = tmp_path / "gpuprobe"
    path.write_text(
        f"#!{sys.executable}\nimport json, sys, time\n"
        f"open({str(tmp_path / 'argv.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
        + textwrap.dedent(body)
    )
    path.chmod(0o755)
    return str(path)


def minimal_report(exit_code: int, status: str, results: list) -> str:
    return json.dumps(
        {
            "schema_version": 1,
            "tool_version": "0.0.0",
            "command": "check",
            "tier": "quick",
            "results": results,
            "findings": [],
            "summary": {
                "total": len(results),
                "passed": 0,
                "failed": 0,
                "crashed": 0,
                "hung": 0,
                "errors": 0,
                "skipped": 0,
                "not_tested": len(results),
            },
            "exit_status": status,
            "exit_code": exit_code,
        }
    )


def test_arguments_reach_the_binary(tmp_path: Path) -> None:
    report = minimal_report(0, "all_passed", [])
    binary = fake_binary(tmp_path, f"print({report!r})\n")
    result = gpuprobe.check(
        "standard", [0, 2], ["copy", "rng.*"], python="/x/python", native=False, seed=7, gpuprobe_bin=binary
    )
    assert result.ok and result.results == ()
    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv == [
        "check", "--json", "--tier", "standard", "--python", "/x/python",
        "--device", "0,2", "--only", "copy", "--only", "rng.*", "--no-native", "--seed", "7",
    ]


def test_output_that_is_not_a_report(tmp_path: Path) -> None:
    binary = fake_binary(tmp_path, "print('hello')\n")
    with pytest.raises(gpuprobe.UnusableOutputError) as caught:
        gpuprobe.check(gpuprobe_bin=binary)
    assert caught.value.exit_code == 0 and "not a gpuprobe report" in str(caught.value)
    binary = fake_binary(tmp_path, "print(json.dumps({'exit_code': 0}))\n")
    with pytest.raises(gpuprobe.UnusableOutputError, match="KeyError"):
        gpuprobe.check(gpuprobe_bin=binary)


def test_exit_code_disagreeing_with_the_report(tmp_path: Path) -> None:
    binary = fake_binary(tmp_path, f"print({minimal_report(0, 'all_passed', [])!r}); sys.exit(1)\n")
    with pytest.raises(gpuprobe.UnusableOutputError, match="exited 1 but its report says 0"):
        gpuprobe.check(gpuprobe_bin=binary)


def test_internal_failure_names_the_message(tmp_path: Path) -> None:
    binary = fake_binary(tmp_path, "print('gpuprobe: error: the \\x1b[31mstate\\x1b[0m broke', file=sys.stderr); sys.exit(3)\n")
    with pytest.raises(gpuprobe.CheckError) as caught:
        gpuprobe.check(gpuprobe_bin=binary)
    err = caught.value
    assert type(err) is gpuprobe.CheckError and err.exit_code == 3
    assert "internal failure" in str(err) and "state" in str(err) and "\x1b" not in str(err)


def test_nothing_tested_from_a_fake(tmp_path: Path) -> None:
    results = [{"probe": "copy.x", "device": "0", "layer": "framework", "verdict": {"verdict": "not_tested", "reason": "no GPU"}}]
    binary = fake_binary(tmp_path, f"print({minimal_report(4, 'nothing_tested', results)!r}); sys.exit(4)\n")
    with pytest.raises(gpuprobe.NothingTestedError, match="no GPU") as caught:
        gpuprobe.check(gpuprobe_bin=binary)
    assert caught.value.result.results[0].detail == "no GPU"


def test_timeout_stops_the_check(tmp_path: Path) -> None:
    binary = fake_binary(tmp_path, "time.sleep(60)\n")
    with pytest.raises(gpuprobe.CheckTimeoutError):
        gpuprobe.check(gpuprobe_bin=binary, timeout=1)
