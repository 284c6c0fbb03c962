#!/bin/bash
# Call 4: the final build (forked sweep reference, database without numba/hypothesis, the
# zygote wherever two workers start) against base: standard tier interleaved with the floor,
# 3 rounds; quick tier with and without the zygote; the sweep database's counts; the full
# tier's sweep under a 150 s budget, each verdict against the last full run's.
B=.dev/gpuprobe-base; N=.dev/gpuprobe-new
L=$OUT/gpu9.log; exec > $L 2>&1
mkdir -p $OUT/r
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2-$1:.2f}')"; }
bad() { python3 -c "import json; r=json.load(open('$1'))['results']; print(len(r), sorted(x['probe'] for x in r if x['verdict']['verdict'] not in ('pass','skip')))"; }
python3 -c "import torch; torch.zeros(1, device='cuda')"
$B check --tier standard --quiet > /dev/null 2>&1; echo "warm base rc=$?"
$N check --tier standard --quiet > /dev/null 2>&1; echo "warm new rc=$?"
for i in 1 2 3; do
  t0=$(now); python3 -c "import torch; torch.zeros(1, device='cuda')"; t1=$(now)
  line="round $i floor $(secs $t0 $t1)"
  for side in base new; do
    bin=$N; [ $side = base ] && bin=$B
    t0=$(now); $bin check --tier standard --json --timings --run-dir $OUT/r/$side-$i > $OUT/r/$side-$i.json 2>/dev/null; rc=$?; t1=$(now)
    line="$line | $side $(secs $t0 $t1) s rc=$rc $(bad $OUT/r/$side-$i.json)"
  done
  echo "$line"
done
for i in 1 2 3; do
  t0=$(now); python3 -c "import torch; torch.zeros(1, device='cuda')"; t1=$(now)
  line="quick $i floor $(secs $t0 $t1)"
  for side in zygote0 auto; do
    env="X=1"; [ $side = zygote0 ] && env="GPUPROBE_ZYGOTE=0"
    t0=$(now); env $env $N check --tier quick --json --run-dir $OUT/r/q$side-$i > $OUT/r/q$side-$i.json 2>/dev/null; rc=$?; t1=$(now)
    line="$line | $side $(secs $t0 $t1) s rc=$rc $(bad $OUT/r/q$side-$i.json)"
  done
  echo "$line"
done
python3 - $OUT/r <<'PY'
import json, sys, collections
def get(run):
    r = json.load(open(f"{sys.argv[1]}/{run}.json"))
    opdb = next(x for x in r["results"] if x["probe"] == "sweep.opdb")["observation"]["metrics"]
    modes = collections.Counter(str((x.get("observation") or {}).get("metrics", {}).get("reference_process")) for x in r["results"] if x["probe"].startswith("sweep."))
    return opdb, dict(modes)
(a, ma), (b, mb) = get("base-1"), get("new-1")
print("opdb base", a); print("opdb new ", b); print("opdb equal:", a == b, "| reference base", ma, "new", mb)
PY
grep -h "forked from the zygote\|ordinary way" $OUT/r/new-1/workers/*/*.log 2>/dev/null | sed 's/[0-9]\+/N/g' | sort | uniq -c | head -5
echo "== full tier sweep, 150 s budget"
t0=$(now); $N check --health --tier full --only 'sweep.*' --budget 150 --run-dir $OUT/r/fullsweep > $OUT/r/fullsweep.txt 2>&1; echo "rc=$? $(secs $t0 $(now)) s"; cat $OUT/r/fullsweep.txt
python3 - $OUT/r/fullsweep/report.json <<'PY'
import json, lzma, sys, collections
new = json.load(open(sys.argv[1]))
old = json.load(lzma.open("bench/axes/h200-2026-11-29/full2-report.json.xz"))
before = {(x["probe"], x["device"]): x["verdict"]["verdict"] for x in old["results"]}
judged = [x for x in new["results"] if x["verdict"]["verdict"] != "not_tested"]
diff = [(x["probe"], before.get((x["probe"], x["device"])), x["verdict"]["verdict"]) for x in judged if before.get((x["probe"], x["device"])) != x["verdict"]["verdict"]]
modes = collections.Counter(str((x.get("observation") or {}).get("metrics", {}).get("reference_process")) for x in judged)
print(f"judged {len(judged)} of {len(new['results'])}; verdicts differing from the last full run: {len(diff)}; reference: {dict(modes)}")
for d in diff[:30]: print("  ", d)
PY
rm -rf $OUT/r/*/workers $OUT/r/*/python
cd $OUT && tar cJf r.tar.xz r && rm -rf r
