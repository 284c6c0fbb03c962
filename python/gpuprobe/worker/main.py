"""Worker entry point: reads a plan, runs it, streams events.

The supervisor starts it in the user's interpreter, without installing anything::

    python -X faulthandler -c "import sys; sys.path.insert(0, sys.argv[1]); \\
        import gpuprobe.worker.main as m; m.process_main(sys.argv[2:])" \\
        <dir> --plan <plan.json> --event-fd 3

(``python -m gpuprobe.worker --plan X --event-fd N`` does the same, and returns normally.)

Modes: ``catalog`` (hello without importing torch, the catalog, done), ``env`` (hello with
torch facts, done) and ``run`` (hello, then begin/result per probe, then done). A run applies
the framework switches of ``GPUPROBE_SWITCHES`` (``gpuprobe.switches``) once torch is
imported and the device checked, before the hello.

Exit status: 0 when the plan ran (including when torch is unusable: hello says why and the
supervisor marks the probes NOT-TESTED), 2 for a bad command line or plan, 3 when the device
context became unusable after a probe error (see ``context.device_context_problem``).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Mapping
from typing import Any, NoReturn

from gpuprobe import switches
from gpuprobe.worker import bytecode, catalog, digest, envinfo, simulate
from gpuprobe.worker.context import ProbeContext, SkipProbe, device_context_problem
from gpuprobe.worker.events import EventStream
from gpuprobe.worker.threads import ThreadBudget
from gpuprobe.worker.faults import is_oom, memory_taken_by_others

PROTOCOL_VERSION = 1
#: What the supervisor writes on stdin to start a worker that waits (``protocol::START_LINE``).
START_LINE = "start"

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_CONTEXT_LOST = 3

MODES = ("catalog", "env", "run")


class PlanError(ValueError):
    """The plan file is missing, unreadable or malformed."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parses ``--plan PATH --event-fd N``."""
    parser = argparse.ArgumentParser(prog="gpuprobe.worker", description="gpuprobe probe worker")
    parser.add_argument("--plan", required=True, help="path of the WorkerPlan JSON file")
    parser.add_argument("--event-fd", type=int, default=3, help="file descriptor for JSON-lines events")
    return parser.parse_args(argv)


