"""Guards for Accelerate loops: each batch of a prepared dataloader is checked after
Accelerate moved it to the device.

    from gpuprobe.callbacks import accelerate as gpa
    model, optimizer, loader = gpa.prepare(accelerator, model, optimizer, loader)
    watch = gpuprobe.guard.watch(model)
    for batch in loader:                 # guarded: GuardError on a zeroed or NaN batch
        accelerator.backward(model(**batch).loss)
        watch.step()
        optimizer.step(); optimizer.zero_grad()

``prepare`` is ``accelerator.prepare`` with every returned ``DataLoader`` wrapped by
``guard_dataloader``; everything else comes back as prepared. With
``mixed_precision="fp16"`` build the watch with ``grads=False`` (the loss scaler expects
Inf gradients in the steps it skips).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from .. import guard
from ._settings import GuardSettings

__all__ = ["GuardedDataLoader", "guard_dataloader", "prepare"]


class GuardedDataLoader:
    """Iterates a dataloader and guards each batch (``guard.tensors``) before yielding it.
    Every other attribute (``len``, ``set_epoch``, ``batch_size``, ...) is the wrapped
    loader's."""

    def __init__(
        self,
        dataloader: Any,
        *,
        where: str = "after accelerator.prepare",
        mode: str = "raise",
        samples: int = guard.DEFAULT_SAMPLES,
        zeros_ok: Iterable[str] = guard.DEFAULT_ZEROS_OK,
    ) -> None:
        self.settings = GuardSettings(mode=mode, samples=samples, zeros_ok=zeros_ok)
        self.dataloader = dataloader
        self.where = where
        self.batches = 0

    def __iter__(self) -> Iterator[Any]:
        for index, batch in enumerate(self.dataloader):
            self.batches += 1
            self.settings.guard_batch(batch, f"{self.where} (batch {index})")
            yield batch

    def __len__(self) -> int:
        return len(self.dataloader)

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes this wrapper lacks.
        return getattr(self.__dict__["dataloader"], name)


def guard_dataloader(dataloader: Any, **kwargs: Any) -> GuardedDataLoader:
    """Wraps a (prepared) dataloader so that each batch is guarded on the device."""
    return GuardedDataLoader(dataloader, **kwargs)


def prepare(accelerator: Any, *objects: Any, **kwargs: Any) -> Any:
    """``accelerator.prepare(*objects)`` with each returned ``DataLoader`` guarded
    (``kwargs`` go to ``guard_dataloader``). Returns what ``prepare`` returns: one object
    for one argument, a tuple otherwise."""
    from torch.utils.data import DataLoader

    prepared = accelerator.prepare(*objects)
    single = len(objects) == 1
    items = [prepared] if single else list(prepared)
    wrapped = [guard_dataloader(o, **kwargs) if isinstance(o, DataLoader) else o for o in items]
    return wrapped[0] if single else tuple(wrapped)
