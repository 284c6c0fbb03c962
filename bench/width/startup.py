"""Where a fresh worker's start-up goes on a GPU host: interpreter, torch import, CUDA runtime
init, first context (the first allocation), and whether a process that only asked
is_available()/get_device_properties() holds device memory (nvidia-smi's per-process list).

Usage: python3 bench/width/startup.py   (prints one JSON line)
"""

import json
import os
import subprocess
import sys
import time

t0 = time.perf_counter()
import torch  # noqa: E402

t_import = time.perf_counter() - t0
t1 = time.perf_counter()
ok = torch.cuda.is_available()
props = torch.cuda.get_device_properties(0) if ok else None
t_query = time.perf_counter() - t1


def smi_mem():
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20).stdout
    except Exception as exc:  # noqa: BLE001
        return f"nvidia-smi failed: {exc}"
    for line in out.splitlines():
        pid, _, mem = line.partition(",")
        if pid.strip() == str(os.getpid()):
            return int(mem)
    return 0


before_ctx = smi_mem()
t2 = time.perf_counter()
x = torch.zeros(1, device="cuda")
torch.cuda.synchronize()
t_ctx = time.perf_counter() - t2
after_ctx = smi_mem()
print(json.dumps({
    "python": sys.version.split()[0], "torch": torch.__version__,
    "import_s": round(t_import, 3), "query_s": round(t_query, 3), "first_alloc_s": round(t_ctx, 3),
    "device_mib_before_first_alloc": before_ctx, "device_mib_after": after_ctx,
    "name": getattr(props, "name", None),
}))
