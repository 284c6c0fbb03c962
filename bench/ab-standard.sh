#!/usr/bin/env bash
# Two builds' standard tier, interleaved on one machine: floor, A, B, floor, A, B, ...
# Lent machines differ by more than most changes (the floor moved 3.8-6.9 s between them),
# so a change is judged against the build before it in the same session, pair by pair.
# Each line lists the run's problems and skips, so a speed-up that silently skipped probes
# shows at once. Reports are kept under OUT.
#
# usage: bench/ab-standard.sh BIN_A BIN_B OUT [PAIRS]
#   CHECK_ARGS: what each check runs instead of the standard tier (e.g.
#   CHECK_ARGS="--tier standard --only sweep.*"); split on spaces, globs kept as text.
set -uo pipefail
a_bin="$1"; b_bin="$2"; out="$3"; pairs="${4:-5}"
set -f
read -ra check_args <<< "${CHECK_ARGS:---tier standard}"
set +f
python="${PYTHON:-python3}"
mkdir -p "$out"
now() { date +%s.%N; }
secs() { "$python" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$2"; }
verdicts() {
  "$python" - "$1" <<'PY'
import json, sys
try:
    results = json.load(open(sys.argv[1]))["results"]
except (OSError, ValueError, KeyError) as exc:
    print(f"no report ({exc})"); sys.exit()
bad = sorted(r["probe"] for r in results if r["verdict"]["verdict"] not in ("pass", "skip"))
skips = sum(1 for r in results if r["verdict"]["verdict"] == "skip")
print(f"{len(results)} results, {skips} skip, problems: {' '.join(bad) or 'none'}")
PY
}
"$python" -c "import torch; torch.zeros(1, device='cuda')"  # warm the file cache, untimed
# One untimed check of each build first: on a fresh machine the first check pays the
# kernel and bytecode caches (a first run, measured by bench/cold-start.sh instead).
for bin in "$a_bin" "$b_bin"; do "$bin" check "${check_args[@]}" --quiet > /dev/null 2>&1; done
for i in $(seq 1 "$pairs"); do
  t0=$(now); "$python" -c "import torch; torch.zeros(1, device='cuda')"; t1=$(now)
  line="pair $i floor $(secs "$t0" "$t1")"
  for side in A B; do
    bin="$a_bin"; [ "$side" = B ] && bin="$b_bin"
    t0=$(now); "$bin" check "${check_args[@]}" --json --timings --run-dir "$out/$side-$i" > "$out/$side-$i.json" 2>/dev/null; rc=$?; t1=$(now)
    line="$line | $side $(secs "$t0" "$t1") s exit=$rc ($(verdicts "$out/$side-$i.json"))"
  done
  echo "$line" | tee -a "$out/ab.txt"
done
"$python" - "$out/ab.txt" <<'PY' | tee -a "$out/ab.txt"
import re, statistics, sys
a, b = [], []
for line in open(sys.argv[1]):
    m = re.search(r"\| A ([0-9.]+) s .*\| B ([0-9.]+) s", line)
    if m:
        a.append(float(m.group(1))); b.append(float(m.group(2)))
if a:
    d = [y - x for x, y in zip(a, b)]
    print(f"median A {statistics.median(a):.2f} s, median B {statistics.median(b):.2f} s, "
          f"median B-A {statistics.median(d):+.2f} s, B faster in {sum(x < 0 for x in d)} of {len(d)} pairs")
PY
