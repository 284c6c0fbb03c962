"""Python bytecode caching for interpreters that cannot cache next to torch's sources.

Python caches each imported module's compiled bytecode in a ``__pycache__`` directory beside
its source. Where that cache is missing or stale and the directory is not writable (a
package tree owned by another user, a read-only image, an installer that skipped bytecode
compilation, such as ``uv`` without ``--compile-bytecode``), every process compiles every
module it imports, every time. On the H100 host that is 5.5 s of the 11 s it takes to
import PyTorch's operator database, in every sweep lane of every run, and part of each
worker's ``import torch``.

The same happens where ``PYTHONDONTWRITEBYTECODE`` is set, a line many container images
carry to keep ``.pyc`` files out of their layers: on the H100 host it is set, torch's tree
has no ``__pycache__`` at all, and ``import torch`` takes 4.2 s in every process.

``enable_if_needed`` looks at torch's own package (without importing it) and, only when its
bytecode can be neither read nor written in place, points ``sys.pycache_prefix`` (Python
3.8+, the same as ``PYTHONPYCACHEPREFIX``) at gpuprobe's cache directory: the first run
compiles and writes there, later runs read from there. Under ``PYTHONDONTWRITEBYTECODE`` it
lets this process write there, and only there: the source tree stays free of bytecode,
which is what that setting is for. It also exports ``PYTHONPYCACHEPREFIX`` so the worker's
own Python children (the sweep's CPU reference, the data-loader and distributed children)
read the same cache. An interpreter whose in-place cache works, or that already has a
prefix, is left alone. Nothing here changes what a module computes: Python checks each
cached file against its source's size and modification time (or hash) before using it.

An empty cache costs every worker of a run the same compile, side by side: on the H100
host twelve workers each compiled torch (4.7 s to their hello instead of 2.3 s), and each
sweep lane compiled the operator database again (15 s instead of 5). So the first worker
that finds the cache empty fills it once for all, with ``compileall`` over every core
(3,760 files of torch, sympy and mpmath in 1.7 s on that host), while the run's other
workers wait for it; a stamp file marks the cache filled for this torch and interpreter.
Hosts with fewer than ``FILL_MIN_CORES`` cores keep compiling what each worker imports.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import struct
import subprocess
import sys
import sysconfig
import time

#: The files of torch's package whose bytecode decides: its ``__init__`` (every worker
#: imports it) and the sweep's operator database (the largest import a lane makes).
PROBED_MODULES = (("__init__.py",), ("testing", "_internal", "common_methods_invocations.py"))

#: The packages compiled into an empty cache, beside the standard library: torch, and the
#: pure-Python packages a worker or the operator database imports, each when installed:
#: numpy's Python parts, sympy and mpmath for torch's symbolic shapes, triton; and what
#: PyTorch's test modules import behind the database when they find it (on the H100 host,
#: ``python -X importtime`` of the database: 532 modules of scipy, 329 of numba with
#: llvmlite, hypothesis, pytest, pygments, coverage, setuptools, yaml, opt_einsum). Left
#: out, each sweep lane and its reference process compiled them side by side on a
#: machine's first run, on the run's critical path.
FILLED_PACKAGES = (
    "torch",
    "numpy",
    "sympy",
    "mpmath",
    "triton",
    "scipy",
    "numba",
    "llvmlite",
    "hypothesis",
    "_pytest",
    "pytest",
    "pluggy",
    "pygments",
    "coverage",
    "setuptools",
    "yaml",
    "opt_einsum",
)

#: Directories of the packages' own tests, which no worker imports: left out of their walk
#: (scipy's are about half of its files). ``torch/testing`` is not one of them.
PACKAGE_TESTS_SKIPPED = r"[/\\](test|tests)[/\\]"

#: Parts of the standard library no worker imports, and the installed packages below it:
#: left out of the standard library's walk.
STDLIB_SKIPPED = r"[/\\](test|tests|idlelib|tkinter|turtledemo|lib2to3|ensurepip|site-packages|dist-packages)[/\\]"

#: How long a worker waits for another to fill the cache, and how long the fill may take:
#: past it the fill stops and every worker compiles what it imports, as without the fill.
FILL_LIMIT_S = 60.0

#: The fill pays off where it runs on many cores: it compiles about 5,300 files where one
#: worker imports about 2,100, once instead of in every worker. 16 cores compiled 3,760
#: in 1.7 s; 2 cores take 25 s for all of them, longer than a small run's own imports.
FILL_MIN_CORES = 8


def _fresh(source: str, cached: str) -> bool:
    """Whether ``cached`` is bytecode this interpreter would use for ``source``."""
    try:
        with open(cached, "rb") as handle:
            header = handle.read(16)
        stat = os.stat(source)
    except OSError:
        return False
    if len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = struct.unpack("<I", header[4:8])[0]
    if flags & 0b1:
        # Hash-based: an unchecked one is always used; a checked one if the hash matches.
        if not flags & 0b10:
            return True
        try:
            with open(source, "rb") as handle:
                return importlib.util.source_hash(handle.read()) == header[8:16]
        except OSError:
            return False
    mtime, size = struct.unpack("<II", header[8:16])
    return mtime == (int(stat.st_mtime) & 0xFFFFFFFF) and size == (stat.st_size & 0xFFFFFFFF)


def _writable(cached: str) -> bool:
    directory = os.path.dirname(cached)
    if os.path.isdir(directory):
        return os.access(directory, os.W_OK)
    return os.access(os.path.dirname(directory), os.W_OK)


def in_place_problem(package_dir: str) -> str | None:
    """Why bytecode of the package at ``package_dir`` cannot be cached in place, or None."""
    for parts in PROBED_MODULES:
        source = os.path.join(package_dir, *parts)
        if not os.path.isfile(source):
            continue
        cached = importlib.util.cache_from_source(source)
        if _fresh(source, cached):
            continue
        name = os.path.relpath(source, os.path.dirname(package_dir))
        if sys.dont_write_bytecode:
            return f"{name} has no current bytecode and PYTHONDONTWRITEBYTECODE (or -B) forbids writing it"
        if not _writable(cached):
            return f"{name} has no current bytecode and {os.path.dirname(cached)} is not writable"
    return None


def enable_if_needed(cache_dir: object) -> str | None:
    """Points the bytecode cache at ``cache_dir`` when torch's cannot work in place; returns
    a note saying so (None when nothing changed)."""
    if not isinstance(cache_dir, str) or not cache_dir or sys.pycache_prefix:
        return None
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.submodule_search_locations:
        return None
    problem = in_place_problem(os.path.dirname(spec.origin))
    if problem is None:
        return None
    prefix = os.path.join(cache_dir, sys.implementation.cache_tag or "python")
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False  # writes go to the prefix only, never beside the sources
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    note = f"bytecode cached under {prefix}: {problem}, so every import would compile it again"
    filled = None
    if (os.cpu_count() or 1) >= FILL_MIN_CORES:
        torch_dir = os.path.dirname(spec.origin)
        filled = fill_once(prefix, torch_dir, *fill_directories(torch_dir))
    return f"{note}; {filled}" if filled else note


def _fill_stamp(prefix: str, torch_dir: str) -> str:
    """The stamp that says ``prefix`` was filled for this torch and this interpreter: a
    reinstalled torch has a new ``__init__.py`` and gets a new fill."""
    init = os.path.join(torch_dir, "__init__.py")
    try:
        stat = os.stat(init)
        identity = f"{init}|{stat.st_mtime_ns}|{stat.st_size}|{sys.version}"
    except OSError:
        identity = f"{init}|{sys.version}"
    return os.path.join(prefix, f".filled-{hashlib.sha256(identity.encode()).hexdigest()[:16]}")


def fill_directories(torch_dir: str) -> tuple[str | None, list[str]]:
    """What an empty cache is filled with: the standard library and the packages of
    [`FILLED_PACKAGES`] that are installed (found without importing them)."""
    stdlib = sysconfig.get_paths().get("stdlib")
    if not (stdlib and os.path.isdir(stdlib)):
        stdlib = None
    directories: list[str] = []
    for name in FILLED_PACKAGES:
        if name == "torch":
            directories.append(torch_dir)
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            directories.extend(str(d) for d in spec.submodule_search_locations if os.path.isdir(d))
    return stdlib, directories


#: The fill's child process: argv[1] is the process count, argv[2] the pattern of
#: [`STDLIB_SKIPPED`], argv[3] that of [`PACKAGE_TESTS_SKIPPED`], argv[4] the standard
#: library, the rest the packages, each walked without what its pattern matches. One pool
#: for all files;
#: ``compileall.compile_file`` skips a file whose cached bytecode is current. Run with
#: ``-c`` so that it needs nothing of gpuprobe's on the child's path.
_FILL_PROGRAM = """
import compileall, concurrent.futures, os, re, sys
stdlib_skipped, package_skipped = re.compile(sys.argv[2]), re.compile(sys.argv[3])
files = []
for index, top in enumerate(sys.argv[4:]):
    skipped = stdlib_skipped if index == 0 else package_skipped
    for directory, subdirectories, names in os.walk(top):
        if skipped.search(directory[len(top):] + os.sep):
            subdirectories[:] = []
            continue
        files.extend(os.path.join(directory, n) for n in names if n.endswith('.py'))
