"""A pytest plugin: ``pytest --gpuprobe`` checks the GPU stack once per session and skips the
GPU tests, with the failing probes as the reason, when the stack is broken.

Installed with the wheel (the ``pytest11`` entry point ``gpuprobe.pytest_plugin``), or
loaded with ``-p gpuprobe.pytest_plugin``. It does nothing unless ``--gpuprobe`` is given.

GPU tests are the tests marked ``gpu`` (``@pytest.mark.gpu``; ``--gpuprobe-marker`` names
another marker) and the tests that use the ``gpuprobe_stack`` fixture (which returns the
``CheckResult``). The check runs only when at least one such test was collected, before the
first test runs: ``gpuprobe.check(tier=...)`` on this interpreter. Then:

- all passed: the GPU tests run;
- problems found: each GPU test is skipped with ``gpuprobe: GPU stack broken: <failing
  probes>``, and the session summary shows the whole account;
- nothing could be tested (no GPU visible to torch): skipped with ``gpuprobe: nothing could
  be tested: <why>``;
- gpuprobe itself could not run (binary missing, usage error, internal failure, timeout):
  the session stops with a usage error that says why, rather than running GPU tests
  unchecked.

Options: ``--gpuprobe-tier`` (quick), ``--gpuprobe-device``, ``--gpuprobe-only``
(repeatable), ``--gpuprobe-timeout`` (seconds), ``--gpuprobe-bin`` (the binary, default
``find_gpuprobe_bin()``), ``--gpuprobe-simulate`` (fault simulation: the skip reasons say
SIMULATED). Importing this module never imports torch.
"""

from __future__ import annotations

from typing import Any, List, Optional

import pytest

from . import report as _report

_FIXTURE = "gpuprobe_stack"
#: Failing probes named in a skip reason; the rest are counted.
_REASON_LIMIT = 3


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("gpuprobe", "GPU stack check before GPU tests (gpuprobe)")
    group.addoption(
        "--gpuprobe",
        action="store_true",
        default=False,
        help="check the GPU stack once (gpuprobe check) and skip GPU tests when it is broken",
    )
    group.addoption("--gpuprobe-tier", default="quick", help="tier of the check (default: quick)")
    group.addoption("--gpuprobe-device", default=None, help="devices to check: all, indices like 0,2, or cpu")
    group.addoption(
        "--gpuprobe-only", action="append", default=[], help="probe pattern to run (repeatable; default: all)"
    )
    group.addoption("--gpuprobe-timeout", type=float, default=None, help="seconds before the check is stopped")
    group.addoption("--gpuprobe-bin", default=None, help="the gpuprobe binary (default: the installed one)")
    group.addoption("--gpuprobe-simulate", default=None, help="fault simulation presets (test and demo mode)")
    group.addoption(
        "--gpuprobe-marker", default="gpu", help="the marker of GPU tests (default: gpu)"
    )


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", "gpu: needs a working GPU stack (skipped by `pytest --gpuprobe` when gpuprobe finds it broken)"
    )


class _State:
    """The session's one check: its result, or why there is none."""

    def __init__(self) -> None:
        self.result: Optional[_report.CheckResult] = None
        self.skip_reason: Optional[str] = None
        self.account: str = ""


_STATE = pytest.StashKey[_State]()


def _is_gpu_test(item: Any, marker: str) -> bool:
    return item.get_closest_marker(marker) is not None or _FIXTURE in getattr(item, "fixturenames", ())


def _run_check(config: Any) -> _State:
    state = _State()
    opt = config.getoption
    try:
        result = _report.check(
            tier=opt("--gpuprobe-tier"),
            device=opt("--gpuprobe-device"),
            only=opt("--gpuprobe-only") or None,
            timeout=opt("--gpuprobe-timeout"),
            simulate=opt("--gpuprobe-simulate"),
            gpuprobe_bin=opt("--gpuprobe-bin"),
        )
    except _report.NothingTestedError as err:
        state.result = err.result
        state.skip_reason = f"gpuprobe: {err}"
        state.account = err.result.describe()
        if err.result.simulated:
            state.skip_reason = "SIMULATED " + state.skip_reason
        return state
    except (_report.GpuprobeError, OSError) as err:
        raise pytest.UsageError(f"--gpuprobe: the GPU stack could not be checked: {err}") from err
    state.result = result
    state.account = result.describe()
    if not result.ok:
        failing = [f"{f.probe} on {f.device} {f.verdict.upper()}" + (f" {f.fail_class}" if f.fail_class else "") for f in result.failures]
        named = ", ".join(failing[:_REASON_LIMIT])
        more = f" and {len(failing) - _REASON_LIMIT} more" if len(failing) > _REASON_LIMIT else ""
        errors = [f.id for f in result.findings if f.severity == "error" and f.source == "kb"]
        known = f"; known issues: {', '.join(errors)}" if errors else ""
        head = "SIMULATED " if result.simulated else ""
        state.skip_reason = _report._visible(
            f"{head}gpuprobe: GPU stack broken: {named or result.exit_status}{more}{known}"
        )
    return state


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: Any, config: Any, items: List[Any]) -> None:
    if not config.getoption("--gpuprobe"):
        return
    marker = config.getoption("--gpuprobe-marker")
    gpu_items = [item for item in items if _is_gpu_test(item, marker)]
    if not gpu_items:
        return
    state = _run_check(config)
    config.stash[_STATE] = state
    if state.skip_reason:
        skip = pytest.mark.skip(reason=state.skip_reason)
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def gpuprobe_stack(request: Any) -> Any:
    """The session's ``CheckResult`` (``None`` without ``--gpuprobe``). A test using it counts
    as a GPU test: it is skipped when the stack is broken."""
    state = request.config.stash.get(_STATE, None)
    return None if state is None else state.result


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    state = config.stash.get(_STATE, None)
    if state is None or not state.account:
        return
    terminalreporter.section("gpuprobe")
    for line in state.account.splitlines():
        terminalreporter.write_line(line)
    if state.skip_reason:
        terminalreporter.write_line("GPU tests skipped: " + state.skip_reason)
