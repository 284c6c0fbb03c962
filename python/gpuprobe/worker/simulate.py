"""Fault simulation: reproduces documented failure modes on any machine, from data.

A ``SimulationSpec`` (protocol.rs) lists faults. Each fault names an operation (``h2d``,
``convert``, ``randn``, ...), conditions that select the affected calls, an effect (``zeros``,
``partial_zeros``, ``nan``, ``bitflip``, ``stale``, ``crash``, ``hang``, ``exception``,
``oom``), the
fraction of matching calls it hits, and the settings that cure it. Nothing here is specific to
a scenario: presets are TOML files (``simulate/presets/*.toml``) that the supervisor turns into
the plan's ``simulate`` object.

Two ways in:

- the operations layer (``gpuprobe.worker.ops``) describes every call it makes (direction,
  method, dtype, size, pinned, non_blocking, whether it runs on the device under test) and
  asks ``FaultEngine.after_call`` to corrupt the result;
- when simulation is active, ``install_patches`` wraps ``torch.Tensor.to`` / ``.cuda`` /
  ``.cpu`` / ``.copy_`` / the dtype shortcuts and the random generators, so library code
  (DataLoader, Accelerate, later families) is affected too.

Each call is faulted at most once: the operations layer performs its torch calls with the
wrappers bypassed, and the wrappers bypass themselves while they call the original function.
The worker runs probe code with the wrappers bypassed on its own thread (a probe's reference
computations and comparisons must never be faulted) and exposes library calls explicitly
through ``exposed()``; threads started by libraries are exposed by default.

A fault's cures (``cured_by``: any one; ``cured_by_all``: all together; ``only_when_set``: the
fault exists only with them) are settings of two kinds. An environment setting (``NAME=VALUE``,
or a bare ``NAME``: set at all) is judged once, when the engine is built, from the environment
the worker was started with, as the runtime reads it at start-up. A framework switch (a name of
``gpuprobe.switches.SWITCHES``, e.g. ``torch.backends.cuda.enable_cudnn_sdp=False``) is judged
live, at every call the fault matches, by reading torch's state then: the simulation proves
that the switch took effect inside torch, not that a variable was passed. Any other dotted
name is an error.

Simulation is never active unless the plan carries a ``simulate`` object.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

#: The fault vocabulary, ``simulation.json`` beside this file: the one list of operations and
#: effects, which the supervisor also reads (embedded in the binary) to reject a fault file
#: before any worker starts.
_VOCABULARY = json.loads(Path(__file__).with_name("simulation.json").read_text(encoding="utf-8"))

#: Operations a fault may name (FaultSpec.op).
OPS = frozenset(_VOCABULARY["ops"])

#: Effects a fault may have (FaultEffect.kind). Beyond the common corruptions and aborts:
#: ``drop_nan`` and ``accept_invalid`` (sweep only: NaN in the device's output becomes 0, a
#: NaN that silently disappears; the device returns a result for an input it should reject);
#: ``wrap`` (width only: what a kernel that computes offsets in 32 bits reads past the
#: boundary); ``round_bf16`` (floating values rounded to bfloat16: a kernel computing in a
#: lower precision than asked); ``lowbit`` (the lowest bit of every 16th element flips, the
#: same elements at every call: a unit that computes slightly different bits, within every
#: tolerance, for gpuprobe fleet).
EFFECTS = frozenset(_VOCABULARY["effects"])

_FAULT_KEYS = frozenset({"name", "description", "op", "when", "effect", "cured_by", "cured_by_all", "only_when_set"})
_WHEN_KEYS = frozenset(
    {"methods", "dtypes", "to_dtypes", "min_bytes", "max_bytes", "pinned", "non_blocking", "on_device", "variants"}
)
_EFFECT_KEYS = frozenset({"kind", "fraction", "signal", "message"})

#: Byte written into a freshly allocated output by a ``stale`` fault: memory the operation
#: never wrote. 0x5A5A... is finite and non-zero in every float format used here.
STALE_BYTE = 0x5A

#: A ``lowbit`` fault flips the lowest bit of every this-many-th element.
LOWBIT_STRIDE = 16

#: Note added to every observation produced under simulation.
SIMULATED_NOTE = "SIMULATED: produced under fault simulation, not by real hardware"

_DTYPE_ALIASES = {
    "fp32": "float32",
    "float": "float32",
    "f32": "float32",
    "fp16": "float16",
    "half": "float16",
    "f16": "float16",
    "bf16": "bfloat16",
    "fp64": "float64",
    "double": "float64",
    "f64": "float64",
    "int": "int32",
    "long": "int64",
    "i8": "int8",
    "i32": "int32",
    "i64": "int64",
    "fp8e4m3": "float8_e4m3fn",
    "fp8_e4m3": "float8_e4m3fn",
    "fp8e5m2": "float8_e5m2",
    "fp8_e5m2": "float8_e5m2",
}


class SimulationError(ValueError):
    """The simulation spec is malformed (unknown key, operation or effect)."""


def normalize_dtype(name: str) -> str:
    """Canonical dtype name (``torch.float16``, ``fp16``, ``half`` → ``float16``)."""
    name = str(name).strip()
    if name.startswith("torch."):
        name = name[len("torch.") :]
    return _DTYPE_ALIASES.get(name.lower(), name.lower())


@dataclass(frozen=True)
class CallInfo:
    """What one operation did, as the fault conditions see it."""

    op: str
    method: str | None = None
    dtype: str | None = None
    to_dtype: str | None = None
    nbytes: int | None = None
    pinned: bool | None = None
    non_blocking: bool | None = None
    on_device: bool | None = None
    #: Input class and direction of a sweep case (``noncontig``, ``nan``, ... / ``forward``,
    #: ``backward``).
    variant: str | None = None
    direction: str | None = None


@dataclass
class Fault:
    """One validated fault with its call counters."""

    name: str
    op: str
    effect: str
    description: str = ""
    methods: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    to_dtypes: tuple[str, ...] = ()
    min_bytes: int | None = None
    max_bytes: int | None = None
    pinned: bool | None = None
    non_blocking: bool | None = None
    on_device: bool | None = None
    variants: tuple[str, ...] = ()
    every: int = 1
    signal_name: str = "SIGABRT"
    message: str | None = None
    cured_by: tuple[str, ...] = ()
    cured_by_all: tuple[str, ...] = ()
    only_when_set: tuple[str, ...] = ()
    #: The framework-switch part of the settings above, judged at every call (set by the
    #: engine): the fault is skipped while any of ``live_cured_by`` is on, while all of
    #: ``live_cured_by_all`` are on, or while not all of ``live_only_when_set`` are on.
    live_cured_by: tuple[str, ...] = ()
    live_cured_by_all: tuple[str, ...] = ()
    live_only_when_set: tuple[str, ...] = ()
    matched: int = 0
    fired: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def matches(self, call: CallInfo) -> bool:
        """Whether ``call`` meets every condition (a condition on an unknown attribute fails)."""
        if self.op != "any" and self.op != call.op:
            return False
        if self.methods and call.method not in self.methods:
            return False
        if self.dtypes and (call.dtype is None or normalize_dtype(call.dtype) not in self.dtypes):
            return False
        if self.to_dtypes and (call.to_dtype is None or normalize_dtype(call.to_dtype) not in self.to_dtypes):
            return False
        if self.variants and call.variant not in self.variants and call.direction not in self.variants:
            return False
        if self.min_bytes is not None and (call.nbytes is None or call.nbytes < self.min_bytes):
            return False
        if self.max_bytes is not None and (call.nbytes is None or call.nbytes > self.max_bytes):
            return False
        for wanted, actual in (
            (self.pinned, call.pinned),
            (self.non_blocking, call.non_blocking),
            (self.on_device, call.on_device),
        ):
            if wanted is not None and actual is not wanted:
                return False
        return True

    def count(self) -> bool:
        """Counts one matching call; True when this call is one the fault hits (every k-th,
        starting with the first)."""
        with self._lock:
            self.matched += 1
            hit = (self.matched - 1) % self.every == 0
            if hit:
                self.fired += 1
            return hit


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SimulationError(f"{where} must be a list of strings")
    return tuple(value)


def _optional_bool(value: Any, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise SimulationError(f"{where} must be true or false")


def _optional_int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SimulationError(f"{where} must be a non-negative integer")
    return value


def parse_fault(raw: Mapping[str, Any]) -> Fault:
    """Validates one ``FaultSpec`` object (unknown keys are errors, as in the Rust type)."""
    if not isinstance(raw, Mapping):
        raise SimulationError("a fault must be a table/object")
    unknown = set(raw) - _FAULT_KEYS
    name = raw.get("name")
    if unknown:
        raise SimulationError(f"fault {name!r}: unknown key(s) {sorted(unknown)}")
    if not isinstance(name, str) or not name:
        raise SimulationError("every fault needs a non-empty name")
    op = raw.get("op")
    if op not in OPS:
        raise SimulationError(f"fault {name!r}: unknown op {op!r} (one of {sorted(OPS)})")
    when = raw.get("when") or {}
    if not isinstance(when, Mapping):
        raise SimulationError(f"fault {name!r}: 'when' must be a table")
    unknown = set(when) - _WHEN_KEYS
    if unknown:
        raise SimulationError(f"fault {name!r}: unknown condition(s) {sorted(unknown)}")
    effect = raw.get("effect")
    if not isinstance(effect, Mapping):
        raise SimulationError(f"fault {name!r}: needs an effect table")
    unknown = set(effect) - _EFFECT_KEYS
    if unknown:
        raise SimulationError(f"fault {name!r}: unknown effect key(s) {sorted(unknown)}")
    kind = effect.get("kind")
    if kind not in EFFECTS:
        raise SimulationError(f"fault {name!r}: unknown effect {kind!r} (one of {sorted(EFFECTS)})")
    fraction = effect.get("fraction", 1.0)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise SimulationError(f"fault {name!r}: fraction must be in (0, 1]")
    signal_name = effect.get("signal") or "SIGABRT"
    if not isinstance(signal_name, str) or not isinstance(getattr(signal, signal_name, None), int):
        raise SimulationError(f"fault {name!r}: unknown signal {signal_name!r}")
    message = effect.get("message")
    if message is not None and not isinstance(message, str):
        raise SimulationError(f"fault {name!r}: message must be a string")
    for key in ("cured_by", "cured_by_all", "only_when_set"):
        for setting in _strings(raw.get(key), f"fault {name!r}: {key}"):
            variable, sep, value = setting.partition("=")
            if not variable:
                raise SimulationError(f"fault {name!r}: {key} entry {setting!r} has no variable name")
            if is_switch(setting):
                allowed = _switches().SWITCHES[variable].allowed
                if not sep or value not in allowed:
                    raise SimulationError(
                        f"fault {name!r}: {key} entry {setting!r}: framework switch {variable} takes "
                        + " or ".join(f"{variable}={v}" for v in allowed)
                    )
            elif "." in variable:
                raise SimulationError(
                    f"fault {name!r}: {key} entry {setting!r}: {variable!r} is neither an environment variable "
                    "nor a framework switch gpuprobe knows"
                )
    return Fault(
        name=name,
        op=op,
        effect=kind,
        description=str(raw.get("description") or ""),
        methods=_strings(when.get("methods"), f"fault {name!r}: when.methods"),
        dtypes=tuple(normalize_dtype(d) for d in _strings(when.get("dtypes"), f"fault {name!r}: when.dtypes")),
        to_dtypes=tuple(normalize_dtype(d) for d in _strings(when.get("to_dtypes"), f"fault {name!r}: when.to_dtypes")),
        min_bytes=_optional_int(when.get("min_bytes"), f"fault {name!r}: when.min_bytes"),
        max_bytes=_optional_int(when.get("max_bytes"), f"fault {name!r}: when.max_bytes"),
        pinned=_optional_bool(when.get("pinned"), f"fault {name!r}: when.pinned"),
        non_blocking=_optional_bool(when.get("non_blocking"), f"fault {name!r}: when.non_blocking"),
        on_device=_optional_bool(when.get("on_device"), f"fault {name!r}: when.on_device"),
        variants=_strings(when.get("variants"), f"fault {name!r}: when.variants"),
        every=max(1, round(1.0 / float(fraction))),
        signal_name=signal_name,
        message=message,
        cured_by=_strings(raw.get("cured_by"), f"fault {name!r}: cured_by"),
        cured_by_all=_strings(raw.get("cured_by_all"), f"fault {name!r}: cured_by_all"),
        only_when_set=_strings(raw.get("only_when_set"), f"fault {name!r}: only_when_set"),
    )


def setting_present(setting: str, environ: Mapping[str, str]) -> bool:
    """``KEY=VALUE`` is present when the variable has exactly that value; a bare ``KEY`` when
    the variable is set at all."""
    key, sep, value = setting.partition("=")
    if not sep:
        return key in environ
    return environ.get(key) == value


_SWITCHES_MODULE: Any = None


def _switches() -> Any:
    """``gpuprobe.switches``. This module is also loaded by file path, with the package off
    ``sys.path`` (the repro scripts' start-up hook): then its sibling file is loaded the same
    way, under a private name."""
    global _SWITCHES_MODULE
    if _SWITCHES_MODULE is None:
        if __name__ == "gpuprobe.worker.simulate":
            from gpuprobe import switches as module
        else:
            private = "_gpuprobe_simulate_switches"
            module = sys.modules.get(private)
            if module is None:
                path = Path(__file__).resolve().parents[1] / "switches.py"
                spec = importlib.util.spec_from_file_location(private, path)
                if spec is None or spec.loader is None:
                    raise ImportError(f"cannot load {path}")
                module = importlib.util.module_from_spec(spec)
                # dataclasses look their module up in sys.modules while the module executes.
                sys.modules[private] = module
                spec.loader.exec_module(module)
        _SWITCHES_MODULE = module
    return _SWITCHES_MODULE


def is_switch(setting: str) -> bool:
    """Whether a cure's ``NAME[=VALUE]`` names a framework switch (judged live) rather than an
    environment variable."""
    return setting.partition("=")[0] in _switches().SWITCHES


def switch_on(setting: str, torch: Any = None) -> bool:
    """Whether framework switch ``NAME=VALUE`` reads back ``VALUE`` in torch right now."""
    name, _, value = setting.partition("=")
    return bool(_switches().is_on(name, value, torch))


# ---------------------------------------------------------------------------------------------
# Thread-local exposure: who may be faulted by the library wrappers.

_local = threading.local()


def _bypass_depth() -> int:
    return getattr(_local, "bypass", 0)


class _Bypassed:
    """Context manager behind ``bypassed()`` (a class: it runs once per tiny copy)."""

    __slots__ = ("_saved",)

    def __enter__(self) -> None:
        _local.bypass = getattr(_local, "bypass", 0) + 1
        self._saved = getattr(_local, "exposed", 0)
        _local.exposed = 0

    def __exit__(self, *exc: object) -> None:
        _local.exposed = self._saved
        _local.bypass -= 1


def bypassed() -> _Bypassed:
    """Library wrappers pass straight through on this thread inside the block."""
    return _Bypassed()


@contextlib.contextmanager
def exposed() -> Iterator[None]:
    """Library calls inside the block may be faulted even where the thread is bypassed
    (probes use it around library code such as a DataLoader or Accelerate)."""
    _local.exposed = getattr(_local, "exposed", 0) + 1
    try:
        yield
    finally:
        _local.exposed -= 1


def wrappers_active() -> bool:
    """Whether a library call on this thread right now may be faulted."""
    if getattr(_local, "exposed", 0) > 0:
        return True
    return _bypass_depth() == 0


# ---------------------------------------------------------------------------------------------
# The engine.


class FaultEngine:
    """Holds the active faults and applies their effects to results."""

    def __init__(self, spec: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> None:
        if not isinstance(spec, Mapping):
            raise SimulationError("simulate must be an object")
        self.source = str(spec.get("source") or "")
        #: The spec as given: a probe that continues its work in a child process activates
        #: the same faults there (``activate(engine.spec, ...)``).
        self.spec: dict[str, Any] = dict(spec)
        raw_faults = spec.get("fault", [])
        if not isinstance(raw_faults, list):
            raise SimulationError("simulate.fault must be a list")
        environ = os.environ if environ is None else environ
        self.faults: list[Fault] = []
        self._statuses: list[tuple[Fault, str]] = []
        for raw in raw_faults:
            fault = parse_fault(raw)
            status = self._status(fault, environ)
            self._statuses.append((fault, status))
            if status == "active":
                self.faults.append(fault)
        self._torch: Any = None

    @staticmethod
    def _status(fault: Fault, environ: Mapping[str, str]) -> str:
        """The environment's verdict, once: ``active`` or why not. The framework-switch
        entries are set aside on the fault (``live_*``), for ``decide`` to judge per call."""
        env_only_when = [s for s in fault.only_when_set if not is_switch(s)]
        env_cured_by = [s for s in fault.cured_by if not is_switch(s)]
        env_cured_by_all = [s for s in fault.cured_by_all if not is_switch(s)]
        fault.live_only_when_set = tuple(s for s in fault.only_when_set if is_switch(s))
        fault.live_cured_by = tuple(s for s in fault.cured_by if is_switch(s))
        live_all = tuple(s for s in fault.cured_by_all if is_switch(s))
        missing = [s for s in env_only_when if not setting_present(s, environ)]
        if missing:
            return (
                "inactive: exists only when " + ", ".join(fault.only_when_set) + " (missing " + ", ".join(missing) + ")"
            )
        for setting in env_cured_by:
            if setting_present(setting, environ):
                return f"cured by {setting}"
        env_all_present = all(setting_present(s, environ) for s in env_cured_by_all)
        if fault.cured_by_all and not live_all and env_all_present:
            return "cured by " + " + ".join(fault.cured_by_all)
        # Switches complete a cure only with the environment part present.
        fault.live_cured_by_all = live_all if env_all_present else ()
        return "active"

    @property
    def messages(self) -> list[str]:
        """One line per fault: active, cured, inactive, and why. A fault with framework-switch
        entries says what they read back now (once torch is there), and that they are judged
        at every call."""
        return [
            f"simulated fault {fault.name!r} ({fault.op}/{fault.effect}): {self._describe(fault, status)}"
            for fault, status in self._statuses
        ]

    def _describe(self, fault: Fault, status: str) -> str:
        if status != "active" or not (fault.live_cured_by or fault.live_cured_by_all or fault.live_only_when_set):
            return status
        pending = status + " (" + ", ".join(self._live_settings(fault)) + " judged live at every call)"
        if self._torch is None and "torch" not in sys.modules:
            return pending
        reason = self._live_cure(fault)
        return pending if reason is None else reason + " (judged at every call)"

    @staticmethod
    def _live_settings(fault: Fault) -> list[str]:
        return list(dict.fromkeys(fault.live_only_when_set + fault.live_cured_by + fault.live_cured_by_all))

    def _live_cure(self, fault: Fault) -> str | None:
        """Why ``fault`` is skipped right now by torch's state, or None while it applies."""
        torch = self._torch
        if fault.live_only_when_set:
            off = [s for s in fault.live_only_when_set if not switch_on(s, torch)]
            if off:
                needs = ", ".join(fault.live_only_when_set)
                return f"inactive live: exists only while {needs} (off: {', '.join(off)})"
        for setting in fault.live_cured_by:
            if switch_on(setting, torch):
                return f"cured live by {setting}"
        if fault.live_cured_by_all and all(switch_on(s, torch) for s in fault.live_cured_by_all):
            return "cured live by " + " + ".join(fault.cured_by_all)
        return None

    def bind(self, torch: Any) -> None:
        """Gives the engine the torch module (effects on tensors and live cures need it)."""
        self._torch = torch

    def wants(self, op: str, effect: str | None = None) -> bool:
        """Cheap pre-check: is any active fault about ``op`` (and ``effect``)?"""
        return any((f.op == op or f.op == "any") and (effect is None or f.effect == effect) for f in self.faults)

    def decide(self, call: CallInfo) -> Fault | None:
        """Counts ``call`` against every matching fault; returns the first one that hits it."""
        chosen: Fault | None = None
        for fault in self.faults:
            if not fault.matches(call):
                continue
            # A fault a framework switch cures is skipped while torch reads the switch back
            # (uncounted: the call never met it).
            live = fault.live_cured_by or fault.live_cured_by_all or fault.live_only_when_set
            if live and self._live_cure(fault) is not None:
                continue
            if fault.count() and chosen is None:
                chosen = fault
        return chosen

    def after_call(
        self,
        call: CallInfo,
        result: Any,
        *,
        sources: tuple[Any, ...] = (),
        snapshot: Any = None,
        in_place: bool = False,
    ) -> Any:
        """Applies the fault that hits ``call`` (if any) and returns the (possibly new) result.

        ``sources`` are the call's inputs: a result sharing storage with one of them is cloned
        before it is corrupted, so the input is never touched (``.to('cpu')`` of a CPU tensor
        returns the tensor itself), unless ``in_place`` says the result is the call's own
        destination (``copy_``). ``snapshot`` is the previous content of an in-place
        destination, for ``stale``.
        """
        fault = self.decide(call)
        if fault is None:
            return result
        return self.apply(fault, call, result, sources=sources, snapshot=snapshot, in_place=in_place)

    def apply(
        self,
        fault: Fault,
        call: CallInfo,
        result: Any,
        *,
        sources: tuple[Any, ...] = (),
        snapshot: Any = None,
        in_place: bool = False,
    ) -> Any:
        """Applies ``fault``'s effect to ``result`` (see ``after_call``)."""
        if fault.effect == "crash":
            crash(fault.signal_name, fault.message or f"simulated crash ({fault.name}) during {call.op}")
        if fault.effect == "hang":
            hang(fault.message)
        if fault.effect == "exception":
            message = fault.message or f"simulated failure ({fault.name}) during {call.op}"
            if is_sticky_error(message):
                # What the real error does: the device context of this process is unusable.
                _lose_context(message)
            raise RuntimeError(message)
        torch = self._torch
        if fault.effect == "oom":
            message = fault.message or f"simulated out of memory ({fault.name}) during {call.op}"
            error = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
            raise (error(message) if error is not None else MemoryError(message))
        if torch is None or not isinstance(result, torch.Tensor):
            return result
        with bypassed():
            devices = {s.device for s in sources if isinstance(s, torch.Tensor) and s.device.type != "cpu"}
            if result.device.type == "cpu" and devices:
                # A non_blocking copy to the host may still be in flight: corrupt after it
                # lands, or the copy would overwrite the corruption.
                for device in devices:
                    torch.cuda.synchronize(device)
            if not in_place and any(isinstance(s, torch.Tensor) and _shares_storage(torch, s, result) for s in sources):
                result = result.clone()
            if fault.effect == "stale":
                if snapshot is not None:
                    result.copy_(snapshot)
                else:
                    _fill_bytes(torch, result, STALE_BYTE)
            else:
                corrupt(torch, result, fault.effect, fault.fired)
        return result


def _shares_storage(torch: Any, a: Any, b: Any) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.device == b.device
    except (RuntimeError, AttributeError):
        return False


_INT_VIEW = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}
_NAN_BITS = {
    "float32": 0x7FC00000,
    "float64": 0x7FF8000000000000,
    "float16": 0x7E00,
    "bfloat16": 0x7FC0,
    "float8_e4m3fn": 0x7F,
    "float8_e5m2": 0x7E,
}


