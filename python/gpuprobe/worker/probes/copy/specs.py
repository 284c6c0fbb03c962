"""Copy family catalog: bit-exact data movement between host and device.

Id grammar: ``copy.<direction>.<memory>.<size>.<sync>[.<method>][.<dtype>]``

- direction: ``h2d`` (host to device under test), ``d2h``, ``d2d`` (no memory/sync part),
  ``roundtrip`` (H2D then D2H), ``p2p`` (between GPUs), ``batch`` (a dict of tensors);
- memory: ``pageable`` or ``pinned`` host memory;
- size: ``tiny`` (≤ 64 B, many copies from several threads), ``medium`` (1 MiB), ``odd``
  (sizes ≡ 1 mod 32 and ≡ 64 mod 128 just past powers of two), shapes (``4x4``,
  ``16x1x64x64``), ``reuse`` (successive copies into one buffer), ``large`` (64 MiB),
  ``1gib``, ``huge`` (more than 2^31 elements), ``huge4g`` (more than 2^32 elements);
- sync: ``blocking`` or ``nonblocking`` (``non_blocking=True``);
- method, when not the default: ``cuda`` (``.cuda()``), ``copy_`` (``dst.copy_(src)`` into a
  canary-filled buffer), ``numpy`` (``torch.from_numpy(a).to(dev)`` / ``t.cpu().numpy()``),
  ``to`` for D2H (``.to('cpu')``); the default is ``.to(dev)`` for H2D, ``.cpu()`` for D2H and
  ``.clone()`` for D2D;
- dtype, when not float32: ``fp16`` or ``bf16``.
"""

from __future__ import annotations

from gpuprobe.worker.catalog import BIT_EXACT, ProbeDef

#: The native probes that move the same data one layer down: when this family's probes
#: fail, those passing place the failure above the runtime (``ProbeSpec.native_counterpart``).
NATIVE_COUNTERPART = "native.copy"

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
    "copy.batch": 0.006,
    "copy.d2d": 0.062,
    "copy.d2h": 0.044,
    "copy.h2d": 0.048,
    # 20,000 tiny pageable copies from four threads, nonblocking: the host's page-locking
    # of each source, not the copy, is the cost.
    "copy.h2d.pageable.tiny.nonblocking": 1.397,
    "copy.h2d.pinned.tiny.nonblocking": 0.504,
    "copy.roundtrip": 0.433,
    "copy.roundtrip.pageable.1gib.blocking": 1.714,
    "copy.roundtrip.pageable.large": 0.129,
    "copy.roundtrip.pageable.medium": 0.004,
    "copy.roundtrip.pinned.large": 0.179,
    "copy.roundtrip.pinned.medium": 0.003,
}

_RUN = "gpuprobe.worker.probes.copy.run"

MIB = 1 << 20
#: Float32 elements in 1 MiB, 64 MiB and 1 GiB.
MEDIUM = MIB // 4
LARGE = 64 * MIB // 4
GIB_ELEMS = (1 << 30) // 4
#: Float16 element counts past the 2^31 and 2^32 index boundaries (odd remainders).
HUGE = (1 << 31) + (1 << 20) + 1
HUGE4G = (1 << 32) + 33

_DTYPE_SUFFIX = {"float32": "", "float16": ".fp16", "bfloat16": ".bf16"}


def _odd_sizes(max_power: int) -> list[int]:
    """Sizes ≡ 1 mod 32 (2^k + 1) and ≡ 64 mod 128 (2^k + 64), just past powers of two."""
    sizes = [(1 << k) + 1 for k in range(5, max_power + 1)]
    sizes += [(1 << k) + 64 for k in range(8, max_power + 1)]
    return sizes


def _tiny(direction: str, memory: str, sync: str, tier: str, threads: int, iterations: int) -> ProbeDef:
    # Their own side lane: thousands of copies from several threads are the quick tier's
    # costliest probes (1.8 of its 4.1 probe-seconds on the H100), and in the shared lane
    # every other quick probe waited behind them.
    what = "host-to-device" if direction == "h2d" else "device-to-host"
    return ProbeDef(
        id=f"copy.{direction}.{memory}.tiny.{sync}",
        tier=tier,
        rule=BIT_EXACT,
        description=(
            f"{threads * iterations} tiny (4-60 B) {memory} {what} copies, {sync}, from {threads} "
            "threads (one stream each on a GPU), compared bit for bit"
        ),
        impl=f"{_RUN}:run_tiny",
        params={
            "direction": direction,
            "memory": memory,
            "non_blocking": sync == "nonblocking",
            "threads": threads,
            "iterations": iterations,
        },
        timeout_s=120.0,
        placement="side",
        lane="copy-threads",
    )


