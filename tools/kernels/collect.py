#!/usr/bin/env python3
"""Time the kernels an LLM engine's forward step is made of, on this GPU.

The simulator (internal/sim) turns a batch into a step time. With a table
from this collector it reads the GEMM, attention and MoE times of the GPU
it simulates instead of deriving them from datasheet peaks and one fitted
efficiency, which is what made it transfer badly to other GPUs and to the
small-batch, paced regime (issue 26).

What it times, over the shapes of the catalog's models (internal/sim/models)
at tensor-parallel degrees 1, 2, 4 and 8:
  gemm            BF16 and FP8 (per-tensor scaled, torch._scaled_mm) dense
                  layers: qkv, o, gate_up, down, lm_head; M = tokens in a step
  attn_prefill    causal self-attention over one sequence (SDPA, flash)
  attn_decode     one query token per sequence against a KV cache, GQA,
                  written as two batched GEMMs that read K and V once, the
                  memory traffic a paged decode kernel has
  moe             grouped expert GEMMs (torch._grouped_mm) with tokens
                  routed uniformly over experts
  memory          device-to-device copy and read bandwidth
  decode_step     whole decode steps of the dense models that fit this GPU
                  at TP 1: every layer's GEMMs and decode attention chained
                  in one graph, then the same with the small glue kernels
                  an engine runs between them, and one layer's attention
                  both ways (the two-GEMM stand-in, and SDPA's FlashAttention
                  kernel, which does not split the context)

Each shape is captured in a CUDA graph of R launches, R sized so a replay
lasts a few milliseconds, and the median of several replays divided by R is
recorded: launch gaps stay out, as they do in the engines' graph-captured
decode. Weights rotate over enough copies to overflow L2, since in a model
step each layer reads weights no earlier layer left in cache. Inputs are
random, never zeros.

The output is one JSON document (format perflab-kernels/1) with the GPU,
driver, CUDA, torch and date it was measured with. The run is bounded by
--budget seconds; sections that run out of time say so in "truncated"
rather than failing, and the file is rewritten after every section so a
killed run keeps what it measured.

Usage: python3 tools/kernels/collect.py --out kernels.json [--budget 200]
       python3 tools/kernels/collect.py --plan   (count shapes, no GPU)
"""

import argparse
import datetime
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import time
import traceback

