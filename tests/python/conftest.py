"""Shared fixtures: run the worker the way the supervisor does and collect its events."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIR = REPO / "python"
PRESET_DIR = REPO / "simulate" / "presets"

# The bootstrap the Rust supervisor passes with -c (no install step: the package directory is
# put first on sys.path).
BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); import gpuprobe.worker.main as m; sys.exit(m.main(sys.argv[2:]))"
)

if str(PACKAGE_DIR) not in sys.path:
    sys.path.insert(0, str(PACKAGE_DIR))


def _reject_constant(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name} in an event")


def parse_event(line: str) -> dict[str, Any]:
    """Parses one event line strictly (NaN/Infinity are not JSON)."""
    event = json.loads(line, parse_constant=_reject_constant)
    assert isinstance(event, dict), line
    assert "event" in event, line
    return event


@dataclass
class WorkerRun:
    """What one worker process did."""

    returncode: int | None
    events: list[dict[str, Any]]
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    raw_lines: list[str] = field(default_factory=list)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == kind]

    @property
    def hello(self) -> dict[str, Any]:
        assert self.events and self.events[0]["event"] == "hello", self.events[:1]
        return self.events[0]

    def results(self) -> dict[str, dict[str, Any]]:
        return {e["probe"]: e for e in self.of("result")}

    def measurement(self, probe: str) -> dict[str, Any]:
        result = self.results()[probe]
        assert result["outcome"] == "observed", result
        return result["observation"]["measurement"]


def run_worker(
    plan: dict[str, Any],
    *,
    env: dict[str, str] | None = None,
    timeout: float = 300.0,
    python_args: tuple[str, ...] = (),
    module: bool = False,
    idle_after_begin: float | None = None,
    stack_dump_before_kill: bool = False,
    stdin_after_hello: bytes | None = None,
) -> WorkerRun:
    """Runs the worker on ``plan`` with its events on descriptor 3, as the supervisor does.

    The process group is killed after ``timeout`` seconds, or when the last event is a
    ``begin`` and nothing followed for ``idle_after_begin`` seconds (a hang). With
    ``stdin_after_hello``, stdin is a pipe that gets those bytes, then end of input, once the
    hello has arrived (what the supervisor does for a worker that waits for the start line)."""
    with tempfile.TemporaryDirectory() as tmp:
        plan_path = os.path.join(tmp, "plan.json")
        with open(plan_path, "w", encoding="utf-8") as handle:
            json.dump(plan, handle)
        read_fd, write_fd = os.pipe()
        if module:
            argv = [sys.executable, *python_args, "-m", "gpuprobe.worker", "--plan", plan_path, "--event-fd", "3"]
            child_env = dict(os.environ if env is None else env)
            child_env["PYTHONPATH"] = str(PACKAGE_DIR)
        else:
            argv = [
                sys.executable,
                *python_args,
                "-X",
                "faulthandler",
                "-c",
                BOOTSTRAP,
                str(PACKAGE_DIR),
                "--plan",
                plan_path,
                "--event-fd",
                "3",
            ]
            child_env = dict(os.environ if env is None else env)

        def put_pipe_on_fd3() -> None:
            # dup2 clears close-on-exec, so the child inherits the pipe as descriptor 3.
            if write_fd == 3:
                os.set_inheritable(3, True)
            else:
                os.dup2(write_fd, 3)

        started = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL if stdin_after_hello is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env,
            close_fds=False,
            preexec_fn=put_pipe_on_fd3,
            start_new_session=True,
        )
        os.close(write_fd)
        lines: list[str] = []

        def read_events() -> None:
            with os.fdopen(read_fd, encoding="utf-8") as events:
                for line in events:
                    lines.append(line.rstrip("\n"))

        reader = threading.Thread(target=read_events, daemon=True)
        reader.start()
        outputs: dict[str, bytes] = {}

        def drain(name: str, stream: Any) -> None:
            outputs[name] = stream.read()

        drains = [
            threading.Thread(target=drain, args=("stdout", proc.stdout), daemon=True),
            threading.Thread(target=drain, args=("stderr", proc.stderr), daemon=True),
        ]
        for thread in drains:
            thread.start()
        timed_out = False
        seen, last_change = 0, time.perf_counter()
        while proc.poll() is None:
            now = time.perf_counter()
            if proc.stdin is not None and lines:
                proc.stdin.write(stdin_after_hello or b"")
                proc.stdin.close()
                proc.stdin = None
            if len(lines) != seen:
                seen, last_change = len(lines), now
            stalled = (
                idle_after_begin is not None
                and lines
                and '"event":"begin"' in lines[-1]
                and now - last_change > idle_after_begin
            )
            if now - started > timeout or stalled:
                timed_out = True
                if stack_dump_before_kill:
                    # What the supervisor does: ask for the Python stacks, then kill.
                    os.kill(proc.pid, signal.SIGUSR1)
                    time.sleep(1.0)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.05)
        for thread in drains:
            thread.join(timeout=10)
        reader.join(timeout=10)
        stdout, stderr = outputs.get("stdout", b""), outputs.get("stderr", b"")
        seconds = time.perf_counter() - started
    events = [parse_event(line) for line in lines if line]
    return WorkerRun(
        returncode=proc.returncode,
        events=events,
        stdout=stdout.decode("utf-8", "replace"),
        stderr=stderr.decode("utf-8", "replace"),
        timed_out=timed_out,
        seconds=seconds,
        raw_lines=lines,
    )


def run_plan(
    probes: list[str],
    *,
    device: str = "cpu",
    seed: int = 1234,
    simulate: dict[str, Any] | None = None,
    env_extra: dict[str, str] | None = None,
    timeout: float = 300.0,
    idle_after_begin: float | None = None,
    stack_dump_before_kill: bool = False,
) -> WorkerRun:
    """Runs ``probes`` on ``device`` (optionally under simulation, with extra settings)."""
    plan: dict[str, Any] = {"protocol": 1, "mode": "run", "device": device, "probes": probes, "seed": seed}
    if simulate is not None:
        plan["simulate"] = simulate
    env = dict(os.environ)
    for key in ("HSA_ENABLE_SDMA", "AMD_SERIALIZE_COPY", "AMD_SERIALIZE_KERNEL", "HIP_FORCE_DEV_KERNARG"):
        env.pop(key, None)
    env.update(env_extra or {})
    return run_worker(
        plan,
        env=env,
        timeout=timeout,
        idle_after_begin=idle_after_begin,
        stack_dump_before_kill=stack_dump_before_kill,
    )


def load_preset(name: str) -> dict[str, Any]:
    """A preset file as the plan's ``simulate`` object (what the Rust side sends)."""
    with open(PRESET_DIR / f"{name}.toml", "rb") as handle:
        data = tomllib.load(handle)
    return {"source": f"preset:{name}", "fault": data.get("fault", [])}


