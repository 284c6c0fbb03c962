"""``gpuprobe.check()``: runs ``gpuprobe check --json`` and returns the report as typed data.

    import gpuprobe
    result = gpuprobe.check(only="copy")          # the quick tier, every GPU
    if not result.ok:
        for failure in result.failures:
            print(failure.probe, failure.device, failure.verdict, failure.detail)

The binary does the work (``find_gpuprobe_bin()``) and probes this interpreter unless
``python=`` says otherwise. The JSON document follows ``docs/report.schema.json``; the
dataclasses here hold the fields a program acts on, and every one keeps its ``raw`` dict for
the rest. The exit codes of ``docs/exit-codes.md`` map to the result or to an exception:

- 0 (all passed) and 1 (problems found): a ``CheckResult`` (``ok`` is true only for 0);
- 2 (usage or input error): ``CheckUsageError``;
- 4 (nothing could be tested): ``NothingTestedError``, with the parsed report in ``.result``;
- 3, an interruption, any other code, or output that is not a report: ``CheckError`` or its
  subclass ``UnusableOutputError``; a run past ``timeout``: ``CheckTimeoutError``.

Importing this module never imports torch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

__all__ = [
    "CheckError",
    "CheckResult",
    "CheckTimeoutError",
    "CheckUsageError",
    "Finding",
    "GpuprobeError",
    "NothingTestedError",
    "ProbeResult",
    "Remedy",
    "Summary",
    "UnusableOutputError",
    "check",
    "parse_report",
]

#: Verdicts that are problems with the stack (docs/exit-codes.md, code 1).
PROBLEM_VERDICTS = frozenset({"fail", "crash", "hang", "error"})

#: Seconds a timed-out check gets to stop its workers after SIGTERM before it is killed.
_TERM_GRACE_S = 10.0


class GpuprobeError(Exception):
    """Base class of the errors the ``gpuprobe`` Python API raises."""


class CheckError(GpuprobeError):
    """``gpuprobe check`` did not give a usable answer: an internal failure (exit 3), an
    interruption, or an unexpected exit code. ``exit_code``, ``stderr`` and ``command`` say
    what happened."""

    def __init__(self, message: str, *, exit_code: Optional[int] = None, stderr: str = "", command: Sequence[str] = ()):
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr = stderr
        self.command = list(command)


class CheckUsageError(CheckError):
    """The binary refused the arguments or an input (exit 2): the message is its own."""


class UnusableOutputError(CheckError):
    """The binary's output is not a gpuprobe report (not JSON, or missing required fields)."""


class CheckTimeoutError(CheckError):
    """The check ran past ``timeout`` seconds and was stopped."""


class NothingTestedError(CheckError):
    """Nothing could be tested (exit 4): no GPU visible to the framework, no working PyTorch,
    or too few probe runs judged. ``result`` holds the report, whose results say why."""

    def __init__(self, message: str, result: "CheckResult", **kwargs: Any):
        super().__init__(message, **kwargs)
        self.result = result


def _visible(text: str) -> str:
    """External text (worker output, exception messages) for one line: control characters
    become visible escapes, so a report cannot move a terminal's cursor or colour it."""
    out = []
    for ch in text:
        code = ord(ch)
        if code < 0x20 or 0x7F <= code < 0xA0 or code in (0x2028, 0x2029):
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


@dataclass(frozen=True)
class ProbeResult:
    """One probe run on one device."""

    probe: str
    device: str
    #: ``pass``, ``fail``, ``crash``, ``hang``, ``error``, ``skip`` or ``not_tested``.
    verdict: str
    #: For ``fail``: ``all_zeros``, ``partial_zeros``, ``nan_inf``, ``unchanged`` or ``mismatch``.
    fail_class: Optional[str]
    #: The key numbers of a ``fail``, the message of a ``crash``/``error``, the limit of a
    #: ``hang``, the reason of a ``skip``/``not_tested``; empty for ``pass``.
    detail: str
    layer: str
    simulated: bool
    elapsed_s: Optional[float]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def problem(self) -> bool:
        """Whether this result is a problem with the stack (FAIL, CRASH, HANG or ERROR)."""
        return self.verdict in PROBLEM_VERDICTS

    def describe(self) -> str:
        """One line: ``probe on device: VERDICT class: detail`` (SIMULATED when it was)."""
        label = self.verdict.upper() + (f" {self.fail_class}" if self.fail_class else "")
        text = f"{self.probe} on {self.device}: {label}"
        if self.detail:
            text += f": {self.detail}"
        if self.simulated:
            text += " (SIMULATED)"
        return _visible(text)


