#!/usr/bin/env bash
# Call 2 of 2026-11-30c, on a two-GPU host: the first lanes where a second GPU's lanes are
# admitted after GPU 0's hello (`--device all`), base against new, with lane timelines and
# every verdict; then bench/ab-standard.sh on GPU 0 alone (CUDA_VISIBLE_DEVICES=0), PAIRS
# pairs, floors interleaved. Everything under OUT is packed into OUT.tar.xz.
# usage: call-two.sh BASE NEW OUT [PAIRS]
set -uo pipefail
base="$1"; new="$2"; out="$3"; pairs="${4:-3}"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv > "$out/gpu.txt" 2>&1
"$new" check --tier standard --device all --json > /dev/null 2>&1   # warm-up
for build in base new; do
  bin="$base"; [ "$build" = new ] && bin="$new"
  python3 "$root/bench/lane-timeline.py" "$bin" "$out/two-$build" --tier standard --device all > "$out/two-$build.txt" 2>&1
done
python3 - "$out" <<'PY' > "$out/two-verdicts.txt"
import json, sys
out = sys.argv[1]
def verdicts(build):
    rs = [json.loads(l) for l in open(f"{out}/two-{build}/results.jsonl")]
    return {(r["probe"], r["device"]): r["verdict"]["verdict"] for r in rs}
b, n = verdicts("base"), verdicts("new")
print(f"base {len(b)} results, new {len(n)} results")
for key in sorted(set(b) | set(n)):
    if b.get(key) != n.get(key):
        print("differs:", key, b.get(key), n.get(key))
for build, v in (("base", b), ("new", n)):
    bad = sorted(f"{p}@{d}" for (p, d), x in v.items() if x not in ("pass", "skip"))
    print(build, "problems:", " ".join(bad))
PY
CUDA_VISIBLE_DEVICES=0 bash "$root/bench/ab-standard.sh" "$base" "$new" "$out/ab" "$pairs"
tar -C "$(dirname "$out")" -cJf "$out.tar.xz" --exclude='python' "$(basename "$out")"
