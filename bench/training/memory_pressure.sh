#!/usr/bin/env bash
# The conv net's float16 training probes (eager and compiled) with almost no free device
# memory: does the first-layer gradient's error come from the convolution algorithm cuDNN
# falls back to when its preferred algorithm's workspace cannot be allocated?
#
# usage: bench/training/memory_pressure.sh [FREE_MIB]   (on the GPU host)
set -uo pipefail
free_mib="${1:-512}"
python="${PYTHON:-python3}"
"$python" - "$free_mib" <<'PY'
import runpy, sys
import torch
free_mib = int(sys.argv[1])
free, total = torch.cuda.mem_get_info()
hog = torch.empty(max(0, free - free_mib * 2**20), dtype=torch.uint8, device="cuda")
print(f"held {hog.numel() / 2**30:.1f} GiB of {total / 2**30:.1f}; free now {torch.cuda.mem_get_info()[0] / 2**20:.0f} MiB", flush=True)
sys.argv = ["train_probes.py", "--only", "convnet.fp16", "--seeds", "20261122,1", "--verbose"]
try:
    runpy.run_path("bench/training/train_probes.py", run_name="__main__")
except SystemExit as exc:
    print("exit", exc.code)
PY
