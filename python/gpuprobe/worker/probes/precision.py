"""Precision settings the probes of several families run under: whether float32 GEMMs and
convolutions may use TF32 (``tf32_mode``). The ops and nn probes judged as ``tf32`` turn it
on and their other float32 probes off; the sweep, compile, graph and train families run
their cases with it off (float32 means float32), and ``compile.ambient`` under each setting.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def tf32_mode(torch: Any, enabled: bool) -> Iterator[None]:
    """Sets whether float32 GEMMs and convolutions may use TF32 (tensor cores) for the block,
    restoring the previous settings afterwards."""
    matmul = torch.backends.cuda.matmul
    cudnn = torch.backends.cudnn
    try:
        saved = (bool(matmul.allow_tf32), bool(cudnn.allow_tf32))
    except RuntimeError:
        # Settings made with the newer fp32_precision API may refuse the legacy getters.
        saved = None
    if saved is None:
        old = (matmul.fp32_precision, cudnn.conv.fp32_precision)
        matmul.fp32_precision = "tf32" if enabled else "ieee"
        cudnn.conv.fp32_precision = "tf32" if enabled else "ieee"
        try:
            yield
        finally:
            matmul.fp32_precision, cudnn.conv.fp32_precision = old
        return
    matmul.allow_tf32 = enabled
    with contextlib.ExitStack() as stack:
        try:
            cudnn.allow_tf32 = enabled
        except RuntimeError:
            # Importing PyTorch's test harness (the sweep's operator database) freezes the
            # global cuDNN flags; its ``flags`` context manager still sets them, with the
            # other flags kept as they are.
            stack.enter_context(
                cudnn.flags(
                    enabled=cudnn.enabled,
                    benchmark=cudnn.benchmark,
                    deterministic=cudnn.deterministic,
                    allow_tf32=enabled,
                )
            )
            saved = (saved[0], None)
        try:
            yield
        finally:
            matmul.allow_tf32 = saved[0]
            if saved[1] is not None:
                cudnn.allow_tf32 = saved[1]
