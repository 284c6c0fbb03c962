"""width family: operations on tensors past the index-width boundaries.

Kernels that compute element offsets in 32 bits go wrong, or fault, once a tensor passes
2^31 elements (a signed offset wraps negative) or 2^32 (an unsigned one wraps to the start),
or once one dimension passes 2^31. Each probe runs one family of operations (``GROUPS``) at
one boundary (``BOUNDARIES``): ``n31`` and ``n32`` use tensors just past 2^31 and 2^32
elements in total whose dimensions are all small (rows of 1031 elements, planes of 32×32);
``d31`` and ``d32`` use one dimension just past 2^31 and just past 2^32 (the latter for the
operations that treat one dimension apart: reductions and scans along it, indexing into it;
``WIDE_KINDS``). The indexing cases at ``d31``/``d32`` take int64 index values past 2^31
(and 2^32) into a source dimension that long.

``g16`` is the launch-geometry boundary: one dimension (batch, channels or planes, heads, a
spatial size) just past 2^16 on a small tensor. Kernels that put such a dimension on the
second or third axis of their launch grid (at most 65535 blocks there on CUDA) fail to
launch or skip what lies past it, and kernels that multiply two sizes of that order in 32
bits (an adaptive pool's window bounds: output index × input size) overflow past 2^31 with
tensors of a few megabytes. These probes need little memory and run in a side lane.

Oracles (no CPU reference of the whole tensor: it would take minutes and the host's memory):

- **slice consistency**: the same operation on a small slice taken before, across and past
  each boundary (and at the end, and at a random place past the first boundary), computed
  alone in float64 on the device from the same inputs, must equal that slice of the big
  result within the tolerance of the result's dtype (``TOLERANCE``, relative to a scale that
  each case names: the value itself, the sum of magnitudes a reduction or scan adds up, or
  the row's largest value). A small operation is far from every boundary, and the rest of
  the probe set checks small operations;
- **closed forms** at sentinel indices: ``arange`` is its index, a cumulative sum of ones is
  its position, a planted maximum is found where it was planted, a gradient of ``sum`` is 1,
  a position-coded copy holds its source's code.

Memory is planned from the device's free memory (``mem_get_info``) when the probe (or a
child process of it, below) starts: a case whose tensors do not fit is listed as not run
(with what it needs); a probe none of whose cases fit is a SKIP that says how much memory it
needs. An out-of-memory error in a case that was planned to fit is reported the same way,
never as a failure.

An exception in a case is told apart by ``faults.is_device_fault``: an argument check that
refuses the size (``... more than INT_MAX elements``) is a documented limitation, listed as
refused; a fault of the stack that the device context survives (an internal assert) fails
the case. A fault ends the case, not the probe: after a sticky fault (an illegal address:
the context of the process is lost) the remaining cases run in a fresh child process
(``child``), again after each further fault, and a case during which that child
crashes or that runs past ``CASE_TIMEOUT_S`` (the child is killed) is that case's fault.
Every faulting case is listed with its error; the probe is an ERROR when a case faulted and
no judged case was wrong, a FAIL (with the faults in its notes) when one was.

On a CPU device the same cases run with the boundaries scaled down to 2^14 and 2^15
(``CPU_BITS_BELOW``), so CI exercises every case, its oracle and the simulation that plants
the failure the oracle targets (effect ``wrap`` of op ``width``: what a kernel reads when
its offsets wrap).

The cases, their geometry and the ``Scope`` they run in are ``scope``'s; the cases
themselves are in ``CASE_MODULES``. This module imports no torch at import time: the
catalog and the memory table in ``docs/probes.md`` read the registry without it.
"""

from __future__ import annotations

import gc
import json
import os
import random
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from gpuprobe.worker import simulate
from gpuprobe.worker.context import ProbeContext, ProbeOutput, SkipProbe, device_context_problem
from gpuprobe.worker.faults import is_device_fault, is_oom
from gpuprobe.worker.patterns import derive_seed
from gpuprobe.worker.probes import children
from gpuprobe.worker.probes.width import cases as width_cases
from gpuprobe.worker.probes.width import grid as width_grid
from gpuprobe.worker.probes.width.scope import (
    BOUNDARIES,
    GROUPS,
    MAX_EXAMPLES,
    REGISTRY,
    SMALL_KINDS,
    Case,
    CaseRefused,
    Geometry,
    Scope,
    geometry,
)

#: The modules that define the width cases (``@case`` functions): the registry holds their
#: cases once they are imported, which this module does before it reads ``REGISTRY``.
CASE_MODULES = (width_cases, width_grid)

