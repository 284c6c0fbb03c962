"""gpuprobe: checks that a GPU stack computes the right numbers, and says where it does not.

The command-line tool is a compiled binary installed next to this package; this package holds
the probe worker the binary runs inside your interpreter (``gpuprobe.worker``), a function to
find the binary, ``check()`` (runs the binary, returns the typed report), ``apply_profile()``,
the training guards (``gpuprobe.guard``), callbacks for training libraries
(``gpuprobe.callbacks.*``, imported on demand) and a pytest plugin
(``gpuprobe.pytest_plugin``). Importing it never imports torch (docs/python-api.md).
"""

from __future__ import annotations

import os
import sys
import sysconfig

__all__ = [
    "__version__",
    "CheckError",
    "CheckResult",
    "CheckTimeoutError",
    "CheckUsageError",
    "Finding",
    "GpuprobeError",
    "GpuprobeNotFoundError",
    "NothingTestedError",
    "ProbeResult",
    "ProfileError",
    "UnusableOutputError",
    "apply_profile",
    "check",
    "find_gpuprobe_bin",
    "guard",
]

__version__ = "0.1.0"

from .report import (  # noqa: E402
    CheckError,
    CheckResult,
    CheckTimeoutError,
    CheckUsageError,
    Finding,
    GpuprobeError,
    NothingTestedError,
    ProbeResult,
    UnusableOutputError,
    check,
)


class GpuprobeNotFoundError(FileNotFoundError, GpuprobeError):
    """The gpuprobe binary is not installed where this package expects it."""


def _user_scheme() -> str:
    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    if os.name == "nt":  # pragma: no cover - old Pythons only
        return "nt_user"
    if sys.platform == "darwin" and sys._framework:  # type: ignore[attr-defined]  # pragma: no cover
        return "osx_framework_user"
    return "posix_user"  # pragma: no cover


def _candidate_dirs() -> list[str]:
    """Directories a wheel install may have put the binary in, most specific first."""
    dirs = [
        # The scripts directory of this interpreter (venv/bin, conda env bin).
        sysconfig.get_path("scripts"),
        # The base interpreter's scripts directory (a venv built on a system Python).
        sysconfig.get_path("scripts", vars={"base": sys.base_prefix}),
        # `pip install --target <dir>`: the package lives in <dir>/gpuprobe, scripts in <dir>/bin.
        os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin"),
        # `pip install --prefix <prefix>`: <prefix>/lib/pythonX.Y/site-packages/gpuprobe.
        os.path.join(
            os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
            "bin",
        ),
    ]
    try:
        dirs.append(sysconfig.get_path("scripts", scheme=_user_scheme()))
    except KeyError:  # pragma: no cover - no user scheme on this platform
        pass
    seen: list[str] = []
    for d in dirs:
        if d and d not in seen:
            seen.append(d)
    return seen


def find_gpuprobe_bin() -> str:
    """Returns the path of the installed ``gpuprobe`` binary.

    Searches where pip puts a wheel's scripts: this interpreter's scripts directory, the base
    interpreter's, the ``bin`` next to a ``--target`` or ``--prefix`` install, and the user
    scheme. ``PATH`` is not searched, so an unrelated ``gpuprobe`` elsewhere is never picked.
    Raises ``GpuprobeNotFoundError`` (a ``FileNotFoundError``) listing where it looked.
    """
    name = "gpuprobe" + (sysconfig.get_config_var("EXE") or "")
    searched = _candidate_dirs()
    for directory in searched:
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise GpuprobeNotFoundError(
        f"could not find the {name} binary; looked in: {', '.join(searched)}. "
        "Install it with `pip install gpuprobe` or `cargo install gpuprobe`."
    )


from .profile import ProfileError, apply_profile  # noqa: E402  (needs find_gpuprobe_bin above)
from . import guard  # noqa: E402  (imports torch only when a guard runs)