FORMAT = "perflab-kernels/1"
TPS = (1, 2, 4, 8)
GEMM_M = (1, 4, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
LMHEAD_M = (1, 4, 16, 64, 256, 1024)
PREFILL_S = (128, 512, 1024, 2048, 4096, 8192, 16384, 32768)
DECODE_B = (1, 4, 16, 64, 256)
DECODE_L = (256, 1024, 4096, 16384, 65536)
MOE_T = (1, 4, 16, 64, 256, 1024, 4096, 16384)
# Bytes of KV cache a decode shape may allocate; larger shapes are skipped
# (they are outside what one GPU holds next to its weights anyway).
DECODE_KV_CAP = 24 << 30
# Whole decode steps: batch and context; models whose BF16 weights and the
# step's KV cache do not fit next to each other are skipped per shape.
STEP_B = (1, 4, 16, 64, 256)
STEP_L = (1024, 4096, 32768)
STEP_DTYPES = ("bf16", "fp8")
# Glue kernels per decoder layer in an engine's graph-captured decode of a
# dense GQA model, counted in vLLM's Qwen3/Llama forward: fused add+RMSNorm
# twice, the q and k RMSNorms (Qwen3; Llama has none), rotary embedding,
# the KV-cache write and SiLU-and-mul. Each is a small launch-bound kernel.
STEP_GLUE = {"qwen3": ("hidden", "qkv", "qkv", "qkv", "qkv", "hidden", "gate_up"),
             "llama": ("hidden", "qkv", "qkv", "hidden", "gate_up")}
# Where tensors live; the checks in tools/kernels/collect_test.py run the
# step on the CPU.
DEVICE = "cuda"


def here():
    return os.path.dirname(os.path.abspath(__file__))


def load_models(root):
    models = {}
    for path in sorted(glob.glob(os.path.join(root, "internal", "sim", "models", "*.json"))):
        with open(path) as f:
            models[os.path.basename(path)[:-5]] = json.load(f)
    return models


def hybrid(c):
    """Whether a config mixes linear-attention layers in (Qwen3.5 names
    them by full_attention_interval, others by layer_types)."""
    return "layer_types" in c or c.get("full_attention_interval", 1) > 1 or "linear_num_key_heads" in c


def dims(c):
    """A config's hidden size, query heads, KV heads, head dim, MLP width and
    vocabulary."""
    h = c["hidden_size"]
    heads = c["num_attention_heads"]
    return (h, heads, c["num_key_value_heads"], c.get("head_dim") or h // heads,
            c["intermediate_size"], c["vocab_size"])


def div(a, tp):
    """a split over tp ranks, or None where it does not split evenly."""
    if a % tp:
        return None
    return a // tp


def plan(models):
    """The shapes to time, deduplicated, each with the layers that use it."""
    gemm = {}  # (n, k, kind) -> set of users
    attn = {}  # (heads, kv_heads, head_dim) -> users
    moe = {}  # (experts, topk, n, k) -> users

    def add(d, key, user):
        d.setdefault(key, set()).add(user)

    for name, c in models.items():
        h, heads, kv, hd, inter, vocab = dims(c)
        experts = c.get("num_experts", 0)
        for tp in TPS:
            user = "%s/tp%d" % (name, tp)
            hq = div(heads, tp)
            if hq is None:
                continue
            hkv = max(1, kv // tp)  # engines replicate KV heads past tp == kv
            add(gemm, ((hq + 2 * hkv) * hd, h, "dense"), user + "/qkv")
            add(gemm, (h, hq * hd, "dense"), user + "/o")
            add(attn, (hq, hkv, hd), user)
            v = div(vocab, tp)
            if v is not None:
                add(gemm, (v, h, "lm_head"), user + "/lm_head")
            if experts:
                mi = div(c["moe_intermediate_size"], tp)
                if mi is not None and mi % 16 == 0:
                    topk = c["num_experts_per_tok"]
                    add(moe, (experts, topk, 2 * mi, h), user + "/moe_gate_up")
                    add(moe, (experts, topk, h, mi), user + "/moe_down")
            else:
                i = div(inter, tp)
                if i is not None:
                    add(gemm, (2 * i, h, "dense"), user + "/gate_up")
                    add(gemm, (h, i, "dense"), user + "/down")
    return gemm, attn, moe


def provenance(torch):
    p = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "collector": "tools/kernels/collect.py",
    }
    props = torch.cuda.get_device_properties(0)
    p["gpu"] = props.name
    p["sm_count"] = props.multi_processor_count
    p["memory_bytes"] = props.total_memory
    p["compute_capability"] = "%d.%d" % (props.major, props.minor)
    p["l2_bytes"] = getattr(props, "L2_cache_size", None)
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,clocks.max.mem,power.limit,name",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
        if out:
            f = [x.strip() for x in out[0].split(",")]
            p["driver"] = f[0]
            p["sm_clock_max_mhz"] = f[1]
            p["mem_clock_max_mhz"] = f[2]
            p["power_limit_w"] = f[3]
    except Exception as e:  # nvidia-smi missing: keep what torch said
        p["driver_error"] = repr(e)
    try:
        p["cublas"] = torch.backends.cuda.preferred_blas_library().name
    except Exception:
        pass
    return p


class Timer:
    """Times a callable by CUDA-graph replays, falling back to events."""

    def __init__(self, torch, target_ms=3.0, replays=5):
        self.torch = torch
        self.target_ms = target_ms
        self.replays = replays

    def time_us(self, fns, est_us):
        """Median microseconds per call of the callables in fns, run in turn.

        fns is a list of zero-argument callables that do the same work on
        different buffers (the rotation that keeps L2 cold)."""
        torch = self.torch
        reps = int(max(len(fns), min(400, (self.target_ms * 1000.0) / max(est_us, 1.0))))
        reps = max(2, reps)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for f in fns[:3]:
                f()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        try:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for i in range(reps):
                    fns[i % len(fns)]()
            g.replay()
            torch.cuda.synchronize()
            times = []
            for _ in range(self.replays):
                a = torch.cuda.Event(enable_timing=True)
                b = torch.cuda.Event(enable_timing=True)
                a.record()
                g.replay()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) * 1000.0 / reps)
            del g
            return statistics.median(times), "graph", reps
        except Exception:
            torch.cuda.synchronize()
            times = []
            for _ in range(self.replays):
                a = torch.cuda.Event(enable_timing=True)
                b = torch.cuda.Event(enable_timing=True)
                a.record()
                for i in range(reps):
                    fns[i % len(fns)]()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) * 1000.0 / reps)
            return statistics.median(times), "events", reps