#: Device memory kept free beyond a case's own tensors (workspaces, the float64 references
#: of the slices, library handles), and the fraction of free memory never planned.
RESERVE_BYTES = 1 << 30
RESERVE_FRACTION = 0.04


def cases_for(group: str, kind: str) -> list[Case]:
    """The cases a probe of ``group`` at boundary ``kind`` runs, in order."""
    return [c for c in REGISTRY if c.group == group and kind in c.kinds]


def probe_need_bytes(group: str, kind: str) -> tuple[int, int]:
    """The (smallest, largest) device memory a case of this probe needs on a GPU."""
    g = geometry(kind, True)
    needs = [c.need_bytes(g) + RESERVE_BYTES for c in cases_for(group, kind)]
    return (min(needs), max(needs)) if needs else (0, 0)



def _free(torch: Any, on_gpu: bool) -> None:
    """Returns a case's memory to the device. Never raises: after a fault the context may
    be lost, and the fault, not this cleanup, is what the probe reports."""
    gc.collect()
    if on_gpu:
        try:
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001 - see above
            pass


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


# ---------------------------------------------------------------------------------------
# Running cases: in the probe's worker first; after a fault that leaves the device context
# unusable, the remaining cases run in a fresh child process (``child``), again after
# each further fault.


#: Seconds one case may run in a child process before it counts as hung and the child is
#: killed. The slowest healthy case seen on an H100 took 6 s (and a process's first
#: backward pass 2.6-4 s): a case still running after 20 times that is not slow.
CASE_TIMEOUT_S = 120.0

#: Seconds a child process may take to start (the interpreter, the torch import) before it
#: begins its first case.
CHILD_START_TIMEOUT_S = 180.0

#: How often the probe looks at a child's progress.
CHILD_POLL_S = 0.05

#: Characters of a fault's error text kept in the report.
FAULT_TEXT_CHARS = 300

#: The module a child process runs (``children.start``).
CHILD_MODULE = "gpuprobe.worker.probes.width.child"


@dataclass
class CaseResult:
    """What one case came to, in the probe's worker or in a child process (sent back as
    JSON: plain fields only)."""

    case: str
    #: ``ran`` (its checks counted), ``refused`` (an argument check refused the size),
    #: ``not_run`` (it does not fit in memory), ``fault`` (a fault that left the device
    #: context unusable, or the child process running it crashed or hung).
    outcome: str
    #: Why, for every outcome but ``ran``.
    text: str = ""
    checked: int = 0
    violations: int = 0
    zero_violations: int = 0
    examples: list[str] = field(default_factory=list)
    seconds: float = 0.0
    planned_gib: float = 0.0
    #: 0: the probe's worker; k: the k-th fresh process the probe started after a fault.
    process: int = 0


class CaseFaults(RuntimeError):
    """Cases faulted and no judged case was wrong: the probe is an ERROR whose message names
    every faulting case and what ran after it (``results``: every case's result)."""

    def __init__(self, message: str, results: list[CaseResult]) -> None:
        super().__init__(message)
        self.results = results


def memory_budget(ctx: ProbeContext) -> tuple[int, int]:
    """(free device memory, the bytes a case may plan for) in this process, now."""
    if not ctx.is_gpu:
        return 1 << 62, 1 << 62
    free, _total = ctx.torch.cuda.mem_get_info(ctx.device)
    return free, int(free * (1 - RESERVE_FRACTION)) - RESERVE_BYTES


def context_lost(ctx: ProbeContext) -> str | None:
    """Why this process's device context is unusable after a fault, or None when it
    survived. A simulated sticky error (``simulate.context_lost``) counts as one, on any
    device."""
    simulated = simulate.context_lost()
    if simulated is not None:
        return simulated
    return device_context_problem(ctx.torch, ctx.device) if ctx.is_gpu else None


