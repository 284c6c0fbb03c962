#!/usr/bin/env bash
# The whole full tier on the GPU host (bench/sweep/full-tier-run.sh, label `full`), then, when
# train.convnet.fp16.compile failed inside it, the same probe alone twice: once on the
# Inductor cache the full tier filled (the compile family's programs compiled into it at the
# same time) and once on an empty one. A failure on the filled cache alone and a pass on the
# empty one says the cache's state decides (a kernel or an autotuning choice stored by
# another program), not the host's load. Then each CANDIDATE of bench/sweep/candidates.py.
# Everything lands under OUT_DIR.
#
# usage: bench/axes/gpu-call-full.sh GPUPROBE_BINARY OUT_DIR [LIMIT_S [CANDIDATE...]]
set -uo pipefail
bin="$1"; out="$2"; limit="${3:-500}"
shift $(( $# < 3 ? $# : 3 ))
python="${PYTHON:-python3}"
mkdir -p "$out"
bash bench/sweep/full-tier-run.sh "$bin" "$out" full "$limit" > /dev/null 2>&1
grep -E 'FAIL|ERROR|HANG|CRASH|interrupted|exit |check rc' "$out/full.txt" | cut -c1-400
sed -n '/^lane /,/^check rc/p' "$out/full.txt" | cut -c1-300
if grep -q 'FAIL *train.convnet.fp16.compile' "$out/full.txt"; then
  filled="$(find "$HOME/.cache" /tmp -maxdepth 6 -type d -path '*gpuprobe*' -name inductor 2>/dev/null | head -n 1)"
  filled="$(find "$filled" -mindepth 1 -maxdepth 1 -type d | head -n 1)"
  echo "the full tier's Inductor cache: $filled ($(du -sh "$filled" 2>/dev/null | cut -f1))"
  for which in filled empty; do
    rm -rf "/tmp/gpuprobe-cv-$which"
    if [ "$which" = filled ]; then dir="$filled"; else dir="/tmp/gpuprobe-ind-empty"; rm -rf "$dir"; fi
    TORCHINDUCTOR_CACHE_DIR="$dir" "$bin" check --tier full --device cuda:0 \
      --only train.convnet.fp16.compile --run-dir "/tmp/gpuprobe-cv-$which" --quiet
    echo "convnet alone on the $which cache: rc=$?"
    "$python" bench/sweep/report_summary.py "/tmp/gpuprobe-cv-$which/report.json" | grep -E "FAIL|verdicts" | cut -c1-300
  done
fi
for name in "$@"; do
  timeout 120 "$python" bench/sweep/candidates.py --only "$name" 2>&1 | tail -n 25
done
