#!/usr/bin/env bash
# The lane planner replayed against a GPU run's measured seconds, without a GPU: which lanes
# this tree would cut a tier into on that host, each lane's estimated and measured seconds,
# and when it would end (crates/gpuprobe/examples/lane_replay.rs). A change to the estimates
# or to the cutting rules is judged here first, then on the GPU (bench/ab-standard.sh).
#
# usage: bench/lane-replay.sh REPORT.json [TIER] [CORES] [FREE_GIB] [HELLO_S] [--oracle]
#   REPORT.json: a finished run's report from the GPU host (its `elapsed_s` per probe);
#   CORES, FREE_GIB: that host's (16 and 139 for the H200); HELLO_S: when its Python lanes'
#   first probes began (the report's `timings`); --oracle: every probe estimated by its own
#   measured seconds (the best the cutting rules could do).
# PYTHON: an interpreter with torch (the sweep's operators are listed from its database).
set -euo pipefail
report="$1"; shift
python="${PYTHON:-python3}"
catalog="$(mktemp)"
trap 'rm -f "$catalog"' EXIT
oracle=()
args=()
for a in "$@"; do
  if [ "$a" = --oracle ]; then oracle=(--oracle); else args+=("$a"); fi
done
# The catalogue names the sweep's and the compile family's lanes by the host's cores: list
# it as the GPU host would (CORES, the third argument).
PYTHONPATH="$(dirname "$0")/../python" "$python" - "$catalog" "${args[1]:-16}" <<'PY'
import json, os, sys
cores = int(sys.argv[2])
os.cpu_count = lambda: cores
import torch
from gpuprobe.worker import catalog
specs = [p.spec() for p in catalog.all_probes().values()]
extra, _ = catalog.expanded(["sweep"], torch)
specs += [p.spec() for p in extra]
json.dump(specs, open(sys.argv[1], "w"))
PY
cargo run --quiet --release -p gpuprobe --example lane_replay -- "${oracle[@]}" "$catalog" "$report" "${args[@]}"
