"""The Slurm scripts of ``deploy/slurm/`` against a real Slurm (Debian's ``slurm-wlm`` and
``munge``, which ``scripts/python-test-env.sh`` installs): munged, slurmctld and slurmd are
started on this host with a generated ``slurm.conf`` (one node named as this host, every file
in a temporary directory, free ports, no systemd and no cgroups), and stopped at the end, their
process groups killed, whatever happened.

``gpuprobe-slurm.sh`` is ``HealthCheckProgram``, ``Prolog`` and ``Epilog``, copied beside the
environment file each test writes, as an operator installs them. slurmd runs the health check
program when it starts, before it registers with slurmctld, so a restart of slurmd runs the
check now, and the node's new registration (``SlurmdStartTime``, which slurmctld stamps when
slurmd registers) says it has ended; ``HealthCheckInterval`` is an hour, so no periodic check
interferes. gpuprobe runs a few cheap copy probes on the CPU, and ``--simulate h2d-zeros``
makes them fail; where a test is about what the script does with an answer, a stand-in
binary gives it at once.

Needs root (slurmd runs the scripts as root and drains through slurmctld). Without Slurm or
root the tests skip and say why; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from conftest import REPO, gpuprobe_binary

pytestmark = pytest.mark.slurm

DEPLOY = REPO / "deploy" / "slurm"
TOOLS = ("mungekey", "munged", "slurmctld", "slurmd", "scontrol", "sinfo", "sbatch", "squeue", "scancel")
#: Cheap probes that ``h2d-zeros`` makes fail (small pageable host-to-device copies).
PROBES = "copy.h2d.*"
FAILING_PRESET = "h2d-zeros"


def _in_ci() -> bool:
    value = os.environ.get("CI", "")
    return value not in ("", "0", "false")


def _cannot_run(why: str) -> None:
    if _in_ci():
        pytest.fail(f"{why} (CI is set: scripts/python-test-env.sh installs slurm-wlm and munge)")
    pytest.skip(why)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(condition: Callable[[], bool], timeout: float, what: str, details: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{details()}")
        time.sleep(0.2)


class Cluster:
    """munged, slurmctld and one slurmd on this host, with gpuprobe-slurm.sh installed."""

    def __init__(self, root: Path, gpuprobe: str) -> None:
        self.root = root
        self.gpuprobe = gpuprobe
        self.node = socket.gethostname().split(".")[0]
        self.munge_dir = root / "munge"
        self.slurm_dir = root / "slurm"
        self.etc = root / "etc"
        self.state = root / "gpuprobe-state"
        self.conf = self.slurm_dir / "slurm.conf"
        self.script = self.etc / "gpuprobe-slurm.sh"
        self.daemons: dict[str, subprocess.Popen[bytes]] = {}
        for directory in (self.munge_dir, self.slurm_dir / "state", self.slurm_dir / "spool", self.etc):
            directory.mkdir(parents=True, exist_ok=True)
        self.munge_dir.chmod(0o700)
        # The scripts as an operator installs them: copied, the env file beside them.
        for name in ("gpuprobe-slurm.sh", "gpuprobe-sweep.sh", "gpuprobe-sweep.sbatch"):
            shutil.copy2(DEPLOY / name, self.etc / name)
        # Stand-ins for gpuprobe where a test is about what the script does with an answer,
        # not about gpuprobe finding it (each real check costs seconds of torch start-up).
        self.ok_stub = self._stub("ok-gpuprobe", "echo 'OK: gpuprobe: 1 probe runs passed on cpu (quick tier)'")
        self.fail_stub = self._stub(
            "fail-gpuprobe", "echo 'FAIL: gpuprobe: 1 probe runs failed on cpu (1 FAIL; first copy.h2d.x)'; exit 1"
        )
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        self.env["SLURM_CONF"] = str(self.conf)

    def _stub(self, name: str, body: str) -> Path:
        path = self.root / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
        return path

    # --- daemons -------------------------------------------------------------------------

    def write_conf(self) -> None:
        s = self.slurm_dir
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=gpuprobetest",
                    f"SlurmctldHost={self.node}(127.0.0.1)",
                    f"SlurmctldPort={_free_port()}",
                    f"SlurmdPort={_free_port()}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={self.munge_dir / 'munge.sock'}",
                    f"StateSaveLocation={s / 'state'}",
                    f"SlurmdSpoolDir={s / 'spool'}",
                    f"SlurmctldPidFile={s / 'slurmctld.pid'}",
                    f"SlurmdPidFile={s / 'slurmd.pid'}",
                    f"SlurmctldLogFile={s / 'slurmctld.log'}",
                    f"SlurmdLogFile={s / 'slurmd.log'}",
                    # No systemd, no cgroups in a container.
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "JobCompType=jobcomp/none",
                    "SwitchType=switch/none",
                    "MpiDefault=none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_CPU",
                    "ReturnToService=2",
                    f"HealthCheckProgram={self.script}",
                    # Nonzero, or slurmd does not run the program at all (not even at its
                    # start); an hour, so only the restarts below run it.
                    "HealthCheckInterval=3600",
                    "HealthCheckNodeState=ANY",
                    f"Prolog={self.script}",
                    f"Epilog={self.script}",
                    f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN",
                    f"PartitionName=gpus Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / f"{name}.out", "ab")  # noqa: SIM115 (the daemon owns it)
        self.daemons[name] = subprocess.Popen(
            argv, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
        )
        log.close()

    def _stop(self, name: str) -> None:
        proc = self.daemons.pop(name, None)
        if proc is None:
            return
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue

    def start(self) -> None:
        m = self.munge_dir
        subprocess.run(["mungekey", "--create", f"--keyfile={m / 'munge.key'}"], check=True, capture_output=True)
        self._spawn(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",
                f"--key-file={m / 'munge.key'}",
                f"--socket={m / 'munge.sock'}",
                f"--pid-file={m / 'munged.pid'}",
                f"--seed-file={m / 'munge.seed'}",
            ],
        )
        wait_for(lambda: (m / "munge.sock").exists(), 15, "munged's socket", self.logs)
        self.write_conf()
        self._spawn("slurmctld", ["slurmctld", "-D"])
        wait_for(lambda: self.run("scontrol", "ping").returncode == 0, 30, "slurmctld", self.logs)
        self._spawn_slurmd()
        wait_for(self.registered_since(""), 60, "the node to register", self.logs)

    def _spawn_slurmd(self) -> None:
        self._spawn("slurmd", ["slurmd", "-D", "-N", self.node])

    def restart_slurmd(self) -> None:
        """Restarts slurmd, which runs the health check program before it registers; returns
        once the node has registered again (the check has ended)."""
        before = self.node_field("SlurmdStartTime")
        # slurmctld stamps the registration in whole seconds (local time): one in the same
        # second as the last would look like no registration at all.
        while datetime.now().replace(microsecond=0) <= datetime.fromisoformat(before):
            time.sleep(0.05)
        self._stop("slurmd")
        self._spawn_slurmd()
        wait_for(self.registered_since(before), 60, "slurmd to run the health check and register", self.logs)

    def registered_since(self, before: str) -> Callable[[], bool]:
        def registered() -> bool:
            started = self.node_field("SlurmdStartTime")
            return started not in ("", "None", before) and "NOT_RESPONDING" not in self.flags()

        return registered

    def stop(self) -> None:
        if "slurmctld" in self.daemons:
            jobs = self.run("squeue", "-h", "-o", "%i").stdout.split()
            if jobs:
                self.run("scancel", *jobs)
        for name in ("slurmd", "slurmctld", "munged"):
            self._stop(name)

    # --- looking and acting ----------------------------------------------------------------

    def run(self, *argv: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=env or self.env, capture_output=True, text=True, timeout=timeout)

    def node_field(self, key: str) -> str:
        line = self.run("scontrol", "-o", "show", "node", self.node).stdout
        for token in line.split(" "):
            if token.startswith(f"{key}="):
                return token.split("=", 1)[1]
        return ""

    def flags(self) -> str:
        """The node's state with its flags: ``IDLE``, ``IDLE+DRAIN``, ..."""
        return self.node_field("State")

    def reason(self) -> str:
        """The node's reason as ``sinfo`` shows it (``none`` without one)."""
        return self.run("sinfo", "-h", "-N", "-n", self.node, "-o", "%E").stdout.strip()

    def drain(self, reason: str) -> None:
        done = self.run("scontrol", "update", f"nodename={self.node}", "state=drain", f"reason={reason}")
        assert done.returncode == 0, done.stderr

    def resume(self) -> None:
        if "DRAIN" in self.flags():
            done = self.run("scontrol", "update", f"nodename={self.node}", "state=resume")
            assert done.returncode == 0, done.stderr
        self.assert_idle()

    def assert_idle(self) -> None:
        """The node is IDLE, neither drained nor anything else. A node just resumed reads
        IDLE+NOT_RESPONDING until slurmctld has pinged it: that passes within seconds."""
        wait_for(lambda: self.flags() == "IDLE", 15, "the node to be IDLE", self.logs)

    def configure(
        self, binary: str | None = None, per_mode: dict[str, dict[str, str]] | None = None, **settings: str
    ) -> None:
        """Writes the env file beside the script: gpuprobe (or ``binary``) on the CPU, a few
        copy probes, then ``settings`` (GPUPROBE_* names without the prefix), then the
        variables of ``per_mode`` for the mode they name (``health``, ``prolog``, ``epilog``).

        Unless ``per_mode`` names the epilog, the epilog's gpuprobe is a stand-in that answers
        OK at once: a real check after each job would hold the script's lock (and the node in
        COMPLETING) for seconds after the job, racing with what a test does next."""
        values = {
            "GPUPROBE": binary or self.gpuprobe,
            "GPUPROBE_PYTHON": sys.executable,
            "GPUPROBE_DEVICE": "cpu",
            "GPUPROBE_ONLY": PROBES,
            "GPUPROBE_BUDGET": "30",
            "GPUPROBE_STATE_DIR": str(self.state),
            "SLURM_CONF": str(self.conf),
        }
        values.update({f"GPUPROBE_{key.upper()}": value for key, value in settings.items()})
        text = "".join(f"{key}={shlex.quote(value)}\n" for key, value in values.items())
        per_mode = per_mode or {"epilog": {"GPUPROBE": str(self.ok_stub)}}
        for mode, overrides in per_mode.items():
            text += f'if [ "$GPUPROBE_SLURM_MODE" = {mode} ]; then\n'
            text += "".join(f"    {k}={shlex.quote(v)}\n" for k, v in overrides.items())
            text += "fi\n"
        (self.etc / "gpuprobe-slurm.env").write_text(text)

    def health_check_by_hand(self) -> subprocess.CompletedProcess[str]:
        """Runs the script as slurmd runs a health check program: no environment but
        SLURMD_NODENAME."""
        done = self.run(str(self.script), env={"SLURMD_NODENAME": self.node})
        assert "skipped" not in done.stderr, done.stderr
        return done

    def last(self, mode: str = "health") -> str:
        """The script's record of its last answer in ``mode``: ``TIME MODE LINE``."""
        path = self.state / f"last-{mode}"
        return path.read_text().strip() if path.exists() else ""

    def last_line(self, mode: str = "health") -> str:
        return self.last(mode).split(" ", 2)[2]

    def logs(self) -> str:
        parts = [
            f"state: {self.flags()!r} reason: {self.reason()!r} slurmd started: {self.node_field('SlurmdStartTime')!r}"
        ]
        for path in sorted(self.root.glob("*.out")) + sorted(self.slurm_dir.glob("*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}")
        for last in sorted(self.state.glob("last-*")):
            parts.append(f"--- {last.name}: {last.read_text()}")
        return "\n".join(parts)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        _cannot_run(f"Slurm is not installed (missing {', '.join(missing)}; Debian: slurm-wlm munge)")
    if os.geteuid() != 0:
        _cannot_run("the Slurm test needs root (slurmd runs the health check as root)")
    binary = gpuprobe_binary()
    if binary is None:
        _cannot_run("no gpuprobe binary (set GPUPROBE_BIN or build it with cargo)")
        return
    cluster = Cluster(tmp_path_factory.mktemp("slurm"), binary)
    cluster.configure()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def assert_gpuprobe_drained(cluster: Cluster, prefix: str, mode: str = "health") -> str:
    flags, reason = cluster.flags(), cluster.reason()
    assert "DRAIN" in flags, cluster.logs()
    assert reason.startswith(prefix), cluster.logs()
    # The reason is gpuprobe's line as it is, as `sinfo -R` and `scontrol show node` show it.
    assert reason == cluster.last_line(mode), cluster.logs()
    assert len(reason) <= 200
    assert reason in cluster.run("sinfo", "-R", "-h", "-o", "%E").stdout
    assert f"Reason={reason} [" in cluster.run("scontrol", "show", "node", cluster.node).stdout
    return reason


def test_health_check_drains_on_failure_and_resumes_when_healthy(cluster: Cluster) -> None:
    # The fixture's start ran a healthy check: the node is idle.
    cluster.assert_idle()
    assert " health OK: gpuprobe: " in cluster.last(), cluster.logs()

    cluster.configure(simulate=FAILING_PRESET)
    cluster.restart_slurmd()
    reason = assert_gpuprobe_drained(cluster, "FAIL: SIMULATED gpuprobe: ")
    assert "first copy.h2d." in reason

    cluster.configure()
    cluster.restart_slurmd()
    cluster.assert_idle()
    assert cluster.reason() == "none"


def test_a_node_drained_by_someone_else_stays_drained(cluster: Cluster) -> None:
    cluster.resume()
    cluster.drain("maintenance: replace the fan")
    try:
        # A failure does not overwrite their reason (or a later OK would undrain their node)...
        cluster.configure(binary=str(cluster.fail_stub))
        cluster.restart_slurmd()
        assert cluster.last_line().startswith("FAIL: gpuprobe: "), cluster.logs()
        assert "DRAIN" in cluster.flags()
        assert cluster.reason() == "maintenance: replace the fan", cluster.logs()
        # ...and a healthy check leaves the node drained.
        cluster.configure(binary=str(cluster.ok_stub))
        cluster.restart_slurmd()
        assert cluster.last_line().startswith("OK: gpuprobe: "), cluster.logs()
        assert "DRAIN" in cluster.flags()
        assert cluster.reason() == "maintenance: replace the fan", cluster.logs()
    finally:
        cluster.resume()


def test_prolog_failure_drains_with_gpuprobes_reason(cluster: Cluster) -> None:
    cluster.resume()
    cluster.configure(simulate=FAILING_PRESET)
    try:
        submitted = cluster.run("sbatch", "--parsable", "--output=/dev/null", "--wrap", "true")
        assert submitted.returncode == 0, submitted.stderr
        job = submitted.stdout.strip().split(";")[0]
        wait_for(lambda: "DRAIN" in cluster.flags(), 60, "the prolog to drain the node", cluster.logs)
        assert " prolog FAIL: SIMULATED gpuprobe: " in cluster.last("prolog"), cluster.logs()
        # Slurm requeues the job, held, and drains the node (its own reason, `Prolog error`,
        # only where there is none yet: gpuprobe's stays).
        wait_for(
            lambda: "held" in cluster.run("squeue", "-h", "-j", job, "-o", "%T %r").stdout,
            30,
            "the job to be requeued held",
            lambda: cluster.run("squeue", "-h", "-j", job, "-o", "%T %r").stdout + cluster.logs(),
        )
        assert_gpuprobe_drained(cluster, "FAIL: SIMULATED gpuprobe: ", "prolog")
        cluster.run("scancel", job)
    finally:
        cluster.configure()
        cluster.resume()


def test_epilog_failure_drains_with_gpuprobes_reason(cluster: Cluster) -> None:
    cluster.resume()
    cluster.configure(
        per_mode={"prolog": {"GPUPROBE": str(cluster.ok_stub)}, "epilog": {"GPUPROBE_SIMULATE": FAILING_PRESET}}
    )
    try:
        submitted = cluster.run("sbatch", "--parsable", "--output=/dev/null", "--wrap", "true")
        assert submitted.returncode == 0, submitted.stderr
        job = submitted.stdout.strip().split(";")[0]
        wait_for(lambda: "DRAIN" in cluster.flags(), 60, "the epilog to drain the node", cluster.logs)
        # The prolog passed and the job ran; the check after it failed.
        assert " prolog OK: gpuprobe: " in cluster.last("prolog"), cluster.logs()
        # The job completes once slurmctld has the epilog's exit, which drains no further.
        wait_for(
            lambda: "JobState=COMPLETED" in cluster.run("scontrol", "show", "job", job).stdout,
            30,
            "the job to complete",
            lambda: cluster.run("scontrol", "show", "job", job).stdout + cluster.logs(),
        )
        # Slurm drains a node whose epilog failed, keeping the reason already set.
        assert_gpuprobe_drained(cluster, "FAIL: SIMULATED gpuprobe: ", "epilog")
    finally:
        cluster.configure()
        cluster.resume()


def test_unknown_drains_only_after_repeats_when_asked(cluster: Cluster) -> None:
    cluster.resume()
    # A --python that does not exist: gpuprobe answers UNKNOWN (usage or input error) at once.
    cluster.configure(python="/nonexistent/python3")
    for _ in range(3):
        done = cluster.health_check_by_hand()
        assert done.returncode == 0, done.stderr
        assert cluster.last_line() == "UNKNOWN: gpuprobe: usage or input error", cluster.logs()
        cluster.assert_idle()

    cluster.configure(python="/nonexistent/python3", drain_unknown_after="2")
    (cluster.state / "unknown-count").unlink()
    cluster.health_check_by_hand()
    cluster.assert_idle()
    cluster.health_check_by_hand()
    assert_gpuprobe_drained(cluster, "UNKNOWN: gpuprobe: usage or input error")

    # A healthy answer resumes a node drained on UNKNOWN answers, as after a FAIL.
    cluster.configure(binary=str(cluster.ok_stub), drain_unknown_after="2")
    cluster.health_check_by_hand()
    cluster.assert_idle()
    cluster.configure()


def test_a_hung_gpuprobe_is_stopped_and_its_output_never_reaches_the_reason(cluster: Cluster) -> None:
    cluster.resume()
    hung = cluster.root / "hung-gpuprobe"
    hung.write_text("#!/bin/sh\nexec sleep 300\n")
    hung.chmod(0o755)
    cluster.configure(binary=str(hung), timeout="2")
    started = time.monotonic()
    cluster.health_check_by_hand()
    assert time.monotonic() - started < 15
    assert cluster.last_line() == "UNKNOWN: gpuprobe: no answer within 2 s", cluster.logs()
    cluster.assert_idle()

    # Whatever a binary prints, only its first line, made safe and cut, is the reason.
    output = cluster.root / "hostile-output"
    output.write_bytes(
        b"FAIL: gpuprobe: 1 probe runs failed \"q\" 'x' $HOME /home/alice/.ssh `id` ~root \\ \x1b[31m \xc3\xbc "
        + b"A" * 300
        + b"\nSECOND LINE\n"
    )
    hostile = cluster.root / "hostile-gpuprobe"
    hostile.write_text(f"#!/bin/sh\necho stderr-secret >&2\ncat {shlex.quote(str(output))}\nexit 1\n")
    hostile.chmod(0o755)
    cluster.configure(binary=str(hostile))
    cluster.health_check_by_hand()
    reason = assert_gpuprobe_drained(cluster, "FAIL: gpuprobe: 1 probe runs failed ")
    assert len(reason) == 200
    for unsafe in ('"', "'", "/", "`", "~", "\\", "$", "\x1b", "SECOND", "stderr-secret"):
        assert unsafe not in reason, reason
    assert all(" " <= c <= "~" for c in reason), reason
    # gpuprobe's stderr is kept in the run directory, for the log.
    assert any("stderr-secret" in p.read_text() for p in cluster.state.glob("runs/*/health-stderr.txt"))
    cluster.configure(binary=str(cluster.ok_stub))
    cluster.health_check_by_hand()
    cluster.assert_idle()


def test_a_broken_setting_drains_nothing(cluster: Cluster) -> None:
    cluster.resume()
    env_file = cluster.etc / "gpuprobe-slurm.env"
    prolog_env = {"SLURMD_NODENAME": cluster.node, "SLURM_SCRIPT_CONTEXT": "prolog_slurmd", "SLURM_JOB_ID": "1"}
    try:
        for broken in ("GPUPROBE_BUDGET=soon\n", "if then fi (\n"):
            env_file.write_text(broken)
            # A prolog's non-zero exit would drain the node: the job runs instead, and the log
            # says why no check ran.
            prolog = cluster.run(str(cluster.script), env=prolog_env)
            assert prolog.returncode == 0, prolog.stderr
            assert "no check: " in prolog.stderr
            health = cluster.run(str(cluster.script), env={"SLURMD_NODENAME": cluster.node})
            assert health.returncode == 1, health.stderr
            cluster.assert_idle()
    finally:
        cluster.configure()


def test_sweep_runs_one_check_on_every_node_of_the_partition(cluster: Cluster) -> None:
    cluster.resume()
    cluster.configure(per_mode={"prolog": {"GPUPROBE": str(cluster.ok_stub)}, "epilog": {"GPUPROBE": str(cluster.ok_stub)}})
    sweep = cluster.root / "sweep"
    env = dict(cluster.env)
    env.update(
        GPUPROBE=cluster.gpuprobe,
        GPUPROBE_PYTHON=sys.executable,
        GPUPROBE_DEVICE="cpu",
        GPUPROBE_ONLY=PROBES,
        GPUPROBE_TIER="quick",
    )
    submitted = cluster.run(str(cluster.etc / "gpuprobe-sweep.sh"), "gpus", str(sweep), env=env)
    assert submitted.returncode == 0, submitted.stderr
    node, job = submitted.stdout.split()
    assert node == cluster.node
    out = sweep / node
    wait_for(
        lambda: "JobState=COMPLETED" in cluster.run("scontrol", "show", "job", job).stdout,
        90,
        "the sweep job to complete",
        lambda: cluster.run("scontrol", "show", "job", job).stdout + cluster.logs(),
    )
    assert (out / "answer").read_text().startswith("OK: gpuprobe: "), (out / f"slurm-{job}.out").read_text()
    assert (out / "runs" / job / "report.json").is_file()
    assert "gpuprobe_info{" in (out / "gpuprobe.prom").read_text()
    assert "<testsuites" in (out / "gpuprobe-junit.xml").read_text()

    # A drained node is left out, and said so.
    cluster.drain("maintenance: replace the fan")
    try:
        skipped = cluster.run(str(cluster.etc / "gpuprobe-sweep.sh"), "gpus", str(sweep), env=env)
        assert skipped.returncode == 1
        assert f"{node} skipped" in skipped.stderr
    finally:
        cluster.resume()
