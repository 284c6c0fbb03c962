#!/usr/bin/env bash
# One GPU call before the full tiers:
# 1. the standard tier against the floor (median of 3, warm; a first run with --timings
#    fills the caches and says where the time goes);
# 2. compile.ambient on an empty private Inductor cache, then `gpuprobe fix` from that run
#    (which switch cures it, proven in fresh workers);
# 3. the public report's own repro (bench/training/upstream_repros.py);
# 4. train.convnet.{bf16,fp16}.compile on an empty private cache (the float16 step after the
#    bfloat16 one filled it), then the float16 probe alone on that cache with AOTAutograd's
#    cache off (TORCHINDUCTOR_AUTOGRAD_CACHE=0): what made it fail in every full tier;
# 5. the compile family's candidate reports, each alone.
#
# usage: bench/axes/gpu-call-first.sh GPUPROBE_BINARY OUT_DIR
set -uo pipefail
bin="$(realpath "$1")"; out="$(realpath -m "$2")"
python="${PYTHON:-python3}"
mkdir -p "$out"
summary() { "$python" bench/sweep/report_summary.py "$1/report.json" 2>&1 | grep -E "FAIL|ERROR|verdicts|HANG|CRASH" | cut -c1-400; }
echo "== standard"
timeout 90 "$bin" check --tier standard --device cuda:0 --timings --run-dir /tmp/gp-std-timings > "$out/standard-timings.txt" 2>&1
timeout 150 bash bench/tier-timing.sh standard "$bin" "$out/standard" 3 > "$out/standard.txt" 2>&1
tail -n 4 "$out/standard.txt"
echo "== compile.ambient, empty private cache"
rm -rf /tmp/gp-ind-amb /tmp/gp-amb /tmp/gp-amb-fix
TORCHINDUCTOR_CACHE_DIR=/tmp/gp-ind-amb timeout 150 "$bin" check --tier full --device cuda:0 --only compile.ambient \
  --run-dir /tmp/gp-amb --quiet; echo "rc=$?"
summary /tmp/gp-amb
"$python" - /tmp/gp-amb/report.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print(json.dumps(r["observation"]["measurement"]["failures"])[:1500]); print(r["observation"]["metrics"]); print(r["observation"].get("notes"))
PY
TORCHINDUCTOR_CACHE_DIR=/tmp/gp-ind-amb timeout 200 "$bin" fix --from /tmp/gp-amb --run-dir /tmp/gp-amb-fix > "$out/ambient-fix.txt" 2>&1
echo "fix rc=$?"; tail -n 30 "$out/ambient-fix.txt" | cut -c1-300
echo "== upstream repro"
timeout 90 "$python" bench/training/upstream_repros.py --device cuda --only autocast_dtype_compile_cache_reuse
echo "== train.convnet bf16 then fp16 compiled, empty private cache"
rm -rf /tmp/gp-ind-cv /tmp/gp-cv /tmp/gp-cv-off
TORCHINDUCTOR_CACHE_DIR=/tmp/gp-ind-cv timeout 120 "$bin" check --tier full --device cuda:0 \
  --only train.convnet.bf16.compile --only train.convnet.fp16.compile --run-dir /tmp/gp-cv --quiet; echo "rc=$?"
summary /tmp/gp-cv
TORCHINDUCTOR_CACHE_DIR=/tmp/gp-ind-cv TORCHINDUCTOR_AUTOGRAD_CACHE=0 timeout 60 "$bin" check --tier full --device cuda:0 \
  --only train.convnet.fp16.compile --run-dir /tmp/gp-cv-off --quiet; echo "AOTAutograd cache off: rc=$?"
summary /tmp/gp-cv-off
echo "== candidates"
for name in softshrink_nan; do
  timeout 60 "$python" bench/compile/candidates.py --only "$name" 2>&1 | tail -n 3
done
