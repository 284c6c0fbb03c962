"""Alloc family catalog: device memory as the framework's caching allocator hands it out.

Id grammar: ``alloc.<case>[.<variant>]``

- ``oom.recovery``: an out-of-memory error, caught, then a bit-exact copy (``.filled``: after
  filling the device first);
- ``usable.chunks``: the reported free memory allocated in chunks, each keeping its own data;
- ``largest.single``: the largest single allocation (time-bounded search), written and read
  back at byte offsets past 2^31 and 2^32;
- ``fragmentation.cycles``: allocation/free cycles of varied sizes, then a large allocation
  (``.large``: more and larger blocks);
- ``stream.free_reuse``: memory freed while a side stream still writes it must not be handed
  out again before that write ends (``record_stream``);
- ``config.effective``: which allocator-config variable this torch reads, what it parsed, and
  the warnings it prints (a fresh child process);
- ``caching.disabled``: a bit-exact workload with ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` /
  ``PYTORCH_NO_HIP_MEMORY_CACHING=1`` (a child process: the setting is read at start-up);
- ``expandable.h2d``: a host-to-device copy with ``expandable_segments:True`` (RKB-020; a child
  process; ``.2gib`` is the 2 GiB fp16 case of the issue);
- ``stress.<case>``: the allocator under several streams and threads (``alloc_stress``):
  ``cross_stream_free`` (frees recorded on a busy side stream, device ~90% full),
  ``oom_retry`` (an allocation that fits in memory freed by completed side-stream work must
  not raise out-of-memory), ``handoff`` (data handed between streams after an event or
  ``wait_stream``; ``.large`` adds 256 MiB + 4 B), ``threads`` (threads with a stream each
  allocating and copying at once).

Correctness is judged (``invariant``, ``bit_exact``); sizes and settings are measured
(``measure``) and reported in the observation's metrics.
"""

from __future__ import annotations

from gpuprobe.worker.catalog import BIT_EXACT, INVARIANT, MEASURE, ProbeDef

#: The native probes that test the same device memory one layer down: when this family's
#: probes fail, those passing place the failure above the runtime (``ProbeSpec.native_counterpart``).
NATIVE_COUNTERPART = "native.memtest"

#: Seconds one run of a probe typically takes on a warm machine, by the longest prefix of its
#: id listed (whole parts): the ``typical_s`` the catalog publishes for each of the
#: family's probes that sets none (lanes are sized by it; a probe no prefix matches counts
#: the engine's default, 0.1 s). Measured on the H200 host (torch 2.11: warm standard tier,
#: mean per probe of 18 runs with the other lanes beside it, leaving out a worker's first
#: probe, which also pays the device context; ``bench/typical-seconds.py`` and
#: bench/RESULTS.md "Lanes balanced by refreshed estimates"; the full tier's families from
#: its runs there); a whole id is listed where one probe takes several times its
#: sub-family's mean.
TYPICAL_SECONDS = {
    "alloc.caching": 0.029,
    "alloc.config": 3.791,
    "alloc.expandable": 0.086,
    "alloc.fragmentation": 0.361,
    "alloc.largest": 0.505,
    "alloc.oom": 0.202,
    "alloc.stream": 0.352,
    "alloc.stress": 0.709,
    "alloc.usable": 0.479,
}

_RUN = "gpuprobe.worker.probes.alloc.run"
_STRESS = "gpuprobe.worker.probes.alloc.stress"
#: Element counts of the handoff case: tiny, odd and ≡ 1 mod 32 (a partial last warp or vector).
_HANDOFF_SIZES = (1, 3, 33, 1000, 1025, (1 << 16) + 1, (1 << 20) + 1)
#: 256 MiB + 4 B of float32.
_HANDOFF_LARGE = (1 << 26) + 1


