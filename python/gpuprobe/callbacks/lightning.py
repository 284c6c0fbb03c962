"""``GuardCallback`` for PyTorch Lightning: the ``lightning`` package's ``Callback``, or
``pytorch_lightning``'s when only that one is installed.

    from gpuprobe.callbacks.lightning import GuardCallback
    trainer = lightning.Trainer(callbacks=[GuardCallback()])

Use ``gpuprobe.callbacks.pytorch_lightning`` when both are installed and your Trainer comes
from ``pytorch_lightning``. What it checks: ``_lightning.build``.
"""

from __future__ import annotations

try:
    from lightning.pytorch import Callback
except ImportError:  # only the older package name is installed
    from pytorch_lightning import Callback

from ._lightning import build

__all__ = ["GuardCallback"]

GuardCallback = build(Callback)
