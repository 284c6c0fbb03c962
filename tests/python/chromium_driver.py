"""Headless Chromium driven over the Chrome DevTools Protocol (``--remote-debugging-pipe``:
no port, no extra package), shared by the browser tests of the HTML report
(``test_html_browser.py``) and of ``gpuprobe ui`` (``test_ui_browser.py``): start it, open a
page, send commands, collect the events that tell which requests a page made and which
errors it logged.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

WIDTH = 1200


def chromium_binary() -> str | None:
    """$CHROMIUM, else the first Chromium or Chrome on PATH."""
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """Headless Chromium driven over the DevTools pipe (fd 3: commands in, fd 4: replies and
    events out; each message is JSON ended by a NUL byte)."""

    def __init__(self, binary: str, profile: Path) -> None:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        args = [
            binary,
            "--headless",
            "--remote-debugging-pipe",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
            "--hide-scrollbars",
            "--mute-audio",
            f"--user-data-dir={profile}",
            f"--window-size={WIDTH},900",
        ]
        if os.geteuid() == 0:
            # Chromium refuses to start its sandbox as root (a CI container).
            args.append("--no-sandbox")
        args.append("about:blank")

        def fds() -> None:
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self._proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(3, 4),
            preexec_fn=fds,
            # Its own process group: the renderer, GPU and crash-handler children are ended
            # with it, before its profile directory is removed.
            start_new_session=True,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from Chromium")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                    raise RuntimeError(f"Chromium closed the DevTools pipe: {err[-2000:]}")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0) -> dict[str, Any]:
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session and not method.startswith("Target."):
            command["sessionId"] = self.session
        os.write(self._to_child, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            message = self._read_message(deadline)
            self.events.append(message)
            if message.get("method") == method:
                return message

    def drain(self, seconds: float) -> None:
        """Collects the events that arrive within `seconds` (late requests, late errors)."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.append(self._read_message(deadline))
        except TimeoutError:
            pass

    def open_page(self) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": WIDTH, "height": 900, "deviceScaleFactor": 1, "mobile": False},
        )
        self.events.clear()

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (returned by value)."""
        answer = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in answer:
            raise RuntimeError(f"{expression}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def wait_until(self, expression: str, timeout: float = 30.0, every: float = 0.2) -> Any:
        """Polls `expression` until it is truthy; its value. Events that arrive meanwhile
        are kept."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(expression)
            except RuntimeError:
                value = None  # the page is navigating: its context is gone for a moment
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"still false after {timeout} s: {expression}")
            self.drain(every)

    def screenshot(self, path: Path, max_height: float | None = None) -> None:
        """Saves the whole page (or its top `max_height` pixels), as wide as the window, as a
        PNG."""
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        height = size["height"] if max_height is None else min(size["height"], max_height)
        shot = self.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1},
            },
            timeout=60,
        )
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        """Ends Chromium and every process it started. A child still writing into the
        profile (a loaded machine lets one outlive the browser) would make the profile
        directory's removal fail with "Directory not empty"."""
        self.session = None  # Browser.close goes to the browser, not the page
        seen = len(self.events)  # what arrives while it closes is no part of the visit
        try:
            self.send("Browser.close", timeout=5.0)
        except (RuntimeError, TimeoutError, OSError):
            pass  # the pipe closes as it exits; it is ended below if it did not
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        del self.events[seen:]
        group_gone_by = time.monotonic() + 10.0
        while _running_in_group(self._proc.pid) and time.monotonic() < group_gone_by:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                break
            time.sleep(0.05)
        os.close(self._to_child)
        os.close(self._from_child)


def _running_in_group(group: int) -> bool:
    """Whether a process of process group `group` still runs (zombies, which write
    nothing, do not count; an unreaped one may linger where PID 1 does not reap)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(group) and fields[0] not in ("Z", "X"):
            return True
    return False


def requests_of(events: list[dict[str, Any]]) -> list[str]:
    """The URLs a page requested."""
    return [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"]


def errors_of(events: list[dict[str, Any]]) -> list[str]:
    """The console errors, uncaught exceptions and error log entries among `events`."""
    errors = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            errors.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            errors.append("exception: " + details.get("exception", {}).get("description", details.get("text", "")))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            errors.append(f"log: {params['entry']['text']} {params['entry'].get('url', '')}")
    return errors
