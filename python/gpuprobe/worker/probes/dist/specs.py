"""Dist family catalog: several GPUs of one host working together.

Id grammar:

- ``dist.p2p.pairs[.large]``: from the device under test to every other GPU (every lane does
  its own outgoing pairs, so a run covers every ordered pair), by ``.to(j)``, non_blocking
  ``.to(j)`` and ``copy_`` into a canary-filled buffer on j, each compared with ``x.cpu()``
  (RKB-027: peer copies that arrive as zeros behind an IOMMU);
- ``dist.<collective>.rank_tagged``: ``all_reduce`` (sum and max), ``all_gather`` (list and
  into one tensor), ``reduce_scatter`` and ``broadcast`` through ``torch.distributed``, one
  process per GPU, every rank's data tagged by its rank so a rank that receives another rank's
  data, stale data or zeros is caught (RKB-026). NCCL (RCCL on ROCm) on GPUs, with
  ``NCCL_NVLS_ENABLE=0``; on a CPU device under test a two-process gloo run checks the
  probe itself.

The collectives run once per host, from the lane of ``cuda:0``, over every GPU torch sees:
one process group serves all four probes.
"""

from __future__ import annotations

from gpuprobe.worker.catalog import BIT_EXACT, ProbeDef

_RUN = "gpuprobe.worker.probes.dist.run"

_TEXT = {
    "all_reduce": "all_reduce (sum of int64, fp32 and bf16 small integers; max of int64)",
    "all_gather": "all_gather (into a list and into one tensor) of fp32/bf16 bit patterns",
    "reduce_scatter": "reduce_scatter_tensor (sum of int64 and fp32 small integers)",
    "broadcast": "broadcast from the last rank of fp32/bf16 bit patterns",
}


def specs() -> list[ProbeDef]:
    """The dist probes."""
    probes = [
        ProbeDef(
            id="dist.p2p.pairs",
            tier="standard",
            rule=BIT_EXACT,
            description=(
                "peer copies from the device under test to every other GPU (4 KiB + 4 B, 4 MiB + 4 B, 64 MiB) "
                "by .to(j), non_blocking .to(j) and copy_ into a canary-filled buffer, compared with x.cpu()"
            ),
            impl=f"{_RUN}:run_p2p",
            params={"sizes": [1025, (1 << 20) + 1, 1 << 24]},
            timeout_s=120.0,
            needs=("multi_gpu",),
        )
    ]
    for collective, text in _TEXT.items():
        probes.append(
            ProbeDef(
                id=f"dist.{collective}.rank_tagged",
                tier="standard",
                rule=BIT_EXACT,
                description=(
                    f"{text} with rank-tagged data, one process per GPU (NCCL/RCCL; gloo with 2 processes on "
                    "the CPU), sizes 7, 2^16 + 1 and 2^20 elements, every rank's result compared bit for bit"
                ),
                impl=f"{_RUN}:run_collective",
                params={"collective": collective},
                timeout_s=180.0,
                # One process per rank: the time goes to starting them and the rendezvous.
                placement="side",
            )
        )
    probes.append(
        ProbeDef(
            id="dist.p2p.pairs.large",
            tier="full",
            rule=BIT_EXACT,
            description="peer copies of 1 GiB + 4 B from the device under test to every other GPU, with bandwidth",
            impl=f"{_RUN}:run_p2p",
            params={"sizes": [(1 << 28) + 1]},
            timeout_s=300.0,
            needs=("multi_gpu",),
            isolated=True,
        )
    )
    return probes
