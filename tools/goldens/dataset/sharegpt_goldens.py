#!/usr/bin/python3
"""ShareGPT goldens: vLLM v0.11.0's ShareGPTDataset.load_data/sample and
maybe_oversample_requests, run with CPython's own `random`, on token counts
from Hugging Face's Rust tokenizers (tok.js). Usage (see gen.sh):

    /usr/bin/python3 sharegpt_goldens.py SAMPLE.json LENGTHS.json > ../../../internal/dataset/testdata/sharegpt_goldens.json
"""
import json
import random
import sys

CASES = [
    {"seed": 0, "num_prompts": 1000, "output_len": None},
    {"seed": 42, "num_prompts": 100, "output_len": None},
    {"seed": 7, "num_prompts": 1000, "output_len": 64},
    {"seed": 3, "num_prompts": 1500, "output_len": 3},
]


def is_valid_sequence(prompt_len, output_len, min_len=4, max_prompt_len=1024,
                      max_total_len=2048, skip_min_output_len_check=False):
    prompt_too_short = prompt_len < min_len
    output_too_short = (not skip_min_output_len_check) and (output_len < min_len)
    prompt_too_long = prompt_len > max_prompt_len
    combined_too_long = (prompt_len + output_len) > max_total_len
    return not (prompt_too_short or output_too_short or prompt_too_long
                or combined_too_long)


def run(data, lens, seed, num_prompts, output_len):
    rows = [dict(e, **{"_len": l}) for e, l in zip(data, lens)]
    rows = [e for e in rows if "conversations" in e and len(e["conversations"]) >= 2]
    random.seed(seed)
    random.shuffle(rows)
    samples = []
    for e in rows:
        if len(samples) >= num_prompts:
            break
        prompt_len = e["_len"]["prompt_len"]
        new_output_len = e["_len"]["completion_len"] if output_len is None else output_len
        if not is_valid_sequence(prompt_len, new_output_len,
                                 skip_min_output_len_check=output_len is not None):
            continue
        samples.append({"id": e["id"], "prompt_len": prompt_len, "output_len": new_output_len})
    # maybe_oversample_requests, v0.11.0: random.choices over the kept list.
    if len(samples) < num_prompts:
        random.seed(seed)
        samples.extend(random.choices(samples, k=num_prompts - len(samples)))
    return samples


def main():
    data = json.load(open(sys.argv[1], encoding="utf-8"))
    lens = json.load(open(sys.argv[2]))
    assert len(data) == len(lens)
    for e, l in zip(data, lens):
        assert e.get("id") == l["id"]
    out = []
    for c in CASES:
        reqs = run(data, lens, c["seed"], c["num_prompts"], c["output_len"])
        out.append(dict(c, requests=reqs))
    json.dump({"cases": out}, sys.stdout, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
