#!/usr/bin/env bash
# The three start-up budgets of a check, measured the way they are stated, in one go:
# 1. the first standard-tier run on this machine (`bench/cold-start.sh`; only a true first
#    run when this is the first gpuprobe command since the machine started: say so in the
#    results, the script cannot tell a fresh machine from a warm one);
# 2. the standard tier warm, RUNS_STANDARD runs, floors interleaved (`bench/tier-timing.sh`);
# 3. the quick tier, RUNS_QUICK runs, floors interleaved.
# Prints each figure against its budget (first run <= 30 s; standard <= 3x the floor; quick
# <= 1.3x the floor) and leaves every report under OUT.
#
# usage: bench/budgets.sh BIN OUT [RUNS_STANDARD] [RUNS_QUICK]
set -uo pipefail
bin="$1"; out="$2"; runs_standard="${3:-3}"; runs_quick="${4:-5}"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$out"
bash "$here/cold-start.sh" "$bin" "$out/first" first
bash "$here/tier-timing.sh" standard "$bin" "$out/standard" "$runs_standard"
bash "$here/tier-timing.sh" quick "$bin" "$out/quick" "$runs_quick"
python3 - "$out" <<'PY' | tee "$out/budgets.txt"
import re, sys
out = sys.argv[1]
first = open(f"{out}/first/first.txt").read()
wall = float(re.search(r"^wall ([0-9.]+) s", first, re.M).group(1))
print(f"first standard run  {wall:6.2f} s          budget 30 s    {'met' if wall <= 30 else 'NOT met'}")
for tier, budget in (("standard", 3.0), ("quick", 1.3)):
    text = open(f"{out}/{tier}/summary.txt").read()
    m = re.search(r"median floor ([0-9.]+) s, median \w+ tier ([0-9.]+) s, ratio ([0-9.]+)", text)
    floor, check, ratio = (float(x) for x in m.groups())
    print(f"{tier:8} median      {check:6.2f} s ({ratio:.2f}x a {floor:.2f} s floor)   budget {budget}x   {'met' if ratio <= budget else 'NOT met'}")
    c = re.search(r"median floor with gpuprobe's bytecode cache ([0-9.]+) s .* ratio ([0-9.]+)", text)
    if c:
        print(f"{'':8}   like-for-like: the floor reading gpuprobe's bytecode cache {c.group(1)} s, ratio {c.group(2)}")
PY