def specs() -> list[ProbeDef]:
    """The alloc probes, quick tier first."""
    probes = [
        ProbeDef(
            id="alloc.oom.recovery",
            tier="quick",
            rule=BIT_EXACT,
            description=(
                "an allocation far past device memory must raise out-of-memory; after freeing, a 1 MiB "
                "host-device-host copy must still be bit-exact"
            ),
            impl=f"{_RUN}:run_oom_recovery",
            params={"fill": False},
            timeout_s=60.0,
        ),
        ProbeDef(
            id="alloc.config.effective",
            tier="standard",
            placement="side",
            rule=MEASURE,
            description=(
                "which of PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF / PYTORCH_HIP_ALLOC_CONF this torch "
                "reads (measured in a child with all three set), the parsed keys, the settings in effect "
                "(expandable segments, backend, max_split_size) and the warnings they print"
            ),
            impl=f"{_RUN}:run_config",
            timeout_s=120.0,
        ),
        ProbeDef(
            id="alloc.caching.disabled",
            tier="standard",
            placement="side",
            rule=BIT_EXACT,
            description=(
                "a bit-exact copy workload with allocation churn in a child process started with "
                "PYTORCH_NO_CUDA_MEMORY_CACHING=1 and PYTORCH_NO_HIP_MEMORY_CACHING=1"
            ),
            impl=f"{_RUN}:run_caching_disabled",
            params={"numel": (1 << 20) + 33, "churn": 64},
            timeout_s=120.0,
        ),
        ProbeDef(
            id="alloc.expandable.h2d",
            tier="standard",
            placement="side",
            rule=BIT_EXACT,
            description=(
                "a 64 MiB + 2 B fp16 host-to-device copy and allocation churn in a child process with "
                "expandable_segments:True (RKB-020: hangs or wrong data on some ROCm builds)"
            ),
            impl=f"{_RUN}:run_expandable",
            params={"numel": (1 << 25) + 1, "churn": 64},
            timeout_s=120.0,
        ),
        ProbeDef(
            id="alloc.usable.chunks",
            tier="full",
            isolated=True,
            placement="exclusive",
            rule=INVARIANT,
            description=(
                "the reported free memory (less a margin) allocated in chunks, each filled with its own tag "
                "and sampled back; facts: reported total/free, allocated bytes, APU GTT/VRAM from sysfs"
            ),
            impl=f"{_RUN}:run_usable",
            timeout_s=120.0,
        ),
        ProbeDef(
            id="alloc.largest.single",
            tier="full",
            isolated=True,
            placement="exclusive",
            rule=INVARIANT,
            description=(
                "the largest single allocation (time-bounded binary search), written and read back at byte "
                "offsets 0, 2^31-1, 2^31, 2^32-1, 2^32 and the end"
            ),
            impl=f"{_RUN}:run_largest",
            params={"time_bound_s": 8.0},
            timeout_s=120.0,
        ),
        ProbeDef(
            id="alloc.fragmentation.cycles",
            tier="full",
            isolated=True,
            placement="exclusive",
            rule=INVARIANT,
            description=(
                "8 rounds of 160 allocations of 512 B-32 MiB with random frees; every live block keeps its "
                "tag, then an allocation of half the free memory succeeds and holds its data"
            ),
            impl=f"{_RUN}:run_fragmentation",
            params={"rounds": 8, "per_round": 160, "max_block": 32 << 20},
            timeout_s=120.0,
        ),
        ProbeDef(
            id="alloc.stream.free_reuse",
            tier="standard",
            rule=INVARIANT,
            description=(
                "a buffer still written by a delayed kernel on a side stream is freed (record_stream) and "
                "memory is allocated and filled at once on the default stream: the new buffer must keep "
                "its own data"
            ),
            impl=f"{_RUN}:run_stream_reuse",
            params={"rounds": 8},
            timeout_s=60.0,
        ),
        ProbeDef(
            id="alloc.oom.recovery.filled",
            tier="full",
            isolated=True,
            placement="exclusive",
            rule=BIT_EXACT,
            description=(
                "the device filled to its reported free memory, then an allocation past what is left must "
                "raise out-of-memory; after freeing everything, a bit-exact copy must still work"
            ),
            impl=f"{_RUN}:run_oom_recovery",
            params={"fill": True},
            timeout_s=120.0,
        ),
        ProbeDef(
            id="alloc.expandable.h2d.2gib",
            tier="full",
            placement="exclusive",
            rule=BIT_EXACT,
            description=(
                "the RKB-020 recipe: a 2 GiB fp16 host-to-device copy in a child process with "
                "expandable_segments:True, bit-exact"
            ),
            impl=f"{_RUN}:run_expandable",
            params={"numel": (1 << 30) + 1, "churn": 16},
            timeout_s=300.0,
            isolated=True,
        ),
        ProbeDef(
            id="alloc.fragmentation.cycles.large",
            tier="full",
            placement="exclusive",
            rule=INVARIANT,
            description=(
                "32 rounds of 256 allocations of 512 B-512 MiB with random frees, then an allocation of half "
                "the free memory"
            ),
            impl=f"{_RUN}:run_fragmentation",
            params={"rounds": 32, "per_round": 256, "max_block": 512 << 20},
            timeout_s=300.0,
            isolated=True,
        ),
    ]
    probes += _stress_specs()
    return probes


