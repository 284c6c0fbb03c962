#!/usr/bin/env bash
# One `gpuprobe check --tier full` on the GPU host with its lane timeline, the summary of
# every result that is not PASS/SKIP (bench/sweep/report_summary.py) and the report
# (xz-compressed) under OUT_DIR, named by LABEL.
#
# usage: bench/sweep/full-tier-run.sh GPUPROBE_BINARY OUT_DIR LABEL [LIMIT_S [CHECK_ARGS...]]
# (CHECK_ARGS are added to `check --tier full`: `--only 'sweep.*'` runs the sweep alone.)
set -uo pipefail
bin="$1"; out="$2"; label="$3"; limit="${4:-560}"
shift $(( $# < 4 ? $# : 4 ))
python="${PYTHON:-python3}"
mkdir -p "$out"
run="/tmp/gpuprobe-full-$label"
rm -rf "$run"
export PYTHONUNBUFFERED=1
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
  "$python" -c "import torch; print('torch', torch.__version__)"
  start=$(date +%s.%N)
  timeout -s INT "$limit" "$python" bench/lane-timeline.py "$bin" "$run" --tier full "$@"
  echo "check rc=$? wall $("$python" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)") s"
  "$python" bench/sweep/report_summary.py "$run/report.json"
} 2>&1 | tee "$out/$label.txt"
if [ -f "$run/report.json" ]; then xz -T4 -c "$run/report.json" > "$out/$label-report.json.xz"; fi
# What landed when, and the raw results, also of a run that ran out of time.
for name in landings.jsonl results.jsonl; do
  if [ -f "$run/$name" ]; then xz -T4 -c "$run/$name" > "$out/$label-$name.xz"; fi
done
