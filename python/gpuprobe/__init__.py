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
import re
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


def _version_from_cargo(manifest: str | os.PathLike[str]) -> str | None:
    """The ``[workspace.package]`` version of a Cargo.toml, or None. A regex, not tomllib:
    the package supports Pythons before 3.11."""
    try:
        with open(manifest, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    section = re.search(r"^\[workspace\.package\][^\[]*", text, re.MULTILINE)
    found = section and re.search(r'^version\s*=\s*"([^"]+)"', section.group(0), re.MULTILINE)
    return found.group(1) if found else None


def _version() -> str:
    """Cargo's version, the one source: the Cargo.toml of the checkout this package lies in,
    else the installed distribution's metadata (maturin takes the wheel's version from
    Cargo.toml), else ``unknown``."""
    checkout = _version_from_cargo(
        os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "Cargo.toml")
    )
    if checkout:
        return checkout
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python < 3.8
        return "unknown"
    try:
        return version("gpuprobe")
    except PackageNotFoundError:
        return "unknown"


def __getattr__(name: str) -> str:
    # Computed on first use, so that importing the package (the probe worker does, at every
    # start) reads no file.
    if name == "__version__":
        value = _version()
        globals()["__version__"] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    # `cargo install --path crates/gpuprobe`, the other install from source the
    # not-found error suggests, puts the binary in cargo's own bin directory.
    cargo_home = os.environ.get("CARGO_HOME") or os.path.join(os.path.expanduser("~"), ".cargo")
    dirs.append(os.path.join(cargo_home, "bin"))
    seen: list[str] = []
    for d in dirs:
        if d and d not in seen:
            seen.append(d)
    return seen


#: Names the binary explicitly (a build tree, a copy on a cluster's shared disk).
BIN_ENV_VAR = "GPUPROBE_BIN"


def find_gpuprobe_bin() -> str:
    """Returns the path of the installed ``gpuprobe`` binary.

    ``$GPUPROBE_BIN`` when it is set (it must name an executable file). Else searches where
    pip puts a wheel's scripts: this interpreter's scripts directory, the base
    interpreter's, the ``bin`` next to a ``--target`` or ``--prefix`` install, the user
    scheme, and cargo's ``bin`` (``cargo install``). ``PATH`` is not searched, so an
    unrelated ``gpuprobe`` elsewhere is never picked. Raises ``GpuprobeNotFoundError`` (a
    ``FileNotFoundError``) saying where it looked.
    """
    explicit = os.environ.get(BIN_ENV_VAR)
    if explicit:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return explicit
        raise GpuprobeNotFoundError(f"{BIN_ENV_VAR} names {explicit!r}, which is not an executable file")
    name = "gpuprobe" + (sysconfig.get_config_var("EXE") or "")
    searched = _candidate_dirs()
    for directory in searched:
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise GpuprobeNotFoundError(
        f"could not find the {name} binary; looked in: {', '.join(searched)}. "
        "gpuprobe is not published on PyPI or crates.io yet: install it from a source checkout "
        "with `pip install .` (the binary and this package) or `cargo install --path crates/gpuprobe` "
        f"(docs/packaging.md), or set {BIN_ENV_VAR} to the binary's path."
    )


from .profile import ProfileError, apply_profile  # noqa: E402  (needs find_gpuprobe_bin above)
from . import guard  # noqa: E402  (imports torch only when a guard runs)
