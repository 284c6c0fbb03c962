"""Applying a profile written by ``gpuprobe fix`` inside a Python program.

    import gpuprobe
    gpuprobe.apply_profile("profile.toml")   # before torch is imported
    import torch

A profile holds two kinds of settings:

- environment variables (``[env]``, ``unset``): the GPU runtime and PyTorch read them once,
  when they start, so a profile that has any must be applied before ``import torch``;
  ``apply_profile`` refuses to run afterwards;
- framework switches (``gpuprobe.switches``: an attention backend off, TF32 off, ...): state
  set on the imported torch. They are applied in this process, at once when torch is already
  imported, else right after the program's own ``import torch`` (a post-import hook; torch
  is not imported early). A profile with switches only may therefore be applied after
  ``import torch`` too.

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

from . import switches as _switches

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
    """Sets the profile's variables in ``os.environ`` (or ``environ``), removes the ones it
    unsets, and applies its framework switches in this process: at once when torch is
    imported, else as soon as the program imports it (a switch that cannot be applied then
    is reported with a ``RuntimeWarning``, never raised into the import).

    Returns the variables it set and the switches it applied or scheduled, in one dict
    (``{"HSA_ENABLE_SDMA": "0", "torch.backends.cuda.enable_cudnn_sdp": "False"}``; switch
    names are dotted, variable names never are).

    Raises ``ProfileError`` when torch is already imported and the profile has environment
    settings, when the binary refuses the profile (a setting outside the catalogue, a newer
    format), when it was proven on a different stack (GPUs, kernel, driver, runtime, torch)
    and ``force`` is not set, or when a switch cannot be applied to the imported torch.
    ``gpuprobe_bin`` defaults to ``find_gpuprobe_bin()``.
    """
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
        # Absent from the answers of binaries that predate switches: none.
        switch_pairs = [(str(k), str(v)) for k, v in (data.get("switches") or {}).items()]
    except (ValueError, KeyError, AttributeError) as err:
        raise ProfileError(f"unexpected answer from {gpuprobe_bin}: {err}") from err
    try:
        switch_pairs = _switches.parse(_switches.format_pairs(switch_pairs))
    except _switches.SwitchError as err:
        raise ProfileError(f"profile {os.fspath(path)}: framework switch refused: {err}") from err
    # Probe-side switches change gpuprobe's own probes, never a program.
    switch_pairs = [(n, v) for n, v in switch_pairs if not _switches.SWITCHES[n].probe_side]
    torch = sys.modules.get("torch")
    if torch is not None and (settings or removals):
        raise ProfileError(
            "apply_profile() must run before torch is imported: the GPU runtime and PyTorch "
            "read these settings once, at start-up (call it first, or use `gpuprobe run "
            "--profile FILE -- python ...`)"
        )
    if torch is not None and switch_pairs:
        try:
            _switches.apply(torch, switch_pairs, in_job=True)
        except _switches.SwitchError as err:
            raise ProfileError(f"profile {os.fspath(path)}: framework switch refused: {err}") from err
    target = os.environ if environ is None else environ
    for name in removals:
        target.pop(name, None)
    target.update(settings)
    if torch is None and switch_pairs:
        _switches.apply_when_imported(switch_pairs, _warn_not_applied)
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
    return {**settings, **dict(switch_pairs)}


def _warn_not_applied(pair: str, why: str) -> None:
    warnings.warn(f"gpuprobe: profile: cannot apply {pair}: {why}", RuntimeWarning, stacklevel=2)
