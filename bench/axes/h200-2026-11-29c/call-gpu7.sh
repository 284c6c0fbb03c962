#!/bin/bash
# Call 2: standard tier base / new (forked reference) / new with 10 and 8 lanes, interleaved
# with the floor, 4 rounds after one untimed run of each build; CPU profiles.
B=.dev/gpuprobe-base; N=.dev/gpuprobe-new
L=$OUT/gpu7.log; exec > $L 2>&1
mkdir -p $OUT/r
now() { date +%s.%N; }
python3 -c "import torch; torch.zeros(1, device='cuda')"
$B check --tier standard --quiet > /dev/null 2>&1; echo "warm base rc=$?"
$N check --tier standard --quiet > /dev/null 2>&1; echo "warm new rc=$?"
for i in 1 2 3 4; do
  t0=$(now); python3 -c "import torch; torch.zeros(1, device='cuda')"; t1=$(now)
  line="round $i floor $(python3 -c "print(f'{$t1-$t0:.2f}')")"
  for side in base new lanes10 lanes8; do
    bin=$N; env="X=1"; [ $side = base ] && bin=$B
    [ $side = lanes10 ] && env="GPUPROBE_BENCH_LANES=10"; [ $side = lanes8 ] && env="GPUPROBE_BENCH_LANES=8"
    t0=$(now); env $env $bin check --tier standard --json --timings --run-dir $OUT/r/$side-$i > $OUT/r/$side-$i.json 2>/dev/null; rc=$?; t1=$(now)
    bad=$(python3 -c "import json; r=json.load(open('$OUT/r/$side-$i.json'))['results']; print(len(r), sorted(x['probe'] for x in r if x['verdict']['verdict'] not in ('pass','skip')))")
    line="$line | $side $(python3 -c "print(f'{$t1-$t0:.2f}')") s rc=$rc $bad"
  done
  echo "$line"
done
python3 - $OUT/r <<'PY'
import json, sys, collections
for run in ("base-1", "new-1", "lanes10-1"):
    r = json.load(open(f"{sys.argv[1]}/{run}.json"))
    modes = collections.Counter(str((x.get("observation") or {}).get("metrics", {}).get("reference_process")) for x in r["results"] if x["probe"].startswith("sweep."))
    lanes = [l for l in r["timings"]["lanes"]]
    print(run, "reference_process:", dict(modes), "lanes", len(lanes), "python workers", sum(l["workers"] for l in lanes if l["backend"] == "python"))
PY
echo "== cpu profile new"; python3 bench/cpu-profile.py -- $N check --tier standard --quiet --run-dir $OUT/r/prof-new
echo "== cpu profile lanes10"; GPUPROBE_BENCH_LANES=10 python3 bench/cpu-profile.py -- $N check --tier standard --quiet --run-dir $OUT/r/prof-l10
ls $OUT/r/prof-new
rm -rf $OUT/r/*/workers $OUT/r/*/python
cd $OUT && tar cJf r.tar.xz r && rm -rf r