def one(path):
    try:
        return bool(compileall.compile_file(path, quiet=2))
    except Exception:
        return False
with concurrent.futures.ProcessPoolExecutor(int(sys.argv[1])) as pool:
    current = sum(pool.map(one, files, chunksize=32))
print(len(files), current)
"""


def _compile_all(prefix: str, stdlib: str | None, packages: list[str]) -> str:
    """Compiles the standard library and ``packages`` into ``prefix`` with one process per
    core; a note of what happened."""
    started = time.perf_counter()
    env = dict(os.environ, PYTHONPYCACHEPREFIX=prefix)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    processes = str(os.cpu_count() or 1)
    command = [
        sys.executable,
        "-c",
        _FILL_PROGRAM,
        processes,
        STDLIB_SKIPPED,
        PACKAGE_TESTS_SKIPPED,
        stdlib or "",
        *packages,
    ]
    try:
        done = subprocess.run(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=FILL_LIMIT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"filling it stopped after {FILL_LIMIT_S:.0f} s"
    except OSError as exc:
        return f"filling it failed: {exc}"
    counts = done.stdout.split()
    if done.returncode != 0 or len(counts) != 2:
        return f"filling it failed (exit {done.returncode})"
    seconds = time.perf_counter() - started
    return f"filled it once for all workers: {counts[1]} of {counts[0]} files current, {processes} processes, {seconds:.1f} s"


def fill_once(prefix: str, torch_dir: str, stdlib: str | None, packages: list[str]) -> str | None:
    """Fills an empty cache once for all the run's workers: the first to get the lock
    compiles ``stdlib`` and ``packages`` into ``prefix``, the others wait for it (at most
    [`FILL_LIMIT_S`]). A note of what this worker did; None when the cache was already
    filled for the torch at ``torch_dir``."""
    stamp = _fill_stamp(prefix, torch_dir)
    if os.path.exists(stamp):
        return None
    try:
        os.makedirs(prefix, exist_ok=True)
        lock = open(os.path.join(prefix, ".fill.lock"), "a+b")  # noqa: SIM115 - held below
    except OSError as exc:
        return f"not filled ahead: {exc}"
    with lock:
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - started > FILL_LIMIT_S:
                    return "another worker is still filling it; this one compiles what it imports"
                time.sleep(0.05)
            except OSError as exc:
                return f"not filled ahead: {exc}"
        waited = time.monotonic() - started
        if os.path.exists(stamp):
            return f"waited {waited:.1f} s for another worker to fill it"
        note = _compile_all(prefix, stdlib, packages)
        try:
            with open(stamp, "w", encoding="utf-8") as handle:
                handle.write(note + "\n")
        except OSError:
            pass
        return note
