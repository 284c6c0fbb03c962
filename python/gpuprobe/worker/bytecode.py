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
"""

from __future__ import annotations

import importlib.util
import os
import struct
import sys

#: The files of torch's package whose bytecode decides: its ``__init__`` (every worker
#: imports it) and the sweep's operator database (the largest import a lane makes).
PROBED_MODULES = (("__init__.py",), ("testing", "_internal", "common_methods_invocations.py"))


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
    return f"bytecode cached under {prefix}: {problem}, so every import would compile it again"
