#!/usr/bin/env bash
# Call 3 of 2026-11-30b: as call-exp1.sh, with every worker started (GPUPROBE_ZYGOTE=0), so
# that the hooks reach the workers (in call 1 they were forked from the zygote, which
# imports torch before any hook could act): unchanged, blocking sync, context made early,
# interleaved with the floor, 3 rounds after one untimed run of each.
set -uo pipefail
bin="$1"; out="$2"; rounds="${3:-3}"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$2"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt"
python3 -c "import torch; torch.zeros(1, device='cuda')"
run() {  # mode label
  local mode="$1" label="$2" t0 t1 rc
  t0=$(now)
  GPUPROBE_ZYGOTE=0 GPX_MODE="$mode" PYTHONPATH="$here/hooks" "$bin" check --tier standard --json --timings --run-dir "$out/$label" > "$out/$label.json" 2> "$out/$label.err"; rc=$?
  t1=$(now)
  echo "$label $(secs "$t0" "$t1") exit=$rc $(python3 -c "
import json,sys
r=json.load(open(sys.argv[1])); res=r['results']
bad=sorted(x['probe'] for x in res if x['verdict']['verdict'] not in ('pass','skip'))
print(len(res),'results', len(bad),'problems:',' '.join(bad))" "$out/$label.json" 2>&1 | cut -c1-300)"
}
for mode in none block early; do run "$mode" "warm-$mode" > /dev/null; done
for i in $(seq 1 "$rounds"); do
  t0=$(now); python3 -c "import torch; torch.zeros(1, device='cuda')"; t1=$(now)
  echo "floor-$i $(secs "$t0" "$t1")"
  for mode in none block early; do run "$mode" "$mode-$i"; done
done | tee "$out/exp3.txt"
for m in block early; do echo "$m: $(grep -rhoa 'gpx: [a-z ]*rc=[0-9-]*' "$out/$m-1" | sort | uniq -c | tr '\n' ' ')"; done | tee -a "$out/exp3.txt"
