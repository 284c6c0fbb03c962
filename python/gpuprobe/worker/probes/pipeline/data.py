"""The dataset of the pipeline probes, importable by DataLoader worker processes.

A DataLoader with the ``spawn`` start method unpickles its dataset in a fresh interpreter, so
the dataset class must live in an importable module (not in the probe function). Every item is
computed from the seed and its index alone (``patterns.pattern``, no random generator state),
so the probe can rebuild any batch in its own process and compare bit for bit. Items look like
the latent-cache batches of field note 000: a 1x64x64 latent in bf16 and in fp32, 77 caption
token ids, a bool mask and the item's index (a 0-dim int64), collated by the default
``collate_fn`` into 16x1x64x64 latents and so on.

Items are built with the fault simulation bypassed: the dataset is the ground truth, what
happens to it on the way to the device is what the probes test.
"""

from __future__ import annotations

from typing import Any

from gpuprobe.worker.patterns import derive_seed, pattern

#: Field name → (dtype, per-item shape).
FIELDS: dict[str, tuple[str, tuple[int, ...]]] = {
    "latents": ("bfloat16", (1, 64, 64)),
    "latents_fp32": ("float32", (1, 64, 64)),
    "caption_ids": ("int64", (77,)),
    "attention_mask": ("bool", (77,)),
}


class LatentDataset:
    """``length`` items, each a dict of tensors derived from ``seed`` and the item index."""

    def __init__(self, length: int, seed: int) -> None:
        self.length = int(length)
        self.seed = int(seed)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, Any]:
        import torch

        from gpuprobe.worker import simulate

        if not 0 <= index < self.length:
            raise IndexError(index)
        with simulate.bypassed():
            item: dict[str, Any] = {}
            for name, (dtype, shape) in FIELDS.items():
                numel = 1
                for dim in shape:
                    numel *= dim
                item[name] = pattern(torch, numel, dtype, derive_seed(self.seed, f"item{index}", name), shape)
            item["index"] = torch.tensor(index, dtype=torch.int64)
            return item

    def batch(self, indices: list[int]) -> dict[str, Any]:
        """The batch the default ``collate_fn`` makes of ``indices`` (stacked fields)."""
        import torch

        from gpuprobe.worker import simulate

        items = [self[i] for i in indices]
        with simulate.bypassed():
            return {name: torch.stack([item[name] for item in items]) for name in items[0]}
