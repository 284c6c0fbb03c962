"""width family catalog: operations past the index-width boundaries.

Id grammar: ``width.<group>.<boundary>``

- group (``scope.GROUPS``): ``create``, ``elementwise`` (and type conversion),
  ``reduce``, ``scan``, ``norm``, ``softmax``, ``pool`` (and upsampling), ``index``
  (gather/scatter/embedding/losses/histograms), ``sort`` (and top-k), ``attention``,
  ``copy``;
- boundary (``scope.BOUNDARIES``): ``n31`` and ``n32`` (more than 2^31 and 2^32
  elements in total, every dimension small), ``d31`` (one dimension past 2^31; not for
  attention, whose dimensions cannot be that long), ``d32`` (one dimension past 2^32: the
  groups that treat one dimension apart: reduce, scan, index),
  ``g16`` (one dimension past 2^16 in small tensors: the launch grid's second and third
  axes, products of two sizes).

Every probe is in the ``full`` tier and in a worker of its own (``isolated``: a fault past
the boundary loses the device context; the probe runs its remaining cases in fresh child
processes, ``width_run.run_width``). The large boundaries run alone on the device
(``exclusive``: they plan their memory from what is free); ``g16`` needs about a gigabyte
and runs in a side lane of its own (``width-grid``) beside the others. The cases each probe runs and the memory each needs are
in ``run`` / ``cases``; ``docs/probes.md`` tabulates them.
"""

from __future__ import annotations

from gpuprobe.worker.catalog import INVARIANT, ProbeDef

_RUN = "gpuprobe.worker.probes.width.run"

_WHAT = {
    "n31": "more than 2^31 elements in total",
    "n32": "more than 2^32 elements in total",
    "d31": "one dimension of more than 2^31 elements",
    "d32": "one dimension of more than 2^32 elements",
    "g16": "one dimension of more than 2^16 (batch, planes, heads or a spatial size) and few elements",
}


def specs() -> list[ProbeDef]:
    """One probe per group and boundary that has cases."""
    # The registry is pure Python (torch is imported by the cases only when they run).
    from gpuprobe.worker.probes.width import run as width_run
    from gpuprobe.worker.probes.width import scope as width_scope

    probes = []
    for group in width_scope.GROUPS:
        for kind in width_scope.BOUNDARIES:
            cases = width_run.cases_for(group, kind)
            if not cases:
                continue
            low, high = width_run.probe_need_bytes(group, kind)
            small = kind in width_scope.SMALL_KINDS
            probes.append(
                ProbeDef(
                    id=f"width.{group}.{kind}",
                    tier="full",
                    rule=INVARIANT,
                    description=(
                        f"{len(cases)} {group} operations on tensors with {_WHAT[kind]} (forward and backward where "
                        "differentiable) equal the same operations on slices across and past the boundary, and "
                        f"closed forms at sentinel indices; needs {low / 2**30:.0f}-{high / 2**30:.0f} GiB of free "
                        "device memory (cases that do not fit are listed as not run)"
                    ),
                    impl=f"{_RUN}:run_width",
                    params={"group": group, "kind": kind},
                    timeout_s=120.0 if small else 300.0,
                    placement="side" if small else "exclusive",
                    lane="width-grid" if small else None,
                    isolated=True,
                )
            )
    return probes
