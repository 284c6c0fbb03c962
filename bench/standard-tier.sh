#!/usr/bin/env bash
# Timings and real-fault checks of the alloc, pipeline, dist, soak and fault families on a GPU
# host (raw outputs for bench/families/; the summary numbers go to bench/RESULTS.md).
#
#   bash bench/standard-tier.sh single   # one GPU: the standard tier of every family (timed),
#                                        # the gated fault tests, the soak probe, pytest -m gpu
#   bash bench/standard-tier.sh multi    # two or more GPUs: the gated fault tests, pytest -m gpu
#                                        # and the soak probe side by side on GPUs 0 and 1, then
#                                        # the standard tier of alloc/pipeline/dist on all GPUs
#
# Expects, because .dev/ is not tracked:
#   .dev/fam/gpuprobe   release build  (cargo build --release -p gpuprobe)
#   .dev/fam/it-gpu     gated tests    (cargo test -p gpuprobe --features gpu-tests --release --no-run;
#                                       the `it` binary cargo prints)
#   .dev/fam/pylib      pytest and its pure-Python dependencies, used when python3 lacks pytest
# Writes to $OUT (default ./families-out). Each step has its own time limit, and all of them
# together stay within TOTAL seconds (default 900; TOTAL=230 under a 240 s limit on the whole
# command), so a stuck step cannot take the others with it and the outputs survive.
# Measured 2026-11-22: bench/families/h100-run1.txt, bench/families/h200x2-run2.txt.
set -u
MODE=${1:-single}
BIN=${BIN:-$PWD/.dev/fam/gpuprobe}
TESTS=${TESTS:-$PWD/.dev/fam/it-gpu}
OUT=${OUT:-$PWD/families-out}
PY=${PY:-$(command -v python3)}
TOTAL=${TOTAL:-900}
mkdir -p "$OUT"
chmod +x "$BIN" "$TESTS" 2>/dev/null
if ! "$PY" -c "import pytest" 2>/dev/null; then
    export PYTHONPATH="$PWD/.dev/fam/pylib${PYTHONPATH:+:$PYTHONPATH}"
fi

# step NAME LIMIT_S COMMAND...: output to $OUT/NAME.txt; json_step: stdout to $OUT/NAME.json and
# stderr to $OUT/NAME.txt. Both append the wall time to $OUT/times.txt.
run_step() {
    local name=$1 limit=$2 json=$3
    shift 3
    local start end rc left
    left=$((TOTAL - SECONDS))
    if [ "$left" -lt "$limit" ]; then limit=$left; fi
    if [ "$limit" -le 5 ]; then
        echo "$name: skipped, no time left" | tee -a "$OUT/times.txt"
        return
    fi
    start=$(date +%s%N)
    if [ "$json" = yes ]; then
        timeout -k 5 "$limit" "$@" >"$OUT/$name.json" 2>"$OUT/$name.txt"
    else
        timeout -k 5 "$limit" "$@" >"$OUT/$name.txt" 2>&1
    fi
    rc=$?
    end=$(date +%s%N)
    printf '%-20s rc=%-3s %8.2f s  %s\n' "$name" "$rc" "$(((end - start) / 1000000))e-3" "$*" | tee -a "$OUT/times.txt"
}
step() { run_step "$1" "$2" no "${@:3}"; }
json_step() { run_step "$1" "$2" yes "${@:3}"; }

