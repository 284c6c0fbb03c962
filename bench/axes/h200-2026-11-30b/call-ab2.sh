#!/usr/bin/env bash
# Call 2 of 2026-11-30b: the standard tier, warm, the head before this change (A) against
# this change (B: refreshed typical seconds, a family split at a piece's share, nn shared),
# interleaved with the floor (bench/ab-standard.sh), then B's full-tier nn and ops probes
# under a budget, to see that sharing a worker with the other shared probes judges them
# as before.
set -uo pipefail
a="$1"; b="$2"; out="$3"; pairs="${4:-4}"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/gpu.txt"
bash "$root/bench/ab-standard.sh" "$a" "$b" "$out/ab" "$pairs"
"$b" check --tier full --only 'nn.*' --only 'ops.*' --budget 150 --json --timings --run-dir "$out/full-nn-ops" > "$out/full-nn-ops.json" 2> "$out/full-nn-ops.err"
echo "full nn+ops exit=$?"
python3 - "$out/full-nn-ops.json" <<'PY'
import collections, json, sys
r = json.load(open(sys.argv[1]))
c = collections.Counter(x["verdict"]["verdict"] for x in r["results"])
print("full nn+ops:", dict(c), "wall", round(r["wall_s"], 1))
for x in r["results"]:
    if x["verdict"]["verdict"] not in ("pass", "skip", "not_tested"):
        print("  ", x["probe"], x["verdict"]["verdict"])
PY
