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
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from chromium_driver import WIDTH, Browser, chromium_binary, errors_of, requests_of
from conftest import gpuprobe_binary

pytestmark = pytest.mark.browser

FAILING_PRESETS = "h2d-zeros,bf16-fp32-zeros"


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
    requests = requests_of(events)
    errors = errors_of(events)
    return {"url": url, "requests": requests, "errors": errors, **json.loads(facts)}


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = chromium_binary()
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
