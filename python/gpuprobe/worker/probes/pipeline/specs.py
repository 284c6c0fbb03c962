"""Pipeline family catalog: the data path of a training job (layer ``pipeline``).

Id grammar:

- ``pipeline.dataloader.w<N>[.<start method>][.pinned]``: a DataLoader with N worker
  processes (``fork`` or ``spawn``; none for N = 0) and ``pin_memory``, yielding dict batches
  (16x1x64x64 bf16 and fp32 latents, token ids, a bool mask, indices) that are moved to the
  device and compared bit for bit with the dataset's own tensors;
- ``pipeline.accelerate.prepare.<placed|unplaced>``: the same loader through Accelerate's
  ``prepare()`` with ``device_placement=[True]`` or ``[False]`` (then moved by hand, as in
  field note 000); ``pipeline.accelerate.send_to_device``: Accelerate's batch mover alone;
- ``pipeline.save.<safetensors|torch>.bf16[.large]``: bf16 (and fp32) tensors written from
  the device with ``safetensors.torch.save_file`` or ``torch.save``, reloaded onto the host and
  onto the device, compared bit for bit (``.large``: a 2 GiB bf16 tensor).

Probes needing Accelerate or safetensors skip with a reason when the package is missing.
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
    "pipeline.accelerate": 0.134,
    "pipeline.dataloader": 0.214,
    "pipeline.dataloader.w2.spawn.pinned": 2.957,
    "pipeline.save": 0.012,
}

_RUN = "gpuprobe.worker.probes.pipeline.run"


def _loader(workers: int, method: str, pinned: bool, tier: str, *, isolated: bool = False) -> ProbeDef:
    parts = [f"pipeline.dataloader.w{workers}"]
    if workers:
        parts.append(method)
    if pinned:
        parts.append("pinned")
    where = f"{workers} {method} worker processes" if workers else "the main process"
    return ProbeDef(
        id=".".join(parts),
        tier=tier,
        layer="pipeline",
        rule=BIT_EXACT,
        description=(
            f"DataLoader batches (dicts of bf16/fp32 16x1x64x64 latents, ids, masks) loaded in {where}, "
            f"pin_memory={pinned}, moved to the device and compared bit for bit with the dataset's tensors"
        ),
        impl=f"{_RUN}:run_dataloader",
        params={"workers": workers, "start_method": method if workers else "main", "pin_memory": pinned},
        timeout_s=120.0,
        isolated=isolated,
        # Worker processes cost start-up time, not device memory: run beside the main lane.
        placement="side" if workers else "shared",
    )


def _save(fmt: str, tier: str, *, large: bool = False) -> ProbeDef:
    call = "safetensors.torch.save_file / load_file" if fmt == "safetensors" else "torch.save / torch.load"
    size = "a 2 GiB bf16 tensor" if large else "bf16 16x1x64x64 latents, an odd-length bf16 vector and fp32 scales"
    return ProbeDef(
        id=f"pipeline.save.{fmt}.bf16" + (".large" if large else ""),
        tier=tier,
        layer="pipeline",
        rule=BIT_EXACT,
        description=(
            f"{size} written from the device with {call}, reloaded onto the host and onto the device, "
            "compared bit for bit"
        ),
        impl=f"{_RUN}:run_save_load",
        params={"fmt": fmt, "large": large},
        timeout_s=300.0 if large else 60.0,
        isolated=large,
        placement="exclusive" if large else "shared",
    )


def specs() -> list[ProbeDef]:
    """The pipeline probes, quick tier first."""
    probes = [
        _loader(0, "main", False, "quick"),
        _loader(0, "main", True, "standard"),
        _loader(2, "fork", False, "standard"),
        _loader(2, "fork", True, "standard"),
        _loader(2, "spawn", True, "standard"),
    ]
    for placed in (True, False):
        probes.append(
            ProbeDef(
                id=f"pipeline.accelerate.prepare.{'placed' if placed else 'unplaced'}",
                tier="standard",
                layer="pipeline",
                rule=BIT_EXACT,
                description=(
                    f"Accelerate prepare(loader, device_placement=[{placed}]) over dict batches"
                    + ("" if placed else ", then moved to the device by hand")
                    + "; every tensor compared bit for bit with the dataset's"
                ),
                impl=f"{_RUN}:run_accelerate",
                params={"device_placement": placed},
                timeout_s=120.0,
            )
        )
    probes.append(
        ProbeDef(
            id="pipeline.accelerate.send_to_device",
            tier="standard",
            layer="pipeline",
            rule=BIT_EXACT,
            description="accelerate.utils.send_to_device of a dict batch (non_blocking), compared bit for bit",
            impl=f"{_RUN}:run_send_to_device",
            timeout_s=60.0,
        )
    )
    probes += [_save("safetensors", "standard"), _save("torch", "standard")]
    probes += [
        _loader(2, "spawn", False, "full", isolated=True),
        _save("safetensors", "full", large=True),
        _save("torch", "full", large=True),
    ]
    return probes
