#!/usr/bin/env bash
# Quick tier wall time against the floor of any PyTorch GPU job, measured in the same run.
#
# The floor is `python3 -c "import torch; torch.zeros(1, device='cuda')"`: importing torch and
# creating a CUDA/HIP context, which every GPU job pays. Runs are interleaved (floor, check,
# floor, check, ...) so both see the same machine state. Each check's JSON report is kept;
# the script prints a table and the medians, and counts false alarms (any verdict other than
# PASS or SKIP on a healthy machine).
#
# usage: bench/quick-tier.sh [GPUPROBE_BINARY] [OUT_DIR] [RUNS]
set -euo pipefail
bin="${1:-gpuprobe}"
out="${2:-bench-quick-out}"
runs="${3:-5}"
python="${PYTHON:-python3}"
mkdir -p "$out"
now() { date +%s.%N; }
elapsed() { "$python" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$2"; }
# Warm the file cache once (not timed): the first import of torch after boot reads ~GBs.
"$python" -c "import torch; torch.zeros(1, device='cuda')"
printf '%-4s %-10s %-10s %-10s %s\n' run floor_s check_s ratio problems | tee "$out/summary.txt"
floors=(); checks=()
for i in $(seq 1 "$runs"); do
    s=$(now); "$python" -c "import torch; torch.zeros(1, device='cuda')"; e=$(now)
    floor=$(elapsed "$s" "$e")
    rm -rf "$out/run-$i"
    s=$(now); "$bin" check --json --run-dir "$out/run-$i" > "$out/quick-$i.json" || true; e=$(now)
    check=$(elapsed "$s" "$e")
    problems=$("$python" - "$out/quick-$i.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
bad = [r for r in report["results"] if r["verdict"]["verdict"] not in ("pass", "skip")]
print(f'{len(bad)}/{len(report["results"])} exit={report["exit_code"]}' + "".join(f' {r["probe"]}:{r["verdict"]["verdict"]}' for r in bad))
PY
)
    ratio=$("$python" -c "import sys; print(f'{float(sys.argv[2]) / float(sys.argv[1]):.2f}')" "$floor" "$check")
    printf '%-4s %-10s %-10s %-10s %s\n' "$i" "$floor" "$check" "$ratio" "$problems" | tee -a "$out/summary.txt"
    floors+=("$floor"); checks+=("$check")
done
"$python" - "${floors[*]}" "${checks[*]}" <<'PY' | tee -a "$out/summary.txt"
import statistics, sys
floors = [float(x) for x in sys.argv[1].split()]
checks = [float(x) for x in sys.argv[2].split()]
f, c = statistics.median(floors), statistics.median(checks)
print(f"median floor {f:.2f} s, median quick tier {c:.2f} s, ratio {c / f:.2f} (target <= 2)")
PY
