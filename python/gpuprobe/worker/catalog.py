"""The probe catalog: every probe's spec, importable without torch.

Each family is a package of ``gpuprobe.worker.probes`` (``probes/<family>/``): it declares its
probes in its ``specs`` module, which imports nothing heavy, and implements them in modules
imported only when a probe runs (``run`` and the family's others). ``FAMILY_SPECS`` lists every
family's spec function, in catalog order: the one place a family is registered. A
``ProbeDef`` names its implementation as ``"module:function"`` plus keyword parameters, so
listing the catalog (mode ``catalog``) stays fast and never imports torch.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

#: Tiers in the order they include each other (``ProbeSpec.tier``).
TIERS = ("quick", "standard", "full", "soak")

#: Rules as ``ProbeSpec.rule`` serializes them.
BIT_EXACT: dict[str, Any] = {"kind": "bit_exact"}
INVARIANT: dict[str, Any] = {"kind": "invariant"}
MEASURE: dict[str, Any] = {"kind": "measure"}


def statistical(alpha: float = 1e-10) -> dict[str, Any]:
    """The statistical rule with false-alarm budget ``alpha`` for the whole probe."""
    return {"kind": "statistical", "alpha": alpha}


@dataclass(frozen=True)
class ProbeDef:
    """One probe: its published spec plus where its implementation lives."""

    id: str
    tier: str
    rule: dict[str, Any]
    description: str
    impl: str
    params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 30.0
    layer: str = "framework"
    needs: tuple[str, ...] = ()
    isolated: bool = False
    #: How the probe shares its device with the lanes beside it (``ProbeSpec.placement``):
    #: ``shared`` (the main lane), ``side`` (a second lane: the time goes to starting
    #: processes, little device memory is used) or ``exclusive`` (alone on the device, after
    #: everything else: it fills device memory or measures what is free).
    placement: str = "shared"
    #: The side lane's name (``ProbeSpec.lane``); side probes of one family share a lane
    #: unless they name one (the sweep spreads over several).
    lane: str | None = None
    #: ``module:function`` that starts the probe's helper processes without importing the
    #: framework (the sweep's reference process): the worker calls it once, before its own
    #: import of torch, so that the helper's start-up overlaps the worker's instead of
    #: following it (``start_helpers``). Worker-side only: not part of the ``ProbeSpec``.
    helpers: str | None = None
    #: Seconds one run typically takes on a warm machine (``ProbeSpec.typical_s``), where the
    #: family knows better than the engine's table by id prefix; only lanes are sized by it.
    typical_s: float | None = None
    #: The native probe id prefix covering the same operation one layer down
    #: (``ProbeSpec.native_counterpart``): the family's specs module declares it once as
    #: ``NATIVE_COUNTERPART`` and the catalog sets it on each of the family's probes.
    native_counterpart: str | None = None
    #: The group the HTML report shows the probe's results in (``ProbeSpec.report_group``),
    #: declared once by a family as ``REPORT_GROUP`` where it is not the family's own name.
    report_group: str | None = None

    def spec(self) -> dict[str, Any]:
        """The ``ProbeSpec`` JSON object (protocol.rs / probe.rs)."""
        out: dict[str, Any] = {
            "id": self.id,
            "tier": self.tier,
            "layer": self.layer,
            "rule": dict(self.rule),
            "backend": "python",
            "timeout_s": float(self.timeout_s),
            "description": self.description,
        }
        if self.needs:
            out["needs"] = list(self.needs)
        if self.isolated:
            out["isolated"] = True
        if self.placement != "shared":
            out["placement"] = self.placement
        if self.lane:
            out["lane"] = self.lane
        if self.typical_s is not None:
            out["typical_s"] = float(self.typical_s)
        if self.native_counterpart:
            out["native_counterpart"] = self.native_counterpart
        if self.report_group and self.report_group != self.id.split(".")[0]:
            out["report_group"] = self.report_group
        return out

    def resolve(self) -> Callable[..., Any]:
        """Imports and returns the implementation function (this may import torch)."""
        return _function(self.impl)


def _function(path: str) -> Callable[..., Any]:
    """The function a ``module:function`` path names, its module imported."""
    module_name, _, function_name = path.partition(":")
    return getattr(importlib.import_module(module_name), function_name)


def start_helpers(probe_ids: list[str]) -> list[str]:
    """Calls the ``helpers`` starter of each probe planned (each starter once, in plan
    order); returns a note per starter that failed. Never raises: a helper that did not
    start is started, or reported, by its probe."""
    notes: list[str] = []
    started: set[str] = set()
    for probe_id in probe_ids:
        probe = lookup(probe_id)
        if probe is None or not probe.helpers or probe.helpers in started:
            continue
        started.add(probe.helpers)
        try:
            _function(probe.helpers)()
        except Exception as exc:  # noqa: BLE001 - the probe starts it again, or says why
            notes.append(f"helpers of {probe_id} not started early: {type(exc).__name__}: {exc}")
    return notes


_CATALOG: dict[str, ProbeDef] | None = None

#: Every family's spec function (``module:function``), in catalog order, one line per family.
#: Each returns the family's ``list[ProbeDef]`` and its module imports nothing heavy (no torch).
FAMILY_SPECS = (
    "gpuprobe.worker.probes.copy.specs:specs",
    "gpuprobe.worker.probes.rng.specs:specs",
    "gpuprobe.worker.probes.dtype.specs:specs",
    "gpuprobe.worker.probes.ops.specs:specs",
    "gpuprobe.worker.probes.nn.specs:specs",
    "gpuprobe.worker.probes.alloc.specs:specs",
    "gpuprobe.worker.probes.pipeline.specs:specs",
    "gpuprobe.worker.probes.dist.specs:specs",
    "gpuprobe.worker.probes.soak.specs:specs",
    "gpuprobe.worker.probes.sweep.specs:specs",
    "gpuprobe.worker.probes.width.specs:specs",
    "gpuprobe.worker.probes.compile.specs:specs",
    "gpuprobe.worker.probes.graph.specs:specs",
    "gpuprobe.worker.probes.optim.specs:specs",
    "gpuprobe.worker.probes.train.specs:specs",
    "gpuprobe.worker.probes.fault.specs:specs",
)


#: What a family's specs module may declare once for all its probes (module attribute →
#: ``ProbeDef`` field): metadata the Rust side reads from the published catalog instead
#: of keeping its own table by family.
FAMILY_DECLARATIONS = {"NATIVE_COUNTERPART": "native_counterpart", "REPORT_GROUP": "report_group"}


def family_declarations(specs: str) -> dict[str, Any]:
    """The ``ProbeDef`` fields the family of spec function ``specs`` declares for all its
    probes (``FAMILY_DECLARATIONS``), by field name."""
    module = importlib.import_module(specs.partition(":")[0])
    return {
        field_name: getattr(module, attribute)
        for attribute, field_name in FAMILY_DECLARATIONS.items()
        if getattr(module, attribute, None) is not None
    }


def typical_prefix(table: dict[str, float], probe_id: str) -> str | None:
    """The longest prefix of ``probe_id`` (whole parts: ``nn.sdpa`` covers ``nn.sdpa.bf16``
    but not ``nn.sdpax``) that a family's ``TYPICAL_SECONDS`` lists."""
    matching = [prefix for prefix in table if probe_id == prefix or probe_id.startswith(prefix + ".")]
    return max(matching, key=len) if matching else None


