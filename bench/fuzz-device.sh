#!/usr/bin/env bash
# One round of fuzzing every target at once on a many-core host without cargo, from the
# stripped build-all bundle (scripts/fuzz.sh build-all, binaries stripped, tar.xz). The corpus
# of an earlier round, when given, is restored first, so rounds add up.
#
#   bash bench/fuzz-device.sh BUNDLE.tar.xz OUT SECONDS [CORPUS.tar.xz]
#
# Jobs per target (16 cores): triage 4 (the slowest per input), the others 3 each. Writes
# OUT/TARGET.txt (the script's totals), OUT/corpus.tar.xz (every corpus, for the next round)
# and OUT/artifacts/ (crashes, timeouts, OOMs, if any).
set -u
BUNDLE=$1
OUT=$2
SECONDS_EACH=$3
CORPUS=${4:-}
work=$(mktemp -d)
tar xJf "$BUNDLE" -C "$work"
cd "$work/gpuprobe-fuzz" || exit 1
if [ -n "$CORPUS" ] && [ -f "$CORPUS" ]; then tar xJf "$CORPUS"; fi
mkdir -p "$OUT"
nproc >"$OUT/host.txt"
for spec in triage:4 protocol:3 kb_entry:3 profile:3 simulate_spec:3; do
    target=${spec%%:*}
    jobs=${spec##*:}
    ./fuzz.sh "$target" "$SECONDS_EACH" "$jobs" >"$OUT/$target.txt" 2>&1 &
done
wait
tail -n 12 "$OUT"/*.txt
tar cJf "$OUT/corpus.tar.xz" corpus
if find artifacts -type f ! -name '*.log' | grep -q .; then
    mkdir -p "$OUT/artifacts"
    find artifacts -type f ! -name '*.log' -exec cp --parents {} "$OUT/artifacts/" \;
fi
grep -h "stat::number_of_executed_units\|Done [0-9]* runs\|cov:" artifacts/*/run-*.log 2>/dev/null | tail -n 20
