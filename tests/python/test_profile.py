"""``gpuprobe.apply_profile``: settings validated by the binary, applied before torch."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import REPO, gpuprobe_binary

import gpuprobe
from gpuprobe import ProfileError, apply_profile


@pytest.fixture(scope="module")
def gpuprobe_bin() -> str:
    binary = gpuprobe_binary()
    if binary is None:
        pytest.skip("the gpuprobe binary is not built and cargo could not build it (set GPUPROBE_BIN)")
    return binary


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test models a program that has not imported torch yet: other test modules of this
    session import it into this process, which apply_profile() rightly refuses."""
    monkeypatch.delitem(sys.modules, "torch", raising=False)


PROFILE = """\
profile_version = 1
created_by = "gpuprobe 0.1.0"
created_at = "2026-11-22T10:00:00Z"
simulated = true
unset = ["HSA_OVERRIDE_GFX_VERSION"]
cures = ["copy.h2d.pageable.tiny.nonblocking"]
still_failing = []
system_changes = []

[env]
HSA_ENABLE_SDMA = "0"
{extra}

[proven_on]
gpus = ["gfx1151"]
kernel = "0.0.0-nowhere"
torch = "0.0.0"
"""


def _write(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "profile.toml"
    path.write_text(PROFILE.format(extra=extra))
    return path


def test_settings_are_applied_and_removed(tmp_path: Path, gpuprobe_bin: str) -> None:
    environ = {"HSA_OVERRIDE_GFX_VERSION": "11.0.0", "KEEP": "1"}
    with pytest.warns(UserWarning, match="SIMULATION"):
        applied = apply_profile(_write(tmp_path), force=True, gpuprobe_bin=gpuprobe_bin, environ=environ)
    assert applied == {"HSA_ENABLE_SDMA": "0"}
    assert environ == {"HSA_ENABLE_SDMA": "0", "KEEP": "1"}


def test_os_environ_is_the_default_target(tmp_path: Path, gpuprobe_bin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HSA_ENABLE_SDMA", raising=False)
    with pytest.warns(UserWarning):
        apply_profile(_write(tmp_path), force=True, gpuprobe_bin=gpuprobe_bin)
    assert os.environ["HSA_ENABLE_SDMA"] == "0"
    # Not monkeypatch.delenv: it would record "0" as the value to restore (the delenv above
    # recorded nothing when the variable was absent), leaking the setting into later tests,
    # where it cures the simulated h2d-zeros fault.
    os.environ.pop("HSA_ENABLE_SDMA", None)


def test_a_profile_from_another_stack_is_refused_unless_forced(tmp_path: Path, gpuprobe_bin: str) -> None:
    environ: dict[str, str] = {}
    with pytest.raises(ProfileError, match="different stack") as refused:
        apply_profile(_write(tmp_path), gpuprobe_bin=gpuprobe_bin, environ=environ)
    assert "gfx1151" in str(refused.value)
    assert environ == {}


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ('LD_PRELOAD = "/tmp/evil.so"', "LD_PRELOAD"),
        ('PYTHONPATH = "/tmp"', "PYTHONPATH"),
        ('MY_PLUGIN_DIR = "/opt/x"', "not a setting of the workaround catalogue"),
        ('HSA_ENABLE_SDMA_X = "1"', "not a setting of the workaround catalogue"),
    ],
)
def test_settings_outside_the_catalogue_are_refused(tmp_path: Path, gpuprobe_bin: str, line: str, words: str) -> None:
    environ: dict[str, str] = {}
    with pytest.raises(ProfileError, match=words):
        apply_profile(_write(tmp_path, line), force=True, gpuprobe_bin=gpuprobe_bin, environ=environ)
    assert environ == {}, "nothing may be applied from a refused profile"


def test_refused_after_torch_is_imported(tmp_path: Path, gpuprobe_bin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", object())
    environ: dict[str, str] = {}
    with pytest.raises(ProfileError, match="before torch is imported"):
        apply_profile(_write(tmp_path), force=True, gpuprobe_bin=gpuprobe_bin, environ=environ)
    assert environ == {}


def test_the_package_exports_it() -> None:
    assert gpuprobe.apply_profile is apply_profile
    assert "apply_profile" in gpuprobe.__all__
