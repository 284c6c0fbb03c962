#!/bin/bash
# Call 2: base against new (the exclusive lane's gate opens at the other lanes' last results;
# the Python workers on the GPU take a larger CPU thread share as lanes finish), the standard
# tier interleaved with the floor, 3 pairs; then the full tier under a 150 s budget with new,
# each verdict against the last full run's (zero false alarms with the moving thread share).
B=.dev/gpuprobe-base; N=.dev/gpuprobe-new
L=$OUT/gpu2.log; exec > $L 2>&1
mkdir -p $OUT/r
bash bench/ab-standard.sh $B $N $OUT/r/ab 3
python3 - $OUT/r/ab <<'PY'
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    r = json.load(open(f)); lanes = r["timings"]["lanes"]
    ex = [l for l in lanes if l["placement"] == "exclusive"]
    others = sorted((l["last_result_s"] or 0, l["first_probe"]) for l in lanes if l["placement"] != "exclusive")
    print(f"{f.split('/')[-1]}: wall {r['wall_s']:.2f}; lanes end " + ", ".join(f"{t:.1f}" for t, _ in others) + f" (last {others[-1][1]}); exclusive {ex[0]['first_begin_s']:.2f}-{ex[0]['last_result_s']:.2f}")
PY
cat $OUT/r/ab/B-1/workers/threads 2>/dev/null && echo " <- last published thread share"
grep -h "torch threads" $OUT/r/ab/B-1/workers/*/*.log 2>/dev/null | head -3
echo "== full tier, 150 s budget, new"
t0=$(date +%s.%N); $N check --health --tier full --budget 150 --run-dir $OUT/r/full > $OUT/r/full.txt 2>&1; echo "rc=$? $(python3 -c "import time; print(round(time.time()-$t0,1))") s"; cat $OUT/r/full.txt
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
rm -rf $OUT/r/ab/*/python $OUT/r/full/python
cd $OUT && tar cJf r.tar.xz r && rm -rf r