def copies_for(nbytes, l2):
    """How many copies of a weight overflow L2 three times over (capped)."""
    want = 3 * (l2 or (64 << 20))
    return int(min(16, max(1, math.ceil(want / max(nbytes, 1)))))


class Collector:
    def __init__(self, torch, args):
        self.torch = torch
        self.args = args
        self.t0 = time.time()
        self.timer = Timer(torch)
        self.doc = {"format": FORMAT, "provenance": provenance(torch), "truncated": [],
                    "errors": [], "gemm": [], "attn_prefill": [], "attn_decode": [],
                    "moe": [], "memory": {}, "decode_step": []}
        self.l2 = self.doc["provenance"].get("l2_bytes")
        self.peak_tflops = 700.0
        self.peak_gbps = 3000.0

    def left(self):
        return self.args.budget - (time.time() - self.t0)

    def save(self):
        self.doc["seconds"] = round(time.time() - self.t0, 1)
        tmp = self.args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, separators=(",", ":"))
        os.replace(tmp, self.args.out)

    def error(self, what, e):
        if len(self.doc["errors"]) < 200:
            self.doc["errors"].append({"what": what, "error": repr(e)[:300]})

    def randn(self, *shape, dtype=None):
        torch = self.torch
        return torch.randn(*shape, device=DEVICE, dtype=dtype or torch.bfloat16)

    # -- memory ----------------------------------------------------------
    def memory(self):
        torch = self.torch
        n = 1 << 30  # 1 GiB of bf16 each way
        src = self.randn(n // 2)
        dst = torch.empty_like(src)
        us, how, reps = self.timer.time_us([lambda: dst.copy_(src)], 2 * n / 3e6)
        copy = 2 * n / (us * 1e-6) / 1e9
        us2, _, _ = self.timer.time_us([lambda: torch.sum(src, dtype=torch.float32)], n / 3e6)
        read = n / (us2 * 1e-6) / 1e9
        self.doc["memory"] = {"copy_gbps": round(copy, 1), "read_gbps": round(read, 1),
                              "bytes": n, "timing": how}
        self.peak_gbps = max(copy, read)
        # A large bf16 GEMM for the compute ceiling (and the clocks' warm-up).
        a = self.randn(8192, 8192)
        b = self.randn(8192, 8192)
        c = torch.empty_like(a)
        for _ in range(20):
            torch.matmul(a, b, out=c)
        us3, _, _ = self.timer.time_us([lambda: torch.matmul(a, b, out=c)], 1500)
        self.doc["memory"]["bf16_8192_tflops"] = round(2 * 8192 ** 3 / (us3 * 1e-6) / 1e12, 1)
        self.peak_tflops = self.doc["memory"]["bf16_8192_tflops"]
        del src, dst, a, b, c
        torch.cuda.empty_cache()

    def est_us(self, flops, nbytes, tflops_scale=1.0):
        return max(flops / (self.peak_tflops * tflops_scale * 1e6), nbytes / (self.peak_gbps * 1e3)) + 3.0

    # -- dense GEMMs -----------------------------------------------------
    def gemm(self, shapes, dtype, deadline):
        torch = self.torch
        fp8 = dtype == "fp8"
        keys = sorted(shapes, key=lambda x: (x[0] * x[1]))
        for (n, k, kind) in keys:
            ms = LMHEAD_M if kind == "lm_head" else GEMM_M
            wbytes = n * k * (1 if fp8 else 2)
            ncopy = copies_for(wbytes, self.l2)
            try:
                if fp8:
                    ws = [self.randn(n, k).to(torch.float8_e4m3fn) for _ in range(ncopy)]
                    sa = torch.tensor(1.0, device="cuda", dtype=torch.float32)
                    sb = torch.tensor(1.0, device="cuda", dtype=torch.float32)
                else:
                    ws = [self.randn(k, n) for _ in range(ncopy)]
            except Exception as e:
                self.error("alloc gemm %s %dx%d" % (dtype, n, k), e)
                continue
            for m in ms:
                if time.time() > deadline:
                    self.doc["truncated"].append("gemm-%s at n=%d k=%d m=%d" % (dtype, n, k, m))
                    return
                try:
                    mm = m
                    if fp8:
                        mm = max(16, (m + 15) // 16 * 16)
                        a = self.randn(mm, k).to(torch.float8_e4m3fn)

                        def mk(w):
                            return lambda: torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb,
                                                            out_dtype=torch.bfloat16, use_fast_accum=True)
                    else:
                        a = self.randn(mm, k)

                        def mk(w):
                            return lambda: torch.matmul(a, w)
                    fns = [mk(w) for w in ws]
                    flops = 2.0 * mm * n * k
                    nbytes = wbytes + mm * k * (1 if fp8 else 2) + mm * n * 2
                    us, how, reps = self.timer.time_us(fns, self.est_us(flops, nbytes, 2.0 if fp8 else 1.0))
                    self.doc["gemm"].append({"dtype": dtype, "kind": kind, "m": m, "m_run": mm, "n": n, "k": k,
                                             "us": round(us, 3), "tflops": round(flops / (us * 1e-6) / 1e12, 2),
                                             "gbps": round(nbytes / (us * 1e-6) / 1e9, 1), "timing": how})
                    del a, fns
                except Exception as e:
                    self.error("gemm %s m=%d n=%d k=%d" % (dtype, m, n, k), e)
            del ws
            torch.cuda.empty_cache()

    # -- attention -------------------------------------------------------
    def attn_prefill(self, shapes, deadline):
        torch = self.torch
        F = torch.nn.functional
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            ctx = lambda: sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                                       SDPBackend.EFFICIENT_ATTENTION])
        except Exception:
            import contextlib
            ctx = contextlib.nullcontext
        with ctx():
            self._attn_prefill(shapes, deadline, F)

    def _attn_prefill(self, shapes, deadline, F):
        torch = self.torch
        for (hq, hkv, hd) in sorted(shapes):
            for s in PREFILL_S:
                if time.time() > deadline:
                    self.doc["truncated"].append("attn_prefill at h=%d s=%d" % (hq, s))
                    return
                try:
                    q = self.randn(1, hq, s, hd)
                    k = self.randn(1, hkv, s, hd)
                    v = self.randn(1, hkv, s, hd)
                    gqa = hq != hkv
                    if gqa:
                        f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                    else:
                        f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    flops = 4.0 * hq * hd * s * s / 2  # causal: half the score matrix
                    us, how, reps = self.timer.time_us([f], self.est_us(flops, 0))
                    self.doc["attn_prefill"].append({"heads": hq, "kv_heads": hkv, "head_dim": hd, "seq": s,
                                                     "us": round(us, 3),
                                                     "tflops": round(flops / (us * 1e-6) / 1e12, 2),
                                                     "timing": how})
                    del q, k, v
                except Exception as e:
                    self.error("attn_prefill h=%d kv=%d d=%d s=%d" % (hq, hkv, hd, s), e)
            torch.cuda.empty_cache()

    def attn_decode(self, shapes, deadline):
        torch = self.torch
        for (hq, hkv, hd) in sorted(shapes):
            g = hq // hkv
            for b in DECODE_B:
                for L in DECODE_L:
                    kvbytes = 2 * b * hkv * L * hd * 2
                    if kvbytes > DECODE_KV_CAP:
                        continue
                    if time.time() > deadline:
                        self.doc["truncated"].append("attn_decode at h=%d b=%d L=%d" % (hq, b, L))
                        return
                    try:
                        # Enough cache copies to overflow L2: a step's layers
                        # each read their own cache.
                        nc = copies_for(kvbytes, self.l2)
                        kts = [self.randn(b, hkv, hd, L) for _ in range(nc)]
                        vs = [self.randn(b, hkv, L, hd) for _ in range(nc)]
                        q = self.randn(b, hkv, g, hd)
                        scale = 1.0 / math.sqrt(hd)

                        def mk(kt, v):
                            def f():
                                s = torch.matmul(q, kt) * scale
                                p = torch.softmax(s, dim=-1)
                                return torch.matmul(p, v)
                            return f
                        fns = [mk(kts[i], vs[i]) for i in range(nc)]
                        us, how, reps = self.timer.time_us(fns, self.est_us(0, kvbytes))
                        self.doc["attn_decode"].append({"heads": hq, "kv_heads": hkv, "head_dim": hd, "batch": b,
                                                        "context": L, "us": round(us, 3),
                                                        "gbps": round(kvbytes / (us * 1e-6) / 1e9, 1),
                                                        "timing": how})
                        del kts, vs, q, fns
                    except Exception as e:
                        self.error("attn_decode h=%d kv=%d d=%d b=%d L=%d" % (hq, hkv, hd, b, L), e)
                torch.cuda.empty_cache()

    # -- MoE -------------------------------------------------------------
    def moe(self, shapes, deadline):
        torch = self.torch
        have_grouped = hasattr(torch, "_grouped_mm")
        routes = {}
        for (e, topk, n, k) in sorted(shapes):
            try:
                w = self.randn(e, n, k)  # experts' weights, as the engines store them
            except Exception as ex:
                self.error("alloc moe e=%d n=%d k=%d" % (e, n, k), ex)
                continue
            for t in MOE_T:
                if time.time() > deadline:
                    self.doc["truncated"].append("moe at n=%d k=%d t=%d" % (n, k, t))
                    return
                try:
                    if (e, topk, t) not in routes:
                        gen = torch.Generator(device="cpu").manual_seed(t)
                        # Uniform routing: each token picks topk distinct experts.
                        picks = torch.stack([torch.randperm(e, generator=gen)[:topk] for _ in range(min(t, 4096))])
                        if t > 4096:
                            picks = picks.repeat((t + 4095) // 4096, 1)[:t]
                        routes[(e, topk, t)] = torch.bincount(picks.flatten(), minlength=e)
                    counts = routes[(e, topk, t)]
                    active = int((counts > 0).sum())
                    # Grouped GEMMs want each group's rows aligned to 16.
                    padded = ((counts + 15) // 16) * 16
                    padded[counts == 0] = 0
                    rows = int(padded.sum())
                    offs = torch.cumsum(padded, 0).to(torch.int32).cuda()
                    a = self.randn(max(rows, 16), k)
                    how = None
                    if have_grouped:
                        f = lambda: torch._grouped_mm(a, w.transpose(-2, -1), offs=offs, out_dtype=torch.bfloat16)
                        try:
                            f()
                            torch.cuda.synchronize()
                            how = "grouped_mm"
                        except Exception as ex:
                            self.error("grouped_mm e=%d n=%d k=%d t=%d" % (e, n, k, t), ex)
                    if how is None:
                        idx = [i for i in range(e) if int(counts[i]) > 0]
                        starts = torch.cumsum(padded, 0) - padded
                        slices = [(int(starts[i]), int(padded[i]), i) for i in idx]

                        def f():
                            for s0, ln, i in slices:
                                torch.matmul(a[s0:s0 + ln], w[i].t())
                        how = "loop"
                    flops = 2.0 * rows * n * k
                    nbytes = active * n * k * 2 + rows * (n + k) * 2
                    us, timing, reps = self.timer.time_us([f], self.est_us(flops, nbytes))
                    self.doc["moe"].append({"experts": e, "topk": topk, "n": n, "k": k, "tokens": t,
                                            "rows": rows, "active_experts": active, "us": round(us, 3),
                                            "tflops": round(flops / (us * 1e-6) / 1e12, 2),
                                            "gbps": round(nbytes / (us * 1e-6) / 1e9, 1),
                                            "impl": how, "timing": timing})
                    del a
                except Exception as ex:
                    self.error("moe e=%d n=%d k=%d t=%d" % (e, n, k, t), ex)
            del w
            torch.cuda.empty_cache()

    # -- whole decode steps ----------------------------------------------
    def free_bytes(self):
        return self.torch.cuda.mem_get_info()[0]

    def decode_step(self, models, deadline):
        """Time whole decode steps of each dense model that fits at TP 1.

        The table's kernels are each timed alone, over rotated copies; an
        engine runs them back to back, one layer's GEMMs after another's
        attention, with small glue kernels between. This times that chain
        (kernels_us), the chain with the glue (step_us), and what one small
        kernel costs inside a graph (floor_us), so the simulator's step can
        be checked against a step measured whole. FP8 steps quantize the
        decoder layers' GEMMs and keep the LM head in BF16, as vLLM's and
        SGLang's FP8 checkpoints do."""
        torch = self.torch
        for name in sorted(models):
            c = models[name]
            if c.get("num_experts", 0) or c.get("quantization_config") or hybrid(c):
                continue  # dense full-attention BF16 checkpoints only
            for dtype in STEP_DTYPES:
                if time.time() > deadline:
                    self.doc["truncated"].append("decode_step at %s %s" % (name, dtype))
                    return
                self._model_steps(name, c, dtype, deadline)

    def _model_steps(self, name, c, dtype, deadline):
        torch = self.torch
        fp8 = dtype == "fp8"
        h, hq, hkv, hd, inter, vocab = dims(c)
        nl = c["num_hidden_layers"]
        fam = "qwen3" if "qwen" in name.lower() else "llama"
        layer_w = (h * (hq + 2 * hkv) * hd + hq * hd * h + 3 * h * inter) * (1 if fp8 else 2)
        wbytes = nl * layer_w + vocab * h * 2
        if wbytes + (4 << 30) > self.free_bytes():
            self.doc["truncated"].append("decode_step %s %s: %.1f GB of weights do not fit" % (name, dtype, wbytes / 1e9))
            return
        try:
            def w(k, n):
                if fp8:  # stored [n, k] and used transposed, as _scaled_mm wants
                    return self.randn(n, k).to(torch.float8_e4m3fn)
                return self.randn(k, n)
            layers = [dict(qkv=w(h, (hq + 2 * hkv) * hd), o=w(hq * hd, h), gu=w(h, 2 * inter), down=w(inter, h))
                      for _ in range(nl)]
            lm = self.randn(h, vocab)
        except Exception as e:
            self.error("alloc decode_step %s %s" % (name, dtype), e)
            torch.cuda.empty_cache()
            return
        left = self.free_bytes() - (3 << 30)
        shape = dict(name=name, fam=fam, dtype=dtype, h=h, hq=hq, hkv=hkv, hd=hd, inter=inter)
        for b in STEP_B:
            for L in STEP_L:
                kvbytes = nl * 2 * b * hkv * L * hd * 2
                if kvbytes > min(left, DECODE_KV_CAP):
                    continue
                if time.time() > deadline:
                    self.doc["truncated"].append("decode_step at %s %s b=%d L=%d" % (name, dtype, b, L))
                    del layers, lm
                    torch.cuda.empty_cache()
                    return
                try:
                    self.doc["decode_step"].append(self._step(shape, layers, lm, b, L))
                except Exception as e:
                    self.error("decode_step %s %s b=%d L=%d" % (name, dtype, b, L), e)
                torch.cuda.empty_cache()
        del layers, lm
        torch.cuda.empty_cache()

    def timer_for(self, target_ms):
        return Timer(self.torch, target_ms=target_ms, replays=5)

    def _step(self, sh, layers, lm, b, L):
        torch = self.torch
        F = torch.nn.functional
        h, hq, hkv, hd, inter = sh["h"], sh["hq"], sh["hkv"], sh["hd"], sh["inter"]
        fp8 = sh["dtype"] == "fp8"
        g = hq // hkv
        nl = len(layers)
        scale = 1.0 / math.sqrt(hd)
        kts = [self.randn(b, hkv, hd, L) for _ in range(nl)]
        vs = [self.randn(b, hkv, L, hd) for _ in range(nl)]
        mm = max(16, (b + 15) // 16 * 16) if fp8 else b

        def act(k):
            a = self.randn(mm, k)
            return a.to(torch.float8_e4m3fn) if fp8 else a
        x, xa, xi = act(h), act(hq * hd), act(inter)
        xl = self.randn(b, h)
        q = self.randn(b, hkv, g, hd)
        qkv_o = torch.empty(mm, (hq + 2 * hkv) * hd, device=DEVICE, dtype=torch.bfloat16)
        h_o = torch.empty(mm, h, device=DEVICE, dtype=torch.bfloat16)
        gu_o = torch.empty(mm, 2 * inter, device=DEVICE, dtype=torch.bfloat16)
        logits = torch.empty(b, lm.shape[1], device=DEVICE, dtype=torch.bfloat16)
        one_s = torch.tensor(1.0, device=DEVICE, dtype=torch.float32)
        # Stand-ins for the glue: each one small in-place kernel over the
        # tensor the engine's kernel touches, so the launches and the bytes
        # are the engine's while the arithmetic is not.
        over = {"hidden": h_o, "qkv": qkv_o, "gate_up": gu_o}
        glue_t = [over[w] for w in STEP_GLUE[sh["fam"]]]

        if fp8:
            def gemm(a, w, out):
                return torch._scaled_mm(a, w.t(), scale_a=one_s, scale_b=one_s, out_dtype=torch.bfloat16,
                                        use_fast_accum=True)
        else:
            def gemm(a, w, out):
                return torch.matmul(a, w, out=out)

        def attn(l):
            s = torch.matmul(q, kts[l]) * scale
            p = torch.softmax(s, dim=-1)
            return torch.matmul(p, vs[l])

        def run(glue):
            for l, w in enumerate(layers):
                gemm(x, w["qkv"], qkv_o)
                attn(l)
                gemm(xa, w["o"], h_o)
                gemm(x, w["gu"], gu_o)
                gemm(xi, w["down"], h_o)
                if glue:
                    for t in glue_t:
                        t.mul_(0.5)
            torch.matmul(xl, lm, out=logits)
            if glue:
                torch.argmax(logits, dim=-1)

        per_layer = h * (hq + 2 * hkv) * hd + hq * hd * h + 3 * h * inter
        flops = 2.0 * mm * nl * per_layer + 2.0 * b * h * lm.shape[1]
        nbytes = nl * (per_layer * (1 if fp8 else 2) + 2 * b * hkv * L * hd * 2) + h * lm.shape[1] * 2
        est = self.est_us(flops, nbytes, 2.0 if fp8 else 1.0)
        # A step already lasts milliseconds: the graph holds two of them and
        # each replay is timed whole.
        timer = self.timer_for(est / 1000.0)
        kern, how, _ = timer.time_us([lambda: run(False)], est)
        step, _, _ = timer.time_us([lambda: run(True)], est)
        one = self.timer
        fl, _, _ = one.time_us([lambda: h_o.mul_(0.5)], 3.0)
        nc = min(nl, 8)
        proxy, _, _ = one.time_us([lambda l=l: attn(l) for l in range(nc)],
                                  self.est_us(0, 2 * b * hkv * L * hd * 2))
        row = {"model": sh["name"], "dtype": sh["dtype"], "batch": b, "m_run": mm, "context": L, "layers": nl,
               "kernels_us": round(kern, 1), "step_us": round(step, 1), "glue_kernels_per_layer": len(glue_t),
               "floor_us": round(fl, 3), "attn_proxy_us": round(proxy, 3), "timing": how}
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            qs = self.randn(b, hq, 1, hd)
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                fns = [lambda l=l: F.scaled_dot_product_attention(qs, vs[l], vs[l], enable_gqa=True)
                       for l in range(nc)]
                sd, _, _ = one.time_us(fns, proxy)
            row["attn_flash_us"] = round(sd, 3)
        except Exception as e:
            self.error("decode_step flash %s b=%d L=%d" % (sh["name"], b, L), e)
        del kts, vs
        return row

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="kernels.json")
    ap.add_argument("--budget", type=float, default=200.0, help="seconds for the whole run")
    ap.add_argument("--plan", action="store_true", help="print the shapes and exit (no GPU needed)")
    ap.add_argument("--root", default=os.path.join(here(), "..", ".."))
    ap.add_argument("--sections", default="", help="comma-separated sections to run (default: all)")
    args = ap.parse_args()
    models = load_models(args.root)
    gemm, attn, moe = plan(models)
    ngemm = sum(len(LMHEAD_M if key[2] == "lm_head" else GEMM_M) for key in gemm)
    print("models %d; gemm shapes %d (%d points per dtype); attention head sets %d; moe shapes %d"
          % (len(models), len(gemm), ngemm, len(attn), len(moe)))
    if args.plan:
        for key in sorted(gemm):
            print("gemm n=%d k=%d %s: %s" % (key[0], key[1], key[2], ", ".join(sorted(gemm[key]))[:120]))
        for key in sorted(attn):
            print("attn heads=%d kv=%d d=%d" % key)
        for key in sorted(moe):
            print("moe e=%d topk=%d n=%d k=%d" % key)
        return 0
    import torch
    if not torch.cuda.is_available():
        print("collect: no CUDA device; nothing measured", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    c = Collector(torch, args)
    print("gpu:", json.dumps(c.doc["provenance"]))
    sys.stdout.flush()
    # Shares of the budget per section, in order of what the simulator
    # needs most; a section that finishes early leaves its time to the next.
    sections = [
        ("memory", 0.04, lambda d: c.memory()),
        ("gemm-bf16", 0.30, lambda d: c.gemm(gemm, "bf16", d)),
        ("attn_decode", 0.14, lambda d: c.attn_decode(attn, d)),
        ("gemm-fp8", 0.22, lambda d: c.gemm(gemm, "fp8", d)),
        ("attn_prefill", 0.12, lambda d: c.attn_prefill(attn, d)),
        ("moe", 0.18, lambda d: c.moe(moe, d)),
        ("decode_step", 0.25, lambda d: c.decode_step(models, d)),
    ]
    if args.sections:
        want = set(args.sections.split(","))
        sections = [s for s in sections if s[0] in want or s[0] == "memory"]
    share_left = sum(s for _, s, _ in sections)
    for name, share, fn in sections:
        t = time.time()
        deadline = t + c.left() * share / share_left
        share_left -= share
        try:
            fn(deadline)
        except Exception as e:
            c.error("section " + name, e)
            traceback.print_exc()
        c.save()
        print("%-12s %6.1f s  rows: gemm %d, decode %d, prefill %d, moe %d, steps %d; errors %d"
              % (name, time.time() - t, len(c.doc["gemm"]), len(c.doc["attn_decode"]),
                 len(c.doc["attn_prefill"]), len(c.doc["moe"]), len(c.doc["decode_step"]),
                 len(c.doc["errors"])))
        sys.stdout.flush()
    c.save()
    print("memory:", json.dumps(c.doc["memory"]))
    print("truncated:", c.doc["truncated"])
    for e in c.doc["errors"][:8]:
        print("error:", e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