def _transfer(
    direction: str,
    memory: str,
    size: str,
    sync: str,
    tier: str,
    *,
    method: str = "",
    dtype: str = "float32",
    shape: tuple[int, ...] | None = None,
    sizes: list[int] | None = None,
) -> ProbeDef:
    default_method = "to" if direction == "h2d" else "cpu"
    used = method or default_method
    suffix = (f".{method}" if method else "") + _DTYPE_SUFFIX[dtype]
    if shape is not None:
        trial_shapes = [list(shape)]
    elif sizes is not None:
        trial_shapes = [[n] for n in sizes]
    else:
        trial_shapes = [[MEDIUM * 4 // _itemsize(dtype)]]
    what = "host-to-device" if direction == "h2d" else "device-to-host"
    shape_text = "x".join(str(d) for d in shape) if shape else size
    return ProbeDef(
        id=f"copy.{direction}.{memory}.{size}.{sync}{suffix}",
        tier=tier,
        rule=BIT_EXACT,
        description=(
            f"{what} copy of {shape_text} {dtype} via {_method_text(direction, used)} from/to "
            f"{memory} host memory, {sync}; bit-exact, destination canary-checked where preallocated"
        ),
        impl=f"{_RUN}:run_transfer",
        params={
            "direction": direction,
            "memory": memory,
            "method": used,
            "non_blocking": sync == "nonblocking",
            "dtype": dtype,
            "shapes": trial_shapes,
        },
        timeout_s=60.0,
    )


def _method_text(direction: str, method: str) -> str:
    if direction == "h2d":
        return {
            "to": "t.to(dev)",
            "cuda": "t.cuda()",
            "copy_": "dst.copy_(t)",
            "numpy": "torch.from_numpy(a).to(dev)",
        }[method]
    return {
        "cpu": "t.cpu()",
        "to": "t.to('cpu')",
        "copy_": "host.copy_(t)",
        "numpy": "t.cpu().numpy()",
    }[method]


def _itemsize(dtype: str) -> int:
    return 4 if dtype == "float32" else 2


def specs() -> list[ProbeDef]:
    """The copy probes, quick tier first."""
    probes: list[ProbeDef] = []
    add = probes.append

    # Tiny copies: the RKB-001 detection recipe and its pinned control.
    add(_tiny("h2d", "pageable", "nonblocking", "quick", threads=4, iterations=5000))
    add(_tiny("h2d", "pinned", "nonblocking", "quick", threads=4, iterations=2500))
    add(_tiny("h2d", "pageable", "blocking", "quick", threads=2, iterations=2000))
    add(_tiny("d2h", "pageable", "blocking", "quick", threads=2, iterations=2000))

    # Medium (1 MiB) copies by every movement method.
    for memory, sync in (
        ("pageable", "blocking"),
        ("pageable", "nonblocking"),
        ("pinned", "blocking"),
        ("pinned", "nonblocking"),
    ):
        add(_transfer("h2d", memory, "medium", sync, "quick"))
    add(_transfer("h2d", "pageable", "medium", "blocking", "quick", method="cuda"))
    add(_transfer("h2d", "pageable", "medium", "blocking", "quick", method="copy_"))
    add(_transfer("h2d", "pageable", "medium", "nonblocking", "quick", method="copy_"))
    add(_transfer("h2d", "pageable", "medium", "blocking", "quick", method="numpy"))
    add(_transfer("h2d", "pageable", "medium", "blocking", "quick", dtype="float16"))
    add(_transfer("h2d", "pageable", "medium", "blocking", "quick", dtype="bfloat16"))
    add(_transfer("d2h", "pageable", "medium", "blocking", "quick"))
    add(_transfer("d2h", "pageable", "medium", "blocking", "quick", method="to"))
    add(_transfer("d2h", "pageable", "medium", "blocking", "quick", method="copy_"))
    add(_transfer("d2h", "pageable", "medium", "blocking", "quick", method="numpy"))
    add(_transfer("d2h", "pinned", "medium", "nonblocking", "quick", method="copy_"))
    add(_transfer("d2h", "pageable", "medium", "blocking", "quick", dtype="bfloat16"))
    for method in ("clone", "copy_"):
        add(
            ProbeDef(
                id=f"copy.d2d.medium.{method}",
                tier="quick",
                rule=BIT_EXACT,
                description="device-to-device copy of 1 MiB float32 via "
                + ("t.clone()" if method == "clone" else "dst.copy_(t) into a canary-filled buffer"),
                impl=f"{_RUN}:run_d2d",
                params={"method": method, "shapes": [[MEDIUM]], "dtype": "float32"},
                timeout_s=60.0,
            )
        )
    for memory in ("pinned", "pageable"):
        add(
            ProbeDef(
                id=f"copy.roundtrip.{memory}.medium.nonblocking",
                tier="quick",
                rule=BIT_EXACT,
                description=(
                    f"{memory} 1 MiB H2D then immediate D2H into a canary-filled host buffer, both "
                    "non_blocking with no sync in between (the RKB-002 pattern)"
                ),
                impl=f"{_RUN}:run_roundtrip",
                params={"memory": memory, "numel": MEDIUM, "dtype": "float32", "non_blocking": True, "timed": False},
                timeout_s=60.0,
            )
        )
    for memory in ("pageable", "pinned"):
        add(
            ProbeDef(
                id=f"copy.h2d.{memory}.reuse.nonblocking",
                tier="quick",
                rule=BIT_EXACT,
                description=(
                    f"16 successive {memory} non_blocking copy_ of new data into one device buffer; "
                    "each must replace the previous contents (the RKB-030 pattern)"
                ),
                impl=f"{_RUN}:run_reuse",
                params={"memory": memory, "non_blocking": True, "trials": 16, "numel": MEDIUM // 4},
                timeout_s=60.0,
            )
        )

    # Odd sizes and the field-note shapes.
    add(_transfer("h2d", "pageable", "odd", "blocking", "quick", sizes=_odd_sizes(16)))
    for method in ("", "copy_", "numpy"):
        add(_transfer("h2d", "pageable", "4x4", "blocking", "quick", method=method, shape=(4, 4)))
    for method in ("", "copy_", "numpy"):
        add(_transfer("h2d", "pageable", "16x1x64x64", "blocking", "quick", method=method, shape=(16, 1, 64, 64)))
    add(_transfer("h2d", "pageable", "16x1x64x64", "blocking", "quick", dtype="bfloat16", shape=(16, 1, 64, 64)))

    # Dict batches moved like Accelerate's send_to_device.
    for memory, sync, tier in (
        ("pageable", "blocking", "quick"),
        ("pageable", "nonblocking", "quick"),
        ("pinned", "nonblocking", "standard"),
    ):
        add(
            ProbeDef(
                id=f"copy.batch.dict.{memory}.{sync}",
                tier=tier,
                rule=BIT_EXACT,
                description=(
                    f"a training-style dict batch (bf16 latents 16x1x64x64, fp16 embeddings, int64 "
                    f"timesteps, bool mask, 0-dim scale, nested list) moved recursively with "
                    f".to(dev, non_blocking={sync == 'nonblocking'}) from {memory} memory"
                ),
                impl=f"{_RUN}:run_batch",
                params={"memory": memory, "non_blocking": sync == "nonblocking"},
                timeout_s=60.0,
            )
        )

    # Large buffers with bandwidth.
    add(_roundtrip_large("pageable", "large", "blocking", "quick", LARGE, "float32"))
    add(_roundtrip_large("pinned", "large", "nonblocking", "quick", LARGE, "float32"))

    # Standard tier.
    add(_tiny("h2d", "pinned", "blocking", "standard", threads=2, iterations=2000))
    add(_tiny("d2h", "pageable", "nonblocking", "standard", threads=2, iterations=2000))
    add(_tiny("d2h", "pinned", "nonblocking", "standard", threads=2, iterations=2000))
    # Odd sizes test remainders, not magnitude: up to 2^20 elements (the large cases cover size).
    add(_transfer("h2d", "pageable", "odd", "nonblocking", "standard", sizes=_odd_sizes(20)))
    add(_transfer("h2d", "pinned", "odd", "nonblocking", "standard", sizes=_odd_sizes(20)))
    add(_transfer("d2h", "pageable", "odd", "blocking", "standard", sizes=_odd_sizes(20)))
    add(_transfer("h2d", "pageable", "medium", "nonblocking", "standard", dtype="float16"))
    add(_transfer("h2d", "pageable", "medium", "nonblocking", "standard", dtype="bfloat16"))
    add(_transfer("h2d", "pinned", "medium", "nonblocking", "standard", dtype="bfloat16"))
    add(_transfer("h2d", "pageable", "medium", "nonblocking", "standard", method="cuda"))
    add(_transfer("h2d", "pinned", "medium", "nonblocking", "standard", method="copy_"))
    # t.to('cpu', non_blocking=True) from a GPU allocates pinned memory whatever the caller
    # wants, so this method has a pinned variant only.
    add(_transfer("d2h", "pinned", "medium", "nonblocking", "standard", method="to"))
    add(_transfer("d2h", "pageable", "medium", "blocking", "standard", dtype="float16"))
    add(_transfer("h2d", "pageable", "16x1x64x64", "nonblocking", "standard", dtype="bfloat16", shape=(16, 1, 64, 64)))
    add(
        ProbeDef(
            id="copy.d2d.odd.clone",
            tier="standard",
            rule=BIT_EXACT,
            description="device-to-device t.clone() of odd sizes (2^k+1, 2^k+64) up to 1 Mi elements",
            impl=f"{_RUN}:run_d2d",
            params={"method": "clone", "shapes": [[n] for n in _odd_sizes(20)], "dtype": "float32"},
            timeout_s=60.0,
        )
    )
    add(_roundtrip_large("pageable", "1gib", "blocking", "standard", GIB_ELEMS, "float32"))
    # One 1 GiB round trip (pageable: the staging path) in standard; the others in full.
    add(_roundtrip_large("pinned", "1gib", "nonblocking", "full", GIB_ELEMS, "float32", isolated=True))
    add(
        ProbeDef(
            id="copy.d2d.1gib.clone",
            tier="full",
            rule=BIT_EXACT,
            description="device-to-device t.clone() of 1 GiB float32, with bandwidth",
            impl=f"{_RUN}:run_d2d",
            params={"method": "clone", "shapes": [[GIB_ELEMS]], "dtype": "float32"},
            timeout_s=180.0,
            isolated=True,
        )
    )
    add(
        ProbeDef(
            id="copy.p2p.medium",
            tier="standard",
            rule=BIT_EXACT,
            description=(
                "1 MiB t.to('cuda:j') from the device under test to every other GPU and back, "
                "compared with the host data (zeros here point to IOMMU/ACS P2P problems, RKB-027)"
            ),
            impl=f"{_RUN}:run_p2p",
            params={"numel": MEDIUM},
            timeout_s=120.0,
            needs=("multi_gpu",),
        )
    )

    # Full tier: index-width boundaries, each in its own worker.
    add(_roundtrip_large("pageable", "huge", "blocking", "full", HUGE, "float16", isolated=True))
    add(_roundtrip_large("pinned", "huge", "nonblocking", "full", HUGE, "float16", isolated=True))
    add(_roundtrip_large("pageable", "huge4g", "blocking", "full", HUGE4G, "float16", isolated=True))
    return probes


def _roundtrip_large(
    memory: str, size: str, sync: str, tier: str, numel: int, dtype: str, *, isolated: bool = False
) -> ProbeDef:
    nbytes = numel * _itemsize(dtype)
    return ProbeDef(
        id=f"copy.roundtrip.{memory}.{size}.{sync}" + _DTYPE_SUFFIX[dtype],
        tier=tier,
        rule=BIT_EXACT,
        description=(
            f"{memory} H2D then D2H of {numel} {dtype} elements ({nbytes / (1 << 30):.2f} GiB), "
            f"{sync}, each direction timed; bit-exact with a non-periodic pattern"
        ),
        impl=f"{_RUN}:run_roundtrip",
        params={"memory": memory, "numel": numel, "dtype": dtype, "non_blocking": sync == "nonblocking", "timed": True},
        timeout_s=600.0 if numel > GIB_ELEMS else (240.0 if numel == GIB_ELEMS else 60.0),
        isolated=isolated,
    )
