"""``scripts/python-test-env.sh``, the README's test command's setup, on a fresh machine: run
from a copy of the repository with a PATH of stand-ins (no compiler, no Chromium, an
interpreter without ensurepip, a recording apt-get), so nothing is installed for real."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FAKE_PYTHON = """#!/bin/bash
case "$2" in
  *ensurepip*) [ -f "$FAKE_DIR/venv-installed" ];;
  *version_info*) echo 3.11;;
  *base_prefix*) echo /usr;;
  *) exit 7;;
esac
"""
FAKE_APT = """#!/bin/bash
echo "apt-get $*" >> "$FAKE_DIR/apt.log"
[ "$1" = install ] || exit 0
for p in "$@"; do
  case $p in
    g++) printf '#!/bin/bash\\n' > "$FAKE_DIR/bin/g++"; chmod +x "$FAKE_DIR/bin/g++";;
    chromium) exit 100;;
  esac
done
"""


def _run(tmp_path: Path, uid: int) -> tuple[subprocess.CompletedProcess[str], str]:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "tests" / "python").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "python-test-env.sh", repo / "scripts")
    shutil.copy(ROOT / "tests" / "python" / "requirements.txt", repo / "tests" / "python")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sha256sum", "cut", "cat", "dirname", "chmod"):
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not installed")
        (bin_dir / tool).symlink_to(found)
    for name, text in (("python3", FAKE_PYTHON), ("apt-get", FAKE_APT), ("id", f"#!/bin/bash\necho {uid}\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {"PATH": str(bin_dir), "FAKE_DIR": str(tmp_path)}
    done = subprocess.run(
        [str(bin_dir / "bash"), str(repo / "scripts" / "python-test-env.sh")],
        env=env, capture_output=True, text=True, timeout=30, check=False,
    )
    log = tmp_path / "apt.log"
    return done, log.read_text() if log.exists() else ""


def test_without_root_it_names_what_is_missing(tmp_path: Path) -> None:
    done, apt = _run(tmp_path, uid=1000)
    assert apt == "", "apt-get is never run without root"
    assert "C++ compiler for Inductor's CPU backend is missing" in done.stderr
    assert "Chromium for the HTML report's browser test is missing" in done.stderr
    assert done.returncode == 1, "without the venv module .venv cannot be created"
    assert "apt-get install python3.11-venv" in done.stderr


def test_as_root_it_installs_with_apt_get(tmp_path: Path) -> None:
    done, apt = _run(tmp_path, uid=0)
    assert "install -y -qq --no-install-recommends g++" in apt
    assert "python3.11-venv" in apt
    assert "could not be installed (g++)" not in done.stderr
    assert "Chromium for the HTML report's browser test could not be installed" in done.stderr
    assert apt.count("apt-get update") == 1, "the package lists are fetched once"