def typical_seconds(table: dict[str, float], probe_id: str) -> float | None:
    """The seconds ``TYPICAL_SECONDS`` lists for ``probe_id``'s longest prefix."""
    prefix = typical_prefix(table, probe_id)
    return None if prefix is None else table[prefix]


@functools.cache
def _family_metadata(specs: str) -> tuple[dict[str, Any], dict[str, float]]:
    """A family's ``FAMILY_DECLARATIONS`` fields and its ``TYPICAL_SECONDS`` (read once)."""
    module = importlib.import_module(specs.partition(":")[0])
    return family_declarations(specs), getattr(module, "TYPICAL_SECONDS", {})


def declared(probe: ProbeDef, specs: str) -> ProbeDef:
    """``probe`` with what its family (spec function ``specs``) declares for all its probes:
    ``FAMILY_DECLARATIONS``, and its ``typical_s`` from the family's ``TYPICAL_SECONDS``
    where the probe sets none."""
    fields, table = _family_metadata(specs)
    probe = dataclasses.replace(probe, **fields)
    if probe.typical_s is None:
        seconds = typical_seconds(table, probe.id)
        if seconds is not None:
            probe = dataclasses.replace(probe, typical_s=seconds)
    return probe


def all_probes() -> dict[str, ProbeDef]:
    """Every probe this worker knows, by id, in catalog order (built once)."""
    global _CATALOG
    if _CATALOG is None:
        catalog: dict[str, ProbeDef] = {}
        for specs in FAMILY_SPECS:
            for probe in _function(specs)():
                probe = declared(probe, specs)
                if probe.id in catalog:
                    raise ValueError(f"duplicate probe id {probe.id!r}")
                if probe.tier not in TIERS:
                    raise ValueError(f"probe {probe.id!r} has unknown tier {probe.tier!r}")
                catalog[probe.id] = probe
        _CATALOG = catalog
    return _CATALOG


