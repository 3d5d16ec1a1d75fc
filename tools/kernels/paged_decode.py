#!/usr/bin/env python3
"""Time decode attention over a paged KV cache, against the same kernel over
a contiguous one and against the collector's two-GEMM stand-in.

Why: the kernel tables (collect.py) time decode attention over a contiguous
cache. vLLM keeps its cache in 16-token pages (SGLang in 1-token pages,
TensorRT-LLM in 32/64-token blocks), and the long-context decode steps of
the in-sample vLLM 0.11 reports run 1.5x the GPU's bare step (docs/
sim-fidelity.md, issue 26). If gathering 16-token pages cost the attention
kernel much of its bandwidth, the simulator would have to price attention by
the engine's page size.

The kernel is this project's own split-KV decode written in Triton: one
program per (sequence, KV head, split), the query heads of a GQA group packed
into one tile, K and V rows gathered through a block table in the layout
vLLM's cache has ([pages, page_size, kv_heads, head_dim]), an online softmax,
and partial outputs combined afterwards. It is not FlashAttention-3; what it
shows is what page granularity costs a kernel that reads a page's rows for one
head (256-byte runs at head_dim 128), which is the access FA3's non-TMA paged
path makes too. The same kernel with one page per sequence is the contiguous
baseline, so the ratio isolates paging.

Pages are drawn at random from a pool of several GiB, as a long-running
server's free list hands them out, and every launch in a timed CUDA graph gets
its own block table, so L2 holds almost nothing of a launch's cache.

Usage: python3 tools/kernels/paged_decode.py --out paged.json [--budget 150] [--splits-only]
"""

import argparse
import json
import math
import os
import sys
import time

import torch
import triton
import triton.language as tl

# The collector's timing and provenance, so that this script's figures
# are taken the way the kernel tables' are.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from collect import Timer, provenance  # noqa: E402

GROUPS = (4, 8)            # query heads per KV head: Qwen3-8B/Llama-8B, Qwen3-32B
KV_HEADS = 8
HEAD_DIM = 128
BATCHES = (1, 8, 64)
CONTEXTS = (1024, 4096, 32768)
PAGES = (1, 16, 64, 0)     # 0: one page per sequence (contiguous)
BLOCK_N = 64
POOL_TOKENS = 2 * 64 * 32768   # twice the largest shape's tokens


