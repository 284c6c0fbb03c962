#!/usr/bin/env bash
# The flake check: the whole Rust suite under nextest at 8 threads, N times in a row
# (default 10), each run's summary line in OUT (default nextest-x10.txt). A run that fails
# is kept with its failures; the loop goes on so the count is complete.
set -u
cd "$(dirname "$0")/.."
N=${1:-10}
OUT=${2:-nextest-x10.txt}
export GPUPROBE_TEST_PYTHON=${GPUPROBE_TEST_PYTHON:-$PWD/.venv/bin/python}
cargo nextest run --workspace --no-run > /dev/null 2>&1
: > "$OUT"
for i in $(seq 1 "$N"); do
    start=$SECONDS
    log=$(cargo nextest run --workspace --test-threads 8 --no-fail-fast 2>&1)
    rc=$?
    echo "run $i: rc=$rc $((SECONDS - start)) s $(grep -E '^ +Summary' <<< "$log" | tail -1 | sed 's/^ *//')" >> "$OUT"
    grep -E '^ +(FAIL|SIGSEGV|SIGABRT|TIMEOUT)' <<< "$log" | sort -u | sed 's/^/    /' >> "$OUT"
done
cat "$OUT"
