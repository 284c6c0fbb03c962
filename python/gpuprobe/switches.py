"""Framework switches: settings applied inside the Python process after ``import torch``.

An environment variable is read by the runtime or by PyTorch when they start; a framework
switch is state a program sets on the imported framework (an attention backend off, cuDNN
off, TF32 off, a BLAS library, compilation off, ...). ``gpuprobe fix`` tries switches as
candidates next to environment settings, and ``gpuprobe run --profile`` and
``apply_profile`` apply the switches of a profile.

This module owns:

- the switch table (``SWITCHES``): every switch gpuprobe knows, its allowed values, how it
  is applied and read back, and the Python a user would write for it (``python_line``);
  ``kb/catalogue.toml`` lists the same names and values (entries of ``kind = "switch"``);
- the wire format, ``GPUPROBE_SWITCHES`` (``ENV_VAR``): ``NAME=VALUE`` pairs separated by
  ``;``, in the order they are applied (``parse``, ``from_environ``). Empty or unset means
  no switches; an unknown name or a value the name does not allow is an error;
- applying and reading back (``apply``, ``read``, ``is_on``): a switch counts as applied only
  when torch reads back the value that was set;
- the post-import hook (``apply_when_imported``): switches for a process that has not
  imported torch yet, applied the moment ``import torch`` finishes, without importing torch
  earlier (the start-up hook of ``gpuprobe run --profile`` and ``apply_profile`` share it).

Probe-side switches (``gpuprobe.inputs.contiguous``) change no framework state: they change
what gpuprobe's own probes do in the worker (``probe_side_on``), and are never applied in a
user's job.

Importing this module never imports torch, nor anything of gpuprobe: the start-up hook loads
it by file path, with the package off ``sys.path``. Values are spelled as Python literals
(``True``/``False``) or plain words, and read back in the same spelling.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Callable

__all__ = [
    "ENV_VAR",
    "SWITCHES",
    "Applied",
    "Switch",
    "SwitchError",
    "apply",
    "apply_when_imported",
    "from_environ",
    "is_on",
    "parse",
    "probe_side_on",
    "python_import",
    "python_line",
    "read",
    "when_imported",
]

#: The variable that carries a trial's or a profile's switches to a process.
ENV_VAR = "GPUPROBE_SWITCHES"

_BOOL = ("False", "True")


class SwitchError(ValueError):
    """A switch that cannot be parsed, applied, or read back as set."""


@dataclass(frozen=True)
class Switch:
    """One framework switch.

    ``how`` says how it is applied and read back: ``sdp`` (``enable_x(v)`` / ``x_enabled()``
    of ``torch.backends.cuda``), ``attribute`` (an attribute of a module or of a settings
    object), ``library`` (a function that sets with a string and returns the current
    backend without one), ``deterministic``, ``precision`` and ``probe``
    (gpuprobe's own probes; no torch state)."""

    name: str
    allowed: tuple[str, ...]
    description: str
    how: str
    probe_side: bool = False
    #: ``sdp``: the read-back function of ``torch.backends.cuda``.
    getter: str = ""
    #: The module a program imports before it reaches the switch (``torch._dynamo``); the
    #: switch itself imports it when torch has not.
    module: str = ""


def _table() -> dict[str, Switch]:
    entries = [
        Switch(
            "torch.backends.cuda.enable_cudnn_sdp",
            _BOOL,
            "the cuDNN backend of scaled_dot_product_attention (off: the dispatcher picks another)",
            "sdp",
            getter="cudnn_sdp_enabled",
        ),
        Switch(
            "torch.backends.cuda.enable_flash_sdp",
            _BOOL,
            "the flash backend of scaled_dot_product_attention",
            "sdp",
            getter="flash_sdp_enabled",
        ),
        Switch(
            "torch.backends.cuda.enable_mem_efficient_sdp",
            _BOOL,
            "the memory-efficient backend of scaled_dot_product_attention",
            "sdp",
            getter="mem_efficient_sdp_enabled",
        ),
        Switch("torch.backends.cudnn.enabled", _BOOL, "cuDNN (MIOpen on ROCm) for convolutions and RNNs", "attribute"),
        Switch(
            "torch.backends.cudnn.benchmark", _BOOL, "cuDNN/MIOpen algorithm benchmarking per input shape", "attribute"
        ),
        Switch(
            "torch.backends.cudnn.deterministic",
            ("True", "False"),
            "only deterministic cuDNN/MIOpen convolution algorithms",
            "attribute",
        ),
        Switch("torch.backends.cuda.matmul.allow_tf32", _BOOL, "TF32 tensor cores for float32 matmul", "attribute"),
        Switch("torch.backends.cudnn.allow_tf32", _BOOL, "TF32 tensor cores for float32 convolutions", "attribute"),
        Switch(
            "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
            _BOOL,
            "reduced-precision reductions inside float16 GEMMs",
            "attribute",
        ),
        Switch(
            "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
            _BOOL,
            "reduced-precision reductions inside bfloat16 GEMMs",
            "attribute",
        ),
        Switch(
            "torch.backends.cuda.preferred_blas_library",
            ("cublas", "cublaslt"),
            "the BLAS library of matmul (cublaslt means hipBLASLt on ROCm)",
            "library",
        ),
        Switch(
            "torch.backends.cuda.preferred_linalg_library",
            ("cusolver", "magma"),
            "the library of GPU linear algebra (cuSOLVER/hipSOLVER or MAGMA)",
            "library",
        ),
        Switch(
            "torch.use_deterministic_algorithms",
            ("True", "warn_only"),
            "deterministic algorithms only (warn_only: warn where none exists instead of raising)",
            "deterministic",
        ),
        Switch(
            "torch.set_float32_matmul_precision",
            ("highest", "high", "medium"),
            "the internal precision of float32 matmul (high and medium allow TF32 or bfloat16 passes)",
            "precision",
        ),
        Switch(
            "torch._dynamo.config.disable",
            ("True",),
            "torch.compile off: compiled functions run eagerly",
            "attribute",
            module="torch._dynamo",
        ),
        Switch(
            "torch._inductor.config.emulate_precision_casts",
            ("True",),
            "Inductor rounds intermediates to the eager dtype as eager code does",
            "attribute",
            module="torch._inductor.config",
        ),
        Switch(
            "torch._inductor.config.triton.cudagraphs",
            ("False",),
            "CUDA graphs in Inductor's generated code",
            "attribute",
            module="torch._inductor.config",
        ),
        Switch(
            "torch._functorch.config.enable_autograd_cache",
            ("False",),
            "AOTAutograd's on-disk cache of compiled graphs off: every process compiles its training graphs again",
            "attribute",
            module="torch._functorch.config",
        ),
        Switch(
            "gpuprobe.inputs.contiguous",
            ("True",),
            "gpuprobe's operator sweep makes layout-transformed inputs contiguous before the call "
            "(probe-side: no framework state; never applied in a job)",
            "probe",
            probe_side=True,
        ),
    ]
    return {s.name: s for s in entries}


#: Every switch, by name.
SWITCHES: dict[str, Switch] = _table()


@dataclass(frozen=True)
class Applied:
    """A switch that was set, with what torch reads back."""

    name: str
    value: str
    read_back: str


# Probe-side switches applied in this process (``apply`` in the worker).
_PROBE_SIDE_ON: set[str] = set()


# ---------------------------------------------------------------------------------------------
# The wire format.


def _checked(name: str, value: str, pair: str) -> tuple[str, str]:
    switch = SWITCHES.get(name)
    if switch is None:
        raise SwitchError(f"{pair!r}: {name!r} is not a framework switch gpuprobe knows")
    if value not in switch.allowed:
        raise SwitchError(f"{pair!r}: {name} takes {' or '.join(switch.allowed)}, not {value!r}")
    return name, value


def parse(text: str | None) -> list[tuple[str, str]]:
    """``NAME=VALUE;NAME=VALUE`` → ``[(NAME, VALUE), ...]`` in the given order.

    Empty or None gives no switches; blanks around names, values and separators are ignored,
    as is an empty segment (a trailing ``;``). Raises ``SwitchError`` naming the pair for a
    pair without ``=``, an unknown name, a value the name does not allow, or a name given
    twice."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for segment in (text or "").split(";"):
        pair = segment.strip()
        if not pair:
            continue
        name, sep, value = pair.partition("=")
        if not sep:
            raise SwitchError(f"{pair!r} is not NAME=VALUE")
        name, value = _checked(name.strip(), value.strip(), pair)
        if name in seen:
            raise SwitchError(f"{pair!r}: {name} is given twice")
        seen.add(name)
        pairs.append((name, value))
    return pairs


def from_environ(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The switches ``GPUPROBE_SWITCHES`` carries (``parse``); none when it is unset."""
    environ = os.environ if environ is None else environ
    return parse(environ.get(ENV_VAR, ""))


def format_pairs(pairs: Iterable[tuple[str, str]]) -> str:
    """The wire format of ``pairs`` (the inverse of ``parse``)."""
    return ";".join(f"{name}={value}" for name, value in pairs)


# ---------------------------------------------------------------------------------------------
# Reaching torch's state.


class _Missing(Exception):
    """This torch has no such attribute or module."""


def _torch_module() -> Any:
    # Only a process that already imported torch, or a caller that means to, gets here.
    import torch

    return torch


def _resolve(torch: Any, dotted: str) -> Any:
    """``torch`` + ``a.b.c`` → the object ``torch.a.b.c``, importing the submodules of a
    package that are not attributes yet (``torch._inductor.config``); raises ``_Missing``."""
    obj = torch
    for part in dotted.split(".") if dotted else ():
        try:
            obj = getattr(obj, part)
            continue
        except AttributeError:
            pass
        if not isinstance(obj, types.ModuleType):
            raise _Missing
        try:
            obj = importlib.import_module(f"{obj.__name__}.{part}")
        except ImportError as exc:
            raise _Missing from exc
    return obj


def _owner_and_attribute(torch: Any, switch: Switch) -> tuple[Any, str]:
    """The object that holds the switch and the attribute's name, checked to exist (setting a
    missing attribute on a module would only create a new, unread one)."""
    owner_path, _, attribute = switch.name.partition(".")[2].rpartition(".")
    owner = _resolve(torch, owner_path)
    try:
        getattr(owner, attribute)
    except AttributeError as exc:
        raise _Missing from exc
    return owner, attribute


def _function(torch: Any, dotted: str) -> Callable[..., Any]:
    function = _resolve(torch, dotted)
    if not callable(function):
        raise _Missing
    return function


def _bool_word(value: Any) -> str:
    return "True" if bool(value) else "False"


def _library_word(value: Any) -> str:
    # ``_BlasBackend.Cublaslt`` → ``cublaslt``; a string stays itself, lower case.
    return str(getattr(value, "name", value)).rsplit(".", 1)[-1].lower()


def _missing(torch: Any, name: str) -> SwitchError:
    return SwitchError(f"torch {getattr(torch, '__version__', '?')} has no {name}")


def _global_flags_allowed(torch: Any) -> Any:
    """A block in which the ``torch.backends`` flags may be set outside their ``flags()``
    context managers. ``torch.testing._internal`` (the operator database the sweep and many
    test suites import) calls ``torch.backends.disable_global_flags()``, after which setting
    ``torch.backends.cudnn.enabled`` raises; a switch is exactly such a process-wide setting,
    so it is set the way torch's own context managers set theirs."""
    backends = getattr(torch, "backends", None)
    allow = getattr(backends, "__allow_nonbracketed_mutation", None)
    if callable(allow):
        try:
            return allow()
        except Exception:  # noqa: BLE001 - a torch without it: set as a program would
            pass
    return contextlib.nullcontext()


def _set(torch: Any, switch: Switch, value: str) -> None:
    tail = switch.name.partition(".")[2]
    if switch.how == "sdp":
        _function(torch, tail)(value == "True")
    elif switch.how == "attribute":
        owner, attribute = _owner_and_attribute(torch, switch)
        with _global_flags_allowed(torch):
            setattr(owner, attribute, value == "True")
    elif switch.how == "library":
        _function(torch, tail)(value)
    elif switch.how == "deterministic":
        if value == "warn_only":
            _function(torch, tail)(True, warn_only=True)
        else:
            _function(torch, tail)(value == "True")
    elif switch.how == "precision":
        _function(torch, tail)(value)
    elif switch.how == "probe":
        if value == "True":
            _PROBE_SIDE_ON.add(switch.name)
        else:
            _PROBE_SIDE_ON.discard(switch.name)
    else:  # pragma: no cover - the table is fixed
        raise SwitchError(f"{switch.name}: unknown kind {switch.how!r}")


def _get(torch: Any, switch: Switch) -> str:
    tail = switch.name.partition(".")[2]
    if switch.how == "sdp":
        owner = tail.rpartition(".")[0]
        return _bool_word(_function(torch, f"{owner}.{switch.getter}")())
    if switch.how == "attribute":
        owner, attribute = _owner_and_attribute(torch, switch)
        return _bool_word(getattr(owner, attribute))
    if switch.how == "library":
        return _library_word(_function(torch, tail)())
    if switch.how == "deterministic":
        if not _function(torch, "are_deterministic_algorithms_enabled")():
            return "False"
        warn_only = _function(torch, "is_deterministic_algorithms_warn_only_enabled")()
        return "warn_only" if warn_only else "True"
    if switch.how == "precision":
        return str(_function(torch, "get_float32_matmul_precision")())
    if switch.how == "probe":
        return _bool_word(switch.name in _PROBE_SIDE_ON)
    raise SwitchError(f"{switch.name}: unknown kind {switch.how!r}")  # pragma: no cover


def _switch(name: str) -> Switch:
    switch = SWITCHES.get(name)
    if switch is None:
        raise SwitchError(f"{name!r} is not a framework switch gpuprobe knows")
    return switch


def read(torch: Any, name: str) -> str:
    """What ``torch`` reads back for switch ``name`` now, in the table's spelling (``True``,
    ``False``, ``cublaslt``, ``warn_only``, ``high``, ...; a library or precision outside the
    allowed values reads back as torch names it, e.g. ``default``). Raises ``SwitchError``
    when this torch lacks the switch."""
    switch = _switch(name)
    try:
        return _get(torch, switch)
    except _Missing:
        raise _missing(torch, name) from None


def apply(torch: Any, pairs: Iterable[tuple[str, str]], *, in_job: bool = False) -> list[Applied]:
    """Sets each switch in the given order and reads it back.

    Raises ``SwitchError`` at the first switch that is unknown, has a value it does not
    allow, is missing from this torch, fails to set, or reads back something else; the
    switches before it stay set. With ``in_job`` (a user's program, not a gpuprobe worker)
    probe-side switches are skipped: they have no meaning outside gpuprobe's probes."""
    applied: list[Applied] = []
    for name, value in pairs:
        pair = f"{name}={value}"
        _checked(name, value, pair)
        switch = SWITCHES[name]
        if in_job and switch.probe_side:
            continue
        try:
            _set(torch, switch, value)
            got = _get(torch, switch)
        except _Missing:
            raise _missing(torch, name) from None
        except SwitchError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever torch raises, the switch is refused
            raise SwitchError(f"{pair}: {type(exc).__name__}: {exc}") from exc
        if got != value:
            raise SwitchError(f"{pair}: set, but torch reads back {got}")
        applied.append(Applied(name, value, got))
    return applied


def is_on(name: str, value: str, torch: Any = None) -> bool:
    """Whether switch ``name`` reads back ``value`` right now (the fault simulation's live
    check). False when this torch lacks the switch. ``torch`` defaults to the imported one;
    a probe-side switch needs no torch."""
    switch = _switch(name)
    if switch.probe_side:
        return _get(None, switch) == value
    if torch is None:
        torch = _torch_module()
    try:
        return _get(torch, switch) == value
    except _Missing:
        return False


def probe_side_on(name: str) -> bool:
    """Whether probe-side switch ``name`` was applied (to ``True``) in this process."""
    return name in _PROBE_SIDE_ON


# ---------------------------------------------------------------------------------------------
# What a user would write.


def python_import(name: str) -> str:
    """The module a program imports to reach the switch (``import torch``, or ``import
    torch._dynamo`` for a switch of a submodule torch does not import by itself, which
    ``python_line`` then carries); empty for a probe-side switch."""
    switch = _switch(name)
    if switch.probe_side:
        return ""
    return f"import {switch.module}" if switch.module else "import torch"


def python_line(name: str, value: str) -> str:
    """The Python a user would write to set the switch, on one line, after ``import torch``
    (``torch.backends.cuda.enable_cudnn_sdp(False)``, ``torch.backends.cudnn.enabled = False``,
    ``torch.use_deterministic_algorithms(True, warn_only=True)``; a switch of a submodule
    torch does not import by itself carries its import: ``import torch._dynamo;
    torch._dynamo.config.disable = True``). The catalogue's ``python`` lines are these."""
    switch = _switch(name)
    _checked(name, value, f"{name}={value}")
    if switch.how == "sdp":
        return f"{name}({value})"
    if switch.how == "attribute":
        line = f"{name} = {value}"
        return f"import {switch.module}; {line}" if switch.module else line
    if switch.how in ("library", "precision"):
        return f"{name}('{value}')"
    if switch.how == "deterministic":
        return f"{name}(True, warn_only=True)" if value == "warn_only" else f"{name}(True)"
    # Probe-side: what gpuprobe does to the inputs of the call.
    return "x = x.contiguous()  # before the failing call, for each input in another layout"


# ---------------------------------------------------------------------------------------------
# After ``import torch``.


class _AfterImport:
    """A ``sys.meta_path`` finder that lets the real import of one module finish and then
    calls ``callback(module)``. It removes itself once the module is found, so it fires once
    and costs nothing afterwards."""

    def __init__(self, name: str, callback: Callable[[Any], None]) -> None:
        self.name = name
        self.callback = callback

    def _remove(self) -> None:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        self._remove()
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        original = getattr(loader, "exec_module", None)
        if original is None:
            # Not found (the import fails as it would have) or a loader without exec_module.
            return spec
        callback = self.callback

        def exec_module(module: Any) -> None:
            original(module)
            callback(module)

        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):
            return spec
        return spec


