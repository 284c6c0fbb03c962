"""graph family catalog: CUDA graphs (capture, replay, shared memory pools) and
``torch.compile(mode="reduce-overhead")`` (Inductor's CUDA graph trees), judged against
eager and float64.

Id grammar (``graph_run`` holds the workloads and the judging protocol):

- ``graph.capture.<dtype>``: every kernel workload (pointwise chain, reductions, linear,
  conv2d, layer_norm + softmax, index_add / scatter_add / gather / index_select, scans,
  embedding) captured alone in a CUDA graph after a warm-up on a side stream, then replayed
  with its static inputs updated in place; ``fp32`` (standard tier), ``bf16``, ``fp16``;
- ``graph.training.<dtype>``: a small MLP's forward and backward graphed by
  ``torch.cuda.make_graphed_callables``, once with one micro-batch per step and once
  accumulating two micro-batches' gradients into ``.grad`` (no ``zero_grad`` between
  them), an ``Adam(capturable=True)`` step and a fused ``AdamW`` step captured whole;
  ``fp32``, ``bf16``;
- ``graph.pool.<dtype>``: two graphs sharing one memory pool (``pool=g1.pool()``, the
  second reading the first's outputs), replayed in order under allocator pressure, with
  tensors allocated between capture and replay that must keep their contents; ``fp32``,
  ``bf16``;
- ``graph.reduce_overhead.<dtype>``: the kernel workloads in two compiled functions under
  ``torch.compile(mode="reduce-overhead")``: warm-up, recording and replays, then another
  input shape (re-recording) and back; and the MLP's training step compiled the same way,
  accumulating two micro-batches' gradients; ``fp32``, ``bf16``.

Every probe reports the sweep's observation (rule ``sweep``): a case is one replay compared
with one reference (eager on the same device in the same dtype, or float64 on the CPU).
On a CPU device under test the capture, training and pool probes run the same protocol
with an eager stand-in for the graph (a self-test of the protocol and its judge, said in
the notes); the reduce-overhead probes skip.
"""

from __future__ import annotations

from gpuprobe.worker.catalog import ProbeDef
from gpuprobe.worker.probes.sweep.specs import SWEEP_RULE

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
    # CUDA-graph capture and replay (H200): the standard probe 0.3 s warm; a
    # reduce-overhead probe about 0.5 s on a filled Inductor cache.
    "graph": 0.581,
    "graph.capture.fp32": 0.823,
    "graph.reduce_overhead": 8.000,
}

_RUN = "gpuprobe.worker.probes.graph.run"
#: The side lane of the full tier's graph probes: their time goes to float64 references on
#: the host and, for reduce-overhead, to Inductor's compilation on the host's cores.
LANE = "graph"

#: Kernel workloads (``graph_run.KERNELS``), in the order they run.
KERNEL_WORKLOADS = (
    "pointwise_chain",
    "reduction",
    "linear",
    "conv2d",
    "layer_norm_softmax",
    "index_scatter_gather",
    "scan",
    "embedding",
)
#: Training-step workloads (``graph_run.run_training``); the ``mlp_*`` ones are
#: ``graph_run.MLP_WORKLOADS``.
TRAINING_WORKLOADS = ("mlp_graphed_callables", "mlp_graphed_accumulate", "adam_capturable", "adamw_fused")
#: The training step of the reduce-overhead probes: the MLP compiled whole, forward and
#: backward, with gradient accumulation.
COMPILED_TRAINING = ("mlp_compiled_accumulate",)
#: Workloads of the shared-pool probe: one of each memory behaviour (elementwise temporaries,
#: a GEMM with a workspace, a convolution, a normalization, index kernels).
POOL_WORKLOADS = ("pointwise_chain", "linear", "conv2d", "layer_norm_softmax", "index_scatter_gather")
#: The kernel workloads in the compiled functions of the reduce-overhead probes: each group is
#: one ``torch.compile`` (compilation costs seconds per function, not per kernel).
COMPILE_GROUPS: dict[str, tuple[str, ...]] = {
    "dense": ("pointwise_chain", "reduction", "linear", "conv2d", "layer_norm_softmax"),
    "index": ("index_scatter_gather", "scan", "embedding"),
}

_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _probe(
    probe_id: str,
    tier: str,
    description: str,
    impl: str,
    params: dict,
    timeout_s: float,
) -> ProbeDef:
    full = tier == "full"
    return ProbeDef(
        probe_id,
        tier,
        SWEEP_RULE,
        description,
        f"{_RUN}:{impl}",
        params=params,
        timeout_s=timeout_s,
        # A fault of a captured graph can poison the device context: every full-tier probe
        # gets a worker of its own. The standard probe is cheap and stays in the main lane.
        isolated=full,
        placement="side" if full else "shared",
        lane=LANE if full else None,
    )


def specs() -> list[ProbeDef]:
    out: list[ProbeDef] = []
    for short, tier in (("fp32", "standard"), ("bf16", "full"), ("fp16", "full")):
        out.append(
            _probe(
                f"graph.capture.{short}",
                tier,
                f"CUDA graphs in {_DTYPE_NAMES[short]}: each kernel workload ({', '.join(KERNEL_WORKLOADS)}) "
                "captured after a side-stream warm-up, replayed 5 times with its static inputs updated in place; "
                "each replay against eager on the device, the first updated one against float64 on the CPU; "
                "stale replays told apart",
                "run_capture",
                {"dtype": short, "workloads": list(KERNEL_WORKLOADS)},
                120.0,
            )
        )
    for short in ("fp32", "bf16"):
        out.append(
            _probe(
                f"graph.training.{short}",
                "full",
                f"CUDA graphs of training steps in {_DTYPE_NAMES[short]}: an MLP's forward and backward through "
                "make_graphed_callables (one micro-batch a step, and two accumulated into .grad without zero_grad), "
                "an Adam(capturable=True) step and a fused AdamW step captured whole, "
                "replayed with new inputs and gradients against eager twins and float64",
                "run_training",
                {"dtype": short, "workloads": list(TRAINING_WORKLOADS)},
                120.0,
            )
        )
    for short in ("fp32", "bf16"):
        out.append(
            _probe(
                f"graph.pool.{short}",
                "full",
                f"Two CUDA graphs sharing one memory pool in {_DTYPE_NAMES[short]} (the second reads the first's "
                "outputs), replayed in order under allocator pressure (NaN-filled freed blocks, many sizes); "
                "tensors allocated between capture and replay must keep their contents",
                "run_pool",
                {"dtype": short, "workloads": list(POOL_WORKLOADS)},
                120.0,
            )
        )
    for short in ("fp32", "bf16"):
        out.append(
            _probe(
                f"graph.reduce_overhead.{short}",
                "full",
                f"torch.compile(mode='reduce-overhead') (Inductor with CUDA graph trees) in {_DTYPE_NAMES[short]}: "
                "the kernel workloads in two compiled functions, called 5 times with new inputs (warm-up, "
                "recording, replays), then with another input shape and back, each result cloned and compared "
                "with eager; an MLP's compiled training step, 5 steps of two micro-batches accumulated into .grad",
                "run_reduce_overhead",
                {
                    "dtype": short,
                    "groups": {k: list(v) for k, v in COMPILE_GROUPS.items()},
                    "training": list(COMPILED_TRAINING),
                },
                420.0,
            )
        )
    return out
