#!/usr/bin/env bash
# The sweep's full tier with its new axes (per-argument shapes, the large transforms,
# non-finite input to decompositions) on the GPU host, and beside it, under that load:
# train.convnet.fp16.compile three times, each on an empty Inductor cache (does its
# first-layer gradient error follow the host's load at compile time?), and the repro
# recipes of the optim and graph families on simulated failures (a script must reproduce
# under the simulation and not without it). Everything lands under OUT_DIR.
#
# usage: bench/axes/gpu-call-sweep.sh GPUPROBE_BINARY OUT_DIR [LIMIT_S]
set -uo pipefail
bin="$1"; out="$2"; limit="${3:-500}"
python="${PYTHON:-python3}"
mkdir -p "$out"
bash bench/sweep/full-tier-run.sh "$bin" "$out" sweep "$limit" --only 'sweep.*' > /dev/null 2>&1 &
sweep_pid=$!
sleep 20  # the sweep's lanes are up and loading the host
{
  for i in 1 2 3; do
    rm -rf "/tmp/gpuprobe-ind-$i" "/tmp/gpuprobe-cv-$i"
    TORCHINDUCTOR_CACHE_DIR="/tmp/gpuprobe-ind-$i" "$bin" check --tier full --device cuda:0 \
      --only train.convnet.fp16.compile --run-dir "/tmp/gpuprobe-cv-$i" --quiet
    echo "convnet run $i (empty Inductor cache, under the sweep's load): rc=$?"
    "$python" bench/sweep/report_summary.py "/tmp/gpuprobe-cv-$i/report.json" | grep -E "FAIL|verdicts" | cut -c1-400
  done
} > "$out/convnet.txt" 2>&1
{
  for spec in "optim-fused-zeros optim.adamw.fp32" "graph-stale graph.capture.fp32"; do
    set -- $spec
    rm -rf "/tmp/gpuprobe-rp-$1"
    "$bin" check --tier full --device cuda:0 --simulate "$1" --only "$2" --run-dir "/tmp/gpuprobe-rp-$1" --quiet
    echo "== $1 $2: check rc=$?"
    "$bin" repro "$2" --run "/tmp/gpuprobe-rp-$1" --out "/tmp/gpuprobe-rp-$1/r" 2>&1 | tail -n 4
    (cd /tmp && timeout 120 "$python" "/tmp/gpuprobe-rp-$1/r/repro.py" 2>&1 | tail -n 2; echo "script alone (no simulation): rc=$?")
  done
} > "$out/repro.txt" 2>&1
wait "$sweep_pid"
cat "$out/convnet.txt" "$out/repro.txt"
tail -n 60 "$out/sweep.txt" | cut -c1-600
