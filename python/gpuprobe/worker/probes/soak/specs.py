"""Soak family catalog: sentinel probes run cold, then after sustained load.

``soak.sustained.mixed`` runs a set of sentinel probes of other families (their own
implementations, with the same seeds), then keeps the device busy for ``soak_seconds``
(plan option; default 60) with checked fp32 matmuls and device copies, then runs the
sentinels again. A sentinel that fails only after the load points to the machine's state
(heat, power, a degrading link) rather than to a code path; one that fails cold as well is a
code or configuration problem. The observation says which phase failed.

Tier ``soak`` and ``needs = ["explicit"]``: like the other long or deliberate probes, it runs
only when named (``gpuprobe check --only soak``), never as part of a tier.
"""

from __future__ import annotations

from gpuprobe.worker.catalog import INVARIANT, ProbeDef

_RUN = "gpuprobe.worker.probes.soak.run"

#: Sentinels: cheap probes with exact rules (bit_exact or invariant) that cover the copy
#: engine in both directions, pinned memory, on-device copies, a conversion, a generator and
#: the allocator.
SENTINELS = (
    "copy.h2d.pageable.tiny.nonblocking",
    "copy.h2d.pinned.medium.nonblocking",
    "copy.d2h.pageable.medium.blocking",
    "copy.d2d.medium.clone",
    "copy.roundtrip.pinned.large.nonblocking",
    "dtype.bf16.fp32.to.device",
    "rng.repeat.randn",
    "alloc.fragmentation.cycles",
)

#: Longest load phase a plan may ask for (the probe's timeout leaves room for the sentinels).
MAX_SOAK_SECONDS = 720.0


def specs() -> list[ProbeDef]:
    """The soak probes."""
    return [
        ProbeDef(
            id="soak.sustained.mixed",
            tier="soak",
            rule=INVARIANT,
            description=(
                "sentinel probes (copies, a conversion, a generator, the allocator) run cold, then after "
                "soak_seconds (default 60) of checked fp32 matmuls and device copies, then again; every run of "
                "every sentinel must pass, and the load's own results must stay exact"
            ),
            impl=f"{_RUN}:run_soak",
            params={"sentinels": list(SENTINELS), "default_seconds": 60.0},
            timeout_s=MAX_SOAK_SECONDS + 180.0,
            # Sustained load: other probes beside it would measure the load, not the GPU.
            placement="exclusive",
        )
    ]
