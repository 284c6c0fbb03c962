"""Fault family catalog: deliberate real faults that prove the isolation.

Each probe breaks something on purpose, through the framework, and the run must report it
with the right class and go on with the next probe on a usable GPU:

- ``fault.illegal_address.index``: an out-of-bounds index on the device (a device-side assert
  on CUDA builds, a memory access fault on ROCm builds compiled without device asserts). The
  error is sticky, so the worker sees its context lost after the error, exits, and a fresh
  worker runs the next probe (ERROR on CUDA; CRASH where the runtime aborts the process);
- ``fault.hang.kernel``: a kernel that never ends (``torch.cuda._sleep`` with a cycle count of
  centuries); the supervisor's timeout kills the process group (HANG);
- ``fault.oom.huge``: an allocation of 2^50 bytes (2^62 on the CPU): ``torch.OutOfMemoryError``,
  recorded as ERROR, and the same worker goes on;
- ``fault.signal.kill``: the worker kills itself with SIGKILL (CRASH, signal 9);
- ``fault.signal.segv``: the worker reads address 8 through ctypes, a real segmentation fault
  in native code rather than a signal sent to itself (CRASH, signal 11, after faulthandler's
  Python stack);
- ``fault.signal.abort``: the worker calls ``os.abort()``, as a native library does on a failed
  assertion (CRASH, signal 6);
- ``fault.recovery.roundtrip``: not a fault but the check that follows them (it is last in
  catalog order): a bit-exact 64 MiB round trip and an exact matmul on the same device,
  which must pass in whatever worker runs it after the faults.

All declare ``needs = ["explicit"]`` (run only when ``--only`` names them) and tier ``soak``
(no check tier includes them, as for the native full memtest). Their timeouts are short so
that the hang is found quickly. The signal faults behave the same on the CPU as on a GPU (the
fault is in the worker process, not on the device), so they are tested without one.
"""

from __future__ import annotations

from gpuprobe.worker.catalog import BIT_EXACT, ProbeDef

_RUN = "gpuprobe.worker.probes.fault.run"


def _fault(case: str, variant: str, description: str, timeout_s: float, impl: str | None = None) -> ProbeDef:
    """A deliberate fault, run by ``fault_run.run_<impl>`` (``impl`` defaults to ``case``)."""
    return ProbeDef(
        id=f"fault.{case}.{variant}",
        tier="soak",
        rule=BIT_EXACT,
        description=description,
        impl=f"{_RUN}:run_{impl or case}",
        timeout_s=timeout_s,
        needs=("explicit",),
    )


def specs() -> list[ProbeDef]:
    """The deliberate faults."""
    return [
        _fault(
            "illegal_address",
            "index",
            "deliberate fault: gathers index 2^40 of a 16-element device tensor (device-side assert or illegal "
            "address); the context is lost and a fresh worker continues",
            30.0,
        ),
        _fault(
            "hang",
            "kernel",
            "deliberate fault: a kernel that spins for 2^62 clock cycles; the supervisor's timeout kills it",
            10.0,
        ),
        _fault(
            "oom",
            "huge",
            "deliberate fault: allocates 2^50 bytes on the device (2^62 on the CPU): out-of-memory, and the worker "
            "goes on",
            30.0,
        ),
        _fault(
            "signal",
            "kill",
            "deliberate fault: the worker sends itself SIGKILL; the probe is a crash and a fresh worker continues",
            30.0,
        ),
        _fault(
            "signal",
            "segv",
            "deliberate fault: the worker reads address 8 (a real segmentation fault in native code); the probe "
            "is a crash with signal 11 and a fresh worker continues",
            30.0,
            impl="segv",
        ),
        _fault(
            "signal",
            "abort",
            "deliberate fault: the worker calls abort(), as a native library does on a failed assertion; the probe "
            "is a crash with signal 6 and a fresh worker continues",
            30.0,
            impl="abort",
        ),
        _fault(
            "recovery",
            "roundtrip",
            "after the deliberate faults: a 64 MiB + 4 B round trip through the device and an exact 512x512 matmul, "
            "bit for bit: the device is still usable",
            60.0,
        ),
    ]
