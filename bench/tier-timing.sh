#!/usr/bin/env bash
# A tier's wall time against the floor of any PyTorch GPU job, measured in the same run, and
# the time per probe family.
#
# The floor is `python3 -c "import torch; torch.zeros(1, device='cuda')"`: importing torch and
# creating a CUDA/HIP context, which every GPU job pays. Runs are interleaved (floor, check,
# floor, check, ...) so both see the same machine state. Each check's JSON report is kept;
# the script prints a table and the medians, and counts false alarms (any verdict other than
# PASS or SKIP on a healthy machine).
#
# Where the interpreter cannot cache torch's bytecode in place, gpuprobe's workers cache it
# in gpuprobe's own directory (docs/probes.md, "Bytecode") and no longer pay the compile the
# floor pays. Once that cache exists, each run also times the floor reading the same cache
# (`floor_c`, `ratio_c`): the like-for-like comparison.
#
# usage: bench/tier-timing.sh [TIER] [GPUPROBE_BINARY] [OUT_DIR] [RUNS]
set -euo pipefail
tier="${1:-quick}"
bin="${2:-gpuprobe}"
out="${3:-bench-$tier-out}"
runs="${4:-5}"
python="${PYTHON:-python3}"
mkdir -p "$out"
now() { date +%s.%N; }
elapsed() { "$python" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$2"; }
ratio() { "$python" -c "import sys; print(f'{float(sys.argv[2]) / float(sys.argv[1]):.2f}')" "$1" "$2"; }
# Warm the file cache once (not timed): the first import of torch after boot reads ~GBs.
"$python" -c "import torch; torch.zeros(1, device='cuda')"
bytecode="${XDG_CACHE_HOME:-$HOME/.cache}/gpuprobe/bytecode/$("$python" -c 'import sys; print(sys.implementation.cache_tag)')"
printf '%-4s %-10s %-10s %-10s %-10s %-10s %s\n' run floor_s check_s ratio floor_c ratio_c problems | tee "$out/summary.txt"
floors=(); checks=(); cached_floors=()
for i in $(seq 1 "$runs"); do
    s=$(now); "$python" -c "import torch; torch.zeros(1, device='cuda')"; e=$(now)
    floor=$(elapsed "$s" "$e")
    floor_c=-; ratio_c=-
    if [ -d "$bytecode" ]; then
        s=$(now); PYTHONPYCACHEPREFIX="$bytecode" "$python" -c "import torch; torch.zeros(1, device='cuda')"; e=$(now)
        floor_c=$(elapsed "$s" "$e"); cached_floors+=("$floor_c")
    fi
    rm -rf "$out/run-$i"
    s=$(now); "$bin" check --tier "$tier" --json --run-dir "$out/run-$i" > "$out/$tier-$i.json" || true; e=$(now)
    check=$(elapsed "$s" "$e")
    problems=$("$python" - "$out/$tier-$i.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
bad = [r for r in report["results"] if r["verdict"]["verdict"] not in ("pass", "skip")]
print(f'{len(bad)}/{len(report["results"])} exit={report["exit_code"]}' + "".join(f' {r["probe"]}:{r["verdict"]["verdict"]}' for r in bad))
PY
)
    ratio=$(ratio "$floor" "$check")
    if [ "$floor_c" != - ]; then
        ratio_c=$(ratio "$floor_c" "$check")
    fi
    printf '%-4s %-10s %-10s %-10s %-10s %-10s %s\n' "$i" "$floor" "$check" "$ratio" "$floor_c" "$ratio_c" "$problems" | tee -a "$out/summary.txt"
    floors+=("$floor"); checks+=("$check")
done
"$python" - "${floors[*]}" "${checks[*]}" "$tier" "${cached_floors[*]:-}" <<'PY' | tee -a "$out/summary.txt"
import statistics, sys
floors = [float(x) for x in sys.argv[1].split()]
checks = [float(x) for x in sys.argv[2].split()]
cached = [float(x) for x in sys.argv[4].split()]
f, c = statistics.median(floors), statistics.median(checks)
print(f"median floor {f:.2f} s, median {sys.argv[3]} tier {c:.2f} s, ratio {c / f:.2f}")
if cached:
    fc = statistics.median(cached)
    print(f"median floor with gpuprobe's bytecode cache {fc:.2f} s ({len(cached)} runs), ratio {c / fc:.2f}")
PY
# Seconds of probe time per family and lane (the lanes run side by side), from the last run.
"$python" - "$out/$tier-$runs.json" <<'PY' | tee -a "$out/summary.txt"
import collections, json, sys
report = json.load(open(sys.argv[1]))
families = collections.defaultdict(float)
counts = collections.Counter()
for r in report["results"]:
    family = r["probe"].split(".")[0]
    families[family] += r.get("elapsed_s") or 0.0
    counts[family] += 1
print("probe seconds per family (last run):")
for family, seconds in sorted(families.items(), key=lambda kv: -kv[1]):
    print(f"  {family:10} {counts[family]:4} probes {seconds:7.2f} s")
PY