def lookup(probe_id: str) -> ProbeDef | None:
    """The probe with this id: from the static catalog, or a well-formed id of a family
    whose probes depend on the installed framework (the sweep's expanded operators)."""
    found = all_probes().get(probe_id)
    if found is not None:
        return found
    from gpuprobe.worker.probes.sweep import specs as sweep_specs

    return sweep_specs.resolve(probe_id)


_SWEEP_SPECS = "gpuprobe.worker.probes.sweep.specs:specs"


def expanded(families: list[str], torch: Any) -> tuple[list[ProbeDef], list[str]]:
    """The framework-dependent probes of ``families`` (mode ``catalog`` with ``expand``),
    and a note per family that could not be expanded (never raises)."""
    out: list[ProbeDef] = []
    notes: list[str] = []
    for family in families:
        if family != "sweep":
            notes.append(f"no framework-dependent probes in family {family!r}")
            continue
        try:
            from gpuprobe.worker.probes.sweep import specs as sweep_specs

            out.extend(declared(probe, _SWEEP_SPECS) for probe in sweep_specs.expanded_specs(torch))
        except Exception as exc:  # noqa: BLE001 - sweep.opdb reports the reason when it runs
            notes.append(f"the sweep's operators could not be listed: {type(exc).__name__}: {exc}")
    return out, notes


def framework_devices(torch: Any) -> list[dict[str, Any]] | None:
    """The GPUs ``torch`` sees, as a hello lists them (``TorchDevice``: index, name, total
    memory, arch), for a listing that imported the framework anyway (``expanded``): the
    supervisor then plans every GPU before any worker runs and spreads the stack's probes
    over identical ones. ``[]`` without a usable GPU; ``None`` when torch cannot say (the
    supervisor then plans as without a list). Never raises."""
    from gpuprobe.worker import envinfo

    try:
        return envinfo.gpu_devices(torch) if torch.cuda.is_available() else []
    except Exception:  # noqa: BLE001 - a broken runtime is the workers' to report
        return None


def probes_in_tier(tier: str) -> list[ProbeDef]:
    """The probes a run at ``tier`` includes (each tier includes the ones below it)."""
    if tier == "soak":
        wanted = {"quick", "standard", "soak"}
    else:
        wanted = set(TIERS[: TIERS.index(tier) + 1])
    return [p for p in all_probes().values() if p.tier in wanted]
