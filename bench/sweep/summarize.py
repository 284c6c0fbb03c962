"""Summarizes a calibrate.py JSONL: counts, failing (op, dtype) with their first failure."""
import collections
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
by = collections.Counter(r["outcome"] for r in rows)
print("records", len(rows), dict(by))
secs = collections.defaultdict(float)
for r in rows:
    secs[r["dtype"]] += r.get("seconds", 0)
print("seconds per dtype (summed over shards)", {k: round(v, 1) for k, v in secs.items()})
cases = sum(r["m"]["cases"] for r in rows if r["outcome"] == "observed")
print("cases judged", cases)
for r in rows:
    if r["outcome"] == "crash":
        print("CRASH", r["key"], r["dtype"])
    if r.get("restart"):
        print("RESTART", r["key"], r["dtype"], r["restart"][:250])
for r in rows:
    if r["outcome"] == "error":
        print("ERROR", r["key"], r["dtype"], r["error"][:300])
for r in rows:
    if r["outcome"] != "observed":
        continue
    m = r["m"]
    if m["failed"] or m["device_errors"]:
        f = (m["failures"] or [{}])[0]
        e = (m["errors"] or [{}])[0]
        print("FAIL", r["key"], r["dtype"], m["failed"], "derr", m["device_errors"], "|",
              f.get("variant"), f.get("direction"), f.get("output"), f.get("detail", "")[:120], "exp", f.get("expected"), "got", f.get("found"),
              "|", e.get("variant", ""), e.get("message", "")[:150])
unj = collections.Counter()
inv = 0
for r in rows:
    if r["outcome"] == "observed":
        for k, v in r["m"]["unjudged"].items():
            unj[k] += v
        inv += r["m"]["invalid_accepted"]
print("unjudged", dict(unj), "invalid_accepted", inv)
skips = collections.Counter(r["reason"][:60] for r in rows if r["outcome"] == "skip")
print("skips", skips.most_common(8))
slow = sorted((r.get("seconds", 0), r["key"], r["dtype"]) for r in rows)[-8:]
print("slowest", slow)
