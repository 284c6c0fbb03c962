"""``GuardCallback`` for the ``pytorch_lightning`` namespace (what it checks:
``_lightning.build``).

    from gpuprobe.callbacks.pytorch_lightning import GuardCallback
    trainer = pytorch_lightning.Trainer(callbacks=[GuardCallback()])
"""

from __future__ import annotations

from pytorch_lightning import Callback

from ._lightning import build

__all__ = ["GuardCallback"]

GuardCallback = build(Callback)
