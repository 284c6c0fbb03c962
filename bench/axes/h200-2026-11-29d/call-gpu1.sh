#!/bin/bash
# Call 1: where the exclusive allocator lane's seconds go (bench/exclusive-costs.py); how the
# ops lane's probes follow their CPU thread count (2 against 8); base against new (the
# exclusive lane's gate opens at the other lanes' last results, not at their workers'
# exits), the standard tier interleaved with the floor, 3 pairs.
B=.dev/gpuprobe-base; N=.dev/gpuprobe-new
L=$OUT/gpu1.log; exec > $L 2>&1
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,driver_version,memory.total,persistence_mode --format=csv
echo "== exclusive costs"; python3 bench/exclusive-costs.py 3
echo "== ops threads"
for t in 2 8; do
  OMP_NUM_THREADS=$t $N check --tier standard --only 'ops.*' --json --run-dir $OUT/r/ops-t$t > $OUT/r/ops-t$t.json 2>/dev/null
  python3 - $OUT/r/ops-t$t.json $t <<'PY'
import json, sys, collections
r = json.load(open(sys.argv[1])); fam = collections.defaultdict(float)
for x in r["results"]: fam[".".join(x["probe"].split(".")[:2])] += x.get("elapsed_s") or 0
print(f"threads {sys.argv[2]}: wall {r['wall_s']:.2f} s, probe seconds {sum(fam.values()):.2f}:", {k: round(v, 2) for k, v in sorted(fam.items())})
PY
done
echo "== A/B"
bash bench/ab-standard.sh $B $N $OUT/r/ab 3
python3 - $OUT/r/ab <<'PY'
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    r = json.load(open(f)); ex = [l for l in r["timings"]["lanes"] if l["placement"] == "exclusive"]
    others = [l for l in r["timings"]["lanes"] if l["placement"] != "exclusive"]
    last = max(l["last_result_s"] or 0 for l in others); done = max(l["done_s"] for l in others)
    print(f"{f.split('/')[-1]}: wall {r['wall_s']:.2f}; others' last result {last:.2f}, last exit {done:.2f}; exclusive begins {ex[0]['first_begin_s']:.2f}, last result {ex[0]['last_result_s']:.2f}, exit {ex[0]['done_s']:.2f}")
PY
rm -rf $OUT/r/*/workers $OUT/r/*/python $OUT/r/ab/*/workers $OUT/r/ab/*/python
cd $OUT && tar cJf r.tar.xz r && rm -rf r