@pytest.fixture(scope="session")
def catalog_specs() -> list[dict[str, Any]]:
    """The catalog as the worker publishes it."""
    run = run_worker({"protocol": 1, "mode": "catalog"}, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.of("catalog")[0]["probes"]


#: Seed of the shared quick+standard run.
SHARED_SEED = 20261122


@pytest.fixture(scope="session")
def quick_and_standard(catalog_specs: list[dict[str, Any]]) -> tuple[WorkerRun, list[dict[str, Any]]]:
    """One worker running every quick and standard probe on the CPU, with no fault."""
    specs = [s for s in catalog_specs if s["tier"] in ("quick", "standard")]
    run = run_plan([s["id"] for s in specs], seed=SHARED_SEED, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return run, specs


def gpuprobe_binary() -> str | None:
    """The gpuprobe binary: $GPUPROBE_BIN, a built one in the target directories, or one
    built now with cargo."""
    explicit = os.environ.get("GPUPROBE_BIN")
    if explicit:
        return explicit
    targets = [REPO / "target"]
    if os.environ.get("CARGO_TARGET_DIR"):
        targets.insert(0, Path(os.environ["CARGO_TARGET_DIR"]))
    for target in targets:
        for profile in ("debug", "release"):
            candidate = target / profile / "gpuprobe"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    cargo = shutil.which("cargo")
    if cargo is None:
        return None
    built = subprocess.run(
        [cargo, "build", "-q", "-p", "gpuprobe"], cwd=REPO, capture_output=True, text=True
    )
    if built.returncode != 0:
        return None
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    candidate = target / "debug" / "gpuprobe"
    return str(candidate) if candidate.is_file() else None
