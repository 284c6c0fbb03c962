"""The event stream: one JSON object per line on the private event descriptor.

The supervisor parses every line of the descriptor as a ``WorkerEvent``; stdout and stderr
are only logs. Libraries may print anything to stdout; nothing but events is ever written
here. Non-finite floats are refused (``allow_nan=False``): the protocol reports NaN and Inf
as counts, and example values as strings.
"""

from __future__ import annotations

import json
import os
import threading
from typing import IO, Any


class EventStream:
    """Writes protocol events to a file descriptor, one flushed line per event."""

    def __init__(self, fd: int) -> None:
        # Line buffering: every event reaches the supervisor as soon as it is written, so a
        # crash right after a result loses nothing.
        self._file: IO[str] = os.fdopen(fd, "w", buffering=1, encoding="utf-8", closefd=False)
        self._lock = threading.Lock()

    def emit(self, event: dict[str, Any]) -> None:
        """Writes one event; raises ``ValueError`` if it holds a non-finite float."""
        line = json.dumps(event, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()

    def log(self, level: str, message: str) -> None:
        """Emits a ``log`` event (``info`` or ``warn``)."""
        self.emit({"event": "log", "level": level, "message": message})

    def close(self) -> None:
        """Flushes the stream; the descriptor itself stays open for the process."""
        with self._lock:
            try:
                self._file.flush()
            except OSError:
                pass


def finite_or_none(value: float) -> float | None:
    """Returns ``value`` when it is a finite float, else ``None`` (for optional fields)."""
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return float(value)
