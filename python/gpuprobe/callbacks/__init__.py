"""Callbacks that run ``gpuprobe.guard`` inside training libraries (docs/python-api.md).

Each submodule imports its library, so import the one you use:

- ``gpuprobe.callbacks.lightning``: ``GuardCallback`` for PyTorch Lightning (``lightning``,
  or ``pytorch_lightning`` when only that is installed); ``gpuprobe.callbacks.pytorch_lightning``
  for the ``pytorch_lightning`` namespace explicitly;
- ``gpuprobe.callbacks.huggingface``: ``GuardTrainerCallback`` for ``transformers.Trainer``;
- ``gpuprobe.callbacks.accelerate``: ``prepare`` and ``guard_dataloader`` for Accelerate loops.
"""