def run_cases(
    ctx: ProbeContext,
    g: Geometry,
    cases: list[Case],
    *,
    process: int = 0,
    on_start: Callable[[str], None] | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Runs ``cases`` in order in this process, planning memory from what is free now.
    Stops after a case whose fault left the device context unusable (the last result, with
    outcome ``fault``): nothing more can run here."""
    free, budget = memory_budget(ctx)
    scope = Scope(ctx, g, derive_seed(ctx.seed, ctx.probe_id, "width"))
    results: list[CaseResult] = []
    for c in cases:
        if on_start is not None:
            on_start(c.name)
        result = _run_case(ctx, scope, c, free, budget)
        result.process = process
        results.append(result)
        if on_result is not None:
            on_result(result)
        if result.outcome == "fault":
            break
    return results


def case_seed(plan_seed: int, probe: str, case: str) -> int:
    """The seed of case ``case``'s generator: a case draws from a generator of its own, so
    that it can be rerun alone (``gpuprobe repro`` writes one case into a script)."""
    return derive_seed(plan_seed, probe, f"width.{case}")


def _run_case(ctx: ProbeContext, scope: Scope, c: Case, free: int, budget: int) -> CaseResult:
    torch = ctx.torch
    need = c.need_bytes(scope.g)
    planned = round(need / 2**30, 2)
    if need > budget:
        return CaseResult(
            c.name, "not_run", f"needs {_gib(need + RESERVE_BYTES)} of device memory, {_gib(free)} free",
            planned_gib=planned,
        )
    scope.case = c.name
    scope.case_violations = 0
    scope.examples = []
    before = (scope.checked, scope.violations, scope.zero_violations)
    # Each case draws from a generator of its own, so it can be rerun alone (``gpuprobe
    # repro`` writes one case into a script), in whichever process runs it.
    scope.rng = random.Random(case_seed(ctx.seed, ctx.probe_id, c.name))
    # The worker's log names the case a crash interrupts (the supervisor keeps its tail).
    print(f"gpuprobe width: {ctx.probe_id} {c.name}", file=sys.stderr, flush=True)
    outcome, text = "ran", ""
    started = time.perf_counter()
    try:
        c.run(scope)
    except CaseRefused as exc:
        outcome, text = "refused", str(exc)
    except Exception as exc:  # noqa: BLE001 - sorted into refusals, memory and faults below
        message = f"{type(exc).__name__}: {str(exc).strip()}"
        first_line = message.splitlines()[0][:FAULT_TEXT_CHARS]
        if is_oom(torch, exc):
            outcome, text = "not_run", f"out of memory although planned to fit ({_gib(need)} planned): {first_line}"
        elif not is_device_fault(message) or type(exc).__name__ == "NotImplementedError":
            outcome, text = "refused", first_line
        elif context_lost(ctx) is not None:
            # A sticky fault (an illegal address): nothing more can run in this process.
            outcome, text = "fault", first_line
        else:
            # A fault the context survived (an internal assert, a launch the driver refused):
            # a finding of this case; the other cases still run here.
            scope.truth("the operation runs", False, f"faulted: {first_line}")
    finally:
        _free(torch, ctx.is_gpu)
    return CaseResult(
        c.name,
        outcome,
        text,
        checked=scope.checked - before[0],
        violations=scope.violations - before[1],
        zero_violations=scope.zero_violations - before[2],
        examples=list(scope.examples),
        seconds=round(time.perf_counter() - started, 3),
        planned_gib=planned,
    )


class _Progress:
    """Reads the JSON lines a child appends to its progress file (``child``): a whole
    line at a time, so a line being written is read on a later call."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        events = []
        for line in data[:end].decode("utf-8", "replace").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict):
                events.append(event)
        return events


