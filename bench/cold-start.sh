#!/usr/bin/env bash
# A standard-tier check on a cold machine: where its time goes while the GPU libraries are
# still on disk.
#
# Runs `BIN check --tier standard --json` with `vmstat 1` beside it (blocks read, I/O wait and
# CPU use, second by second) and prints, from the report: the wall time, the lane timeline,
# the slowest probes and each family's probe seconds; from vmstat: the megabytes read and the
# time spent waiting for the disk. `fincore` (util-linux) says which GPU libraries were in
# the page cache before the run and after it.
#
# A freshly started machine is the real cold start (the issue's figure). `--drop` (root only)
# imitates one on a warm machine: it empties the page cache (`vm.drop_caches=3`) and
# gpuprobe's bytecode cache first. The two are not the same when the machine's disk is
# itself cold (blocks fetched from remote storage on first read): compare before trusting it.
#
# usage: bench/cold-start.sh BIN OUT LABEL [--drop] [-- EXTRA CHECK ARGS...]
set -uo pipefail
bin="$1"; out="$2"; label="$3"; shift 3
drop=0
if [ "${1:-}" = --drop ]; then drop=1; shift; fi
[ "${1:-}" = -- ] && shift
python="${PYTHON:-python3}"
mkdir -p "$out"
site=$("$python" -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null)
libraries() {
    find "$site/torch/lib" "$site/nvidia" "$site/triton" /opt/rocm/lib -maxdepth 3 -name '*.so*' -type f 2>/dev/null
}
cached() {
    if command -v fincore > /dev/null; then
        libraries | xargs -r fincore --bytes --noheadings 2>/dev/null \
            | awk '{res += $1; size += $NF} END {printf "%.0f MB of %.0f MB of GPU libraries in the page cache\n", res / 1e6, size / 1e6}'
    else
        echo "fincore not installed: page-cache residency not measured"
    fi
}
if [ "$drop" = 1 ]; then
    rm -rf "${XDG_CACHE_HOME:-$HOME/.cache}/gpuprobe/bytecode"
    sync
    if ! echo 3 > /proc/sys/vm/drop_caches; then
        echo "cannot drop the page cache (needs root): not a cold start" >&2
        exit 2
    fi
fi
echo "== $label: before: $(cached)" | tee "$out/$label.txt"
vmstat -n 1 > "$out/$label-vmstat.txt" &
vmstat_pid=$!
start=$(date +%s.%N)
"$bin" check --tier standard --json --run-dir "$out/$label-run" "$@" > "$out/$label.json"
rc=$?
end=$(date +%s.%N)
kill "$vmstat_pid" 2> /dev/null
wait "$vmstat_pid" 2> /dev/null
echo "== $label: after: $(cached)" | tee -a "$out/$label.txt"
"$python" - "$out/$label.json" "$out/$label-vmstat.txt" "$start" "$end" "$rc" <<'PY' | tee -a "$out/$label.txt"
import collections, json, sys

report_path, vmstat_path, start, end, rc = sys.argv[1:6]
print(f"wall {float(end) - float(start):.1f} s, exit {rc}")
try:
    report = json.load(open(report_path))
except (OSError, ValueError) as exc:
    print(f"no report: {exc}")
    sys.exit(0)
bad = [r for r in report["results"] if r["verdict"]["verdict"] not in ("pass", "skip")]
print(f"{len(report['results'])} results, {len(bad)} problems: " + " ".join(r["probe"] for r in bad))
timings = report.get("timings") or {}
print(f"prepare {timings.get('prepare_s', 0):.1f} s, probes {timings.get('probes_s', 0):.1f} s")
print(f"{'placement':<10} {'probes':>6} {'hello':>6} {'begin':>6} {'last':>6} {'done':>6}  first probe")
for lane in timings.get("lanes", []):
    cell = lambda key: f"{lane[key]:6.1f}" if lane.get(key) is not None else "     -"
    print(f"{lane['placement']:<10} {lane['probes']:>6} {cell('first_hello_s')} {cell('first_begin_s')} {cell('last_result_s')} {cell('done_s')}  {lane['first_probe']}")
elapsed = [(r.get("elapsed_s") or 0.0, r["probe"]) for r in report["results"]]
print("slowest probes:", ", ".join(f"{p} {s:.1f}" for s, p in sorted(elapsed, reverse=True)[:15]))
families = collections.Counter()
for seconds, probe in elapsed:
    families[".".join(probe.split(".")[:2])] += seconds
print("probe seconds by family:", ", ".join(f"{f} {s:.1f}" for f, s in families.most_common(15)))
rows = []
for line in open(vmstat_path):
    fields = line.split()
    if fields and fields[0].isdigit():
        rows.append([int(x) for x in fields])
if rows:
    # vmstat columns: r b swpd free buff cache si so bi bo in cs us sy id wa st
    read_mb = sum(r[8] for r in rows) / 1024
    busy = sum(r[12] + r[13] for r in rows) / len(rows)
    wait = sum(r[15] for r in rows) / len(rows)
    blocked = sum(1 for r in rows if r[1] > 0)
    print(f"vmstat over {len(rows)} s: {read_mb:.0f} MB read, CPU busy {busy:.0f}%, I/O wait {wait:.0f}%, {blocked} s with a process blocked on I/O")
PY
