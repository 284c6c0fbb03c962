#!/bin/bash
# Call 1: standard tier base / fork-reference / fork-reference + 10 lanes, interleaved with the
# floor; a CPU profile of the new build; the spread's one-GPU check (nothing changes).
B=.dev/gpuprobe-base; N=.dev/gpuprobe-new
L=$OUT/gpu6.log; exec > $L 2>&1
mkdir -p $OUT/r
now() { date +%s.%N; }
nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; torch.zeros(1, device='cuda')"
$B check --tier standard --quiet > /dev/null 2>&1; echo "warm base rc=$?"
$N check --tier standard --quiet > /dev/null 2>&1; echo "warm new rc=$?"
for i in 1 2 3; do
  t0=$(now); python3 -c "import torch; torch.zeros(1, device='cuda')"; t1=$(now)
  line="round $i floor $(python3 -c "print(f'{$t1-$t0:.2f}')")"
  for side in base new lanes10; do
    bin=$N; env="X=1"; [ $side = base ] && bin=$B; [ $side = lanes10 ] && env="GPUPROBE_BENCH_LANES=10"
    t0=$(now); env $env $bin check --tier standard --json --timings --run-dir $OUT/r/$side-$i > $OUT/r/$side-$i.json 2>/dev/null; rc=$?; t1=$(now)
    bad=$(python3 -c "import json; r=json.load(open('$OUT/r/$side-$i.json'))['results']; print(len(r), sorted(x['probe'] for x in r if x['verdict']['verdict'] not in ('pass','skip')))")
    line="$line | $side $(python3 -c "print(f'{$t1-$t0:.2f}')") s rc=$rc $bad"
  done
  echo "$line"
done
python3 - $OUT/r <<'PY'
import json, sys, collections
for run in ("base-1", "new-1"):
    r = json.load(open(f"{sys.argv[1]}/{run}.json"))
    modes = collections.Counter(str((x.get("observation") or {}).get("metrics", {}).get("reference_process")) for x in r["results"] if x["probe"].startswith("sweep."))
    print(run, "reference_process:", dict(modes))
PY
echo "== cpu profile new"; python3 bench/cpu-profile.py -- $N check --tier standard --quiet --run-dir $OUT/r/prof
echo "== spread on one GPU"
for side in base new; do
  bin=$N; [ $side = base ] && bin=$B
  ( time $bin check --tier full --device all --only 'sweep.add*' --only 'copy.h2d*' --only 'width.create*' --json --timings --run-dir $OUT/r/spread-$side > $OUT/r/spread-$side.json 2>$OUT/r/spread-$side.err ) 2>&1 | grep real; echo "rc=${PIPESTATUS[0]}"
  python3 -c "
import json; p=json.load(open('$OUT/r/spread-$side/plan.json')); r=json.load(open('$OUT/r/spread-$side.json'))
print('$side', 'spread' in p, sorted({t['device'] for t in p['tasks']}), len(r['results']), 'exit', r['exit_code'], 'prepare_s', round(r['timings']['prepare_s'],2), [n for n in r.get('notes',[]) if 'spread' in n])
print(sorted(x['probe'] for x in r['results'] if x['verdict']['verdict'] not in ('pass','skip')))"
done
rm -rf $OUT/r/*/workers $OUT/r/*/python
cd $OUT && tar cJf r.tar.xz r && rm -rf r
