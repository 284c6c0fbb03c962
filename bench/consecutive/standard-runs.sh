#!/usr/bin/env bash
# N consecutive standard-tier checks on one GPU host, for the false-alarm count in
# bench/RESULTS.md: every non-PASS result of every run is listed with its verdict and detail,
# so that each one can be judged (a real upstream bug that reproduces, or a false alarm).
#
#   bash bench/consecutive/standard-runs.sh BIN OUT [N=20] [TOTAL_S=560]
#
# BIN: a gpuprobe release binary; OUT: where the reports and the summary go. The runs stop
# early (and say so) when TOTAL_S would be exceeded, so a device call's limit never cuts a run
# in half. Writes OUT/summary.txt, and OUT/raw.tar.xz with each run's stderr and the full
# reports of the first and the last run.
set -u
BIN=$1
OUT=$2
N=${3:-20}
TOTAL=${4:-560}
PY=${PY:-$(command -v python3)}
mkdir -p "$OUT"
chmod +x "$BIN" 2>/dev/null
summary="$OUT/summary.txt"
: >"$summary"
last=0
for k in $(seq 1 "$N"); do
    left=$((TOTAL - SECONDS))
    # A run takes about as long as the last one; stop rather than be cut off mid-run.
    if [ "$left" -lt $((last + 15)) ]; then
        echo "stopped after $((k - 1)) runs: ${left}s left of ${TOTAL}s" | tee -a "$summary"
        break
    fi
    start=$SECONDS
    timeout -k 5 "$left" "$BIN" check --tier standard --json --run-dir "$OUT/run$k.dir" \
        >"$OUT/run$k.json" 2>"$OUT/run$k.err"
    rc=$?
    last=$((SECONDS - start))
    "$PY" - "$OUT/run$k.json" "$k" "$rc" "$last" >>"$summary" <<'PYEOF'
import json, sys
path, k, rc, wall = sys.argv[1:5]
try:
    report = json.load(open(path))
except Exception as e:  # a run that printed no report is itself a finding
    print(f"run {k}: rc={rc} wall={wall}s NO REPORT ({e})")
    sys.exit()
counts = {}
problems = []
for r in report["results"]:
    label = str(r["verdict"].get("verdict", "?")).upper()
    counts[label] = counts.get(label, 0) + 1
    if label not in ("PASS", "SKIP"):
        problems.append(f"    {label:<10} {r['probe']} [{r['device']}] {json.dumps(r['verdict'])[:240]}")
print(f"run {k}: rc={rc} wall={report.get('wall_s', 0):.1f}s results={len(report['results'])} "
      + " ".join(f"{c}={n}" for c, n in sorted(counts.items())))
if problems:
    print("\n".join(problems))
PYEOF
    rm -rf "$OUT/run$k.dir"
    # The summary lists every non-PASS result of every run; the full reports of the first
    # and the last run are kept (compressed) for the timeline and the fingerprint.
    if [ "$k" -gt 2 ]; then rm -f "$OUT/run$((k - 1)).json"; fi
done
xz -9 "$OUT"/run*.json 2>/dev/null
# One archive for the raw files: a device call brings back only a few files.
(cd "$OUT" && tar cJf raw.tar.xz run*.err run*.json.xz 2>/dev/null && rm -f run*.err run*.json.xz)
cat "$summary"
