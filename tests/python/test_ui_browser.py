"""``gpuprobe ui`` in a real browser: the server is started with ``--port 0`` on a runs
directory made by real ``gpuprobe check --device cpu`` runs (a healthy one, a SIMULATED
failing one, and a corrupt one), its URL read from its stdout, and headless Chromium (the
driver of ``chromium_driver.py``) lists the runs, opens one, compares two, starts a
SIMULATED check and sees it finish live, and starts another and stops it. Every request the
browser made went to the server, and no page logged an error. Requests without the token,
or naming another host, are refused.

Screenshots are saved as ``ui-*.png`` in $GPUPROBE_SCREENSHOT_DIR (default: the test's
temporary directory); ``docs/ui.md`` names the command that refreshes ``docs/images/``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from chromium_driver import Browser, chromium_binary, errors_of, requests_of
from conftest import gpuprobe_binary

pytestmark = pytest.mark.browser

# Cheap probes that the presets below make fail: a few seconds of CPU.
ONLY = ["--only", "dtype.bf16.fp32*", "--only", "copy.h2d.pageable*"]
FAILING_PRESETS = "h2d-zeros,bf16-fp32-zeros"
HEALTHY = "check-2026-01-01T10-00-00-1"
FAILING = "check-2026-01-02T10-00-00-1"
CORRUPT = "check-2026-01-03T10-00-00-1"
FIX = "fix-2026-01-04T10-00-00-1"
# The failing check's report as recorded on an AMD gfx1100 Linux host: the stack RKB-001
# names, so the KB page matched against this run shows an entry and why.
AMD = "check-2025-12-01T10-00-00-1"
# Older runs that fill the list past its first page (100 runs a page).
FILLERS = 100
# A profile as `fix` writes it into its run (proven under simulation, on another stack).
PROFILE = """\
profile_version = 1
created_by = "gpuprobe 0.1.0"
created_at = "2026-01-04T10:00:00Z"
simulated = true
cures = ["copy.h2d.pageable.tiny.nonblocking"]
measured_cost = "none measured <b>"

[env]
HSA_ENABLE_SDMA = "0"