def _int_view(torch: Any, t: Any) -> Any:
    return t.view(getattr(torch, _INT_VIEW[t.element_size()]))


def _signed(bits: int, nbytes: int) -> int:
    width = 8 * nbytes
    bits &= (1 << width) - 1
    if nbytes > 1 and bits >= 1 << (width - 1):
        bits -= 1 << width
    return bits


def _fill_bytes(torch: Any, t: Any, byte: int) -> None:
    size = t.element_size()
    value = int.from_bytes(bytes([byte]) * size, "little")
    _in_place_on_flat(torch, t, lambda flat: flat.fill_(_signed(value, size)))


def _in_place_on_flat(torch: Any, t: Any, edit: Callable[[Any], Any]) -> None:
    """Applies ``edit`` to a flat integer view of ``t``'s elements, in place."""
    if t.numel() == 0:
        return
    if t.is_contiguous():
        edit(_int_view(torch, t).view(-1))
        return
    tmp = t.contiguous()
    edit(_int_view(torch, tmp).view(-1))
    t.copy_(tmp)


def corrupt(torch: Any, t: Any, effect: str, occurrence: int) -> None:
    """Corrupts tensor ``t`` in place (called with the wrappers bypassed).

    - ``zeros``: every element becomes zero (False for bool);
    - ``partial_zeros``: elements at flat indices ≡ 0 mod 4 become zero (a one-element tensor
      becomes all zero);
    - ``nan``: floats at flat indices ≡ 0 mod 8 become NaN; integer and bool tensors cannot
      hold NaN and get ``bitflip`` instead;
    - ``bitflip``: the lowest bit of one element flips (which element depends on how many
      times the fault fired);
    - ``wrap``: with ``P`` the largest power of two below the element count, every element at
      flat index ``i >= P`` takes the value at ``i - P``: what a kernel reads when its offsets
      wrap at 2^31 or 2^32 (the index-width boundary of a real tensor, the nearest power of
      two of a small one);
    - ``round_bf16``: every floating element rounded to bfloat16 and back (what a kernel
      computing in bfloat16 where a higher precision was asked returns); other dtypes are
      left as they are;
    - ``lowbit``: the lowest bit (of a float: the last mantissa bit, one unit in the last
      place) of the elements at flat indices ≡ 0 mod 16 flips, the same elements at every
      call: a device whose outputs differ from its identical peers' by bits that pass every
      tolerance, and do so reproducibly (only the cross-node differential sees it).
    """
    dtype_name = str(t.dtype).replace("torch.", "")
    if effect == "nan" and dtype_name not in _NAN_BITS:
        effect = "bitflip"
    if effect == "zeros":
        _in_place_on_flat(torch, t, lambda flat: flat.zero_())
    elif effect == "partial_zeros":
        _in_place_on_flat(torch, t, lambda flat: flat[::4].zero_())
    elif effect == "nan":
        bits = _signed(_NAN_BITS[dtype_name], t.element_size())
        _in_place_on_flat(torch, t, lambda flat: flat[::8].fill_(bits))
    elif effect == "wrap":

        def wrap(flat: Any) -> None:
            count = flat.numel()
            if count < 2:
                return
            period = 1 << ((count - 1).bit_length() - 1)
            flat[period:].copy_(flat[: count - period].clone())

        _in_place_on_flat(torch, t, wrap)
    elif effect == "round_bf16":
        if t.is_floating_point():
            t.copy_(t.to(torch.bfloat16).to(t.dtype))
    elif effect == "lowbit":
        _in_place_on_flat(torch, t, lambda flat: flat[::LOWBIT_STRIDE].bitwise_xor_(1))
    elif effect == "bitflip":

        def flip(flat: Any) -> None:
            index = (occurrence * 2654435761) % flat.numel()
            flat[index : index + 1].bitwise_xor_(1)

        _in_place_on_flat(torch, t, flip)
    else:
        raise SimulationError(f"effect {effect!r} does not corrupt data")


