#!/usr/bin/env bash
# Call 4 of 2026-11-30c, one H200: the committed build against base, bench/ab-standard.sh
# with floors interleaved (PAIRS pairs, after one untimed run of each), then the full tier's
# whole alloc family and the native filling probes with the committed build (the four torch
# filling probes now full-tier, isolated, exclusive). Everything under OUT is packed into
# OUT.tar.xz.
# usage: call-final.sh BASE NEW OUT [PAIRS]
set -uo pipefail
base="$1"; new="$2"; out="$3"; pairs="${4:-3}"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv > "$out/gpu.txt" 2>&1
nproc > "$out/cores.txt"
"$base" check --tier standard --json > /dev/null 2>&1
"$new" check --tier standard --json > /dev/null 2>&1
bash "$root/bench/ab-standard.sh" "$base" "$new" "$out/ab" "$pairs"
"$new" check --tier full --only 'alloc.*' --only 'native.alloc.*' --json > "$out/full-alloc.json" 2> "$out/full-alloc.err"
echo "exit=$?" >> "$out/full-alloc.err"
python3 - "$out/full-alloc.json" > "$out/full-alloc.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for x in r["results"]:
    print(x["probe"], x["verdict"]["verdict"], x.get("elapsed_s"))
print("wall", r.get("wall_s"))
PY
tar -C "$(dirname "$out")" -cJf "$out.tar.xz" --exclude='python' "$(basename "$out")"
