"""The sweep's reference, computed in a process of its own.

The float64 CPU reference can fail by itself: LAPACK reports parameter errors for
non-finite input and, after that, a later call in the same process has died with SIGSEGV.
A reference that crashes, hangs or raises is the reference's finding and must never be
blamed on the device, and must not take the device's results down with it. So the worker
starts one reference process per sweep lane (the GPU hidden from it, CPU only), asks it for
each case by number (op, dtype, seed, sample, transform, direction: ``sweep_cases`` builds
the same inputs on both sides, and a digest of them proves it), and restarts it when it
dies. Messages are length-prefixed pickles on the process's stdin and stdout.

A request names the case as the worker's ``sweep_cases.Case`` does (with ``argument``, the
tensor a targeted transform changes). Modes of a request: ``reference`` (float64, the
inputs in the case's layout), ``same_dtype``
(the sample's dtype: the yardstick of the oracle, never the truth),
``reference_contiguous`` (float64 from contiguous copies: a second opinion when a layout
transform differs, since the CPU's strided kernels have bugs of their own),
``same_dtype_poisoned`` (a per-argument case in the sample's dtype twice, from the same
generator state: ``outputs`` with the targeted view cut from a base poisoned beside it,
``plain`` as usual; where they differ, the CPU kernel reads past the view's end) and
``variant_same_dtype`` (a call variant's own outputs on the CPU in the sample's dtype: in
every other mode a call variant returns the functional call's values, after the CPU's
variant has shown the call is valid). When the
sample at the requested index has another digest, the sample with the device's digest is
used (the database's generators may iterate over sets, whose order follows the process).

Where it is safe, the reference process is a fork of the worker, made at the first
reference once the worker has loaded the database, instead of a fresh interpreter: a fresh
one imports torch and the database again (on the H200 host the standard tier's two cost
17 CPU seconds, on a host whose cores every lane already keeps busy). A fork shares the
worker's imports and gives the same isolation (its own address space: a crash is its own).
It is made only where nothing it inherits could change what it computes (``fork_refusal``):
no framework switch under test applied, no simulated fault bound. Elsewhere, and where fork
fails, a fresh interpreter is started as before. The fork computes on one CPU thread, set
first thing, as PyTorch's own data-loader workers do after their fork: the worker's OpenMP
team has no threads in the child, and only a pool of one never uses it (the references are
small; on a host whose lanes share the cores each worker had one or two threads anyway). It
never touches the GPU (the framework refuses device calls in a forked child), hands its
descriptors back (only its two pipes and stderr stay open, standard output going to
stderr), and leaves with ``os._exit``.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
from typing import Any, BinaryIO, Iterator

from gpuprobe.worker.probes import children
from gpuprobe.worker.probes.sweep import cases as sweep_cases

_HEADER = struct.Struct("<Q")
#: Largest message accepted (the database's samples are small; the largest outputs, of the
#: ``large_*`` transforms, are tens of MiB: ``sweep_cases.LARGE_ELEMENTS``).
MAX_MESSAGE = 1 << 30


def _write(stream: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read(stream: BinaryIO) -> Any:
    header = _read_exact(stream, _HEADER.size)
    if header is None:
        raise EOFError("end of stream")
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes")
    data = _read_exact(stream, size)
    if data is None:
        raise EOFError("end of stream")
    return pickle.loads(data)  # noqa: S301 - our own child process, over a private pipe


# --------------------------------------------------------------------------- the server


def error_text(exc: BaseException, limit: int = 400) -> str:
    """``Type: first line of the message``, at most ``limit`` characters."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:limit]


