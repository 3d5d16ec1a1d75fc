#!/usr/bin/python3
"""Golden vectors for perflab's Go ports of CPython's random (MT19937) and
numpy's default_rng (SeedSequence + PCG64 + Generator.integers).

Run with Debian's python3 + python3-numpy:
    /usr/bin/python3 tools/goldens/dataset/rng_goldens.py > internal/dataset/testdata/rng.json
"""
import json
import random

import numpy as np

SEEDS = [0, 1, 42, 12345, 2**33 + 5, -7]


def py_case(seed):
    r = random.Random(seed)
    out = {"seed": seed}
    out["getrandbits32"] = [r.getrandbits(32) for _ in range(8)]
    out["random"] = [r.random().hex() for _ in range(5)]
    xs = list(range(50))
    r.shuffle(xs)
    out["shuffle50"] = xs
    out["choice_1000"] = [r.choice(range(1000)) for _ in range(20)]
    out["choices_7_k10"] = r.choices(range(7), k=10)
    out["choices_941_k59"] = r.choices(range(941), k=59)
    xs = list(range(3))
    r.shuffle(xs)
    out["shuffle3"] = xs
    return out


def np_case(seed):
    if seed < 0:
        return None
    g = np.random.default_rng(seed)
    out = {"seed": seed}
    # Interleave calls so the buffered 32-bit half is exercised across calls.
    calls = [
        (3996, 4001, 7),
        (100, 101, 3),
        (0, 151643, 9),
        (2000, 6001, 5),
        (0, 2**32, 3),
        (0, 2**40, 3),
        (-5, 5, 4),
        (1, 2, 2),
    ]
    res = []
    for lo, hi, n in calls:
        res.append({"low": lo, "high": hi, "n": n,
                    "values": [int(v) for v in g.integers(lo, hi, size=n)]})
    out["integers"] = res
    return out


def main():
    doc = {
        "python": [py_case(s) for s in SEEDS],
        "numpy": [c for c in (np_case(s) for s in SEEDS) if c is not None],
        "numpy_version": np.__version__,
    }
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
