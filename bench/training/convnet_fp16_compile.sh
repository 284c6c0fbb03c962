#!/usr/bin/env bash
# The conv net's float16 compiled training step against float64 (train.convnet.fp16.compile),
# over several seeds, eager beside it, then with Inductor rounding intermediates as eager
# does (emulate_precision_casts): does the compiled step's first-layer gradient error follow
# the seed, and does it come from Inductor keeping fused intermediates in float32?
#
# usage: bench/training/convnet_fp16_compile.sh [SEEDS]   (on the GPU host)
set -uo pipefail
seeds="${1:-20261122,1,2}"
python="${PYTHON:-python3}"
echo "== default Inductor"
"$python" bench/training/train_probes.py --only convnet.fp16 --seeds "$seeds" --verbose
echo "== torch._inductor.config.emulate_precision_casts = True"
"$python" - "$seeds" <<'PY'
import runpy, sys
import torch._inductor.config as config
config.emulate_precision_casts = True
sys.argv = ["train_probes.py", "--only", "convnet.fp16.compile", "--seeds", sys.argv[1], "--verbose"]
runpy.run_path("bench/training/train_probes.py", run_name="__main__")
PY
