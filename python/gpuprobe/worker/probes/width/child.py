"""Child process of the width family: the cases of one probe that remain after a fault.

A sticky fault (an illegal memory access) leaves the device context of the process it hit
unusable, so the probe (``width_run.run_width``) runs its remaining cases here, in a fresh
process with a context of its own, started with ``children.start``. Job (JSON on the
command line): ``device``, ``seed``, ``probe``, ``options`` (the probe's context), ``group``,
``kind``, ``cases`` (names, in order), ``process`` (this child's number), ``progress`` (a
file) and ``simulate`` (the worker's fault simulation spec, or null).

The child applies the framework switches of the worker's environment and its fault
simulation, as the worker does, then runs the cases with ``width_run.run_cases`` (memory
planned from what is free in this process) and appends one JSON line to the progress file
before each case (``{"start": name}``) and after it (``{"result": {...}}``). It stops after
a fault that loses its own context, as the worker does. The probe reads the file while the
child runs: a case that started and never reported is the case during which the child
crashed, or that the probe killed when it ran too long; either is that case's fault. A
failure of this module itself (before any case) is reported as ``{"error": text}``.
"""

from __future__ import annotations

import json
import sys
import traceback
from dataclasses import asdict
from typing import Any, TextIO


def _emit(stream: TextIO, event: dict[str, Any]) -> None:
    stream.write(json.dumps(event, sort_keys=True) + "\n")
    stream.flush()


def main(argv: list[str]) -> int:
    job = json.loads(argv[0])
    with open(job["progress"], "a", encoding="utf-8") as progress:
        try:
            return _run(job, progress)
        except Exception as exc:  # noqa: BLE001 - reported to the probe, which decides
            traceback.print_exc()
            _emit(progress, {"error": f"{type(exc).__name__}: {str(exc).strip()}".splitlines()[0][:300]})
            return 1


def _run(job: dict[str, Any], progress: TextIO) -> int:
    import torch

    from gpuprobe import switches
    from gpuprobe.worker import simulate
    from gpuprobe.worker.context import ProbeContext
    from gpuprobe.worker.probes.width import run as width_run
    from gpuprobe.worker.probes.width import scope as width_scope

    device = job["device"]
    switches.apply(torch, switches.from_environ())
    if job.get("simulate") is not None:
        simulate.activate(job["simulate"], torch, device)
    ctx = ProbeContext(torch, device, job["seed"], job["probe"], job.get("options") or {})
    by_name = {c.name: c for c in width_run.cases_for(job["group"], job["kind"])}
    cases = [by_name[name] for name in job["cases"]]
    g = width_scope.geometry(job["kind"], ctx.is_gpu)
    # As in the worker: the probe's own code runs with the simulation's wrappers bypassed;
    # the operation under test meets its faults through ``Scope.op``.
    with simulate.bypassed():
        width_run.run_cases(
            ctx,
            g,
            cases,
            process=int(job["process"]),
            on_start=lambda name: _emit(progress, {"start": name}),
            on_result=lambda result: _emit(progress, {"result": asdict(result)}),
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