# getattr: Windows lacks some of these signals.
_FATAL_SIGNALS = frozenset(
    getattr(signal, name) for name in ("SIGABRT", "SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE") if hasattr(signal, name)
)
_UNCATCHABLE = frozenset(getattr(signal, name) for name in ("SIGKILL", "SIGSTOP") if hasattr(signal, name))


def crash(signal_name: str, message: str) -> None:
    """Writes ``message`` to stderr and kills this process with the named signal."""
    sys.stdout.flush()
    data = (message.rstrip("\n") + "\n").encode("utf-8", "replace")
    try:
        sys.stderr.flush()
        os.write(2, data)
    except OSError:
        pass
    signum = getattr(signal, signal_name)
    # faulthandler (the worker runs with -X faulthandler) catches SIGABRT, SIGSEGV, SIGBUS,
    # SIGILL and SIGFPE, prints the Python stacks and re-raises the signal with its default
    # action, as a real abort would look. Other signals may carry a Python handler (SIGINT,
    # SIGTERM): restore the default action so the process dies by the signal.
    if signum not in _FATAL_SIGNALS and signum not in _UNCATCHABLE:
        signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    time.sleep(5)
    os._exit(128 + signum)


def hang(message: str | None) -> None:
    """Never returns (a copy that never completes); the supervisor kills the process group."""
    if message:
        try:
            os.write(2, (message.rstrip("\n") + "\n").encode("utf-8", "replace"))
        except OSError:
            pass
    while True:
        time.sleep(3600)


