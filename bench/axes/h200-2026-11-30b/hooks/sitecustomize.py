"""Experiment hook for bench/axes/h200-2026-11-30b/call-exp1.sh, never part of a product run.

Put on PYTHONPATH with GPX_MODE set, it acts in gpuprobe's Python lane workers only (their
command line names a plan-python-*.json file), before anything else the worker does:
- block: the device's primary context is made with CU_CTX_SCHED_BLOCKING_SYNC, so a worker
  waiting for the GPU sleeps instead of spinning on a core (CUDA spins by default when a
  process has fewer contexts than the host has cores).
- early: a thread creates the primary context (cuInit, cuDevicePrimaryCtxRetain) while the
  main thread imports torch, instead of at the lane's first probe.
- both: block, then early.
"""
import ctypes
import os
import sys
import threading

_MODE = os.environ.get("GPX_MODE", "")


def _init(mode: str) -> None:
    try:
        cu = ctypes.CDLL("libcuda.so.1")
        if cu.cuInit(0) != 0:
            return
        dev = ctypes.c_int()
        if cu.cuDeviceGet(ctypes.byref(dev), 0) != 0:
            return
        if mode in ("block", "both"):
            set_flags = getattr(cu, "cuDevicePrimaryCtxSetFlags_v2", None) or cu.cuDevicePrimaryCtxSetFlags
            rc = set_flags(dev, 4)
            print(f"gpx: set flags rc={rc}", file=sys.stderr)
        if mode in ("early", "both"):
            ctx = ctypes.c_void_p()
            rc = cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
            print(f"gpx: retained rc={rc}", file=sys.stderr)
    except Exception as exc:  # an experiment: never take the worker down
        print(f"gpx: {exc}", file=sys.stderr)


if _MODE and any("plan-python-" in a for a in sys.argv):
    if _MODE == "block":
        _init(_MODE)
    else:
        threading.Thread(target=_init, args=(_MODE,), daemon=True).start()
