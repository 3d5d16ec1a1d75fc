#!/usr/bin/env python3
"""Checks of collect.py's whole-step section that need PyTorch but no GPU.

Run where PyTorch is installed (the device machine, or Debian's
python3-torch): python3 tools/kernels/collect_test.py. CI does not run it:
its machines have no PyTorch. The step is run on the CPU with a timer that
calls each callable once and counts what it was given."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import collect  # noqa: E402


class CountingTimer:
    def __init__(self):
        self.calls = 0

    def time_us(self, fns, est_us):
        for f in fns:
            f()
        self.calls += 1
        return 10.0 * len(fns), "cpu", 1


class Args:
    budget = 60.0
    out = os.devnull


def tiny(layers=2, h=64, heads=4, kv=2, dim=16, inter=128, vocab=256, **extra):
    c = {"hidden_size": h, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": dim,
         "intermediate_size": inter, "vocab_size": vocab, "num_hidden_layers": layers}
    c.update(extra)
    return c


def collector(torch, free):
    c = object.__new__(collect.Collector)
    c.torch = torch
    c.args = Args()
    c.t0 = time.time()
    c.timer = CountingTimer()
    c.timer_for = lambda ms: c.timer
    c.free_bytes = lambda: free
    c.doc = {"truncated": [], "errors": [], "decode_step": []}
    c.l2 = 1 << 20
    c.peak_tflops, c.peak_gbps = 700.0, 3000.0
    return c


class DecodeStep(unittest.TestCase):
    def setUp(self):
        import torch
        self.torch = torch
        collect.DEVICE = "cpu"
        # The CPU build has no FP8 GEMM: BF16 steps only.
        self.saved = (collect.STEP_B, collect.STEP_L, collect.STEP_DTYPES)
        collect.STEP_B, collect.STEP_L, collect.STEP_DTYPES = (1, 4), (32, 64), ("bf16",)

    def tearDown(self):
        collect.STEP_B, collect.STEP_L, collect.STEP_DTYPES = self.saved

    def test_rows(self):
        c = collector(self.torch, 8 << 30)
        models = {"Qwen3-tiny": tiny(), "Llama-tiny": tiny(layers=3),
                  "Moe-tiny": tiny(num_experts=8), "Hybrid-tiny": tiny(layer_types=["linear_attention"]),
                  "Qwen3.5-tiny": tiny(full_attention_interval=4, linear_num_key_heads=4)}
        c.decode_step(models, time.time() + 60)
        # SDPA's FlashAttention kernel may be missing on a CPU build; that
        # row part alone may fail, and then says so.
        flash_failed = {e["what"] for e in c.doc["errors"]}
        for what in flash_failed:
            self.assertTrue(what.startswith("decode_step flash "), what)
        rows = c.doc["decode_step"]
        self.assertEqual(sorted({r["model"] for r in rows}), ["Llama-tiny", "Qwen3-tiny"])
        self.assertEqual(len(rows), 8)
        for r in rows:
            want = 7 if r["model"].startswith("Qwen3") else 5
            self.assertEqual(r["glue_kernels_per_layer"], want)
            self.assertEqual(r["layers"], 3 if r["model"].startswith("Llama") else 2)
            failed = "decode_step flash %s b=%d L=%d" % (r["model"], r["batch"], r["context"]) in flash_failed
            self.assertEqual("attn_flash_us" in r, not failed)

    def test_skips_what_does_not_fit(self):
        # 3 GiB of margin over the weights: nothing fits in 2 GiB.
        c = collector(self.torch, 2 << 30)
        c.decode_step({"Qwen3-tiny": tiny()}, time.time() + 60)
        self.assertEqual(c.doc["decode_step"], [])
        self.assertEqual(len(c.doc["truncated"]), 1)
        self.assertIn("do not fit", c.doc["truncated"][0])

    def test_deadline(self):
        c = collector(self.torch, 8 << 30)
        c.decode_step({"Qwen3-tiny": tiny()}, time.time() - 1)
        self.assertEqual(c.doc["decode_step"], [])
        self.assertTrue(c.doc["truncated"])


if __name__ == "__main__":
    unittest.main()
