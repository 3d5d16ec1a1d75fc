#!/usr/bin/python3
"""Independent reference for perflab's metrics tests.

Reads records (perflab's metrics.Record JSON list) and prints the figures
vLLM's `vllm bench serve` computes for them, using numpy the way vLLM's
calculate_metrics does (np.mean/np.median/np.std/np.percentile on
`values or 0`, TPOT per request with output_len > 1, ITL over all gaps,
goodput with every SLO <=, 1-s bucket peak counting one per chunk, sweep-line
peak concurrency with departures first).

Regenerate: /usr/bin/python3 testdata/vllm_reference.py testdata/numpy_records.json > testdata/numpy_expected.json
"""
import json
import math
import sys

import numpy as np

recs = json.load(open(sys.argv[1]))
dur = 7.25
pcts = [25.0, 50.0, 90.0, 99.0, 99.9]
slo = {"ttft": 250.0, "tpot": 30.0, "e2el": 2000.0}

ok = [r for r in recs if r["success"]]
ttfts = [r["ttft"] for r in ok]
e2els = [r["latency"] for r in ok]
itls = [g for r in ok for g in (r["itl"] or [])]
tpots, all_tpots = [], []
for r in ok:
    n = r["output_len"]
    t = 0.0
    if n > 1:
        t = (r["latency"] - r["ttft"]) / (n - 1)
        tpots.append(t)
    all_tpots.append(t)
good = sum(
    1
    for a, b, c in zip(ttfts, all_tpots, e2els)
    if slo["ttft"] / 1000 >= a and slo["tpot"] / 1000 >= b and slo["e2el"] / 1000 >= c
)
tin = sum(r["prompt_len"] for r in ok)
tout = sum(r["output_len"] for r in ok)

start = min(r["sent"] for r in ok)
end = max(r["sent"] + r["latency"] for r in ok)
nb = int(np.ceil(end - start)) + 1
buckets = np.zeros(nb)
for r in ok:
    t = r["sent"] + r["ttft"]
    times = [t]
    for g in r["itl"] or []:
        t += g
        times.append(t)
    for tt in times:
        b = int(tt - start)
        if 0 <= b < nb:
            buckets[b] += 1
ev = sorted([(r["sent"], 1) for r in ok] + [(r["sent"] + r["latency"], -1) for r in ok])
cur = peak = 0
for _, d in ev:
    cur += d
    peak = max(peak, cur)

out = {
    "completed": len(ok),
    "failed": len(recs) - len(ok),
    "total_input_tokens": tin,
    "total_output_tokens": tout,
    "request_throughput": len(ok) / dur,
    "request_goodput": good / dur,
    "output_throughput": tout / dur,
    "total_token_throughput": (tin + tout) / dur,
    "max_output_tokens_per_s": float(np.max(buckets)),
    "max_concurrent_requests": peak,
}
for name, vals in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
    out[f"mean_{name}_ms"] = float(np.mean(vals or 0) * 1000)
    out[f"median_{name}_ms"] = float(np.median(vals or 0) * 1000)
    out[f"std_{name}_ms"] = float(np.std(vals or 0) * 1000)
    for p in pcts:
        w = str(int(p)) if int(p) == p else str(p)
        out[f"p{w}_{name}_ms"] = float(np.percentile(vals or 0, p) * 1000)
json.dump(out, sys.stdout, indent=1, sort_keys=True)
print()
