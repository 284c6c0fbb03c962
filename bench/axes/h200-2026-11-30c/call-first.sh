#!/usr/bin/env bash
# Call 1 of 2026-11-30c: the device-filling probes moved first (native.alloc.*, placement
# `first`; the framework's four filling probes to the full tier) against the build before.
#  1. one untimed standard tier of each build (warm-up), the new one with its lane timeline;
#  2. bench/ab-standard.sh BASE NEW, floors interleaved, PAIRS pairs;
#  3. the moved probes themselves, new build: the full tier's four torch filling probes and
#     the two native ones, each alone (the verdicts the moved probes give on this host).
# usage: call-first.sh BASE NEW OUT [PAIRS]
set -uo pipefail
base="$1"; new="$2"; out="$3"; pairs="${4:-4}"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv > "$out/gpu.txt" 2>&1
"$base" check --tier standard --json > "$out/warm-base.json" 2> "$out/warm-base.err"
python3 "$root/bench/lane-timeline.py" "$new" "$out/timeline-new" --tier standard > "$out/timeline-new.txt" 2>&1
python3 "$root/bench/lane-timeline.py" "$base" "$out/timeline-base" --tier standard > "$out/timeline-base.txt" 2>&1
bash "$root/bench/ab-standard.sh" "$base" "$new" "$out/ab" "$pairs"
"$new" check --tier full --only 'alloc.usable.*' --only 'alloc.largest.*' --only 'alloc.fragmentation.cycles' --only 'alloc.oom.recovery.filled' --only 'native.alloc.*' --json > "$out/moved.json" 2> "$out/moved.err"
echo "moved probes exit=$?" >> "$out/moved.err"
