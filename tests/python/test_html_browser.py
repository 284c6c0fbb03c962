"""The HTML report in a real browser: headless Chromium opens a healthy and a SIMULATED
failing report made by real ``gpuprobe check --device cpu`` runs, and the Chrome DevTools
Protocol (over ``--remote-debugging-pipe``: no port, no extra package) proves that the page
made no network request but its own file, logged no console error and threw no exception.
Full-page screenshots are saved to $GPUPROBE_SCREENSHOT_DIR (default: the test's temporary
directory).

Chromium is Debian's ``chromium`` package (``scripts/python-test-env.sh`` installs it when absent); $CHROMIUM
names another binary. Without one the tests skip and say why.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import gpuprobe_binary

pytestmark = pytest.mark.browser

WIDTH = 1200
FAILING_PRESETS = "h2d-zeros,bf16-fp32-zeros"


def _chromium() -> str | None:
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


def visit(binary: str, page: Path, screenshot: Path | None) -> dict[str, Any]:
    """Opens `page` in a fresh headless Chromium; returns the URLs requested, the console
    errors and exceptions, and facts read from the page."""
    with tempfile.TemporaryDirectory(prefix="gpuprobe-chromium-") as profile:
        browser = Browser(binary, Path(profile))
        try:
            browser.open_page()
            url = page.resolve().as_uri()
            browser.send("Page.navigate", {"url": url})
            browser.wait_for("Page.loadEventFired")
            browser.drain(1.0)
            facts = browser.send(
                "Runtime.evaluate",
                {
                    "expression": "JSON.stringify({simulated: !!document.getElementById('simulated'),"
                    " title: document.title, text: document.body.innerText})",
                    "returnByValue": True,
                },
            )["result"]["value"]
            if screenshot is not None:
                size = browser.send("Page.getLayoutMetrics")["cssContentSize"]
                shot = browser.send(
                    "Page.captureScreenshot",
                    {
                        "format": "png",
                        "captureBeyondViewport": True,
                        "clip": {"x": 0, "y": 0, "width": WIDTH, "height": size["height"], "scale": 1},
                    },
                    timeout=60,
                )
                screenshot.write_bytes(base64.b64decode(shot["data"]))
            browser.drain(0.2)
        finally:
            browser.close()
    events = browser.events
    requests = [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"]
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
    return {"url": url, "requests": requests, "errors": errors, **json.loads(facts)}


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = _chromium()
    if binary is None:
        pytest.skip(
            "Chromium is not installed, so the HTML report cannot be opened in a browser: "
            "install Debian's `chromium` package (scripts/test.sh does when it runs as root) or set $CHROMIUM"
        )
    return binary


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A healthy and a SIMULATED failing report from real CPU runs of the quick tier."""
    binary = gpuprobe_binary()
    if binary is None:
        pytest.skip("the gpuprobe binary is not built and cargo could not build it (set GPUPROBE_BIN)")
    out = tmp_path_factory.mktemp("html")
    env = {**os.environ, "XDG_STATE_HOME": str(out / "state"), "NO_COLOR": "1"}
    made = {}
    for name, extra, code in (("healthy", [], 0), ("failing", ["--simulate", FAILING_PRESETS], 1)):
        page = out / f"{name}.html"
        run = subprocess.run(
            [binary, "check", "--device", "cpu", "--python", sys.executable, "--html", str(page), *extra],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == code, run.stdout[-3000:] + run.stderr[-3000:]
        assert page.is_file(), run.stderr
        made[name] = page
    return made


def _screenshot(name: str, tmp_path: Path) -> Path:
    folder = Path(os.environ.get("GPUPROBE_SCREENSHOT_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"html-report-{name}.png"


@pytest.mark.parametrize("name", ["healthy", "failing"])
def test_the_report_loads_nothing_and_logs_no_error(
    chromium: str, reports: dict[str, Path], name: str, tmp_path: Path
) -> None:
    shot = _screenshot(name, tmp_path)
    seen = visit(chromium, reports[name], shot)
    assert seen["requests"] == [seen["url"]], f"requests besides the file itself: {seen['requests']}"
    assert seen["errors"] == [], seen["errors"]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shot
    assert shot.stat().st_size > 10_000, "a screenshot of a rendered page"
    text = seen["text"]
    if name == "failing":
        assert seen["simulated"] and seen["title"].startswith("SIMULATED"), seen["title"]
        assert "dtype.bf16.fp32.to.device" in text
        assert text.index("Failures") < text.index("Fingerprint")
    else:
        assert not seen["simulated"]
        assert "No probe failed" in text and "Nothing to report" in text


def test_the_browser_check_sees_requests_and_errors(chromium: str, tmp_path: Path) -> None:
    """The checks above can fail: a page that loads an image and logs an error is caught."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><body><img src='https://gpuprobe.invalid/x.png'>"
        "<script>console.error('broken'); undefinedFunction();</script></body></html>"
    )
    seen = visit(chromium, page, None)
    assert any("gpuprobe.invalid" in url for url in seen["requests"]), seen["requests"]
    assert any("broken" in e for e in seen["errors"]), seen["errors"]
    assert any("undefinedFunction" in e for e in seen["errors"]), seen["errors"]
