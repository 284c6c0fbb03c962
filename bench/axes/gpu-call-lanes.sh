#!/usr/bin/env bash
# One GPU call for the standard tier's lanes, then a machine's first full tier:
# 1. the machine's first standard tier with --timings (the first-run budget, <= 30 s);
# 2. two builds' standard tier interleaved with the floor (bench/ab-standard.sh, 3 pairs);
# 3. the whole full tier with build A on this machine's caches as they are then, until the
#    call's time runs out (bench/sweep/full-tier-run.sh; its run directory stays on the
#    machine for a `--resume` in the next call).
#
# usage: bench/axes/gpu-call-lanes.sh BIN_A BIN_B OUT_DIR FULL_LIMIT_S
set -uo pipefail
a="$(realpath "$1")"; b="$(realpath "$2")"; out="$(realpath -m "$3")"; limit="${4:-400}"
python="${PYTHON:-python3}"
mkdir -p "$out"
echo "== first standard tier"
start=$(date +%s.%N)
timeout 90 "$a" check --tier standard --device cuda:0 --timings --run-dir /tmp/gp-std-first > "$out/standard-first.txt" 2>&1
echo "rc=$? wall $("$python" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)") s"
tail -n 22 "$out/standard-first.txt"
echo "== standard A/B"
timeout 240 bash bench/ab-standard.sh "$a" "$b" "$out/ab" 3 > "$out/ab.txt" 2>&1
cat "$out/ab.txt"
for side in A B; do
  "$python" - "$out/ab/$side-3.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["timings"]
for l in sorted(t["lanes"], key=lambda l: -l["last_result_s"] if l["last_result_s"] else 0)[:8]:
    print(f'  {l["backend"]:6} {l["placement"]:9} {l["probes"]:4} hello {l["first_hello_s"] or 0:5.1f} begin {l["first_begin_s"] or 0:5.1f} last {l["last_result_s"] or 0:5.1f}  {l["first_probe"]}')
PY
done
rm -rf "$out/ab"/A-[0-9] "$out/ab"/B-[0-9]
echo "== full tier (A)"
bash bench/sweep/full-tier-run.sh "$a" "$out" full1 "$limit" > /dev/null 2>&1
grep -E "check rc|verdicts|FAIL|ERROR" "$out/full1.txt" | cut -c1-300 | head -60
