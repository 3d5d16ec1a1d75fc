#!/usr/bin/python3
"""Random-dataset goldens: the numpy draws of vLLM v0.11.0's RandomDataset
(default_rng(seed); integers for input lens, output lens, offsets, then the
prefix), written as a spec that tok.js turns into prompts. Usage (gen.sh):

    /usr/bin/python3 random_goldens.py VOCAB_SIZE > draws.json
"""
import json
import math
import sys

import numpy as np

CASES = [
    {"seed": 42, "num_prompts": 500, "input_len": 4000, "output_len": 200, "range_ratio": 0.0, "prefix_len": 0},
    {"seed": 42, "num_prompts": 500, "input_len": 4000, "output_len": 200, "range_ratio": 0.5, "prefix_len": 0},
    {"seed": 7, "num_prompts": 40, "input_len": 300, "output_len": 50, "range_ratio": 0.25, "prefix_len": 64},
    {"seed": 0, "num_prompts": 200, "input_len": 1, "output_len": 1, "range_ratio": 0.9, "prefix_len": 3},
]


def draws(c, vocab_size, num_special_tokens=0):
    rng = np.random.default_rng(c["seed"])
    real_input_len = max(0, int(c["input_len"]) - num_special_tokens)
    r = c["range_ratio"]
    input_low = math.floor(real_input_len * (1 - r))
    input_high = math.ceil(real_input_len * (1 + r))
    output_low = max(math.floor(c["output_len"] * (1 - r)), 1)
    output_high = math.ceil(c["output_len"] * (1 + r))
    n = c["num_prompts"]
    input_lens = rng.integers(input_low, input_high + 1, size=n)
    output_lens = rng.integers(output_low, output_high + 1, size=n)
    offsets = rng.integers(0, vocab_size, size=n)
    p = c["prefix_len"]
    prefix = rng.integers(0, vocab_size, size=p).tolist() if p > 0 else []
    return dict(c, input_lens=[int(x) for x in input_lens],
                output_lens=[int(x) for x in output_lens],
                offsets=[int(x) for x in offsets], prefix=[int(x) for x in prefix])


def main():
    vocab = int(sys.argv[1])
    json.dump({"vocab_size": vocab, "numpy_version": np.__version__,
               "cases": [draws(c, vocab) for c in CASES]}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
