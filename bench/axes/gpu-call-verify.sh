#!/usr/bin/env bash
# Checks on the GPU host of what a full tier showed or added, in one call (everything lands
# under OUT_DIR):
# 1. train.convnet.fp16.compile, which fails inside full tiers and passes alone, alone on an
#    empty Inductor cache under each condition a full tier differs by: one OpenMP thread
#    (the thread budget of a worker among many lanes) and every host core busy (the timing
#    Triton's autotuning measures), then both at once;
# 2. side by side: the sweep's linear algebra and batch norm (the mends: large cases timed
#    first, arguments read past their end), clipping and checkpointing, the boolean compile
#    programs, and the inplace_output and values passes on eight float32 programs;
# 3. the run-directory and first-hour checks of the binary (a GPU listed that does not
#    exist, repro with relative paths) and env/triage on this host.
#
# usage: bench/axes/gpu-call-verify.sh GPUPROBE_BINARY OUT_DIR
set -uo pipefail
bin="$(realpath "$1")"; out="$(realpath -m "$2")"
python="${PYTHON:-python3}"
mkdir -p "$out"
convnet() {  # label, then environment assignments
  local label="$1"; shift
  rm -rf "/tmp/gpuprobe-cv-$label" "/tmp/gpuprobe-ind-$label"
  env TORCHINDUCTOR_CACHE_DIR="/tmp/gpuprobe-ind-$label" "$@" "$bin" check --tier full --device cuda:0 \
    --only train.convnet.fp16.compile --run-dir "/tmp/gpuprobe-cv-$label" --quiet
  echo "convnet ($label): rc=$?"
  "$python" bench/sweep/report_summary.py "/tmp/gpuprobe-cv-$label/report.json" | grep -E "FAIL|verdicts" | cut -c1-300
}
busy() {  # one spinning process per core for $1 seconds
  for _ in $(seq "$(nproc)"); do timeout "$1" "$python" -c "while True: pass" & done
}
{
  convnet omp1 OMP_NUM_THREADS=1
  busy 40; sleep 1; convnet busy GPUPROBE_NOTHING=1; wait
  busy 40; sleep 1; convnet omp1-busy OMP_NUM_THREADS=1; wait
} > "$out/convnet.txt" 2>&1
cat "$out/convnet.txt"
bash bench/sweep/full-tier-run.sh "$bin" "$out" mends 300 --only 'sweep.linalg.*' --only 'sweep.native_batch_norm.*' \
  --only 'sweep._native_batch_norm_legit.*' --only 'optim.clip*' --only 'train.*checkpoint*' --only 'compile.p*.bool' > /dev/null 2>&1 &
mends=$!
timeout 280 "$python" bench/compile/measure.py --device cuda --dtypes fp32 --chunks 0-7 --passes inplace_output,values \
  --procs 4 --out "$out/passes.jsonl" > "$out/passes.txt" 2>&1
echo "compile passes rc=$?"; tail -n 14 "$out/passes.txt" | cut -c1-300
wait "$mends"
grep -E 'FAIL|ERROR|HANG|CRASH|exit |check rc' "$out/mends.txt" | cut -c1-300
grep -E 'verdicts|probes' "$out/mends.txt" | head -5
{
  "$bin" check --device cpu,97 --only copy.d2d --run-dir "$out/d97" --quiet; echo "check --device cpu,97: exit $?"
  cd "$out" && "$bin" check --device 0 --simulate h2d-zeros --only copy.h2d --run-dir run --quiet
  "$bin" repro copy.h2d.pageable.4x4.blocking --run run --out rp 2>&1 | tail -n 3; echo "repro (relative paths): exit $?"
  cd - > /dev/null
  "$bin" env --json > "$out/env.json"; echo "env: exit $?"
  nvidia-smi > "$out/smi.txt"; "$python" -m torch.utils.collect_env > "$out/ce.txt" 2>&1; dmesg > "$out/dmesg.txt" 2>&1
  "$bin" triage "$out/smi.txt" "$out/ce.txt" "$out/dmesg.txt" | tail -n 15; echo "triage: exit $?"
} > "$out/first-hour.txt" 2>&1
cat "$out/first-hour.txt" | cut -c1-300
