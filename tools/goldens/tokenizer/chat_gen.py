#!/usr/bin/env python3
"""Writes internal/tokenizer/testdata/qwen3_chat_golden.jsonl.gz: Qwen3's
chat_template rendered by Python's Jinja2 with the environment transformers'
apply_chat_template uses (sandboxed, trim_blocks, lstrip_blocks,
loopcontrols, its tojson), for conversations from the ShareGPT sample and
hand-made ones (system turns, multi-turn thinking, reasoning_content, tools).

    python3 tools/goldens/tokenizer/chat_gen.py
"""
import gzip
import json
import os

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SHARED = os.path.join(ROOT, "..", "shared")
CFG = os.path.join(SHARED, "data/tokenizers/qwen3/tokenizer_config.json")
SAMPLE = os.path.join(SHARED, "data/sharegpt/sharegpt_v3_sample_1000.json")
OUT = os.path.join(ROOT, "internal/tokenizer/testdata/qwen3_chat_golden.jsonl.gz")


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def main():
    cfg = json.load(open(CFG, encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    tpl = env.from_string(cfg["chat_template"])

    convs = []
    roles = {"human": "user", "gpt": "assistant", "system": "system"}
    sample = json.load(open(SAMPLE, encoding="utf-8"))
    for c in sample[:80]:
        msgs = [{"role": roles[t["from"]], "content": t["value"]} for t in c["conversations"]]
        if msgs:
            convs.append(("sharegpt " + c["id"], msgs))
            convs.append(("sharegpt-first " + c["id"], msgs[:1]))
    convs += [
        ("system-user", [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi"}]),
        ("multi-turn-think", [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
            {"role": "user", "content": "and 3+3?"},
            {"role": "assistant", "content": "<think>\n\nmore adding\n\n</think>\n\n\n6"},
        ]),
        ("reasoning-content", [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
            {"role": "user", "content": "q2"},
            {"role": "assistant", "content": "a2", "reasoning_content": "\nr2\n"},
        ]),
        ("system-late", [{"role": "user", "content": "u"}, {"role": "system", "content": "late system"}, {"role": "user", "content": "u2"}]),
        ("tool-turns", [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "calling"},
            {"role": "tool", "content": "{\"temp\": 21}"},
            {"role": "tool", "content": "sunny"},
            {"role": "assistant", "content": "It is 21 and sunny."},
        ]),
        ("tool-response-user", [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "<think>t</think>x"},
            {"role": "user", "content": "<tool_response>r</tool_response>"},
            {"role": "assistant", "content": "<think>t2</think>y"},
        ]),
        ("empty-content", [{"role": "user", "content": ""}]),
        ("unicode", [{"role": "user", "content": "你好 👨‍👩‍👧 café\r\n  <|im_end|> {{ not a tag }}"}]),
    ]
    lines = []
    for name, msgs in convs:
        for agp in (False, True):
            for think in (None, False, True):
                kw = {"messages": msgs, "add_generation_prompt": agp, "tools": None,
                      "bos_token": cfg.get("bos_token"), "eos_token": cfg.get("eos_token")}
                if think is not None:
                    kw["enable_thinking"] = think
                lines.append(json.dumps({"name": name, "messages": msgs, "add_generation_prompt": agp,
                                         "enable_thinking": think, "text": tpl.render(**kw)}, ensure_ascii=False))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with gzip.open(OUT, "wt", encoding="utf-8", compresslevel=9) as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {OUT}: {len(lines)} renders (Jinja2 {jinja2.__version__})")


if __name__ == "__main__":
    main()
