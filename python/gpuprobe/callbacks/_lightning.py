"""The Lightning callback, built on whichever ``Callback`` base class the caller imported
(``lightning.pytorch`` and ``pytorch_lightning`` have distinct ones, and a Trainer accepts
only its own)."""

from __future__ import annotations

from typing import Any, Iterable, Optional

from .. import guard
from ._settings import GuardSettings


def build(callback_base: type) -> type:
    """A ``GuardCallback`` class deriving from ``callback_base``."""

    class GuardCallback(callback_base):  # type: ignore[misc, valid-type]
        """Guards every training and validation batch after Lightning moved it to the
        device (``on_*_batch_start``), and the module's parameters and gradients every
        ``every`` optimisation steps (``on_after_backward``).

        With fp16 mixed precision (``precision="16-mixed"``) gradients are not checked:
        the loss scaler expects Inf gradients in the steps it skips."""

        def __init__(
            self,
            every: int = guard.DEFAULT_EVERY,
            mode: str = "raise",
            *,
            batches: bool = True,
            params: bool = True,
            grads: bool = True,
            samples: int = guard.DEFAULT_SAMPLES,
            zeros_ok: Iterable[str] = guard.DEFAULT_ZEROS_OK,
        ) -> None:
            super().__init__()
            self.settings = GuardSettings(every, mode, batches, params, grads, samples, zeros_ok)
            self.watch: Optional[guard.Watch] = None

        def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
            fp16 = str(getattr(trainer, "precision", "")).startswith("16")
            self.watch = self.settings.watch(pl_module, loss_scaled=fp16)

        def _batch(self, batch: Any, what: str, batch_idx: int) -> None:
            if self.settings.batches:
                self.settings.guard_batch(batch, f"after batch_to_device ({what} batch {batch_idx})")

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            self._batch(batch, "train", batch_idx)

        def on_validation_batch_start(
            self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int, dataloader_idx: int = 0
        ) -> None:
            self._batch(batch, "validation", batch_idx)

        def on_after_backward(self, trainer: Any, pl_module: Any) -> None:
            if self.watch is not None:
                self.watch.step()

    return GuardCallback
