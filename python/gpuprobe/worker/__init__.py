"""The gpuprobe probe worker: runs probes inside the user's Python interpreter.

The Rust supervisor starts the worker with a plan file (a ``WorkerPlan``, see
``crates/gpuprobe-model/src/protocol.rs``) and reads one JSON event per line from a private
file descriptor. This package owns that side of the protocol:

- ``main``: argument parsing, the three modes (catalog, env, run) and the event loop;
- ``events``: the event stream (one JSON object per line, never NaN);
- ``catalog`` and ``probes``: the probe catalog (importable without torch) and the probe
  implementations (which import torch);
- ``ops``: the operations layer every probe moves and creates data through;
- ``simulate``: the fault-simulation engine behind ``ops``, active only when the plan asks.

Nothing in this package imports torch at import time.
"""
