"""The zygote: one interpreter that imports the framework once and forks the lanes' workers.

A tier runs a dozen or more Python workers side by side, and each used to import torch on
its own: on a 16-core host the standard tier spent about a fifth of its CPU time on those
imports, all at once at the start, and the tier is bound by host CPU. The supervisor
(``crates/gpuprobe-runner/src/zygote.rs``) starts this process once per run instead; it
imports torch without touching the device (no CUDA/HIP context exists here, so a forked child
may create its own), says ``ready``, then serves fork requests.

Protocol, on the SOCK_SEQPACKET socket at fd 3: each request is one message, a JSON object
``{"argv": [...], "env": {NAME: VALUE}}`` with the child's descriptors attached
(SCM_RIGHTS, in this order: events, stdout, stderr and, when ``"stdin": true``, stdin); each
reply is one message, ``{"pid": N}`` or ``{"error": "..."}``. The child is forked twice so
that it is reparented to the supervisor (a child subreaper), which waits for it and signals
its process group as it does for a worker it started itself.

The child then is what ``python -X faulthandler -c BOOTSTRAP DIR ARGV...`` would be, with
the framework already imported: its own process group, the descriptors on 0-3, the
environment changes applied, and ``main.process_main(argv)``. Only changes the supervisor
knows to be read after the import are sent (``OMP_NUM_THREADS``, applied through
``torch.set_num_threads`` because the OpenMP runtime read it when torch loaded); a worker
with any other setting is started the ordinary way.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import sys
import time
import traceback
from typing import Any, NoReturn

#: The descriptor the supervisor maps the socket to (the workers' event descriptor number).
SOCKET_FD = 3
#: A request is small (argv and a few variables); the limit only bounds a corrupt one.
MAX_REQUEST = 1 << 20
#: Descriptors a request carries at most (events, stdout, stderr, stdin).
MAX_FDS = 4
#: How long a forked worker waits to be adopted by the supervisor before it runs anyway.
ADOPTION_TIMEOUT_S = 5.0
#: Variables a child may be given after the framework import, and how each is applied.
THREADS_VARIABLE = "OMP_NUM_THREADS"


def _reply(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.send(json.dumps(message).encode())


def _await_adoption(middle: int) -> None:
    """Waits until the middle process is gone and this one belongs to the supervisor: the
    worker binds its parent-death signal to its parent, which must be the supervisor's
    (main) thread, not the exiting middle process."""
    deadline = time.monotonic() + ADOPTION_TIMEOUT_S
    while os.getppid() == middle and time.monotonic() < deadline:
        time.sleep(0.0005)


def _become_worker(sock: socket.socket, request: dict[str, Any], fds: list[int], torch: Any, middle: int) -> NoReturn:
    """In the grandchild: set up as a freshly started worker and run it; never returns."""
    status = 1
    try:
        os.setpgid(0, 0)
        _await_adoption(middle)
        sock.detach()  # fd 3 is about to become the event descriptor
        events, stdout, stderr = fds[0], fds[1], fds[2]
        stdin = fds[3] if request.get("stdin") else os.open(os.devnull, os.O_RDONLY)
        for target, source in ((0, stdin), (1, stdout), (2, stderr), (SOCKET_FD, events)):
            os.dup2(source, target)
        for fd in set(fds) | {stdin}:
            if fd > SOCKET_FD:
                os.close(fd)
        env = request.get("env") or {}
        for name, value in env.items():
            os.environ[str(name)] = str(value)
        if THREADS_VARIABLE in env:
            try:
                torch.set_num_threads(max(1, int(env[THREADS_VARIABLE])))
            except (ValueError, RuntimeError):
                pass
        # One line in the worker's log: how it started, and the thread cap as torch holds it.
        print(
            f"gpuprobe worker: forked from the zygote; {THREADS_VARIABLE}={env.get(THREADS_VARIABLE, '(unset)')}, torch threads {torch.get_num_threads()}",
            file=sys.stderr,
            flush=True,
        )
        argv = [str(a) for a in request["argv"]]
        sys.argv = ["-c", *argv]
        from gpuprobe.worker import main as worker_main

        worker_main.process_main(argv)  # exits the process
    except BaseException:  # noqa: BLE001 - whatever happened, this process must end here
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os._exit(status)


def _fork(sock: socket.socket, request: dict[str, Any], fds: list[int], torch: Any) -> int:
    """Forks the worker as a grandchild and returns its pid once its parent is gone (so it
    belongs to the supervisor, the nearest subreaper, by the time the pid is known)."""
    read_end, write_end = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(read_end)
            middle_pid = os.getpid()
            worker = os.fork()
            if worker == 0:
                os.close(write_end)
                _become_worker(sock, request, fds, torch, middle_pid)
            # Both sides set the group, so the supervisor can signal it as soon as it knows
            # the pid, whichever runs first.
            try:
                os.setpgid(worker, worker)
            except OSError:
                pass
            os.write(write_end, str(worker).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        data = b""
        while chunk := os.read(read_end, 64):
            data += chunk
    finally:
        os.close(read_end)
        os.waitpid(middle, 0)
    if not data:
        raise OSError("the forked worker did not report its process id")
    return int(data)


def serve(sock: socket.socket, torch: Any) -> int:
    """Answers fork requests until the supervisor closes the socket."""
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(sock, MAX_REQUEST, MAX_FDS)
        except OSError:
            return 0
        if not message:
            for fd in fds:
                os.close(fd)
            return 0
        try:
            request = json.loads(message)
            if not isinstance(request, dict) or not isinstance(request.get("argv"), list):
                raise ValueError("a request is an object with an argv list")
            needed = 4 if request.get("stdin") else 3
            if len(fds) != needed:
                raise ValueError(f"{len(fds)} descriptors where {needed} were expected")
            if torch.cuda.is_initialized():
                raise RuntimeError("the device context exists here; a forked worker could not use it")
            pid = _fork(sock, request, fds, torch)
            _reply(sock, {"pid": pid})
        except Exception as exc:  # noqa: BLE001 - the supervisor starts this worker itself then
            _reply(sock, {"error": f"{type(exc).__name__}: {exc}"})
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass


def main(argv: list[str]) -> int:
    """``argv``: the run's options as JSON (the bytecode cache is set up from them before the
    import, as a worker does)."""
    sock = socket.socket(fileno=SOCKET_FD)
    try:
        options = json.loads(argv[0]) if argv else {}
    except ValueError:
        options = {}
    from gpuprobe.worker import bytecode, envinfo
    from gpuprobe.worker import main as worker_main

    # Gone when the supervisor is (its workers, once adopted, bind the same signal).
    worker_main.die_with_supervisor()
    try:
        bytecode.enable_if_needed((options or {}).get("bytecode_cache"))
    except Exception:  # noqa: BLE001 - a speed-up, never a reason to fail
        pass
    torch, why = envinfo.import_torch()
    if torch is None:
        _reply(sock, {"error": f"torch did not import: {why}"})
        return 1
    # What every worker imports anyway, so that forks share it too.
    from gpuprobe.worker import catalog  # noqa: F401

    if torch.cuda.is_initialized():
        _reply(sock, {"error": "importing torch created a device context"})
        return 1
    # Every object made so far moves to the collector's permanent generation: a forked
    # worker's collections then never walk (and so never copy, page by page) the thousands
    # of modules it shares with this process.
    gc.collect()
    gc.freeze()
    _reply(sock, {"ready": True, "pid": os.getpid()})
    return serve(sock, torch)


def process_main(argv: list[str]) -> NoReturn:
    try:
        status = main(argv)
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
