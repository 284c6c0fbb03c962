#!/usr/bin/env bash
# Call 5 of 2026-11-30c, one H200: `alloc.largest.single` after its kernels are loaded
# before the device is filled (call 4 saw it raise out of memory in a fresh worker of its
# own). The full tier's alloc family and the native filling probes twice, then the probe
# alone in a fresh worker three times (before the fix it was the first probe of its worker
# in both cases). Everything under OUT is packed into OUT.tar.xz.
# usage: call-largest.sh NEW OUT
set -uo pipefail
new="$1"; out="$2"
mkdir -p "$out"
summary() {
  python3 - "$1" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    print("no report:", exc); sys.exit()
bad = [(x["probe"], x["verdict"]["verdict"]) for x in r["results"] if x["verdict"]["verdict"] != "pass"]
print(len(r["results"]), "results; not pass:", bad or "none")
PY
}
for round in 1 2; do
  "$new" check --tier full --only 'alloc.*' --only 'native.alloc.*' --json > "$out/full-alloc-$round.json" 2>/dev/null
  echo "full alloc round $round: $(summary "$out/full-alloc-$round.json")" | tee -a "$out/summary.txt"
done
for round in 1 2 3; do
  "$new" check --tier full --only 'alloc.largest.single' --json > "$out/largest-$round.json" 2>/dev/null
  echo "largest alone round $round: $(summary "$out/largest-$round.json")" | tee -a "$out/summary.txt"
done
tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
