#!/usr/bin/env bash
# The sweep probes a full-tier run found not passing, alone, with the build's current rules,
# and the reduced clamp_ repro: a short check that a rule answered what it was written for
# and left the real findings standing.
#
# usage: bench/sweep/recheck.sh GPUPROBE_BINARY OUT_DIR
set -uo pipefail
bin="$1"; out="$2"
mkdir -p "$out"
{
  "$bin" check --tier full --no-native \
    --only 'sweep.nn.functional.rms_norm.*' --only 'sweep.nn.functional.conv_transpose1d.*' \
    --only 'sweep.lu.*' --only 'sweep.linalg.lu.*' --only 'sweep.clamp.*' --only 'sweep.fft.ihfftn.*' \
    --only 'sweep.native_batch_norm.*' --only 'sweep.mean.*' --only 'sweep.mode.*' --only 'sweep.sort.*'
  echo "check rc=$?"
  python3 - <<'PY'
import torch
x = torch.tensor([6, 0, 200], dtype=torch.uint8)
low = torch.tensor([-7, 3, 250], dtype=torch.int32)
print("clamp_ uint8 by an int32 bound: cpu", x.clone().clamp_(low).tolist(), "cuda", x.cuda().clamp_(low.cuda()).tolist(),
      "cuda functional", torch.clamp(x.cuda(), low.cuda()).tolist())
PY
} 2>&1 | tee "$out/recheck.txt"
