"""Child processes of probes: starting them, waiting for them, reading what they report.

Some facts exist only in a fresh process: allocator settings are read once, when the
framework starts (``PYTORCH_NO_CUDA_MEMORY_CACHING``, ``PYTORCH_ALLOC_CONF``), the warnings
they cause are printed then, and collectives need one process per GPU. Probes start such
children with the same interpreter and the package on ``sys.path`` (``python -c`` with a
bootstrap, as the supervisor starts the worker), give each a job as JSON on the command line,
and read its report: one JSON object on the last line of its stdout.

A child that does not finish is a hang of the operation under test. The probe kills the
child, copies its stderr tail to the worker's stderr and then blocks (``hang_forever``), so
the supervisor records the probe as HANG with that tail, the one place where hangs are
judged. Children share the worker's process group, so the supervisor's kill reaches any
child still alive.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, NoReturn

#: Bootstrap for ``python -c``: the package directory, then the child module and its job.
BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); import importlib; "
    "m = importlib.import_module(sys.argv[2]); sys.exit(m.main(sys.argv[3:]))"
)

#: Lines of a child's stderr kept for notes and hang reports.
STDERR_TAIL_LINES = 40


class ChildFailed(RuntimeError):
    """A child exited without a report (crash, exception, bad output)."""


class ChildHung(RuntimeError):
    """A child did not finish in time and was killed; the message holds its stderr tail.
    The probe that owns the child's work passes it to ``hang_forever``."""


def package_dir() -> str:
    """The directory that holds the ``gpuprobe`` package (first on a child's ``sys.path``)."""
    import gpuprobe

    return os.path.dirname(os.path.dirname(os.path.abspath(gpuprobe.__file__)))


@dataclass
class Child:
    """A started child process and the files its stdout and stderr go to (files, not pipes:
    a chatty library, such as NCCL with NCCL_DEBUG set, cannot block the child on a full
    pipe)."""

    proc: subprocess.Popen[bytes]
    stdout_path: str
    stderr_path: str
    what: str
    started: float

    def stderr_text(self) -> str:
        """Everything the child wrote to stderr so far."""
        try:
            with open(self.stderr_path, encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return ""

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> list[str]:
        """The last non-empty stderr lines."""
        kept = [line.rstrip() for line in self.stderr_text().splitlines() if line.strip()]
        return kept[-lines:]


def start(module: str, job: dict[str, Any], *, env: dict[str, str] | None = None, what: str = "") -> Child:
    """Starts ``python -c BOOTSTRAP <package dir> <module> <job JSON>`` with ``env`` (default:
    this process's environment)."""
    out_fd, stdout_path = tempfile.mkstemp(prefix="gpuprobe-child-", suffix=".out")
    err_fd, stderr_path = tempfile.mkstemp(prefix="gpuprobe-child-", suffix=".err")
    argv = [sys.executable, "-X", "faulthandler", "-c", BOOTSTRAP, package_dir(), module, json.dumps(job)]
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out_fd,
            stderr=err_fd,
            env=dict(os.environ) if env is None else env,
            close_fds=True,
        )
    finally:
        os.close(out_fd)
        os.close(err_fd)
    return Child(
        proc=proc, stdout_path=stdout_path, stderr_path=stderr_path, what=what or module, started=time.perf_counter()
    )


def hang_forever(message: str) -> NoReturn:
    """Reports a hang on stderr and never returns: the supervisor's timeout turns the probe
    into HANG and kills the process group."""
    try:
        sys.stderr.flush()
        os.write(2, (message.rstrip("\n") + "\n").encode("utf-8", "replace"))
    except OSError:
        pass
    while True:
        time.sleep(3600)