def load_plan(path: str) -> dict[str, Any]:
    """Reads and validates a ``WorkerPlan``."""
    try:
        with open(path, encoding="utf-8") as handle:
            plan = json.load(handle)
    except OSError as exc:
        raise PlanError(f"cannot read plan {path}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise PlanError(f"plan {path} is not JSON: {exc}") from exc
    if not isinstance(plan, dict):
        raise PlanError("the plan must be a JSON object")
    if plan.get("protocol") != PROTOCOL_VERSION:
        raise PlanError(f"plan protocol {plan.get('protocol')!r}; this worker speaks {PROTOCOL_VERSION}")
    if plan.get("mode") not in MODES:
        raise PlanError(f"unknown mode {plan.get('mode')!r} (one of {', '.join(MODES)})")
    probes = plan.get("probes", [])
    if not isinstance(probes, list) or not all(isinstance(p, str) for p in probes):
        raise PlanError("probes must be a list of probe ids")
    seed = plan.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise PlanError("seed must be a non-negative integer")
    device = plan.get("device")
    if plan["mode"] == "run" and not isinstance(device, str):
        raise PlanError("a run plan needs a device (cpu or cuda:N)")
    options = plan.get("options", {})
    if not isinstance(options, dict):
        raise PlanError("options must be an object")
    simulate_spec = plan.get("simulate")
    if simulate_spec is not None and not isinstance(simulate_spec, dict):
        raise PlanError("simulate must be an object or null")
    return plan


def _hello(
    events: EventStream,
    *,
    torch_info: dict[str, Any] | None,
    unusable: str | None,
    packages: dict[str, str],
    simulated: bool,
    conda: dict[str, Any] | None = None,
) -> None:
    event: dict[str, Any] = {
        "event": "hello",
        "protocol": PROTOCOL_VERSION,
        "pid": os.getpid(),
        "worker": "python",
        "executable": envinfo.executable(),
        "python_version": envinfo.python_version(),
        "interpreter": envinfo.interpreter_info(),
        "torch": torch_info,
        "packages": packages,
        "simulated": simulated,
    }
    if unusable:
        event["unusable"] = unusable
    if conda is not None:
        event["conda"] = conda
    events.emit(event)


def die_with_supervisor() -> None:
    """Makes the kernel kill this worker when its supervisor dies.

    A worker stuck in a hung GPU call would otherwise outlive a killed gpuprobe and keep
    the GPU busy. Linux only (prctl PR_SET_PDEATHSIG); elsewhere a no-op. If the parent is
    already gone (it died before this ran), exit at once.
    """
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(EXIT_USAGE)


def main(argv: list[str] | None = None) -> int:
    """Runs the worker; returns the process exit status."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    die_with_supervisor()
    if not faulthandler.is_enabled():
        faulthandler.enable()
    if hasattr(signal, "SIGUSR1"):
        # On a timeout the supervisor sends SIGUSR1 before killing the process group: every
        # thread's Python stack goes to stderr, so a HANG says where it hung.
        faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)
    try:
        events = EventStream(args.event_fd)
    except OSError as exc:
        print(f"gpuprobe worker: cannot open event descriptor {args.event_fd}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        plan = load_plan(args.plan)
    except PlanError as exc:
        print(f"gpuprobe worker: {exc}", file=sys.stderr)
        _hello(events, torch_info=None, unusable=None, packages={}, simulated=False)
        events.log("warn", f"plan refused: {exc}")
        return EXIT_USAGE
    mode = plan["mode"]
    if mode == "catalog":
        return _catalog_mode(events, plan.get("options") or {})
    if mode == "env":
        return _env_mode(events)
    return _run_mode(events, plan)


def process_main(argv: list[str]) -> NoReturn:
    """The worker process's entry: ``main``, then an immediate exit with its status.

    Every event is written and flushed by then. What the interpreter's normal exit would add
    is teardown: finalizing the thousands of modules torch imports, destroying the CUDA/HIP
    context, joining threads a probe left behind. It changes no result (the supervisor has
    them all and ignores how a worker that said ``done`` exits), but the lane's next worker
    and the report wait for it. The supervisor ends the worker's process group afterwards,
    so children a probe left behind do not outlive it.
    """
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse on a bad command line
        status = exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except BaseException:  # noqa: BLE001 - report it the way the interpreter would
        traceback.print_exc()
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(status)


def _catalog_mode(events: EventStream, options: dict[str, Any]) -> int:
    # No torch here unless asked: listing the catalog must stay fast and work without a
    # framework. Option ``expand`` (a list of families) adds the probes that depend on the
    # installed framework (the sweep's operators); that imports torch.
    _hello(events, torch_info=None, unusable=None, packages={}, simulated=False)
    probes = [p.spec() for p in catalog.all_probes().values()]
    listing: dict[str, Any] = {"event": "catalog", "probes": probes}
    families = options.get("expand") or []
    if isinstance(families, list) and families:
        _cache_bytecode(events, options)
        torch, why = envinfo.import_torch()
        if torch is None:
            events.log("warn", f"framework-dependent probes not listed: {why}")
        else:
            extra, notes = catalog.expanded([str(f) for f in families], torch)
            probes.extend(p.spec() for p in extra)
            for note in notes:
                events.log("warn", note)
            # Only here, where torch is imported anyway: the GPUs, for planning ahead.
            devices = catalog.framework_devices(torch)
            if devices is not None:
                listing["devices"] = devices
    events.emit(listing)
    events.emit({"event": "done"})
    return EXIT_OK


def _cache_bytecode(events: EventStream, options: dict[str, Any]) -> None:
    """Before the framework import: gpuprobe's bytecode cache where the interpreter's own
    cannot work (``bytecode.py``); never fatal."""
    try:
        note = bytecode.enable_if_needed(options.get("bytecode_cache"))
    except Exception as exc:  # noqa: BLE001 - a speed-up, never a reason to fail
        note = f"bytecode cache not set up: {type(exc).__name__}: {exc}"
    if note:
        events.log("info", note)


def _torch_facts(torch: Any) -> tuple[dict[str, Any] | None, str | None]:
    try:
        return envinfo.torch_info(torch), None
    except Exception as exc:  # noqa: BLE001 - a broken runtime is a finding, not a crash
        return None, f"torch imported but its device query failed: {type(exc).__name__}: {exc}"


def _env_mode(events: EventStream) -> int:
    torch, why = envinfo.import_torch()
    info = None
    if torch is not None:
        info, why = _torch_facts(torch)
    packages, conda = envinfo.package_facts()
    _hello(events, torch_info=info, unusable=why, packages=packages, simulated=False, conda=conda)
    events.emit({"event": "done"})
    return EXIT_OK


def _run_mode(events: EventStream, plan: dict[str, Any]) -> int:
    device = plan["device"]
    spec = plan.get("simulate")
    simulated = spec is not None
    engine = None
    if simulated:
        # Validate the faults before the (slow) framework import: a bad spec fails fast.
        try:
            engine = simulate.FaultEngine(spec)
        except simulate.SimulationError as exc:
            print(f"gpuprobe worker: bad simulation spec: {exc}", file=sys.stderr)
            _hello(events, torch_info=None, unusable=None, packages={}, simulated=True)
            events.log("warn", f"simulation spec refused: {exc}")
            return EXIT_USAGE
    _cache_bytecode(events, plan.get("options") or {})
    # After the bytecode cache (helpers inherit it), before the framework import (they
    # start beside it), and only when the probes will run (not for a gated lane still
    # waiting for its turn: its helpers would hold the host meanwhile).
    helper_notes = [] if plan.get("wait_for_start") else catalog.start_helpers(plan.get("probes", []))
    torch, why = envinfo.import_torch()
    info = None
    applied: list[switches.Applied] = []
    if torch is not None:
        info, why = _torch_facts(torch)
        if why is None:
            why = envinfo.device_problem(torch, device)
    if why is None:
        # Before the simulation binds: its live cures read the switches' state.
        applied, why = apply_switches(torch)
    if why is None and engine is not None:
        simulate.activate_engine(engine, torch, device)
    packages, conda = envinfo.package_facts()
    _hello(events, torch_info=info, unusable=why, packages=packages, simulated=simulated, conda=conda)
    if applied:
        events.log(
            "info",
            "framework switches applied: "
            + ", ".join(f"{a.name}={a.value} (reads back {a.read_back})" for a in applied),
        )
    for note in helper_notes:
        events.log("warn", note)
    if why is not None:
        # The supervisor marks every planned probe NOT-TESTED with this reason.
        events.emit({"event": "done"})
        return EXIT_OK
    if plan.get("wait_for_start") and not start_line_arrived(sys.stdin):
        # Started ahead of its turn (an exclusive lane) and the supervisor went away first.
        return EXIT_OK
    if engine is not None:
        events.log("info", f"fault simulation active ({engine.source or 'unnamed'})")
        for message in engine.messages:
            events.log("info", message)
    thread_budget = ThreadBudget(plan.get("thread_budget"))
    for probe_id in plan.get("probes", []):
        thread_budget.apply(torch)
        status = _run_probe(events, torch, device, plan, catalog.lookup(probe_id), probe_id, simulated)
        if status is not None:
            return status
        give_back_cached_memory(torch, device)
    events.emit({"event": "done"})
    return EXIT_OK


#: A lane's share of device memory between probes (the engine's ``MEMORY_PER_LANE``,
#: plan/lanes.rs, sizes lanes by it).
LANE_MEMORY_BYTES = 2 << 30


def give_back_cached_memory(torch: Any, device: str) -> None:
    """Returns the caching allocator's unused blocks to the device when this worker holds
    more than its lane's share: a probe that needed tens of GiB for a moment (a large batch
    of a solver, a wide tensor) would otherwise keep them reserved for the rest of the lane,
    and a probe beside it would fail to allocate 4 GiB on a 140 GiB device (seen on the H200:
    two sweep workers held 71 and 35 GiB between probes)."""
    if not device.startswith("cuda"):
        return
    try:
        if torch.cuda.memory_reserved(device) > LANE_MEMORY_BYTES:
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - a release is an optimisation: a broken context is the next probe's to report
        pass


def apply_switches(torch: Any, environ: Mapping[str, str] | None = None) -> tuple[list[switches.Applied], str | None]:
    """Applies the framework switches of ``GPUPROBE_SWITCHES`` (a ``fix`` trial's) in this
    worker, after the framework import and before any probe. Returns what was applied, or
    the reason every probe of the plan is NOT-TESTED: a switch that cannot be set or does
    not read back as set would make the trial test something other than it claims."""
    try:
        return switches.apply(torch, switches.from_environ(environ)), None
    except switches.SwitchError as exc:
        return [], f"framework switch refused: {exc}"


def start_line_arrived(stream: Any) -> bool:
    """Waits for the supervisor's start line (plan ``wait_for_start``); False at end of input."""
    try:
        line = stream.readline() if stream is not None else ""
    except (OSError, ValueError):
        return False
    return line.rstrip("\r\n") == START_LINE


def _missing_need(torch: Any, device: str, need: str) -> str | None:
    if need == "fp8":
        missing = [n for n in ("float8_e4m3fn", "float8_e5m2") if not hasattr(torch, n)]
        if missing:
            return f"this torch {torch.__version__} has no {', '.join('torch.' + n for n in missing)}"
        return None
    if need == "explicit":
        # Selection matter (the supervisor plans it only when named), nothing to check here.
        return None
    if need == "multi_gpu":
        count = torch.cuda.device_count() if device != "cpu" else 0
        if count < 2:
            return f"needs at least 2 GPUs; {count} visible to torch"
        return None
    return f"needs {need!r}, which this worker cannot check"


def _output_digest(
    torch: Any,
    device: str,
    plan: dict[str, Any],
    probe: catalog.ProbeDef,
    probe_id: str,
    ctx: ProbeContext,
    first: digest.Collector,
) -> tuple[dict[str, Any] | None, str | None]:
    """Runs a digested probe a second time, from the same seed, and returns its output digest
    when both runs read back the same bits (``gpuprobe.worker.digest``), else the note why
    there is none. The second run's measurement is discarded: the first one is judged."""
    seed = int(plan.get("seed", 0))
    if first.too_large or first.outputs <= 0:
        # Nothing to compare: no second run.
        return digest.judged(first, None, seed)
    if ctx.restart_worker:
        return digest.judged(first, None, seed, "the device context is unusable after the first run")
    again = ProbeContext(torch, device, seed, probe_id, plan.get("options") or {})
    try:
        with simulate.bypassed(), digest.collecting() as second:
            probe.resolve()(again, **probe.params)
    except Exception as exc:  # noqa: BLE001 - the first run's result stands; only the digest is lost
        return digest.judged(first, None, seed, f"the second run raised {type(exc).__name__}")
    if again.restart_worker:
        ctx.restart_worker = again.restart_worker
    threads = None if ctx.is_gpu else torch.get_num_threads()
    return digest.judged(first, second, seed, cpu_threads=threads)


def _run_probe(
    events: EventStream,
    torch: Any,
    device: str,
    plan: dict[str, Any],
    probe: catalog.ProbeDef | None,
    probe_id: str,
    simulated: bool,
) -> int | None:
    """Runs one probe and emits begin/result; returns an exit status when the worker must stop."""
    events.emit({"event": "begin", "probe": probe_id, "device": device})
    started = time.perf_counter()
    result: dict[str, Any] = {"event": "result", "probe": probe_id, "device": device}
    errored = False
    caught: list[warnings.WarningMessage] = []
    ctx: ProbeContext | None = None
    if probe is None:
        result.update(outcome="error", type="UnknownProbe", message=f"this worker has no probe {probe_id!r}")
        errored = True
    else:
        missing = next((m for m in (_missing_need(torch, device, n) for n in probe.needs) if m), None)
        if missing:
            result.update(outcome="skip", reason=missing)
        else:
            ctx = ProbeContext(torch, device, plan.get("seed", 0), probe_id, plan.get("options") or {})
            with warnings.catch_warnings(record=True) as caught_here:
                warnings.simplefilter("always")
                try:
                    with simulate.bypassed(), digest.collecting() as outputs:
                        output = probe.resolve()(ctx, **probe.params)
                except SkipProbe as skip:
                    result.update(outcome="skip", reason=str(skip))
                except Exception as exc:  # noqa: BLE001 - every probe failure is reported
                    crowded = memory_taken_by_others(str(exc)) if is_oom(torch, exc) else None
                    if crowded is not None:
                        # Not this stack's fault: other processes held the device's memory.
                        result.update(outcome="skip", reason=crowded)
                    else:
                        result.update(
                            outcome="error",
                            type=type(exc).__name__,
                            message=str(exc) or type(exc).__name__,
                            traceback=traceback.format_exc(),
                        )
                        errored = True
                else:
                    notes = list(output.notes) + ctx.notes
                    observation: dict[str, Any] = {
                        "probe": probe_id,
                        "device": device,
                        "measurement": output.measurement,
                        "metrics": {k: v for k, v in output.metrics.items() if v is not None},
                        "notes": notes,
                    }
                    if digest.digested(probe_id, probe.tier):
                        record, note = _output_digest(torch, device, plan, probe, probe_id, ctx, outputs)
                        if record is not None:
                            observation["output_digest"] = record
                        if note is not None:
                            notes.append(note)
                    result.update(outcome="observed", observation=observation)
            caught = list(caught_here)
    warning_notes = []
    for message in dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught):
        events.log("warn", f"{probe_id}: {message}")
        warning_notes.append(f"warning: {message}")
    if result.get("outcome") == "observed":
        notes = result["observation"]["notes"]
        notes.extend(warning_notes)
        if simulated:
            notes.append(simulate.SIMULATED_NOTE)
    result["elapsed_s"] = round(time.perf_counter() - started, 6)
    try:
        events.emit(result)
    except ValueError as exc:
        # A non-finite float slipped into an observation: report it rather than lose the probe.
        events.emit(
            {
                "event": "result",
                "probe": probe_id,
                "device": device,
                "outcome": "error",
                "type": "ValueError",
                "message": f"observation not representable in JSON: {exc}",
                "elapsed_s": result["elapsed_s"],
            }
        )
    if ctx is not None and ctx.restart_worker:
        events.log("warn", f"device context unusable after {probe_id}: {ctx.restart_worker}; exiting so that a fresh "
                   "worker runs the remaining probes")
        return EXIT_CONTEXT_LOST
    if errored and device != "cpu":
        problem = device_context_problem(torch, device)
        if problem is not None:
            events.log(
                "warn",
                f"device context unusable after {probe_id}: {problem}; exiting so that a fresh worker "
                "runs the remaining probes",
            )
            return EXIT_CONTEXT_LOST
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
