"""Applying a profile written by ``gpuprobe fix`` inside a Python program.

    import gpuprobe
    gpuprobe.apply_profile("profile.toml")   # before torch is imported
    import torch

The GPU runtime and PyTorch read these settings once, when they start, so the profile must
be applied before ``import torch``; ``apply_profile`` refuses to run afterwards.

The profile is read and validated by the gpuprobe binary (``gpuprobe profile export FILE
--format json``), so the allow-list of settings has one source of truth: a profile holding
anything but workaround-catalogue settings (``LD_PRELOAD``, ``PYTHONPATH``, a path, ...) is
refused, as is a profile proven on a different stack unless ``force=True``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from typing import MutableMapping, Optional, Union

__all__ = ["ProfileError", "apply_profile"]

PathLike = Union[str, "os.PathLike[str]"]


class ProfileError(RuntimeError):
    """The profile was refused (invalid, foreign stack, torch already imported)."""


def apply_profile(
    path: PathLike,
    *,
    force: bool = False,
    gpuprobe_bin: Optional[str] = None,
    environ: Optional[MutableMapping[str, str]] = None,
) -> dict:
    """Sets the profile's variables in ``os.environ`` (or ``environ``) and removes the ones
    it unsets. Returns the variables it set.

    Raises ``ProfileError`` when torch is already imported, when the binary refuses the
    profile (a setting outside the catalogue, a newer format), or when the profile was
    proven on a different stack (GPUs, kernel, driver, runtime, torch) and ``force`` is not
    set. ``gpuprobe_bin`` defaults to ``find_gpuprobe_bin()``.
    """
    if "torch" in sys.modules:
        raise ProfileError(
            "apply_profile() must run before torch is imported: the GPU runtime and PyTorch "
            "read these settings once, at start-up (call it first, or use `gpuprobe run "
            "--profile FILE -- python ...`)"
        )
    if gpuprobe_bin is None:
        from . import find_gpuprobe_bin

        gpuprobe_bin = find_gpuprobe_bin()
    command = [gpuprobe_bin, "profile", "export", os.fspath(path), "--format", "json"]
    if not force:
        command += ["--check-stack", "--python", sys.executable]
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ProfileError(f"could not run {gpuprobe_bin}: {err}") from err
    if completed.returncode != 0:
        message = completed.stderr.strip().replace("gpuprobe: error: ", "", 1)
        raise ProfileError(message or f"gpuprobe exited {completed.returncode}")
    try:
        data = json.loads(completed.stdout)
        settings = {str(k): str(v) for k, v in data["set"].items()}
        removals = [str(name) for name in data.get("unset", [])]
    except (ValueError, KeyError, AttributeError) as err:
        raise ProfileError(f"unexpected answer from {gpuprobe_bin}: {err}") from err
    target = os.environ if environ is None else environ
    for name in removals:
        target.pop(name, None)
    target.update(settings)
    if data.get("simulated"):
        warnings.warn(
            f"profile {os.fspath(path)} was made under fault SIMULATION: its settings are not "
            "proven on real hardware",
            stacklevel=2,
        )
    if data.get("still_failing"):
        warnings.warn(
            f"profile {os.fspath(path)} records failures it could not cure: "
            + ", ".join(data["still_failing"]),
            stacklevel=2,
        )
    return settings