def kill(child: Child) -> None:
    """Kills a child (if still running) and reaps it."""
    if child.proc.poll() is None:
        try:
            child.proc.kill()
        except OSError:
            pass
    try:
        child.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def collect(child: Child, *, timeout_s: float, hang: bool = True) -> dict[str, Any]:
    """Waits for the child's report (the JSON object on its last stdout line).

    Past ``timeout_s`` the child is killed and the probe hangs (see the module text), or with
    ``hang=False`` ``ChildHung`` is raised for the probe that owns the work to hang on. A child
    that exits without a report raises ``ChildFailed`` with its exit status and stderr tail."""
    try:
        child.proc.wait(timeout=max(0.1, timeout_s - (time.perf_counter() - child.started)))
    except subprocess.TimeoutExpired:
        kill(child)
        tail = "\n".join(child.stderr_tail())
        cleanup(child)
        message = (
            f"gpuprobe: {child.what} in child process {child.proc.pid} did not finish within {timeout_s:.0f} s; "
            f"it was killed. Its last output:\n{tail}\ngpuprobe: waiting for the supervisor's timeout"
        )
        if hang:
            hang_forever(message)
        raise ChildHung(message) from None
    try:
        with open(child.stdout_path, encoding="utf-8", errors="replace") as handle:
            stdout = handle.read()
    except OSError:
        stdout = ""
    report: dict[str, Any] | None = None
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                parsed = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(parsed, dict):
                report = parsed
                break
    code = child.proc.returncode
    tail = child.stderr_tail()
    if report is None or code != 0:
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        detail = " | ".join(tail[-6:]) if tail else "no output"
        problem = report.get("error") if isinstance(report, dict) else None
        if problem:
            raise ChildFailed(f"{child.what}: {problem} (child process ended with {how})")
        raise ChildFailed(f"{child.what}: child process ended with {how} without a report: {detail}")
    report["_stderr_tail"] = tail
    return report


def collect_all(kids: list[Child], *, timeout_s: float) -> list[dict[str, Any]]:
    """Waits for several children that depend on each other (the ranks of one process group).

    When one fails, the others would wait for it until their own timeouts: they are killed at
    once and the first failure is raised (``ChildFailed``). Past ``timeout_s`` all are killed
    and the probe hangs, with every child's stderr tail on the worker's stderr."""
    deadline = time.perf_counter() + timeout_s
    while True:
        codes = [kid.proc.poll() for kid in kids]
        if all(code is not None for code in codes) or any(code not in (None, 0) for code in codes):
            break
        if time.perf_counter() > deadline:
            for kid in kids:
                kill(kid)
            tails = "\n".join(f"[{kid.what}, pid {kid.proc.pid}]\n" + "\n".join(kid.stderr_tail(12)) for kid in kids)
            for kid in kids:
                cleanup(kid)
            hang_forever(
                f"gpuprobe: {len(kids)} child processes did not finish within {timeout_s:.0f} s; they were killed. "
                f"Their last output:\n{tails}\ngpuprobe: waiting for the supervisor's timeout"
            )
        time.sleep(0.05)
    failed = [kid for kid in kids if kid.proc.poll() not in (None, 0)]
    for kid in kids:
        if kid not in failed and kid.proc.poll() is None:
            kill(kid)
    # The first child that failed on its own is the cause; the ones killed above are not.
    ordered = failed + [kid for kid in kids if kid not in failed]
    reports = {}
    for kid in ordered:
        reports[id(kid)] = collect(kid, timeout_s=10.0)
    return [reports[id(kid)] for kid in kids]


def cleanup(child: Child) -> None:
    """Removes the child's output files."""
    for path in (child.stdout_path, child.stderr_path):
        try:
            os.unlink(path)
        except OSError:
            pass


def run(
    module: str, job: dict[str, Any], *, env: dict[str, str] | None = None, timeout_s: float, what: str = ""
) -> dict[str, Any]:
    """``start`` then ``collect``, with the stderr file removed afterwards."""
    child = start(module, job, env=env, what=what)
    try:
        return collect(child, timeout_s=timeout_s)
    finally:
        kill(child)
        cleanup(child)


def report_line(report: dict[str, Any]) -> None:
    """Child side: prints the report as the last stdout line."""
    sys.stdout.write("\n" + json.dumps(report, sort_keys=True) + "\n")
    sys.stdout.flush()
