#!/bin/bash
# Call 3: what one worker's start costs on this host (import, hello facts, the operator
# database); standard tier base / new / new through the zygote, 3 rounds; a CPU profile.
B=.dev/gpuprobe-base; N=.dev/gpuprobe-new
L=$OUT/gpu8.log; exec > $L 2>&1
mkdir -p $OUT/r
now() { date +%s.%N; }
python3 -c "import torch; torch.zeros(1, device='cuda')"
$N check --tier quick --quiet > /dev/null 2>&1
cache=$(ls -d ~/.cache/gpuprobe/bytecode 2>/dev/null || true); echo "bytecode cache: $cache"
for m in scipy numba hypothesis pytest expecttest; do python3 -c "import importlib.util as u; print('$m', u.find_spec('$m') is not None)"; done
for i in 1 2; do
PYTHONPYCACHEPREFIX=$cache PYTHONPATH=python python3 - <<'PY'
import time, sys, resource
t0 = time.time(); c0 = time.process_time()
import torch
t1 = time.time(); c1 = time.process_time()
from gpuprobe.worker import envinfo
info = envinfo.torch_info(torch)
t2 = time.time(); c2 = time.process_time()
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t3 = time.time(); c3 = time.process_time()
from gpuprobe.worker.probes.sweep import db
db.load(torch)
t4 = time.time(); c4 = time.process_time()
print(f"import torch {t1-t0:.2f} s ({c1-c0:.2f} cpu) | torch_info {t2-t1:.2f} ({c2-c1:.2f}) | first tensor {t3-t2:.2f} ({c3-c2:.2f}) | db {t4-t3:.2f} ({c4-c3:.2f})")
PY
done
PYTHONPYCACHEPREFIX=$cache PYTHONPATH=python python3 -X importtime -c "import torch; from gpuprobe.worker.probes.sweep import db; db.load(torch)" 2> $OUT/r/importtime.txt
python3 - $OUT/r/importtime.txt <<'PY'
import collections, sys
rows = []
for line in open(sys.argv[1]):
    if line.startswith("import time:") and "cumulative" not in line:
        s, c, n = [p.strip() for p in line.split(":", 1)[1].split("|")]
        rows.append((int(s), int(c), n.strip()))
pk = collections.Counter()
for s, c, n in rows: pk[n.split(".")[0]] += s
print("self s by package:", [(k, round(v / 1e6, 2)) for k, v in pk.most_common(14)])
PY
$B check --tier standard --quiet > /dev/null 2>&1; echo "warm base rc=$?"
GPUPROBE_ZYGOTE=1 $N check --tier standard --quiet > /dev/null 2>&1; echo "warm new rc=$?"
for i in 1 2 3; do
  t0=$(now); python3 -c "import torch; torch.zeros(1, device='cuda')"; t1=$(now)
  line="round $i floor $(python3 -c "print(f'{$t1-$t0:.2f}')")"
  for side in base new zygote; do
    bin=$N; env="X=1"; [ $side = base ] && bin=$B; [ $side = zygote ] && env="GPUPROBE_ZYGOTE=1"
    t0=$(now); env $env $bin check --tier standard --json --timings --run-dir $OUT/r/$side-$i > $OUT/r/$side-$i.json 2>/dev/null; rc=$?; t1=$(now)
    bad=$(python3 -c "import json; r=json.load(open('$OUT/r/$side-$i.json'))['results']; print(len(r), sorted(x['probe'] for x in r if x['verdict']['verdict'] not in ('pass','skip')))")
    line="$line | $side $(python3 -c "print(f'{$t1-$t0:.2f}')") s rc=$rc $bad"
  done
  echo "$line"
done
echo "== cpu profile zygote"; GPUPROBE_ZYGOTE=1 python3 bench/cpu-profile.py -- $N check --tier standard --quiet --run-dir $OUT/r/prof-z
rm -rf $OUT/r/*/workers $OUT/r/*/python
cd $OUT && tar cJf r.tar.xz r && rm -rf r