@dataclass(frozen=True)
class Remedy:
    """Something to do about a finding (``kind``: ``env``, ``kernel_param``, ``upgrade``, ...)."""

    description: str
    kind: str
    setting: Optional[str]


@dataclass(frozen=True)
class Finding:
    """A conclusion of the report: a known issue of the knowledge base (``source == "kb"``), a
    config lint rule (``lint``) or a diagnosis of the failing results (``diagnosis``)."""

    id: str
    source: str
    #: ``error``, ``warning`` or ``info``.
    severity: str
    #: ``confirmed``, ``suspected`` or ``observed``.
    confidence: str
    layer: str
    title: str
    explanation: str
    citations: tuple
    #: The probe ids its evidence names.
    probes: tuple
    remedies: tuple
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def known_issue(self) -> bool:
        """Whether it is a knowledge-base match."""
        return self.source == "kb"


@dataclass(frozen=True)
class Summary:
    """Counts of results by verdict."""

    total: int
    passed: int
    failed: int
    crashed: int
    hung: int
    errors: int
    skipped: int
    not_tested: int
    judged: int
    mostly_not_tested: bool


@dataclass(frozen=True)
class CheckResult:
    """A parsed ``gpuprobe check --json`` report."""

    #: The binary's exit code: 0 all passed, 1 problems found (4 raises NothingTestedError).
    exit_code: int
    #: Its name: ``all_passed``, ``problems_found``, ``nothing_tested``, ...
    exit_status: str
    tier: str
    tool_version: str
    run_dir: Optional[str]
    #: True when the run was a fault simulation (``simulate=``): nothing in it is real.
    simulated: bool
    results: tuple
    findings: tuple
    summary: Summary
    #: The whole JSON document (docs/report.schema.json).
    raw: Mapping[str, Any] = field(repr=False, compare=False)
    #: What the binary wrote on stderr (notes, progress).
    stderr: str = field(default="", repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Everything tested passed (exit 0)."""
        return self.exit_code == 0

    @property
    def failures(self) -> tuple:
        """The results that are problems: FAIL, CRASH, HANG or ERROR."""
        return tuple(r for r in self.results if r.problem)

    @property
    def known_issues(self) -> tuple:
        """The findings that are knowledge-base matches."""
        return tuple(f for f in self.findings if f.known_issue)

    def describe(self, limit: int = 5) -> str:
        """A short account: the verdict, then up to ``limit`` failures and error findings."""
        head = "SIMULATED " if self.simulated else ""
        s = self.summary
        if self.ok:
            return f"{head}gpuprobe {self.tier} tier: all passed ({s.passed} of {s.judged} judged probe runs)"
        lines = [f"{head}gpuprobe {self.tier} tier: {self.exit_status.replace('_', ' ')} ({len(self.failures)} failing of {s.judged} judged)"]
        for failure in self.failures[:limit]:
            lines.append("  " + failure.describe())
        if len(self.failures) > limit:
            lines.append(f"  ... and {len(self.failures) - limit} more")
        for finding in self.findings:
            if finding.severity == "error":
                lines.append(_visible(f"  {finding.id}: {finding.title}"))
        return "\n".join(lines)


def _verdict_detail(verdict: Mapping[str, Any]) -> str:
    kind = verdict.get("verdict")
    if kind == "fail":
        return str(verdict.get("detail", ""))
    if kind in ("crash", "error"):
        return str(verdict.get("message", ""))
    if kind == "hang":
        return f"no answer in {verdict.get('timeout_s')} s"
    if kind in ("skip", "not_tested"):
        return str(verdict.get("reason", ""))
    return ""


def _probe_result(raw: Mapping[str, Any]) -> ProbeResult:
    verdict = raw["verdict"]
    return ProbeResult(
        probe=str(raw["probe"]),
        device=str(raw["device"]),
        verdict=str(verdict["verdict"]),
        fail_class=verdict.get("class"),
        detail=_verdict_detail(verdict),
        layer=str(raw.get("layer", "")),
        simulated=bool(raw.get("simulated", False)),
        elapsed_s=raw.get("elapsed_s"),
        raw=raw,
    )


def _finding(raw: Mapping[str, Any]) -> Finding:
    evidence = raw.get("evidence") or []
    return Finding(
        id=str(raw["id"]),
        source=str(raw["source"]),
        severity=str(raw["severity"]),
        confidence=str(raw.get("confidence", "")),
        layer=str(raw.get("layer", "")),
        title=str(raw["title"]),
        explanation=str(raw.get("explanation", "")),
        citations=tuple(str(c) for c in raw.get("citations") or []),
        probes=tuple(str(e["probe"]) for e in evidence if isinstance(e, Mapping) and e.get("probe")),
        remedies=tuple(
            Remedy(description=str(r["description"]), kind=str(r["kind"]), setting=r.get("setting"))
            for r in raw.get("remedies") or []
        ),
        raw=raw,
    )


def parse_report(document: Union[str, Mapping[str, Any]], *, stderr: str = "") -> CheckResult:
    """Parses a ``gpuprobe check --json`` report (text or an already decoded dict).

    Raises ``UnusableOutputError`` when it is not JSON or lacks a required field."""
    try:
        data = json.loads(document) if isinstance(document, str) else document
        if not isinstance(data, Mapping):
            raise TypeError("the document is not a JSON object")
        summary = data["summary"]
        return CheckResult(
            exit_code=int(data["exit_code"]),
            exit_status=str(data["exit_status"]),
            tier=str(data["tier"]),
            tool_version=str(data["tool_version"]),
            run_dir=data.get("run_dir"),
            simulated=data.get("simulation") is not None,
            results=tuple(_probe_result(r) for r in data["results"]),
            findings=tuple(_finding(f) for f in data["findings"]),
            summary=Summary(
                total=int(summary["total"]),
                passed=int(summary["passed"]),
                failed=int(summary["failed"]),
                crashed=int(summary["crashed"]),
                hung=int(summary["hung"]),
                errors=int(summary["errors"]),
                skipped=int(summary["skipped"]),
                not_tested=int(summary["not_tested"]),
                judged=int(summary.get("judged", summary["passed"] + summary["failed"])),
                mostly_not_tested=bool(summary.get("mostly_not_tested", False)),
            ),
            raw=data,
            stderr=stderr,
        )
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise UnusableOutputError(f"not a gpuprobe report: {type(err).__name__}: {err}") from err


def _device_arg(device: Union[None, int, str, Iterable[int]]) -> Optional[str]:
    if device is None:
        return None
    if isinstance(device, bool):
        raise TypeError("device must be an index, a list of indices, 'all' or 'cpu'")
    if isinstance(device, int):
        return str(device)
    if isinstance(device, str):
        return device
    return ",".join(str(int(d)) for d in device)


def _stderr_message(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("gpuprobe: error", "error:"))]
    text = errors[-1] if errors else " | ".join(lines[-3:])
    for prefix in ("gpuprobe: error: ", "error: "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return _visible(text)


def check(
    tier: str = "quick",
    device: Union[None, int, str, Iterable[int]] = None,
    only: Union[None, str, Iterable[str]] = None,
    timeout: Optional[float] = None,
    *,
    python: Optional[str] = None,
    simulate: Optional[str] = None,
    native: bool = True,
    run_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    seed: Optional[int] = None,
    extra_args: Sequence[str] = (),
    gpuprobe_bin: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
) -> CheckResult:
    """Runs ``gpuprobe check --json`` and returns its report.

    ``tier``: ``quick``, ``standard``, ``full`` or ``soak``. ``device``: ``None`` (every
    GPU), an index, a list of indices, ``"all"`` or ``"cpu"`` (a self-test of the probes).
    ``only``: a probe pattern or several (``"copy"``, ``"copy.h2d.*"``, a full id).
    ``timeout``: seconds before the check is stopped (SIGTERM, so it stops its workers,
    then SIGKILL after 10 s) and ``CheckTimeoutError`` raised; ``None`` waits.
    ``python``: the interpreter to probe, this one by default. ``simulate``: fault
    simulation presets (the result says ``simulated``). ``native=False`` skips the CUDA/HIP
    runtime probes. ``extra_args`` go to ``gpuprobe check`` as they are.
    ``gpuprobe_bin`` defaults to ``find_gpuprobe_bin()``; ``env`` replaces the environment.

    Returns a ``CheckResult`` for exit 0 and 1; raises ``NothingTestedError`` (exit 4),
    ``CheckUsageError`` (2), ``CheckTimeoutError``, ``UnusableOutputError`` or
    ``CheckError`` (3, interrupted, other), and ``GpuprobeNotFoundError`` when the binary
    is not installed.
    """
    if gpuprobe_bin is None:
        from . import find_gpuprobe_bin

        gpuprobe_bin = find_gpuprobe_bin()
    command = [gpuprobe_bin, "check", "--json", "--tier", tier, "--python", python or sys.executable]
    device_arg = _device_arg(device)
    if device_arg is not None:
        command += ["--device", device_arg]
    patterns = [only] if isinstance(only, str) else list(only or [])
    for pattern in patterns:
        command += ["--only", str(pattern)]
    if simulate:
        command += ["--simulate", simulate]
    if not native:
        command.append("--no-native")
    if run_dir is not None:
        command += ["--run-dir", os.fspath(run_dir)]
    if seed is not None:
        command += ["--seed", str(int(seed))]
    command += [str(a) for a in extra_args]
    try:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=None if env is None else dict(env),
        )
    except OSError as err:
        raise CheckError(f"could not run {gpuprobe_bin}: {err}", command=command) from err
    try:
        out, err_bytes = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGTERM lets the binary stop its worker process groups and keep what it recorded.
        proc.send_signal(signal.SIGTERM)
        try:
            out, err_bytes = proc.communicate(timeout=_TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err_bytes = proc.communicate()
        raise CheckTimeoutError(
            f"gpuprobe check did not finish in {timeout} s and was stopped",
            exit_code=proc.returncode,
            stderr=err_bytes.decode("utf-8", "replace"),
            command=command,
        ) from None
    stderr = err_bytes.decode("utf-8", "replace")
    code = proc.returncode
    details = {"exit_code": code, "stderr": stderr, "command": command}
    if code == 2:
        raise CheckUsageError(_stderr_message(stderr) or "gpuprobe check refused its arguments (exit 2)", **details)
    if code not in (0, 1, 4):
        what = "an internal failure" if code == 3 else "was interrupted" if code in (130, 143) else f"exit {code}"
        message = _stderr_message(stderr)
        raise CheckError(f"gpuprobe check failed ({what})" + (f": {message}" if message else ""), **details)
    try:
        result = parse_report(out.decode("utf-8", "replace"), stderr=stderr)
    except UnusableOutputError as parse_error:
        raise UnusableOutputError(f"gpuprobe check (exit {code}): {parse_error}", **details) from parse_error
    if result.exit_code != code:
        raise UnusableOutputError(
            f"gpuprobe check exited {code} but its report says {result.exit_code}", **details
        )
    if code == 4:
        reasons = sorted({r.detail for r in result.results if r.verdict in ("skip", "not_tested") and r.detail})
        why = f": {_visible(reasons[0])}" if reasons else ""
        raise NothingTestedError(f"gpuprobe check could test nothing{why}", result, **details)
    return result
