#!/usr/bin/env bash
# The GPU-host part of the hostile-input work in one device call: the gated real-fault tests
# (illegal address, never-ending kernel, OOM, SIGKILL, SIGSEGV, abort) first, then as many of
# N consecutive standard-tier checks as fit in what is left of TOTAL_S.
#
#   bash bench/consecutive/h100-round.sh BIN IT_GPU OUT [N=20] [TOTAL_S=585]
#
# BIN: a gpuprobe release binary; IT_GPU: the gated integration tests
# (cargo test -p gpuprobe --features gpu-tests --release --no-run; the `it` binary).
set -u
BIN=$1
IT=$2
OUT=$3
N=${4:-20}
TOTAL=${5:-585}
mkdir -p "$OUT"
chmod +x "$BIN" "$IT"
start=$SECONDS
GPUPROBE_TEST_BIN="$BIN" GPUPROBE_TEST_PYTHON="$(command -v python3)" \
    timeout -k 5 150 "$IT" gpu_faults --test-threads 1 >"$OUT/gpu-faults.txt" 2>&1
echo "gpu_faults rc=$? in $((SECONDS - start)) s" | tee -a "$OUT/gpu-faults.txt"
tail -n 14 "$OUT/gpu-faults.txt"
bash "$(dirname "$0")/standard-runs.sh" "$BIN" "$OUT/standard" "$N" $((TOTAL - SECONDS))
