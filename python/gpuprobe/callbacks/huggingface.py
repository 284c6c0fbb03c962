"""``GuardTrainerCallback`` for the Hugging Face ``transformers.Trainer``.

    from gpuprobe.callbacks.huggingface import GuardTrainerCallback
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[GuardTrainerCallback()])

A ``TrainerCallback`` never sees the batch, so the callback registers a forward pre-hook on
the model when training begins: it guards the keyword arguments the Trainer passes to
``model(**inputs)``, after ``_prepare_inputs`` moved them to the device (evaluation forwards
included), and removes the hook when training ends. Parameters and gradients are checked
every ``every`` optimiser steps in ``on_pre_optimizer_step`` (after the gradients are
complete and clipped, before the step). With ``fp16=True`` gradients are not checked: the
loss scaler expects Inf gradients in the steps it skips.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from transformers import TrainerCallback

from .. import guard
from ._settings import GuardSettings

__all__ = ["GuardTrainerCallback"]


class GuardTrainerCallback(TrainerCallback):
    """Guards each batch on the device and watches parameters and gradients."""

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
        self.settings = GuardSettings(every, mode, batches, params, grads, samples, zeros_ok)
        self.watch: Optional[guard.Watch] = None
        self.forwards = 0
        self._hook: Any = None

    def _guard_inputs(self, module: Any, args: Any, kwargs: Any) -> None:
        self.forwards += 1
        self.settings.guard_batch(
            {"args": list(args), **kwargs} if args else kwargs,
            f"after _prepare_inputs (forward {self.forwards})",
            name="inputs",
        )

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if model is None:
            return
        if self.settings.batches and self._hook is None:
            self._hook = model.register_forward_pre_hook(self._guard_inputs, with_kwargs=True)
        self.watch = self.settings.watch(model, loss_scaled=bool(getattr(args, "fp16", False)))

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.watch is not None:
            self.watch.step()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