# Per-probe table of a --json report: elapsed seconds, verdict, probe; then per-family sums.
summarize() {
    "$PY" - "$1" <<'EOF'
import json, sys
from collections import defaultdict
try:
    report = json.load(open(sys.argv[1]))
except Exception as exc:
    print(f"no report: {exc}")
    sys.exit(0)
families = defaultdict(lambda: [0, 0.0])
for r in report["results"]:
    verdict = r["verdict"]["verdict"]
    seconds = r.get("elapsed_s") or 0.0
    fam = r["probe"].split(".")[0]
    families[fam][0] += 1
    families[fam][1] += seconds
    if verdict != "pass" or seconds > 0.5:
        print(f"{seconds:8.3f} s  {verdict:10s} {r['device']:>4}  {r['probe']}")
print("per family (probes, summed probe seconds):")
for fam, (count, total) in sorted(families.items()):
    print(f"  {fam:10s} {count:4d} {total:8.2f} s")
s = report.get("summary", {})
print("summary:", {k: v for k, v in s.items() if not isinstance(v, (list, dict))})
print("exit_status:", report.get("exit_status"))
EOF
}

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used,temperature.gpu --format=csv
    "$PY" -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.cuda.device_count(), 'GPUs')"
    "$PY" -c "import accelerate, safetensors; print('accelerate', accelerate.__version__, 'safetensors', safetensors.__version__)"
} >"$OUT/host-$MODE.txt" 2>&1

if [ "$MODE" = single ]; then
    # 1. The standard tier of every family on GPU 0 (native layer included), timed.
    json_step standard-all 150 "$BIN" check --tier standard --device 0 --json --python "$PY" \
        --run-dir /tmp/fam-standard
    cp /tmp/fam-standard/results.jsonl "$OUT/standard-all-results.jsonl" 2>/dev/null
    summarize "$OUT/standard-all.json" >"$OUT/standard-all-summary.txt"
    # 2. The gated real-fault tests (and no false alarm from alloc/pipeline/dist).
    step gated-tests 150 env GPUPROBE_TEST_BIN="$BIN" GPUPROBE_TEST_PYTHON="$PY" \
        "$TESTS" gpu_faults --test-threads 1
    # 3. pytest's gpu-marked fault tests (the worker alone, without the supervisor); the
    #    families' false-alarm test is the gated one above, the soak is step 4.
    step pytest-gpu 120 "$PY" -m pytest tests/python/test_families.py -m gpu -k "not soak and not no_false_alarm" \
        -q -s -p no:cacheprovider
    # 4. The soak probe through the CLI, with a 10 s load (environment fallback of soak_seconds).
    json_step soak 60 env GPUPROBE_SOAK_SECONDS=10 "$BIN" check --only soak --device 0 --json --no-native \
        --python "$PY" --run-dir /tmp/fam-soak
    summarize "$OUT/soak.json" >"$OUT/soak-summary.txt"
else
    # Several GPUs. A: two branches at once, one GPU each (CUDA_VISIBLE_DEVICES), so they cannot
    # disturb each other: the gated tests on GPU 0; pytest's gpu tests and the soak probe on
    # GPU 1. B: the standard tier of alloc, pipeline and dist on every GPU (dist's collectives
    # span both), timed, and the copy family's peer probe.
    (
        export CUDA_VISIBLE_DEVICES=0
        step gated-tests 150 env GPUPROBE_TEST_BIN="$BIN" GPUPROBE_TEST_PYTHON="$PY" \
            "$TESTS" gpu_faults --test-threads 1
    ) &
    (
        export CUDA_VISIBLE_DEVICES=1
        step pytest-gpu 120 "$PY" -m pytest tests/python/test_families.py -m gpu -k "not no_false_alarm" \
            -q -s -p no:cacheprovider
        json_step soak 60 env GPUPROBE_SOAK_SECONDS=10 "$BIN" check --only soak --device 0 --json --no-native \
            --python "$PY" --run-dir /tmp/fam-soak
        summarize "$OUT/soak.json" >"$OUT/soak-summary.txt"
    ) &
    wait
    json_step families-standard 150 "$BIN" check --tier standard --only alloc --only pipeline --only dist \
        --only copy.p2p --json --no-native --python "$PY" --run-dir /tmp/fam-families
    cp /tmp/fam-families/results.jsonl "$OUT/families-standard-results.jsonl" 2>/dev/null
    summarize "$OUT/families-standard.json" >"$OUT/families-standard-summary.txt"
fi
cat "$OUT/times.txt"
