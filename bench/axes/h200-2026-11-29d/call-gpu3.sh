#!/bin/bash
# Call 3: the committed build (the gate at the other lanes' last results, the moving thread
# share) against base, the standard tier interleaved with the floor, 5 pairs; then the quick
# tier three times against the floor (one lane of each kind: the thread share barely moves).
B=.dev/gpuprobe-base; N=.dev/gpuprobe-new
L=$OUT/gpu3.log; exec > $L 2>&1
mkdir -p $OUT/r
bash bench/ab-standard.sh $B $N $OUT/r/ab 5
python3 - $OUT/r/ab/ab.txt <<'PY'
import re, statistics, sys
rows = [re.search(r"floor ([0-9.]+) \| A ([0-9.]+) s .*\| B ([0-9.]+) s", l) for l in open(sys.argv[1])]
rows = [tuple(map(float, m.groups())) for m in rows if m]
for name, i in (("base", 1), ("new", 2)):
    ratios = [r[i] / r[0] for r in rows]
    print(f"{name}: per-pair ratio to the floor " + ", ".join(f"{x:.2f}" for x in ratios) + f"; median {statistics.median(ratios):.2f}; median s / median floor {statistics.median(r[i] for r in rows) / statistics.median(r[0] for r in rows):.2f}")
PY
for i in 1 2 3; do
  t0=$(date +%s.%N); python3 -c "import torch; torch.zeros(1, device='cuda')"; t1=$(date +%s.%N)
  $N check --tier quick --json --run-dir $OUT/r/q$i > $OUT/r/q$i.json 2>/dev/null; rc=$?; t2=$(date +%s.%N)
  python3 -c "print(f'quick $i: floor {$t1-$t0:.2f} s, new {$t2-$t1:.2f} s, rc=$rc')"
done
rm -rf $OUT/r/ab/*/python $OUT/r/ab/*/workers $OUT/r/q*/
cd $OUT && tar cJf r.tar.xz r && rm -rf r
