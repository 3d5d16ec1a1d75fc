#!/usr/bin/env bash
# Regenerates internal/bench/testdata/numpy_schedules.json: arrival offsets
# computed with numpy's legacy global generator using the arithmetic of
# vLLM's get_request (gamma gaps, cumulative sum, rescale to n/rate; ramp-up
# rates per request). Needs python3-numpy (Debian).
set -euo pipefail
cd "$(dirname "$0")/.."
/usr/bin/python3 - > internal/bench/testdata/numpy_schedules.json <<'PY'
import json
import numpy as np

def sched(n, rate, b, seed, strat=None, s=None, e=None):
    np.random.seed(seed)
    d = []
    for i in range(n):
        r = rate
        if strat:
            p = i / max(n - 1, 1)
            r = s + (e - s) * p if strat == "linear" else s * ((e / s) ** p)
        if r == float("inf"):
            d.append(0)
        elif b == float("inf"):
            d.append(1.0 / r)
        else:
            d.append(np.random.gamma(shape=b, scale=1.0 / (r * b)))
    for i in range(1, len(d)):
        d[i] += d[i - 1]
    if strat is None and d[-1] != 0:
        f = (n / rate) / d[-1]
        d = [x * f for x in d]
    return [float(x) for x in d]

inf = float("inf")
cases = [(10, 4.0, 1.0, 0, None, None, None), (10, 4.0, 0.5, 0, None, None, None),
         (10, 4.0, 2.0, 7, None, None, None), (6, 2.0, inf, 0, None, None, None),
         (5, inf, 1.0, 0, "linear", 1, 10), (5, inf, 1.0, 3, "exponential", 2, 32),
         (200, 50.0, 0.3, 123, None, None, None)]
enc = lambda x: "inf" if x == inf else x
print(json.dumps([{"n": c[0], "rate": enc(c[1]), "burstiness": enc(c[2]), "seed": c[3], "ramp": c[4] or "",
                   "start": c[5] or 0, "end": c[6] or 0, "offsets": sched(*c)} for c in cases]))
PY
