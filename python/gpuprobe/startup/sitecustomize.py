"""The framework switches of a profile, applied in a job that ``gpuprobe run --profile`` starts.

``gpuprobe run`` puts this directory first on the job's ``PYTHONPATH`` and the profile's
switches in ``GPUPROBE_SWITCHES``; Python runs this module at start-up (``site`` imports the
first ``sitecustomize`` on ``sys.path``). It:

- loads gpuprobe's switch table (``gpuprobe/switches.py``) by file path under a private
  module name: the package itself stays off ``sys.path``, so the job imports exactly what it
  would without gpuprobe;
- parses ``GPUPROBE_SWITCHES``; a value it cannot parse costs one line on stderr
  (``gpuprobe: profile: switches not applied: <why>``), never the job;
- does not import torch (a job that never uses it must not pay for it): a ``sys.meta_path``
  finder lets the job's own ``import torch`` finish and then applies the switches, one line
  on stderr for each that cannot be applied (``gpuprobe: profile: cannot apply <pair>:
  <why>``). When torch is somehow imported already, they are applied at once;
- unless ``GPUPROBE_SWITCHES_INHERIT=1``, removes this directory from ``PYTHONPATH`` and
  ``GPUPROBE_SWITCHES`` from the environment, so the job's own child processes start as
  they would without gpuprobe;
- then runs the ``sitecustomize`` this one shadows (the next one on ``sys.path``, e.g. a
  distribution's), so that it still takes effect.

Nothing here may raise: a failure in a start-up hook would only be printed by ``site``, and
the next ``sitecustomize`` would not run.
"""

import contextlib
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_SWITCHES_FILE = os.path.join(os.path.dirname(_HERE), "switches.py")
#: Private: a job's own ``gpuprobe`` (installed or not) is never shadowed or imported.
_MODULE_NAME = "_gpuprobe_profile_switches"
_ENV_VAR = "GPUPROBE_SWITCHES"
_INHERIT_VAR = "GPUPROBE_SWITCHES_INHERIT"


def _say(text):
    # Without a usable stderr (a daemon) there is nobody to tell.
    with contextlib.suppress(Exception):
        sys.stderr.write(f"gpuprobe: profile: {text}\n")
        sys.stderr.flush()


def _load_switches():
    spec = importlib.util.spec_from_file_location(_MODULE_NAME, _SWITCHES_FILE)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {_SWITCHES_FILE}")
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the module executes.
    sys.modules[_MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(_MODULE_NAME, None)
        raise
    return module


def _same_dir(entry):
    """Whether a path entry is this directory (an empty entry is the working directory)."""
    try:
        return os.path.realpath(entry or os.getcwd()) == os.path.realpath(_HERE)
    except (OSError, ValueError):
        return False


def _apply(text):
    if not text or not text.strip():
        return
    try:
        switches = _load_switches()
    except Exception as exc:  # noqa: BLE001 - the job runs anyway
        _say(f"switches not applied: {type(exc).__name__}: {exc}")
        return
    try:
        pairs = switches.parse(text)
    except switches.SwitchError as exc:
        _say(f"switches not applied: {exc}")
        return
    switches.apply_when_imported(pairs, lambda pair, why: _say(f"cannot apply {pair}: {why}"))


def _forget_self():
    """Keeps the job's children from inheriting the hook and its switches."""
    if os.environ.get(_INHERIT_VAR) == "1":
        return
    os.environ.pop(_ENV_VAR, None)
    path = os.environ.get("PYTHONPATH")
    if path is None:
        return
    kept = [entry for entry in path.split(os.pathsep) if not _same_dir(entry)]
    if any(kept):
        os.environ["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        del os.environ["PYTHONPATH"]


def _chain():
    """Runs the ``sitecustomize`` that this one hides from ``site``."""
    # Never this directory again: the hook would run itself.
    others = [entry for entry in sys.path if not _same_dir(entry)]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _main():
    try:
        _apply(os.environ.get(_ENV_VAR, ""))
    except Exception as exc:  # noqa: BLE001 - never the job's problem
        _say(f"switches not applied: {type(exc).__name__}: {exc}")
    # Should that fail, the environment stays as it was.
    with contextlib.suppress(Exception):
        _forget_self()
    # Last, and outside the guards: an error in the other sitecustomize is its own, and
    # ``site`` reports it as it would have without gpuprobe.
    _chain()


# ``site`` imports this file as ``sitecustomize``; imported any other way (a tool that walks
# the package), it does nothing.
if __name__ == "sitecustomize":
    _main()