def handle(torch: Any, request: dict[str, Any], cache: dict[Any, Any]) -> dict[str, Any]:
    """Computes one reference (also used in-process by the tests)."""
    from gpuprobe.worker.probes.sweep import db as sweep_db

    try:
        database = sweep_db.load(torch)
    except sweep_db.DatabaseUnavailable as exc:
        return {"ok": False, "kind": "unavailable", "error": str(exc)}
    info = database.entry(request["key"])
    if info is None:
        return {"ok": False, "kind": "unavailable", "error": f"no entry {request['key']!r}"}
    # A full-tier probe's samples are the entry's reference inputs (they begin with its
    # sample inputs); the digest below proves both sides built the same.
    wider = bool(request.get("reference_inputs", False))
    cache_key = (request["key"], request["dtype"], request["seed"], request["requires_grad"], wider)
    if cache_key not in cache:
        cache.clear()
        try:
            cache[cache_key] = sweep_cases.generate_samples(
                torch, info, request["dtype"], request["seed"], request["requires_grad"], reference=wider
            )
        except sweep_cases.CaseError as exc:
            cache[cache_key] = exc
    samples = cache[cache_key]
    if isinstance(samples, Exception):
        return {"ok": False, "kind": "unavailable", "error": str(samples)}
    if request["sample"] >= len(samples):
        return {"ok": False, "kind": "mismatch", "error": "the reference generated fewer samples"}
    # Each sample's digest, computed once per sample list: every case of a probe (and every
    # mode of a case) asks again, and a search below may read them all.
    digests: list[str | None] = cache.setdefault(("digests", cache_key), [None] * len(samples))

    def digest_of(i: int) -> str:
        if digests[i] is None:
            digests[i] = sweep_cases.digest(torch, samples[i])
        return digests[i]  # type: ignore[return-value]

    index = request["sample"]
    if digest_of(index) != request["digest"]:
        # The same samples in another order (a generator iterating over a set of strings,
        # whose order follows the process's hash seed): find the one the device ran.
        index = next((i for i in range(len(samples)) if digest_of(i) == request["digest"]), -1)
        if index < 0:
            return {"ok": False, "kind": "mismatch", "error": "the reference built different inputs (non-deterministic sample)"}
    sample = samples[index]
    argument = request.get("argument")
    case = sweep_cases.Case(
        index, request["transform"], request["backward"], tuple(argument) if argument is not None else None  # type: ignore[arg-type]
    )
    mode = request.get("mode", "reference")
    reference = mode in ("reference", "reference_contiguous")
    try:
        with _default_dtype(torch, torch.float64 if reference and sweep_db.is_exact_dtype(request["dtype"]) else None):

            def compute(functional: bool, poisoned: bool = False) -> list[Any]:
                return sweep_cases.run_case(
                    torch,
                    info,
                    sample,
                    case,
                    request["seed"],
                    device="cpu",
                    upcast=reference,
                    contiguous=mode == "reference_contiguous",
                    dtype_name=request["dtype"],
                    functional=functional,
                    poisoned=poisoned,
                )

            if mode == "same_dtype_poisoned":
                # Both runs from the same generator state: a random op draws the same.
                sweep_cases.seed_everything(torch, request["seed"])
                plain = [_transferable(torch, o) for o in compute(False)]
                sweep_cases.seed_everything(torch, request["seed"])
                try:
                    poisoned = compute(False, poisoned=True)
                except Exception as exc:  # noqa: BLE001 - raising on the poison is reading it
                    return {"ok": True, "outputs": None, "plain": plain, "poisoned_error": error_text(exc)}
                return {"ok": True, "outputs": [_transferable(torch, o) for o in poisoned], "plain": plain}
            outputs = compute(False)
            if case.transform in sweep_cases.CALL_VARIANTS and mode != "variant_same_dtype":
                # The CPU's own variant decides whether the call is valid (it raised above
                # if not); its values are the functional call's: an ``out=`` or in-place
                # write must equal them, and the CPU's own out= paths have bugs of their
                # own (a non-contiguous out left unwritten by ``avg_pool3d``).
                outputs = compute(True)
    except sweep_cases.CaseError as exc:
        return {"ok": False, "kind": "unavailable", "error": str(exc)}
    except NotImplementedError as exc:
        return {"ok": False, "kind": "unsupported", "error": error_text(exc)}
    except Exception as exc:  # noqa: BLE001 - the reference rejects the input
        text = error_text(exc)
        kind = "unsupported" if "not implemented for" in text else "rejected"
        return {"ok": False, "kind": kind, "error": text}
    return {"ok": True, "outputs": [_transferable(torch, o) for o in outputs]}


@contextlib.contextmanager
def _default_dtype(torch: Any, dtype: Any) -> Iterator[None]:
    """The default floating dtype while a reference runs: float64 for integer and boolean
    probes, whose integer tensors keep their dtype (integer arithmetic is exact) while the
    floating results they promote to (``sqrt`` of an int32 tensor) are computed in float64;
    the device computes those in its default, float32, and is judged by float32's bound."""
    if dtype is None:
        yield
        return
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


#: Dtypes whose tensors torch cannot unpickle ("UntypedStorage has no attribute dtype"),
#: by name, and the dtype each is sent as: a widening that keeps every value (integers wrap
#: the way the oracle's own int64 conversion does).
_UNPICKLABLE_AS = {
    "complex32": "complex64",
    "uint16": "int64",
    "uint32": "int64",
    "uint64": "int64",
    "float8_e4m3fn": "float32",
    "float8_e5m2": "float32",
    "float8_e4m3fnuz": "float32",
    "float8_e5m2fnuz": "float32",
}