def _stress_specs() -> list[ProbeDef]:
    """The allocator stress probes: exclusive (they fill the device or budget from its free
    memory), the full tier but for one case that costs well under a second."""
    return [
        ProbeDef(
            id="alloc.stress.handoff",
            tier="standard",
            # A few MiB: it runs beside the other lanes (their kernels only lengthen the
            # producer's delay; a consumer that reads early still finds the canary).
            placement="side",
            rule=BIT_EXACT,
            description=(
                "float32 data written by a delayed producer stream and read on another stream after an event "
                "or wait_stream, both directions, 1 to 2^20 + 1 elements (odd and ≡ 1 mod 32), plus a "
                "non_blocking pinned H2D on a side stream read on the default stream; every byte compared"
            ),
            impl=f"{_STRESS}:run_handoff",
            params={"sizes": _HANDOFF_SIZES, "pinned_sizes": (33, (1 << 16) + 1, (1 << 20) + 1), "delay_ms": 2.0},
            timeout_s=120.0,
        ),
        ProbeDef(
            id="alloc.stress.cross_stream_free",
            tier="full",
            placement="exclusive",
            rule=INVARIANT,
            description=(
                "the device filled to 90% of its free memory; 8 rounds: a block written late by a busy side "
                "stream and copied to a result there is freed with record_stream, and a new block is allocated "
                "and written at once on the default stream; results and new blocks must keep their own data"
            ),
            impl=f"{_STRESS}:run_cross_stream_free",
            params={"rounds": 8, "fill_fraction": 0.9, "delay_ms": 10.0},
            timeout_s=240.0,
            isolated=True,
        ),
        ProbeDef(
            id="alloc.stress.oom_retry",
            tier="full",
            placement="exclusive",
            rule=INVARIANT,
            description=(
                "the device filled until less than a 1 GiB request is free; a 1 GiB block freed with "
                "record_stream by side-stream work that has completed must be reusable at the first attempt "
                "(out-of-memory is a violation); the same while the side stream still runs is measured"
            ),
            impl=f"{_STRESS}:run_oom_retry",
            params={"delay_ms": 20.0, "pending_delay_ms": 200.0},
            timeout_s=240.0,
            isolated=True,
        ),
        ProbeDef(
            id="alloc.stress.handoff.large",
            tier="full",
            placement="exclusive",
            rule=BIT_EXACT,
            description=(
                "the stream handoff of alloc.stress.handoff up to 256 MiB + 4 B (2^26 + 1 float32), the pinned "
                "non_blocking H2D included; every byte compared"
            ),
            impl=f"{_STRESS}:run_handoff",
            params={
                "sizes": _HANDOFF_SIZES + (_HANDOFF_LARGE,),
                "pinned_sizes": ((1 << 20) + 1, _HANDOFF_LARGE),
                "delay_ms": 5.0,
            },
            timeout_s=300.0,
            isolated=True,
        ),
        ProbeDef(
            id="alloc.stress.threads",
            tier="full",
            placement="exclusive",
            rule=INVARIANT,
            description=(
                "6 threads, each on its own stream, for 1.5 s: allocate 256 B-16 MiB, write a pattern of their "
                "own, copy device to device and device to host, keep 3 blocks alive, free; every read-back "
                "bit-exact and no exception but a genuine out-of-memory"
            ),
            impl=f"{_STRESS}:run_threads",
            params={"threads": 6, "duration_s": 1.5, "max_block": 16 << 20, "ring": 3},
            timeout_s=240.0,
            isolated=True,
        ),
    ]