[proven_on]
gpus = ["gfx1151"]
kernel = "0.0.0-nowhere"
torch = "0.0.0"
"""


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = chromium_binary()
    if binary is None:
        pytest.skip(
            "Chromium is not installed, so the page cannot be opened in a browser: "
            "install Debian's `chromium` package (scripts/python-test-env.sh does) or set $CHROMIUM"
        )
    return binary


@pytest.fixture(scope="module")
def binary() -> str:
    found = gpuprobe_binary()
    if found is None:
        pytest.skip("the gpuprobe binary is not built and cargo could not build it (set GPUPROBE_BIN)")
    return found


@pytest.fixture(scope="module")
def runs(binary: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A runs directory: a healthy run, a SIMULATED failing one, a corrupt one, a fix run
    holding a profile (its starting check a copy of the failing one) that `gpuprobe run
    --profile` used once, the failing run's report as recorded on an AMD host, and older
    unfinished runs that fill the list past its first page. It is the state directory's
    (`$XDG_STATE_HOME/gpuprobe/runs`), where `run --profile` records its uses."""
    state = tmp_path_factory.mktemp("ui") / "state"
    root = state / "gpuprobe" / "runs"
    env = {**os.environ, "NO_COLOR": "1"}
    # The two checks run side by side: the test's setup is most of its time.
    started = {
        name: (
            subprocess.Popen(
                [binary, "check", "--device", "cpu", "--python", sys.executable, *ONLY, *extra, "--run-dir", str(root / name)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            ),
            code,
        )
        for name, extra, code in ((HEALTHY, [], 0), (FAILING, ["--simulate", FAILING_PRESETS], 1))
    }
    for proc, code in started.values():
        output, _ = proc.communicate(timeout=300)
        assert proc.returncode == code, output[-3000:]
    corrupt = root / CORRUPT
    (corrupt / "workers").mkdir(parents=True)
    (corrupt / "report.json").write_text('{"schema_version": 1, "results": [<script>')
    fix = root / FIX
    (fix / "workers").mkdir(parents=True)
    shutil.copytree(root / FAILING, fix / "check")
    (fix / "profile.toml").write_text(PROFILE)
    # One use of the profile (proven on another stack, so --force), its arguments secret.
    used = subprocess.run(
        [binary, "run", "--force", "--profile", str(fix / "profile.toml"), "--", "sh", "-c", "exit 3", "secret-arg"],
        env={**env, "XDG_STATE_HOME": str(state)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert used.returncode == 3, used.stderr
    journal = (root / "profile-uses.jsonl").read_text()
    assert '"program":"sh"' in journal and "secret-arg" not in journal, journal
    amd = root / AMD
    (amd / "workers").mkdir(parents=True)
    report = json.loads((root / FAILING / "report.json").read_text())
    report["fingerprint"]["host"]["os"] = "linux"
    report["fingerprint"]["gpus"] = [
        {"index": 0, "vendor": "amd", "name": "Radeon RX 7900 XTX", "native_isa": "gfx1100", "runtime_isa": "gfx1100"}
    ]
    (amd / "report.json").write_text(json.dumps(report))
    for i in range(FILLERS):
        (root / f"check-2025-11-01T10-{i // 60:02}-{i % 60:02}-1" / "workers").mkdir(parents=True)
    return root


@pytest.fixture(scope="module")
def server(binary: str, runs: Path) -> Iterator[str]:
    """`gpuprobe ui --port 0` on the runs directory; the URL it prints."""
    proc = subprocess.Popen(
        [binary, "ui", "--port", "0", "--runs-dir", str(runs), "--python", sys.executable],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and "?token=" in url, url
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _status(url: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {})
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as e:
        return e.code


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def test_requests_without_the_token_or_for_another_host_are_refused(server: str) -> None:
    base = server.split("?")[0]
    port = base.rsplit(":", 1)[1].rstrip("/")
    assert _status(base) == 403
    assert _status(base + "runs/" + HEALTHY) == 403
    assert _status(base + "static/ui.js") == 403
    assert _status(server.replace("?token=", "?token=0")) == 403
    # DNS rebinding: the right token, but the browser names another site.
    assert _status(server, {"Host": f"evil.example:{port}"}) == 403
    # The token in the URL once: the cookie, and the same page without it.
    assert _status(server) == 303


def _shot(name: str, tmp_path: Path) -> Path:
    folder = Path(os.environ.get("GPUPROBE_SCREENSHOT_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"ui-{name}.png"


def _then_loaded(browser: Browser, action: str, timeout: float = 30.0) -> None:
    """Runs `action` (JavaScript) and waits until it brought a new document, loaded: the old
    one is marked, so a late load event of an earlier page does not count."""
    browser.evaluate(f"window.__before = true; {action}")
    browser.wait_until("!window.__before && document.readyState === 'complete'", timeout=timeout)


def _go(browser: Browser, url: str) -> None:
    _then_loaded(browser, f"location.assign({url!r})")


def _submit(browser: Browser, form: str, values: dict[str, str]) -> None:
    """Fills the form `form` (a CSS selector) and submits it as a user would."""
    fills = "".join(f"f.elements[{name!r}].value = {value!r};" for name, value in values.items())
    _then_loaded(browser, f"(() => {{ const f = document.querySelector({form!r}); {fills} f.requestSubmit(); }})()")


def _process_writing(run: Path) -> int:
    """The `gpuprobe check` the page started for `run` (the process whose arguments name it)."""
    wanted = f"--run-dir={run}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in argv and b"check" in argv:
            return int(entry.name)
    raise AssertionError(f"no process writes {run}")


def test_the_page_lists_opens_compares_starts_and_stops(chromium: str, server: str, runs: Path, tmp_path: Path) -> None:
    base = server.split("?")[0].rstrip("/")
    with tempfile.TemporaryDirectory(prefix="gpuprobe-chromium-") as profile:
        browser = Browser(chromium, Path(profile))
        try:
            browser.open_page()
            # The list: newest first, the corrupt run shown as such.
            browser.send("Page.navigate", {"url": server})
            browser.wait_until("location.href === " + repr(base + "/") + " && document.readyState === 'complete'")
            names = browser.evaluate("[...document.querySelectorAll('tr.run')].map(r => r.dataset.name)")
            assert names[:5] == [FIX, CORRUPT, FAILING, HEALTHY, AMD] and len(names) == 100, names
            outcomes = browser.evaluate("[...document.querySelectorAll('tr.run')].map(r => r.dataset.outcome)")
            assert outcomes[1:4] == ["corrupt", "fail", "pass"], outcomes
            text = browser.evaluate("document.body.innerText")
            assert "is not a gpuprobe report" in text and "<script>" not in browser.evaluate(
                f"document.querySelector('tr.run[data-name={CORRUPT}]').innerHTML"
            )
            # The first runs only: a hundred older fillers follow them.
            browser.screenshot(_shot("runs", tmp_path), max_height=720)
            # The filter works without script: a GET form.
            _submit(browser, "#filter", {"verdict": "fail"})
            names = browser.evaluate("[...document.querySelectorAll('tr.run')].map(r => r.dataset.name)")
            assert names == [FAILING, AMD], names
            # Pages: 100 runs each, the filter kept by the plain "older" link.
            _submit(browser, "#filter", {"verdict": "unfinished"})
            assert browser.evaluate("document.querySelectorAll('tr.run').length") == 100
            _then_loaded(browser, "document.getElementById('next').click()")
            assert browser.evaluate("location.search") == "?verdict=unfinished&page=2"
            outcomes = browser.evaluate("[...document.querySelectorAll('tr.run')].map(r => r.dataset.outcome)")
            assert outcomes == ["unfinished"] and not browser.evaluate("document.getElementById('next')"), outcomes
            assert "101–101 of 101 matching" in browser.evaluate("document.getElementById('count').textContent")

            # A run's page is its report.
            _go(browser, f"{base}/runs/{FAILING}")
            assert browser.evaluate("document.title").startswith("SIMULATED"), browser.evaluate("document.title")
            assert "dtype.bf16.fp32.to.device" in browser.evaluate("document.body.innerText")
            browser.screenshot(_shot("report", tmp_path), max_height=1400)
            _go(browser, f"{base}/runs/{CORRUPT}")
            assert "this run is corrupt" in browser.evaluate("document.body.innerText")

            # Compare: A healthy, B failing, picked in the list.
            _go(browser, base + "/")
            _then_loaded(
                browser,
                f"document.querySelector('input[name=a][value={HEALTHY}]').click();"
                f"document.querySelector('input[name=b][value={FAILING}]').click();"
                "document.getElementById('compare').click()",
            )
            newly = browser.evaluate("[...document.querySelectorAll('#newly-failing td.mono')].map(t => t.textContent)")
            assert "dtype.bf16.fp32.to.device" in newly, newly
            assert browser.evaluate("document.querySelectorAll('#cured td.mono').length") == 0
            # B was made under fault simulation: the comparison says so beside it.
            assert "SIMULATED" in browser.evaluate("document.body.innerText")
            browser.screenshot(_shot("compare", tmp_path))

            # The profile: what it cures, what it was proven on, its export; delete, confirmed.
            _go(browser, base + "/profiles")
            assert browser.evaluate("[...document.querySelectorAll('tr.profile')].map(r => r.dataset.run)") == [FIX]
            _go(browser, f"{base}/profiles/{FIX}")
            text = browser.evaluate("document.body.innerText")
            assert "copy.h2d.pageable.tiny.nonblocking" in text and "0.0.0-nowhere" in text, text
            assert "none measured <b>" in text
            # Used by: the fix that proved it, and the one `run --profile` use (its program's
            # name only).
            used = browser.evaluate("document.getElementById('used-by').innerText")
            assert FIX in used and "1 use recorded" in used, used
            assert browser.evaluate("document.querySelector('#recent-uses td.mono').textContent") == "sh"
            browser.screenshot(_shot("profile", tmp_path))
            _go(browser, f"{base}/profiles/{FIX}/export?format=env")
            assert "HSA_ENABLE_SDMA=0" in browser.evaluate("document.body.innerText")
            _go(browser, f"{base}/profiles/{FIX}")
            browser.evaluate("document.querySelector('input[name=confirm]').checked = true")
            _submit(browser, "#delete-form", {})
            assert browser.evaluate("location.pathname") == "/profiles"
            assert not (runs / FIX / "profile.toml").exists()

            # The KB: searched, and matched against the newest finished check.
            _go(browser, base + "/kb")
            assert browser.evaluate("document.querySelectorAll('#entries tbody tr').length") > 10
            assert "the newest finished check" in browser.evaluate("document.getElementById('matches').innerText")
            # Matched against a run's recorded stack, from its row: the entry, and why.
            _go(browser, base + "/")
            _then_loaded(browser, f"document.querySelector('tr.run[data-name={AMD}] a.kb').click()")
            matched = browser.evaluate("document.getElementById('matches').innerText")
            assert f"Matching the run {AMD}" in matched and "RKB-001" in matched, matched
            assert "gfx1100 matches gfx11*" in matched, matched

            # Search a cure for the failing check from its row: a fix, live, then its report.
            _go(browser, base + "/")
            _then_loaded(browser, f"document.querySelector('tr.run[data-name={FAILING}] a.fix').click()")
            _submit(browser, "#start-fix", {"max_runs": "2"})
            fixing = browser.evaluate("location.pathname")
            assert fixing.startswith("/runs/fix-"), browser.evaluate("document.body.innerText")
            browser.wait_until("document.title.includes('report') && document.readyState === 'complete'", timeout=180)
            assert browser.evaluate("!!document.getElementById('fix')"), "the fix search is on the page"
            assert (runs / fixing.rsplit("/", 1)[1] / "fix.json").is_file()

            # Start a SIMULATED check and watch it finish live: the page moves to its report.
            _go(browser, base + "/check")
            _submit(
                browser,
                "#start",
                {"tier": "quick", "device": "cpu", "only": "dtype.bf16.fp32*", "simulate": "bf16-fp32-zeros"},
            )
            started = browser.evaluate("location.pathname")
            assert started.startswith("/runs/check-"), browser.evaluate("document.body.innerText")
            # Live or already its report, the page says SIMULATED.
            assert "SIMULATED" in browser.evaluate("document.body.innerText")
            browser.wait_until("document.title.includes('report') && document.readyState === 'complete'", timeout=180)
            assert browser.evaluate("location.pathname") == started
            assert browser.evaluate("document.title").startswith("SIMULATED")
            assert "dtype.bf16.fp32.to.device" in browser.evaluate("document.body.innerText")
            assert (runs / started.rsplit("/", 1)[1] / "report.json").is_file()

            # Start one and stop it: SIGINT, as Ctrl-C; the page says it ended.
            _go(browser, base + "/check")
            _submit(browser, "#start", {"tier": "quick", "device": "cpu", "only": "", "simulate": ""})
            browser.wait_until("document.getElementById('state')?.textContent === 'running'")
            browser.wait_until("Number(document.getElementById('progress')?.value) > 0", timeout=120)
            browser.screenshot(_shot("live", tmp_path))
            _submit(browser, "#stop-form", {})
            browser.wait_until(
                "document.title.includes('report') || /ended/.test(document.getElementById('state')?.textContent)",
                timeout=60,
            )
            assert browser.evaluate("!document.getElementById('stop')")

            # Start one and kill it outright (SIGKILL, as the OOM killer would): the page says
            # it ended without a report and how, and the list has it interrupted.
            _go(browser, base + "/check")
            _submit(browser, "#start", {"tier": "standard", "device": "cpu", "only": "", "simulate": ""})
            killed = browser.evaluate("location.pathname").rsplit("/", 1)[1]
            browser.wait_until("Number(document.getElementById('progress')?.value) > 0", timeout=120)
            pid = _process_writing(runs / killed)
            try:
                os.kill(pid, signal.SIGKILL)
                browser.wait_until(
                    "/ended without a report \\(signal 9, SIGKILL\\)/.test(document.getElementById('state')?.textContent)",
                    timeout=30,
                )
                assert browser.evaluate("!document.getElementById('stop')")
                _go(browser, base + "/")
                row = browser.evaluate(f"document.querySelector('tr.run[data-name={killed}]').innerText")
                assert "interrupted" in row and "in progress" not in row, row
            finally:
                # Its workers, left behind in its process group.
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            browser.drain(0.3)
        finally:
            browser.close()
    requests = requests_of(browser.events)
    assert requests, "the browser's requests are seen"
    strays = [u for u in requests if not (u.startswith(base + "/") or u.startswith("data:"))]
    assert strays == [], f"requests that left the server: {strays}"
    assert errors_of(browser.events) == []
