#!/bin/bash
# Call 1: the build after the doctor's split (plan/, exec/, verdict/, the engine's LaneBook;
# ff12721) against the build of 19e1d5e (the engine before the module moves): behaviour and
# time unchanged on the GPU. The standard tier interleaved with the floor, 3 pairs, each run's
# results and problems; the quick tier once; then the full tier under a 150 s budget, each
# verdict against the last full run's (bench/axes/h200-2026-11-29/full2-report.json.xz).
B=.dev/gpuprobe-19e1d5e; N=.dev/gpuprobe-new
L=$OUT/gpu1.log; exec > $L 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
mkdir -p $OUT/r
bash bench/ab-standard.sh $B $N $OUT/r/ab 3
python3 - $OUT/r/ab/ab.txt <<'PY'
import re, statistics, sys
rows = [re.search(r"floor ([0-9.]+) \| A ([0-9.]+) s .*\| B ([0-9.]+) s", l) for l in open(sys.argv[1])]
rows = [tuple(map(float, m.groups())) for m in rows if m]
for name, i in (("base 19e1d5e", 1), ("new", 2)):
    ratios = [r[i] / r[0] for r in rows]
    print(f"{name}: seconds " + ", ".join(f"{r[i]:.2f}" for r in rows) + f" (median {statistics.median(r[i] for r in rows):.2f}); ratio to the pair's floor " + ", ".join(f"{x:.2f}" for x in ratios) + f"; median {statistics.median(ratios):.2f}")
PY
python3 - $OUT/r/ab <<'PY'
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    r = json.load(open(f)); lanes = r["timings"]["lanes"]
    ex = [l for l in lanes if l["placement"] == "exclusive"]
    others = sorted((l["last_result_s"] or 0, l["first_probe"]) for l in lanes if l["placement"] != "exclusive")
    print(f"{f.split('/')[-1]}: wall {r['wall_s']:.2f}; lanes end " + ", ".join(f"{t:.1f}" for t, _ in others) + f" (last {others[-1][1]}); exclusive {ex[0]['first_begin_s']:.2f}-{ex[0]['last_result_s']:.2f}")
PY
echo "== quick tier"
t0=$(date +%s.%N); $N check --tier quick --json --run-dir $OUT/r/q1 > $OUT/r/q1.json 2>/dev/null; echo "rc=$? $(python3 -c "import time; print(round(time.time()-$t0,2))") s"
echo "== full tier, 150 s budget"
t0=$(date +%s.%N); $N check --health --tier full --budget 150 --run-dir $OUT/r/full > $OUT/r/full.txt 2>&1; echo "rc=$? $(python3 -c "import time; print(round(time.time()-$t0,1))") s"; tail -25 $OUT/r/full.txt
python3 - $OUT/r/full/report.json <<'PY'
import json, lzma, sys, collections
new = json.load(open(sys.argv[1]))
old = json.load(lzma.open("bench/axes/h200-2026-11-29/full2-report.json.xz"))
before = {(x["probe"], x["device"]): x["verdict"]["verdict"] for x in old["results"]}
judged = [x for x in new["results"] if x["verdict"]["verdict"] != "not_tested"]
diff = [(x["probe"], before.get((x["probe"], x["device"])), x["verdict"]["verdict"]) for x in judged if before.get((x["probe"], x["device"])) != x["verdict"]["verdict"]]
fams = collections.Counter(x["probe"].split(".")[0] for x in judged)
print(f"judged {len(judged)} of {len(new['results'])}; verdicts differing from the last full run: {len(diff)}; families judged: {dict(fams)}")
for d in diff[:40]: print("  ", d)
PY
rm -rf $OUT/r/ab/*/python $OUT/r/full/python $OUT/r/q1/python
cd $OUT && tar cJf r.tar.xz r && rm -rf r