def _last_words(stderr: str) -> str:
    """What a child printed last before it died: the line before Python's fatal-error
    report and that report's headline (``Fatal Python error: Segmentation fault``; the
    stacks and module list after it say nothing about the device), else its last two lines."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip() and not line.startswith("gpuprobe width:")]
    for i, line in enumerate(lines):
        if line.startswith("Fatal Python error"):
            return " | ".join(lines[max(0, i - 1) : i + 1])[:FAULT_TEXT_CHARS]
    return " | ".join(lines[-2:])[:FAULT_TEXT_CHARS] or "no output"


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def continue_in_child(
    ctx: ProbeContext, group: str, kind: str, names: list[str], process: int
) -> tuple[list[CaseResult], str | None]:
    """Runs the cases ``names`` in order in a fresh child process (the same device, seed,
    options and fault simulation). Returns their results up to and including the first
    fault (a case during which the child crashed, or that ran past ``CASE_TIMEOUT_S`` and
    was killed, is that case's fault), and why the child ran nothing when it did not start."""
    fd, progress_path = tempfile.mkstemp(prefix="gpuprobe-width-", suffix=".jsonl")
    os.close(fd)
    engine = simulate.engine()
    job = {
        "device": ctx.device_name,
        "seed": ctx.seed,
        "probe": ctx.probe_id,
        "options": ctx.options,
        "group": group,
        "kind": kind,
        "cases": names,
        "process": process,
        "progress": progress_path,
        "simulate": engine.spec if engine is not None else None,
    }
    child = children.start(CHILD_MODULE, job, what=f"{ctx.probe_id} (fresh process {process})")
    progress = _Progress(progress_path)
    results: list[CaseResult] = []
    current: str | None = None
    current_since = 0.0
    error: str | None = None
    hung = False
    started = time.monotonic()
    try:
        while True:
            exited = child.proc.poll() is not None
            for event in progress.read():
                if "start" in event:
                    current, current_since = str(event["start"]), time.monotonic()
                elif "result" in event:
                    results.append(CaseResult(**event["result"]))
                    current = None
                elif "error" in event:
                    error = str(event["error"])
            if exited:
                break
            now = time.monotonic()
            if current is not None and now - current_since > CASE_TIMEOUT_S:
                hung = True
                break
            if current is None and not results and now - started > CHILD_START_TIMEOUT_S:
                error = f"it did not begin within {CHILD_START_TIMEOUT_S:.0f} s"
                break
            time.sleep(CHILD_POLL_S)
    finally:
        children.kill(child)
        last_words = _last_words(child.stderr_text())
        children.cleanup(child)
        try:
            os.unlink(progress_path)
        except OSError:
            pass
    code = child.proc.returncode
    if current is not None:
        if hung:
            text = f"did not finish within {CASE_TIMEOUT_S:.0f} s in fresh process {process}; it was killed"
        elif code is not None and code < 0:
            text = f"fresh process {process} died with {_signal_name(code)} during it: {last_words}"
        else:
            text = f"fresh process {process} ended with exit code {code} during it: {error or last_words}"
        sys.stderr.write(f"gpuprobe width: {ctx.probe_id} {current}: {text}\n")
        results.append(
            CaseResult(current, "fault", text, seconds=round(time.monotonic() - current_since, 3), process=process)
        )
    if results:
        return results, None
    how = f"signal {_signal_name(code)}" if code is not None and code < 0 else f"exit code {code}"
    return [], f"{error or last_words} (it ended with {how})"


def run_width(ctx: ProbeContext, *, group: str, kind: str) -> ProbeOutput:
    """Runs every case of ``group`` at boundary ``kind`` that fits in the device's memory:
    in this process until a fault leaves the device context unusable, then the rest in
    fresh child processes, one more after each further fault."""
    g = geometry(kind, ctx.is_gpu)
    cases = cases_for(group, kind)
    if not cases:
        raise SkipProbe(f"no {group} operation has a {kind} case")
    free, _budget = memory_budget(ctx)
    results = run_cases(ctx, g, cases)
    notes: list[str] = []
    if results and results[-1].outcome == "fault":
        lost = results[-1]
        ctx.restart_worker = f"{lost.case} faulted: {lost.text}"
        held = _held_after_fault(ctx)
        if held:
            notes.append(
                f"this process still held {_gib(held)} of device memory after {lost.case} faulted; the fresh processes "
                "planned their cases from what was left"
            )
    process = 0
    while len(results) < len(cases):
        process += 1
        names = [c.name for c in cases[len(results) :]]
        more, problem = continue_in_child(ctx, group, kind, names, process)
        if not more:
            results.extend(
                CaseResult(name, "not_run", f"the fresh process for the cases after a fault did not run: {problem}",
                           process=process)
                for name in names
            )
            break
        results.extend(more)
    return _output(ctx, g, group, kind, cases, results, free, process, notes)


def _held_after_fault(ctx: ProbeContext) -> int:
    """Device memory this process's allocator still holds (0 when unknown or on a CPU)."""
    if not ctx.is_gpu:
        return 0
    try:
        return int(ctx.torch.cuda.memory_reserved(ctx.device))
    except Exception:  # noqa: BLE001 - the context is lost; this is only a note
        return 0


def _output(
    ctx: ProbeContext,
    g: Geometry,
    group: str,
    kind: str,
    cases: list[Case],
    results: list[CaseResult],
    free: int,
    processes: int,
    notes: list[str],
) -> ProbeOutput:
    ran = [r for r in results if r.outcome == "ran"]
    faults = [r for r in results if r.outcome == "fault"]
    not_run = [r for r in results if r.outcome == "not_run"]
    refused = [r for r in results if r.outcome == "refused"]
    if not ran and not faults:
        if not_run and not refused:
            smallest = min(c.need_bytes(g) for c in cases) + RESERVE_BYTES
            raise SkipProbe(
                f"needs at least {_gib(smallest)} of free device memory for its smallest case; {_gib(free)} free"
            )
        reasons = [f"{r.case}: {r.text}" for r in not_run + refused]
        raise SkipProbe("no case could run: " + "; ".join(reasons[:4]))
    violations = sum(r.violations for r in results)
    if faults and not violations:
        raise CaseFaults(_fault_message(g, results), results)
    notes = (
        [f"not run: {r.case}: {r.text}" for r in not_run]
        + [f"refused: {r.case}: {r.text}" for r in refused]
        + [f"faulted: {_fault_line(r)}" for r in faults]
        + notes
    )
    if processes:
        notes.append(f"after each fault the remaining cases ran in a fresh process ({processes} started)")
    examples = [e for r in results for e in r.examples][:MAX_EXAMPLES]
    measurement: dict[str, Any] = {
        "kind": "invariant",
        "property": (
            f"{group} operations on {_describe(g)} equal the same operations on slices across and past the "
            "boundary, and closed-form values at sentinel indices"
        ),
        "checked": sum(r.checked for r in results),
        "violations": violations,
        "zero_violations": sum(r.zero_violations for r in results),
    }
    if examples:
        measurement["example"] = " | ".join(examples)
    metrics: dict[str, Any] = {
        "boundary": kind,
        "elements": g.total,
        "cases_run": len(ran),
        "cases_not_run": len(not_run),
        "cases_refused": len(refused),
        "cases_faulted": len(faults),
        "fresh_processes": processes,
        "free_device_gib": round(free / 2**30, 1) if ctx.is_gpu else None,
        "cases": [
            {"case": r.case, "violations": r.violations, "seconds": r.seconds, "planned_gib": r.planned_gib}
            | ({"process": r.process} if r.process else {})
            for r in ran
        ],
    }
    if faults:
        metrics["faulted"] = [{"case": r.case, "error": r.text, "process": r.process} for r in faults]
    return ProbeOutput(measurement=measurement, metrics=metrics, notes=notes)


def _fault_line(r: CaseResult) -> str:
    where = f" (in fresh process {r.process})" if r.process and "fresh process" not in r.text else ""
    return f"{r.case}: {r.text}{where}"


def _fault_message(g: Geometry, results: list[CaseResult]) -> str:
    """The ERROR's text: every faulting case with its error, then what the other cases came
    to (those after a fault ran in fresh processes)."""
    faults = [r for r in results if r.outcome == "fault"]
    listed = "; ".join(_fault_line(r) for r in faults)
    parts = [f"{len(faults)} of {len(results)} cases on {_describe(g)} faulted: {listed}"]
    before = [r.case for r in results if r.outcome == "ran" and r.process == 0]
    after = [r.case for r in results if r.outcome == "ran" and r.process > 0]
    parts.append("Cases that passed in the probe's process: " + (", ".join(before) or "none"))
    parts.append("cases that passed in fresh processes after a fault: " + (", ".join(after) or "none"))
    for outcome, label in (("not_run", "not run"), ("refused", "refused")):
        names = [r.case for r in results if r.outcome == outcome]
        if names:
            parts.append(f"{label}: " + ", ".join(names))
    return parts[0] + ". " + "; ".join(parts[1:])


def _describe(g: Geometry) -> str:
    if g.kind in SMALL_KINDS:
        return f"one dimension of {g.length} (past 2^{g.bits}) in small tensors"
    if g.long:
        return f"one dimension of {g.length} elements (past 2^{g.bits})"
    return f"{g.total} elements in rows of {g.cols} (past 2^{g.bits})"


def memory_markdown() -> str:
    """The table of docs/probes.md ("width"): per probe, its cases and the device memory
    its smallest and largest case need on a GPU (a test keeps the page in step; regenerate
    with ``python -m gpuprobe.worker.probes.width.run``)."""
    lines = [
        "| probe | cases | smallest case needs | largest case needs | cases over 76 GiB (not run on an 80 GB GPU) |",
        "|---|---|---|---|---|",
    ]
    for group in GROUPS:
        for kind in BOUNDARIES:
            cases = cases_for(group, kind)
            if not cases:
                continue
            g = geometry(kind, True)
            low, high = probe_need_bytes(group, kind)
            over = [c.name for c in cases if c.need_bytes(g) + RESERVE_BYTES > 76 * 2**30]
            lines.append(
                f"| `width.{group}.{kind}` | {len(cases)} | {low / 2**30:.1f} GiB | {high / 2**30:.1f} GiB | "
                f"{', '.join(f'`{name}`' for name in over) or '-'} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(memory_markdown(), end="")