def when_imported(callback: Callable[[Any], None], name: str = "torch") -> object | None:
    """Calls ``callback(module)`` once module ``name`` is imported: at once when it already
    is, else right after its import finishes (the finder is returned; it goes away by
    itself once it fired). Never imports the module itself."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return None
    finder = _AfterImport(name, callback)
    sys.meta_path.insert(0, finder)
    return finder


def apply_when_imported(
    pairs: Iterable[tuple[str, str]],
    on_error: Callable[[str, str], None],
    *,
    name: str = "torch",
) -> object | None:
    """Applies ``pairs`` in a user's program once torch is imported (``when_imported``), one
    switch at a time, so that one refused switch does not keep the others from applying;
    probe-side switches are skipped. ``on_error(pair, why)`` hears of each failure: the
    callback runs inside the program's ``import torch``, which must never fail because of
    it."""
    pending = list(pairs)

    def callback(torch: Any) -> None:
        for switch_name, value in pending:
            try:
                apply(torch, [(switch_name, value)], in_job=True)
            except Exception as exc:  # noqa: BLE001 - reported, never raised into the import
                why = str(exc) if isinstance(exc, SwitchError) else f"{type(exc).__name__}: {exc}"
                # A broken reporter must not break the import either.
                with contextlib.suppress(Exception):
                    on_error(f"{switch_name}={value}", why)

    return when_imported(callback, name)