# ---------------------------------------------------------------------------------------------
# Activation and library wrappers.

_ENGINE: FaultEngine | None = None
#: The message of a simulated sticky error raised in this process (``context_lost``).
_CONTEXT_LOST: str | None = None

#: Lower-case markers of a sticky device error: after one, every later call in the same
#: process fails too (CUDA's "the process must be terminated and relaunched").
STICKY_ERROR_MARKERS = (
    "illegal memory access",
    "misaligned address",
    "device-side assert",
    "unspecified launch failure",
    "illegal instruction",
)


def is_sticky_error(message: str) -> bool:
    """Whether an exception message names a sticky device error."""
    lowered = message.lower()
    return any(marker in lowered for marker in STICKY_ERROR_MARKERS)


def _lose_context(message: str) -> None:
    global _CONTEXT_LOST
    _CONTEXT_LOST = message


def context_lost() -> str | None:
    """The message of the simulated sticky error that made this process's device context
    unusable (an ``exception`` fault whose ``message`` is a sticky error), or None. Probes
    that tell a sticky fault from one the context survives read it beside the real check
    (``context.device_context_problem``), so the CPU exercises their recovery."""
    return _CONTEXT_LOST


_PATCHED = False
#: The device under test of the active simulation (what "on the device" means to wrappers).
_DUT: Any = None


