"""Packaging: the source archive carries everything the build embeds and builds a tool with
the full knowledge base; the Python package's version is Cargo's.

The unpacked sdist builds in the checkout's target directory (CARGO_TARGET_DIR or target/), so
the dependencies are reused and only gpuprobe's own crates compile. Cargo names a workspace
crate's artifacts by its path relative to the workspace, so the sdist's crates replace the
checkout's (built from the same files) and its binary replaces target/debug/gpuprobe. The
unpacked tree is deleted afterwards: the build scripts watched files in it, and their absence
makes the next build of the checkout run them again against the checkout's own files.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import check_sdist  # noqa: E402

import gpuprobe  # noqa: E402


def _maturin() -> str | None:
    beside = Path(sys.executable).parent / "maturin"
    if beside.is_file():
        return str(beside)
    return shutil.which("maturin")


def _cargo_version() -> str:
    return tomllib.loads((REPO / "Cargo.toml").read_text())["workspace"]["package"]["version"]


def _kb_revision() -> str:
    """docs/packaging.md's definition, computed independently of the build script."""
    files = sorted((p for p in (REPO / "kb").glob("*.toml")), key=lambda p: p.name.encode())
    listing = "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in files)
    entries = sum(1 for p in files if p.name != "catalogue.toml")
    return f"{entries}.{hashlib.sha256(listing.encode()).hexdigest()[:12]}"


def test_python_version_is_cargos() -> None:
    # The metadata of an installed wheel comes from Cargo.toml (maturin's dynamic version);
    # the source-tree fallback reads the same file.
    assert gpuprobe.__version__ == _cargo_version()
    assert gpuprobe._version_from_cargo(REPO / "Cargo.toml") == _cargo_version()


def test_workspace_path_dependencies_carry_the_workspace_version() -> None:
    manifest = tomllib.loads((REPO / "Cargo.toml").read_text())
    deps = manifest["workspace"]["dependencies"]
    local = {name: dep for name, dep in deps.items() if isinstance(dep, dict) and "path" in dep}
    assert local, "no path dependencies found"
    for name, dep in local.items():
        assert dep.get("version") == _cargo_version(), f"{name}: version must be {_cargo_version()}"


def test_check_sdist_names_what_an_archive_lacks(tmp_path: Path) -> None:
    archive = tmp_path / "gpuprobe-0.0.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(REPO / "LICENSE-MIT", arcname="gpuprobe-0.0.0/LICENSE-MIT")
    missing = check_sdist.missing_from(archive)
    assert any(m.startswith("crates/gpuprobe-kb/kb/RKB-001") for m in missing)
    assert any(m.startswith("crates/gpuprobe-runner/presets/") for m in missing)
    assert not any(m.startswith("LICENSE-MIT") for m in missing)


def test_sdist_carries_the_embedded_files_and_builds_the_full_knowledge_base(tmp_path: Path) -> None:
    maturin = _maturin()
    if maturin is None:
        pytest.skip("maturin is not installed (tests/python/requirements.txt installs it)")
    cargo = shutil.which("cargo")
    assert cargo, "cargo is needed to build the unpacked sdist"
    built = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-sdist.sh"), str(tmp_path / "dist")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "MATURIN": maturin},
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    archive = Path(built.stdout.strip().splitlines()[-1])
    assert check_sdist.missing_from(archive) == []

    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "src", filter="data")
    (source,) = (tmp_path / "src").iterdir()
    assert not (source / ".git").exists()
    try:
        _build_and_check(source)
    finally:
        shutil.rmtree(tmp_path / "src", ignore_errors=True)


def _build_and_check(source: Path) -> None:
    cargo = shutil.which("cargo")
    assert cargo
    # maturin stores every file with one fixed old time: give them the present one, or cargo
    # would take the checkout's newer artifacts for up to date and build nothing.
    for path in source.rglob("*"):
        os.utime(path, follow_symlinks=False)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    env = {k: v for k, v in os.environ.items() if k != "GPUPROBE_BUILD_COMMIT"}
    env["CARGO_TARGET_DIR"] = str(target)
    build = subprocess.run(
        [cargo, "build", "--locked", "-q", "-p", "gpuprobe"],
        cwd=source,
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    binary = str(target / "debug" / "gpuprobe")

    validate = subprocess.run([binary, "kb", "validate"], capture_output=True, text=True, timeout=120)
    assert validate.returncode == 0, validate.stderr
    entries = sum(1 for p in (REPO / "kb").glob("*.toml") if p.name != "catalogue.toml")
    assert re.search(rf"\b{entries} entries valid, 0 problem", validate.stdout + validate.stderr), (
        validate.stdout + validate.stderr
    )

    version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    commit = head.stdout.strip()[:12] if head.returncode == 0 else "unknown"
    assert version.stdout.strip() == f"gpuprobe {_cargo_version()} (commit {commit}, kb {_kb_revision()})"


def test_a_build_without_the_knowledge_base_fails_and_says_why(tmp_path: Path) -> None:
    """The kb crate alone, with its kb link pointing at an empty directory."""
    cargo = shutil.which("cargo")
    assert cargo
    crate = tmp_path / "gpuprobe-kb"
    shutil.copytree(REPO / "crates" / "gpuprobe-kb", crate, symlinks=True, ignore=shutil.ignore_patterns("kb"))
    (tmp_path / "empty").mkdir()
    (crate / "kb").symlink_to(tmp_path / "empty")
    # The crate inherits from the workspace manifest: give it a workspace of its own.
    (tmp_path / "Cargo.toml").write_text(
        (REPO / "Cargo.toml").read_text().replace('members = ["crates/*"]', 'members = ["gpuprobe-kb"]')
        .replace('default-members = ["crates/gpuprobe"]', "")
        .replace('path = "crates/', 'path = "' + str(REPO / "crates") + "/")
    )
    shutil.copy(REPO / "Cargo.lock", tmp_path / "Cargo.lock")
    # The checkout's target directory: the dependencies are built already.
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    env = {**os.environ, "CARGO_TARGET_DIR": str(target)}
    result = subprocess.run(
        [cargo, "check", "-q", "-p", "gpuprobe-kb", "--offline"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode != 0
    assert "the knowledge base is missing" in result.stderr, result.stderr[-3000:]
    assert "no entry files" in result.stderr


def test_the_not_found_error_says_how_to_install_from_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GPUPROBE_BIN", raising=False)
    monkeypatch.setattr(gpuprobe, "_candidate_dirs", lambda: [str(tmp_path)])
    with pytest.raises(gpuprobe.GpuprobeNotFoundError) as info:
        gpuprobe.find_gpuprobe_bin()
    message = str(info.value)
    assert "not published" in message and "pip install ." in message
    assert "cargo install --path crates/gpuprobe" in message
    assert "`pip install gpuprobe`" not in message