def _transferable(torch: Any, value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = sweep_cases.dense_on_host(torch, value).contiguous().clone()
        wider = _UNPICKLABLE_AS.get(str(value.dtype).replace("torch.", ""))
        return value.to(getattr(torch, wider)) if wider else value
    if isinstance(value, (bool, int, float, complex, str, type(None))):
        return value
    try:
        pickle.dumps(value)
        return value
    except Exception:  # noqa: BLE001
        return repr(value)


def serve() -> int:
    """The reference process: answers requests until its stdin closes."""
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    # Everything else the op prints must not reach the message stream.
    sys.stdout = sys.stderr
    import warnings

    warnings.simplefilter("ignore")
    import torch

    from gpuprobe.worker.probes.sweep import db as sweep_db

    # Load the database before saying hello: a process started early (``prestart``) does
    # this while the worker loads its own copy.
    try:
        sweep_db.load(torch)
    except sweep_db.DatabaseUnavailable:
        pass  # each request reports it
    return answer(torch, stdin, stdout)


def answer(torch: Any, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Says hello, then answers requests until ``stdin`` ends (both kinds of process)."""
    cache: dict[Any, Any] = {}
    _write(stdout, {"ok": True, "ready": True, "torch": torch.__version__})
    while True:
        try:
            request = _read(stdin)
        except (EOFError, ValueError):
            return 0
        try:
            reply = handle(torch, request, cache)
        except Exception as exc:  # noqa: BLE001 - never die on one bad request
            reply = {"ok": False, "kind": "rejected", "error": error_text(exc)}
        try:
            _write(stdout, reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            _write(stdout, {"ok": False, "kind": "unavailable", "error": f"reference not transferable: {exc}"})


# --------------------------------------------------------------------------- the fork


def fork_expected(environ: Any) -> bool:
    """Whether this worker's reference will be forked (``fork_refusal``'s conditions that
    hold before torch is imported): then nothing is started ahead."""
    return hasattr(os, "fork") and not environ.get("GPUPROBE_SWITCHES")


def fork_refusal() -> str | None:
    """Why the reference must not be a fork of this worker, or None when it may be."""
    if not hasattr(os, "fork"):
        return "no fork on this platform"
    torch = sys.modules.get("torch")
    if torch is None:
        return "torch is not imported here"
    if not hasattr(torch, "set_num_threads"):
        return "this torch cannot be set to one CPU thread"
    if os.environ.get("GPUPROBE_SWITCHES"):
        return "a framework switch under test is applied here"
    from gpuprobe.worker import simulate

    if simulate.engine() is not None:
        return "a simulated fault is bound here"
    return None


class ForkedReference:
    """A reference process forked from this worker, with the part of ``subprocess.Popen``'s
    interface that ``ReferenceProcess`` uses."""

    def __init__(self, pid: int, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.pid = pid
        self.stdin: BinaryIO | None = stdin
        self.stdout: BinaryIO | None = stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -signal.SIGKILL  # reaped elsewhere: gone all the same
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"reference process {self.pid}", timeout or 0.0)
            time.sleep(0.005)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def fork_reference() -> ForkedReference:
    """Forks this worker into a reference process (the caller checked ``fork_refusal``)."""
    import warnings

    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    try:
        with warnings.catch_warnings():
            # Python 3.12 warns that forking a threaded process may deadlock: the child
            # takes no lock the worker's threads hold (no GPU, no events, no logging).
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        for fd in (requests_read, requests_write, replies_read, replies_write):
            os.close(fd)
        raise
    if pid == 0:  # pragma: no cover - the child; its work is seen through its replies
        _child(requests_read, replies_write)
    os.close(requests_read)
    os.close(replies_write)
    return ForkedReference(pid, os.fdopen(requests_write, "wb"), os.fdopen(replies_read, "rb"))


def _child(requests: int, replies: int) -> None:  # pragma: no cover - runs after fork
    code = 70
    try:
        import gc

        # The worker's objects stay as they are: none is collected here (a collected file
        # object would close a descriptor number this process has reused).
        gc.freeze()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(2, 1)  # nothing printed may reach the worker's stdout
        keep = {0, 1, 2, requests, replies}
        try:
            open_fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
        except OSError:
            open_fds = list(range(3, 1024))
        for fd in open_fds:
            if fd not in keep:
                with contextlib.suppress(OSError):
                    os.close(fd)
        sys.stdout = sys.stderr
        torch = sys.modules["torch"]
        # Before any CPU work: the worker's thread pools have no threads here.
        torch.set_num_threads(1)
        code = answer(torch, os.fdopen(requests, "rb"), os.fdopen(replies, "wb"))
    except BaseException:  # noqa: BLE001 - the worker sees the death and restarts
        import traceback

        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        os._exit(code)


# --------------------------------------------------------------------------- the client


class ReferenceProcess:
    """The worker's handle on its reference process (started on first use, restarted after
    a death)."""

    def __init__(self, start_timeout_s: float = 180.0) -> None:
        self._proc: subprocess.Popen[bytes] | ForkedReference | None = None
        #: How the current process was made: ``fork`` or ``spawn`` (None before the first).
        self.made_by: str | None = None
        self._hello_pending = False
        self.start_timeout_s = start_timeout_s
        self.restarts = 0
        self.start_failure: str | None = None

    def prestart(self) -> None:
        """Starts the process without waiting for it, so that its imports (torch, the
        database) overlap with the worker's; the first ``compute`` waits for its hello."""
        if self._proc is not None or self.start_failure is not None:
            return
        if fork_expected(os.environ):
            # Forked at the first reference, once this worker holds the database.
            return
        try:
            self._spawn()
        except OSError as exc:
            self.start_failure = f"the reference process did not start: {exc}"

    def _start(self) -> None:
        self._spawn()
        self._await_hello()

    def _await_hello(self) -> None:
        self._hello_pending = False
        hello = self._receive(self.start_timeout_s)
        if not (isinstance(hello, dict) and hello.get("ready")):
            reason = hello.get("error") if isinstance(hello, dict) else "no hello"
            self.close()
            raise RuntimeError(f"the reference process did not start: {reason}")

    def _spawn(self) -> None:
        if fork_refusal() is None:
            try:
                self._proc = fork_reference()
                self.made_by = "fork"
                self._hello_pending = True
                return
            except OSError:
                pass  # a fresh interpreter instead
        self.made_by = "spawn"
        package_root = children.package_dir()
        env = dict(os.environ)
        # The reference runs on the CPU only: no GPU context, no GPU memory.
        for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
            env[name] = ""
        env["GPUPROBE_SWEEP_REFERENCE"] = "1"
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "from gpuprobe.worker.probes.sweep import ref as sweep_ref; sys.exit(sweep_ref.serve())"
        )
        self._proc = subprocess.Popen(
            [sys.executable, "-c", code, package_root],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self._hello_pending = True

    def _receive(self, timeout_s: float) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdout is not None
        stream = self._proc.stdout
        ready, _, _ = select.select([stream], [], [], timeout_s)
        if not ready:
            return {"ok": False, "kind": "timeout", "error": f"the reference took longer than {timeout_s:.0f} s"}
        try:
            return _read(stream)
        except (EOFError, ValueError, pickle.UnpicklingError) as exc:
            return {"ok": False, "kind": "crashed", "error": self._death(str(exc))}

    def _death(self, why: str) -> str:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return f"the reference process stopped answering ({why})"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return f"the reference process died with {name}"
        return f"the reference process exited with status {code}"

    def compute(self, request: dict[str, Any], timeout_s: float = 60.0) -> dict[str, Any]:
        """One reference; a dead or hung process is reported, then replaced on the next call."""
        if self.start_failure is not None:
            return {"ok": False, "kind": "unavailable", "error": self.start_failure}
        if self._proc is None or self._proc.poll() is not None:
            if self._proc is not None:
                self.restarts += 1
            try:
                self._start()
            except (OSError, RuntimeError) as exc:
                self.start_failure = str(exc)
                return {"ok": False, "kind": "unavailable", "error": self.start_failure}
        elif self._hello_pending:
            try:
                self._await_hello()
            except RuntimeError as exc:
                self.start_failure = str(exc)
                return {"ok": False, "kind": "unavailable", "error": self.start_failure}
        assert self._proc is not None and self._proc.stdin is not None
        started = time.monotonic()
        try:
            _write(self._proc.stdin, request)
        except (BrokenPipeError, OSError) as exc:
            return {"ok": False, "kind": "crashed", "error": self._death(str(exc))}
        reply = self._receive(max(1.0, timeout_s - (time.monotonic() - started)))
        if reply.get("kind") in ("timeout", "crashed"):
            self.close()
        return reply

    def close(self) -> None:
        """Stops the process (it is restarted on the next ``compute``)."""
        proc, self._proc = self._proc, None
        self._hello_pending = False
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


_SHARED: ReferenceProcess | None = None


def prestart_shared() -> None:
    """Starts the worker's reference process now (the sweep probes' ``helpers``)."""
    shared().prestart()


def shared() -> ReferenceProcess:
    """The worker's one reference process (shared by its sweep probes)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = ReferenceProcess()
    return _SHARED
