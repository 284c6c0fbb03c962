#!/usr/bin/env bash
# train.convnet.fp16.compile fails inside whole full tiers (first-layer gradient 0.0785 of
# float64's where 0.0312 is allowed, the same numbers three times) and passes alone: on an
# empty Inductor cache, with one OpenMP thread, with every core busy (bench/RESULTS.md).
# What a full tier adds is the Inductor cache other compiling probes fill at the same time.
# This runs, each on an empty private cache (TORCHINDUCTOR_CACHE_DIR):
# 1. the whole train family (its compiled probes run before this one in the same lane);
# 2. the float16 compile programs, then the probe alone on the cache they filled;
# 3. the probe alone on a cache nothing else filled (the control).
# A failure in 1 or 2 and a pass in 3 says the cache's contents decide.
#
# usage: bench/training/convnet_in_family.sh GPUPROBE_BINARY OUT_DIR
set -uo pipefail
bin="$(realpath "$1")"; out="$(realpath -m "$2")"
python="${PYTHON:-python3}"
mkdir -p "$out"
step() {  # label, cache directory, check arguments...
  local label="$1" cache="$2"; shift 2
  rm -rf "/tmp/gpuprobe-cvf-$label"
  TORCHINDUCTOR_CACHE_DIR="$cache" "$bin" check --tier full --device cuda:0 "$@" \
    --run-dir "/tmp/gpuprobe-cvf-$label" --quiet
  echo "$label: rc=$?"
  "$python" bench/sweep/report_summary.py "/tmp/gpuprobe-cvf-$label/report.json" | grep -E "convnet.fp16.compile|verdicts" | cut -c1-300
}
rm -rf /tmp/gpuprobe-ind-train /tmp/gpuprobe-ind-fp16 /tmp/gpuprobe-ind-alone
{
  step family /tmp/gpuprobe-ind-train --only 'train.*'
  step fp16-programs /tmp/gpuprobe-ind-fp16 --only 'compile.p*.fp16'
  step after-programs /tmp/gpuprobe-ind-fp16 --only train.convnet.fp16.compile
  step alone /tmp/gpuprobe-ind-alone --only train.convnet.fp16.compile
} 2>&1 | tee "$out/convnet-in-family.txt"
