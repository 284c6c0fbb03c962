"""The pytest plugin (``pytest --gpuprobe``), run by pytester against the real binary on the
CPU (healthy and under a simulated fault) and against fake binaries."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import gpuprobe_binary

pytest_plugins = ["pytester"]

TESTS = """
import pytest

@pytest.mark.gpu
def test_marked():
    pass

def test_fixture(gpuprobe_stack):
    assert gpuprobe_stack is None or gpuprobe_stack.ok

def test_plain():
    pass
"""


@pytest.fixture
def binary() -> str:
    path = gpuprobe_binary()
    if path is None:
        pytest.skip("no gpuprobe binary (set GPUPROBE_BIN, or build one with cargo)")
    return path


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The check's run directories go under a temporary state directory.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def fake(tmp_path: Path, body: str) -> str:
    path = tmp_path / "fake-gpuprobe"
    path.write_text(f"#!{sys.executable}\nimport sys\nopen({str(tmp_path / 'ran')!r}, 'w').close()\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_off_unless_asked(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(TESTS)
    binary = fake(tmp_path, "sys.exit(3)")
    result = pytester.runpytest("-p", "gpuprobe.pytest_plugin", f"--gpuprobe-bin={binary}")
    result.assert_outcomes(passed=3)
    assert not (tmp_path / "ran").exists()


def test_broken_stack_skips_gpu_tests(pytester: pytest.Pytester, binary: str) -> None:
    pytester.makepyfile(TESTS)
    result = pytester.runpytest(
        "-p", "gpuprobe.pytest_plugin", "-rs", "--gpuprobe", f"--gpuprobe-bin={binary}",
        "--gpuprobe-device=cpu", "--gpuprobe-only=copy.h2d", "--gpuprobe-simulate=h2d-zeros",
    )
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "*= gpuprobe =*",
            "SIMULATED gpuprobe quick tier: problems found*",
            "*copy.h2d.pageable.tiny.blocking on cpu: FAIL all_zeros*(SIMULATED)",
            "SKIPPED * SIMULATED gpuprobe: GPU stack broken: copy.h2d.pageable.* on cpu FAIL all_zeros*more*",
        ]
    )
    assert result.ret == 0


def test_healthy_stack_runs_gpu_tests(pytester: pytest.Pytester, binary: str) -> None:
    pytester.makepyfile(TESTS)
    result = pytester.runpytest(
        "-p", "gpuprobe.pytest_plugin", "--gpuprobe", f"--gpuprobe-bin={binary}",
        "--gpuprobe-device=cpu", "--gpuprobe-only=copy.h2d.pageable.4x4",
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*= gpuprobe =*", "gpuprobe quick tier: all passed*"])


def test_no_gpu_tests_no_check(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile("def test_plain():\n    pass\n")
    binary = fake(tmp_path, "sys.exit(3)")
    result = pytester.runpytest("-p", "gpuprobe.pytest_plugin", "--gpuprobe", f"--gpuprobe-bin={binary}")
    result.assert_outcomes(passed=1)
    assert not (tmp_path / "ran").exists()


def test_nothing_tested_skips_with_the_reason(pytester: pytest.Pytester, tmp_path: Path) -> None:
    report = (
        '{"schema_version": 1, "tool_version": "0", "command": "check", "tier": "quick", "findings": [], '
        '"results": [{"probe": "copy.x", "device": "0", "layer": "framework", '
        '"verdict": {"verdict": "not_tested", "reason": "no GPU visible to torch"}}], '
        '"summary": {"total": 1, "passed": 0, "failed": 0, "crashed": 0, "hung": 0, "errors": 0, '
        '"skipped": 0, "not_tested": 1}, "exit_status": "nothing_tested", "exit_code": 4}'
    )
    binary = fake(tmp_path, f"print({report!r}); sys.exit(4)")
    pytester.makepyfile(TESTS)
    result = pytester.runpytest("-p", "gpuprobe.pytest_plugin", "-rs", "--gpuprobe", f"--gpuprobe-bin={binary}")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["SKIPPED * gpuprobe: gpuprobe check could test nothing: no GPU visible to torch"])


def test_gpuprobe_that_cannot_run_stops_the_session(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(TESTS)
    result = pytester.runpytest("-p", "gpuprobe.pytest_plugin", "--gpuprobe", f"--gpuprobe-bin={tmp_path / 'absent'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--gpuprobe: the GPU stack could not be checked: could not run*absent*"])
    binary = fake(tmp_path, "print('gpuprobe: error: broken', file=sys.stderr); sys.exit(3)")
    result = pytester.runpytest("-p", "gpuprobe.pytest_plugin", "--gpuprobe", f"--gpuprobe-bin={binary}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*could not be checked: gpuprobe check failed (an internal failure): broken"])


def test_entry_point_loads_it_once(
    pytester: pytest.Pytester, tmp_path: Path, binary: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the wheel installs: a pytest11 entry point named like the module (pyproject.toml).
    import tomllib

    from conftest import PACKAGE_DIR, REPO

    with open(REPO / "pyproject.toml", "rb") as handle:
        entry_points = tomllib.load(handle)["project"]["entry-points"]["pytest11"]
    assert entry_points == {"gpuprobe.pytest_plugin": "gpuprobe.pytest_plugin"}
    site = tmp_path / "site"
    dist = site / "gpuprobe-0.0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gpuprobe\nVersion: 0.0.0\n")
    (dist / "entry_points.txt").write_text(
        "[pytest11]\n" + "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    )
    pytester.makepyfile(TESTS)
    args = ["--gpuprobe", f"--gpuprobe-bin={binary}", "--gpuprobe-device=cpu", "--gpuprobe-only=copy.h2d.pageable.4x4"]
    monkeypatch.setenv("PYTHONPATH", f"{site}:{PACKAGE_DIR}")
    for extra in ([], ["-p", "gpuprobe.pytest_plugin"]):
        result = pytester.runpytest_subprocess(*extra, *args)
        result.assert_outcomes(passed=3)
        result.stdout.fnmatch_lines(["*= gpuprobe =*", "gpuprobe quick tier: all passed*"])
