"""The guard choices every callback takes, and the two things each callback does with them:
guard a batch, and build the watch of a model's parameters and gradients."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional

from .. import guard


@dataclass(frozen=True)
class GuardSettings:
    """What to guard and how: ``every`` optimisation steps for the watch, ``mode`` (raise
    or warn), which checks run (``batches``, ``params``, ``grads``), and the batch
    guard's ``samples`` and ``zeros_ok``."""

    every: int = guard.DEFAULT_EVERY
    mode: str = "raise"
    batches: bool = True
    params: bool = True
    grads: bool = True
    samples: int = guard.DEFAULT_SAMPLES
    zeros_ok: Iterable[str] = guard.DEFAULT_ZEROS_OK

    def __post_init__(self) -> None:
        guard._check_mode(self.mode)
        object.__setattr__(self, "zeros_ok", tuple(self.zeros_ok))

    def guard_batch(self, batch: Any, where: str, **kwargs: Any) -> None:
        """``guard.tensors`` of one batch with these settings (``kwargs``: its ``name``)."""
        guard.tensors(batch, where=where, mode=self.mode, samples=self.samples, zeros_ok=self.zeros_ok, **kwargs)

    def watch(self, model: Any, *, loss_scaled: bool) -> Optional[guard.Watch]:
        """The watch of ``model``, or None when nothing is to be watched. Under fp16 loss
        scaling (``loss_scaled``) gradients are not checked: the scaler expects Inf
        gradients in the steps it skips."""
        grads = self.grads and not loss_scaled
        if not (self.params or grads):
            return None
        return guard.watch(model, self.every, mode=self.mode, params=self.params, grads=grads)
