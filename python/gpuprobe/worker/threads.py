"""The CPU threads a worker's probes use, following the budget the engine publishes.

A worker starts with ``OMP_NUM_THREADS`` set to its share of the host's cores among the lanes
that start beside it. Lanes end at different times, and the cores a finished lane held would
stay idle while the last lanes' probes compute their references and inputs on the threads
they started with. So the engine rewrites one small file (the plan's ``thread_budget``) each
time the share changes, and the worker applies it before each probe: ``torch.set_num_threads``
for its own pool, and ``OMP_NUM_THREADS`` for the child processes its probes start later.

Only the engine writes the file, by renaming a whole one into place. A file that is missing,
unreadable or not a positive number changes nothing: the threads are a speed matter, never a
result's, and a probe must not fail over them. The budget is never applied on a CPU under
test, whose kernels' rounding may follow the thread count (the engine names no file there).
"""

from __future__ import annotations

import os
from typing import Any

THREADS_VARIABLE = "OMP_NUM_THREADS"


class ThreadBudget:
    """The budget file of one worker; :meth:`apply` between probes."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._seen: tuple[int, int, int] | None = None

    def apply(self, torch: Any) -> int | None:
        """Applies the published budget when it changed since the last call; returns the
        thread count set, or ``None`` when nothing changed."""
        if not self.path:
            return None
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
        if stamp == self._seen:
            return None
        self._seen = stamp
        try:
            with open(self.path, encoding="ascii") as handle:
                threads = int(handle.read(32).strip())
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        if threads < 1:
            return None
        threads = min(threads, os.cpu_count() or threads)
        try:
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)
        except (RuntimeError, AttributeError):
            return None
        os.environ[THREADS_VARIABLE] = str(threads)
        return threads