def engine() -> FaultEngine | None:
    """The active engine, or None when simulation is off."""
    return _ENGINE


def activate(spec: Mapping[str, Any], torch: Any, device: str, environ: Mapping[str, str] | None = None) -> FaultEngine:
    """Turns simulation on for this process: builds the engine and wraps torch's entry points."""
    return activate_engine(FaultEngine(spec, environ), torch, device)


def activate_engine(fault_engine: FaultEngine, torch: Any, device: str) -> FaultEngine:
    """Turns simulation on with an engine built (and validated) earlier."""
    global _ENGINE, _DUT, _CONTEXT_LOST
    fault_engine.bind(torch)
    _CONTEXT_LOST = None
    _DUT = torch.device(device)
    _ENGINE = fault_engine
    install_patches(torch)
    return fault_engine


def deactivate() -> None:
    """Turns simulation off (wrappers stay installed but pass through); used by tests."""
    global _ENGINE, _CONTEXT_LOST
    _ENGINE = None
    _CONTEXT_LOST = None


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _nbytes(t: Any) -> int:
    return int(t.numel()) * int(t.element_size())


def _is_pinned(t: Any) -> bool:
    try:
        return bool(t.device.type == "cpu" and t.is_pinned())
    except RuntimeError:
        return False


def _non_blocking_arg(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bool:
    if "non_blocking" in kwargs:
        return bool(kwargs["non_blocking"])
    return any(isinstance(a, bool) and a for a in args)


def _explicit_device(torch: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    candidate = kwargs.get("device")
    if candidate is None:
        for a in args:
            if isinstance(a, (str, torch.device)):
                candidate = a
                break
            if isinstance(a, torch.Tensor):
                candidate = a.device
                break
    if candidate is None:
        return None
    try:
        return torch.device(candidate)
    except (RuntimeError, TypeError):
        return None


def install_patches(torch: Any) -> None:
    """Wraps torch entry points so library code meets the simulated faults too (once per
    process; the wrappers consult whichever engine and device under test are active)."""
    global _PATCHED
    if _PATCHED:
        return
    _PATCHED = True

    def dut_is_cpu() -> bool:
        return _DUT is None or _DUT.type == "cpu"

    def on_dut(t: Any) -> bool:
        if dut_is_cpu():
            return t.device.type == "cpu"
        return t.device.type == _DUT.type and (t.device.index or 0) == (_DUT.index or 0)

    def move_op(src: Any, result: Any, explicit: Any, method: str) -> str | None:
        s, r = src.device.type, result.device.type
        if s == "cpu" and r != "cpu":
            return "h2d"
        if s != "cpu" and r == "cpu":
            return "d2h"
        if s != "cpu" and r != "cpu":
            return "d2d" if src.device != result.device else None
        if dut_is_cpu():
            # On a CPU-only machine the device under test is the CPU: an explicit move onto
            # it is a host-to-device copy, .cpu() is the way back.
            if method == "cpu":
                return "d2h"
            if explicit is not None and explicit.type == "cpu":
                return "h2d"
        return None

    def handle_move_and_convert(self: Any, result: Any, method: str, explicit: Any, nb: bool) -> Any:
        active = _ENGINE
        if active is None or not isinstance(result, torch.Tensor):
            return result
        op = move_op(self, result, explicit, method)
        if op is not None:
            pinned = _is_pinned(self) if op == "h2d" else (_is_pinned(result) if op == "d2h" else None)
            call = CallInfo(
                op=op,
                method=method,
                dtype=_dtype_name(self.dtype),
                nbytes=_nbytes(self),
                pinned=pinned,
                non_blocking=nb,
                on_device=True,
            )
            result = active.after_call(call, result, sources=(self,))
        if result.dtype != self.dtype:
            call = CallInfo(
                op="convert",
                method=method,
                dtype=_dtype_name(self.dtype),
                to_dtype=_dtype_name(result.dtype),
                nbytes=_nbytes(self),
                on_device=on_dut(result),
            )
            result = active.after_call(call, result, sources=(self,))
        return result

    def wrap_tensor_method(name: str) -> None:
        original = getattr(torch.Tensor, name)

        @functools.wraps(original)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _ENGINE is None or not wrappers_active():
                return original(self, *args, **kwargs)
            with bypassed():
                result = original(self, *args, **kwargs)
                explicit = _explicit_device(torch, args, kwargs) if name == "to" else None
                if name == "cuda":
                    explicit = result.device
                return handle_move_and_convert(self, result, name, explicit, _non_blocking_arg(args, kwargs))

        setattr(torch.Tensor, name, wrapper)

    for method_name in (
        "to",
        "cuda",
        "cpu",
        "type",
        "float",
        "half",
        "bfloat16",
        "double",
        "int",
        "long",
        "bool",
        "char",
    ):
        if hasattr(torch.Tensor, method_name):
            wrap_tensor_method(method_name)

    original_copy = torch.Tensor.copy_

    @functools.wraps(original_copy)
    def copy_wrapper(self: Any, src: Any, *args: Any, **kwargs: Any) -> Any:
        active = _ENGINE
        if active is None or not wrappers_active() or not isinstance(src, torch.Tensor):
            return original_copy(self, src, *args, **kwargs)
        with bypassed():
            s, d = src.device.type, self.device.type
            if s == "cpu" and d != "cpu":
                op = "h2d"
            elif s != "cpu" and d == "cpu":
                op = "d2h"
            elif s != "cpu":
                op = "d2d"
            else:
                op = "h2d" if dut_is_cpu() else None
            if op is None:
                return original_copy(self, src, *args, **kwargs)
            snapshot = self.clone() if active.wants(op, "stale") else None
            result = original_copy(self, src, *args, **kwargs)
            pinned = _is_pinned(src) if op == "h2d" else (_is_pinned(self) if op == "d2h" else None)
            call = CallInfo(
                op=op,
                method="copy_",
                dtype=_dtype_name(src.dtype),
                nbytes=_nbytes(src),
                pinned=pinned,
                non_blocking=_non_blocking_arg(args, kwargs),
                on_device=True,
            )
            fault = active.decide(call)
            if fault is not None:
                # In place: the destination itself is the output.
                active.apply(fault, call, result, sources=(src,), snapshot=snapshot, in_place=True)
            if result.dtype != src.dtype and fault is None:
                conv = CallInfo(
                    op="convert",
                    method="copy_",
                    dtype=_dtype_name(src.dtype),
                    to_dtype=_dtype_name(result.dtype),
                    nbytes=_nbytes(src),
                    on_device=on_dut(result),
                )
                conv_fault = active.decide(conv)
                if conv_fault is not None:
                    active.apply(conv_fault, conv, result, sources=(src,), in_place=True)
            return result

    torch.Tensor.copy_ = copy_wrapper

    def wrap_generator(owner: Any, name: str, op: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            active = _ENGINE
            if active is None or not wrappers_active():
                return original(*args, **kwargs)
            with bypassed():
                result = original(*args, **kwargs)
                if not isinstance(result, torch.Tensor):
                    return result
                call = CallInfo(
                    op=op,
                    method=name,
                    dtype=_dtype_name(result.dtype),
                    nbytes=_nbytes(result),
                    on_device=on_dut(result),
                )
                return active.after_call(call, result, sources=tuple(a for a in args if isinstance(a, torch.Tensor)))

        setattr(owner, name, wrapper)

    for name, op in (
        ("randn", "randn"),
        ("randn_like", "randn_like"),
        ("rand", "rand"),
        ("rand_like", "rand"),
        ("randint", "randint"),
        ("randint_like", "randint"),
        ("randperm", "randperm"),
        ("multinomial", "multinomial"),
    ):
        wrap_generator(torch, name, op)
    wrap_generator(torch.Tensor, "multinomial", "multinomial")