@triton.jit
def _split_kv(Q, K, V, BT, O, LSE, L, per, sm_scale,
              stride_qb, stride_bt_b, stride_ob, stride_os, stride_lb,
              KVH: tl.constexpr, G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr,
              PAGE: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    s = tl.program_id(2)
    start = s * per
    end = tl.minimum(start + per, L)
    rows = tl.arange(0, GP)
    d = tl.arange(0, D)
    rmask = rows < G
    q = tl.load(Q + b * stride_qb + (h * G + rows)[:, None] * D + d[None, :], mask=rmask[:, None], other=0.0)
    m = tl.full([GP], float("-inf"), tl.float32)
    l = tl.zeros([GP], tl.float32)
    acc = tl.zeros([GP, D], tl.float32)
    for n0 in range(start, end, BLOCK):
        t = n0 + tl.arange(0, BLOCK)
        tmask = t < end
        page = tl.load(BT + b * stride_bt_b + t // PAGE, mask=tmask, other=0)
        row = page.to(tl.int64) * PAGE + (t % PAGE)
        off = (row * KVH + h) * D
        k = tl.load(K + off[:, None] + d[None, :], mask=tmask[:, None], other=0.0)
        qk = tl.dot(q, tl.trans(k)) * sm_scale
        qk = tl.where(tmask[None, :], qk, float("-inf"))
        m_new = tl.maximum(m, tl.max(qk, 1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(qk - m_new[:, None])
        l = l * alpha + tl.sum(p, 1)
        v = tl.load(V + off[:, None] + d[None, :], mask=tmask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    out = acc / tl.maximum(l, 1e-30)[:, None]
    lse = tl.where(l > 0, m + tl.log(tl.maximum(l, 1e-30)), float("-inf"))
    tl.store(O + b * stride_ob + s * stride_os + (h * G + rows)[:, None] * D + d[None, :], out, mask=rmask[:, None])
    tl.store(LSE + b * stride_lb + s * (KVH * G) + h * G + rows, lse, mask=rmask)


def splits_for(b, L, sms):
    """Splits of the context so the grid covers the GPU about twice, as FA3's
    heuristic aims for, at most 32 (vLLM's cap under CUDA graphs) and no
    split shorter than 256 tokens."""
    want = math.ceil(2 * sms / (b * KV_HEADS))
    return max(1, min(32, want, L // 256))


def launch(q, K, V, bt, o, lse, L, page, g, splits):
    b = q.shape[0]
    per = math.ceil(math.ceil(L / splits) / BLOCK_N) * BLOCK_N
    _split_kv[(b, KV_HEADS, splits)](
        q, K, V, bt, o, lse, L, per, 1.0 / math.sqrt(HEAD_DIM),
        q.stride(0), bt.stride(0), o.stride(0), o.stride(1), lse.stride(0),
        KVH=KV_HEADS, G=g, GP=16, D=HEAD_DIM, PAGE=page, BLOCK=BLOCK_N, num_warps=4)


def combine(o, lse):
    # o [b, s, hq, d], lse [b, s, hq]
    w = torch.softmax(lse, dim=1)
    return (o * w[..., None]).sum(1)


def tables(b, L, page, n, pool_tokens, dev):
    """n block tables of b sequences each, pages drawn at random without
    replacement: two sequences of one launch on the same page would read it
    once from L2 (the first runs drew with replacement, and their contiguous
    64 x 32k baseline, 64 draws from 128 regions, read faster than the
    GPU's bandwidth)."""
    pages = L // page
    npool = pool_tokens // page
    assert b * pages <= npool, "pool too small for distinct pages"
    return [torch.randperm(npool, device=dev)[:b * pages].view(b, pages).to(torch.int32).contiguous()
            for _ in range(n)]


def reference(q, K, V, bt, L, page, g):
    b = q.shape[0]
    rows = (bt.long()[:, :, None] * page + torch.arange(page, device=q.device)).reshape(b, -1)[:, :L]
    k = K[rows].float()          # [b, L, kvh, d]
    v = V[rows].float()
    qf = q.float().view(b, KV_HEADS, g, HEAD_DIM)
    s = torch.einsum("bhgd,blhd->bhgl", qf, k) / math.sqrt(HEAD_DIM)
    p = torch.softmax(s, dim=-1)
    return torch.einsum("bhgl,blhd->bhgd", p, v).reshape(b, KV_HEADS * g, HEAD_DIM)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=150.0)
    ap.add_argument("--splits-only", action="store_true", help="only the split sweep (after the checks)")
    args = ap.parse_args()
    t0 = time.time()
    dev = "cuda"
    torch.manual_seed(0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    prov = provenance(torch)
    prov["collector"] = "tools/kernels/paged_decode.py"
    prov["triton"] = triton.__version__
    doc = {"format": "perflab-kernels-paged/1", "provenance": prov, "rows": [], "checks": [],
           "errors": [], "truncated": []}
    timer = Timer(torch, target_ms=4.0)
    slow = Timer(torch, target_ms=20.0)

    def graph_time_us(fns, est_us, t=timer):
        us, _, reps = t.time_us(fns, est_us)
        return us, reps

    def save():
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)

    K = torch.randn(POOL_TOKENS, KV_HEADS, HEAD_DIM, device=dev, dtype=torch.bfloat16)
    V = torch.randn(POOL_TOKENS, KV_HEADS, HEAD_DIM, device=dev, dtype=torch.bfloat16)
    # Read bandwidth in this run, for the rows' ratio to the GPU.
    big = K.view(-1)
    us, _ = graph_time_us([lambda: big.sum(dtype=torch.float32)], 3000, t=slow)
    doc["read_gbps"] = round(big.numel() * 2 / (us * 1e-6) / 1e9, 1)
    print("read bandwidth %.0f GB/s" % doc["read_gbps"], flush=True)

    # Correctness first, on a small shape for every page size and group.
    for g in GROUPS:
        for page in PAGES:
            L = 1000 if page else 1024
            pg = page or 1024
            Lp = math.ceil(L / pg) * pg
            bt = tables(3, Lp, pg, 1, POOL_TOKENS, dev)[0]
            q = torch.randn(3, KV_HEADS * g, HEAD_DIM, device=dev, dtype=torch.bfloat16)
            sp = 4
            o = torch.empty(3, sp, KV_HEADS * g, HEAD_DIM, device=dev, dtype=torch.float32)
            lse = torch.empty(3, sp, KV_HEADS * g, device=dev, dtype=torch.float32)
            launch(q, K, V, bt, o, lse, L, pg, g, sp)
            err = (combine(o, lse) - reference(q, K, V, bt, L, pg, g)).abs().max().item()
            doc["checks"].append({"group": g, "page": page, "context": L, "max_abs_err": err})
            print("check g=%d page=%d err=%.2e" % (g, page, err), flush=True)
            if not err < 2e-2:
                doc["errors"].append("check g=%d page=%d: max error %g" % (g, page, err))
    save()
    if doc["errors"]:
        sys.exit(1)

    for L in (() if args.splits_only else CONTEXTS):
        for b in BATCHES:
            for g in GROUPS:
                if time.time() - t0 > args.budget:
                    doc["truncated"].append("g=%d b=%d L=%d" % (g, b, L))
                    continue
                kvbytes = 2 * b * L * KV_HEADS * HEAD_DIM * 2
                est = kvbytes / 2.5e12 * 1e6
                q = torch.randn(b, KV_HEADS * g, HEAD_DIM, device=dev, dtype=torch.bfloat16)
                sp = splits_for(b, L, sms)
                o = torch.empty(b, sp, KV_HEADS * g, HEAD_DIM, device=dev, dtype=torch.float32)
                lse = torch.empty(b, sp, KV_HEADS * g, device=dev, dtype=torch.float32)
                row = {"group": g, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "batch": b, "context": L,
                       "splits": sp, "kv_bytes": kvbytes}
                for page in PAGES:
                    pg = page or L
                    n = max(1, min(64, int(4000 / max(est, 1.0))))
                    bts = tables(b, L, pg, n, POOL_TOKENS, dev)

                    def mk(bt, pg=pg):
                        return lambda: launch(q, K, V, bt, o, lse, L, pg, g, sp)
                    try:
                        us, reps = graph_time_us([mk(bt) for bt in bts], est)
                        row["us_page%d" % page if page else "us_contiguous"] = round(us, 3)
                    except Exception as e:
                        doc["errors"].append("g=%d b=%d L=%d page=%d: %r" % (g, b, L, page, e))
                    del bts
                # The collector's two-GEMM stand-in on the same shape, this run.
                try:
                    nc = max(1, min(8, int(200e6 // kvbytes) + 1))
                    kts = [torch.randn(b, KV_HEADS, HEAD_DIM, L, device=dev, dtype=torch.bfloat16) for _ in range(nc)]
                    vs = [torch.randn(b, KV_HEADS, L, HEAD_DIM, device=dev, dtype=torch.bfloat16) for _ in range(nc)]
                    q4 = q.view(b, KV_HEADS, g, HEAD_DIM)

                    def sg(kt, v):
                        return lambda: torch.matmul(torch.softmax(torch.matmul(q4, kt) / math.sqrt(HEAD_DIM), -1), v)
                    us, _ = graph_time_us([sg(kts[i], vs[i]) for i in range(nc)], est)
                    row["us_standin"] = round(us, 3)
                    del kts, vs
                except Exception as e:
                    doc["errors"].append("standin g=%d b=%d L=%d: %r" % (g, b, L, e))
                if "us_contiguous" in row:
                    row["gbps_contiguous"] = round(kvbytes / (row["us_contiguous"] * 1e-6) / 1e9, 1)
                print(json.dumps(row), flush=True)
                doc["rows"].append(row)
                save()
                torch.cuda.empty_cache()
    # How the split count sets a long context's time at small batch: with
    # one split a (sequence, KV head) pair is one program, so 8 programs
    # stream a batch-1 cache on a 132-SM GPU. This is the time a decode
    # kernel that does not split the context would take, the hypothesis
    # the in-sample vLLM 0.11 long-context steps raise (docs/sim-fidelity.md).
    for L in (4096, 32768):
        for b in (1, 8):
            g = 8
            kvbytes = 2 * b * L * KV_HEADS * HEAD_DIM * 2
            q = torch.randn(b, KV_HEADS * g, HEAD_DIM, device=dev, dtype=torch.bfloat16)
            bts = tables(b, L, 16, 16, POOL_TOKENS, dev)
            for sp in (1, 2, 4, 8, 16, 32):
                if time.time() - t0 > args.budget:
                    doc["truncated"].append("splits b=%d L=%d s=%d" % (b, L, sp))
                    continue
                o = torch.empty(b, sp, KV_HEADS * g, HEAD_DIM, device=dev, dtype=torch.float32)
                lse = torch.empty(b, sp, KV_HEADS * g, device=dev, dtype=torch.float32)

                def mk(bt, sp=sp, o=o, lse=lse):
                    return lambda: launch(q, K, V, bt, o, lse, L, 16, g, sp)
                try:
                    us, _ = graph_time_us([mk(bt) for bt in bts], kvbytes / 2.5e12 * 1e6)
                    row = {"group": g, "batch": b, "context": L, "page": 16, "splits": sp,
                           "programs": b * KV_HEADS * sp, "us": round(us, 3),
                           "gbps": round(kvbytes / (us * 1e-6) / 1e9, 1),
                           "gbps_per_program": round(kvbytes / (us * 1e-6) / 1e9 / (b * KV_HEADS * sp), 2)}
                    doc.setdefault("split_rows", []).append(row)
                    print(json.dumps(row), flush=True)
                except Exception as e:
                    doc["errors"].append("splits b=%d L=%d s=%d: %r" % (b, L, sp, e))
            save()
    doc["seconds"] = round(time.time() - t0, 1)
    save()
    print("done in %.0f s, %d rows, %d errors" % (doc["seconds"], len(doc["rows"]), len(doc["errors"])), flush=True)


if __name__ == "__main__":
    main()
