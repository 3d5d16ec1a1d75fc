package sim

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/reference.json from ../shared/reference")

// sharedDir finds ../shared relative to the module root.
func sharedDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
	shared := filepath.Join(dir, "..", "shared")
	if _, err := os.Stat(filepath.Join(shared, "reference")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("shared test data missing: %v", err)
		}
		t.Skipf("shared test data missing: %v", err)
	}
	return shared
}

func bp(b bool) *bool { return &b }

// caseMeta describes each result block of each report, in the order the
// blocks appear; the measured figures are read from the report itself.
type caseMeta struct {
	id, label string
	p         Params
	w         Workload
	exclude   string
	note      string
}

func referenceMeta() map[string][]caseMeta {
	sg := Workload{Kind: "sharegpt", NumPrompts: 1000, Client: "vllm"}
	rnd := func(n, in, out int) Workload {
		return Workload{Kind: "random", NumPrompts: n, InputLen: in, OutputLen: out, Client: "vllm"}
	}
	v11 := func(model string) Params { return Params{Engine: "vllm", Version: "0.11.0", Model: model, GPU: "H100"} }
	sg55 := func(model string) Params {
		return Params{Engine: "sglang", Version: "0.5.5.post1", Model: model, GPU: "H100"}
	}
	trt := func(model string) Params {
		return Params{Engine: "trtllm", Version: "1.2.0rc1", Model: model, GPU: "H100"}
	}
	with := func(p Params, f func(*Params)) Params { f(&p); return p }
	other := func(prefix string, p Params) []caseMeta {
		return []caseMeta{
			{id: prefix + "/random-32k", label: "random 32000 in / 100 out", p: p, w: rnd(100, 32000, 100)},
			{id: prefix + "/random-4k", label: "random 4000 in / 200 out", p: p, w: rnd(500, 4000, 200)},
			{id: prefix + "/random-2k", label: "random 2000 in / 100 out", p: p, w: rnd(500, 2000, 100)},
			{id: prefix + "/random-128", label: "random 128 in / 4 out", p: p, w: rnd(1000, 128, 4)},
		}
	}
	m := map[string][]caseMeta{}
	m["qwen3-14b-h100.md"] = append([]caseMeta{
		{id: "14b/vllm", label: "vLLM default", p: v11("Qwen3-14B"), w: sg},
		{id: "14b/sglang", label: "SGLang default", p: sg55("Qwen3-14B"), w: sg},
		{id: "14b/trtllm", label: "TensorRT-LLM default", p: trt("Qwen3-14B"), w: sg},
		{id: "14b/sglang-fp8", label: "SGLang FP8", p: sg55("Qwen3-14B-FP8"), w: sg},
		{id: "14b/sglang-fp8-fa3", label: "SGLang FP8 --attention-backend=fa3", p: with(sg55("Qwen3-14B-FP8"), func(p *Params) { p.AttentionBackend = "fa3" }), w: sg},
		{id: "14b/sglang-fp8-flashinfer", label: "SGLang FP8 --attention-backend=flashinfer", p: with(sg55("Qwen3-14B-FP8"), func(p *Params) { p.AttentionBackend = "flashinfer" }), w: sg},
		{id: "14b/sglang-fp8-triton", label: "SGLang FP8 --attention-backend=triton", p: with(sg55("Qwen3-14B-FP8"), func(p *Params) { p.AttentionBackend = "triton" }), w: sg},
	}, append(other("14b/vllm", v11("Qwen3-14B")), other("14b/sglang-fp8", sg55("Qwen3-14B-FP8"))...)...)
	trtOpt := with(trt("Qwen3-32B-FP8"), func(p *Params) { p.MaxModelLen = 40960; p.ChunkedPrefill = bp(true) })
	m["qwen3-32b-h100.md"] = append([]caseMeta{
		{id: "32b/vllm", label: "vLLM default", p: v11("Qwen3-32B"), w: sg},
		{id: "32b/sglang", label: "SGLang default", p: sg55("Qwen3-32B"), w: sg},
		{id: "32b/trtllm", label: "TensorRT-LLM default", p: trt("Qwen3-32B"), w: sg},
		{id: "32b/trtllm-fp8", label: "TensorRT-LLM FP8", p: trt("Qwen3-32B-FP8"), w: sg,
			note: "the report's serving script for this block says sglang.launch_server, but its heading, summary (+50.6% over the TensorRT-LLM baseline) and the next step are TensorRT-LLM; read as trtllm-serve Qwen/Qwen3-32B-FP8"},
		{id: "32b/trtllm-fp8-chunked", label: "TensorRT-LLM FP8 --max_seq_len=40960 --enable_chunked_prefill", p: trtOpt, w: sg},
	}, append(other("32b/vllm", v11("Qwen3-32B")), other("32b/trtllm-fp8-chunked", trtOpt)...)...)

	g := func(kind string, n, in, out int, rate float64, conc int) Workload {
		return Workload{Kind: kind, NumPrompts: n, InputLen: in, OutputLen: out, RequestRate: rate, MaxConcurrency: conc, Client: "guidellm"}
	}
	gsg := g("sharegpt", 1000, 0, 0, 1000, 512)
	v17 := func(f func(*Params)) Params {
		p := Params{Engine: "vllm", Version: "0.17.1", Model: "Qwen3.5-9B", GPU: "H100", MaxModelLen: 32768}
		if f != nil {
			f(&p)
		}
		return p
	}
	perf := func(seqs, tokens int) Params {
		return v17(func(p *Params) { p.PerformanceMode = "throughput"; p.MaxNumSeqs = seqs; p.MaxNumBatchedTokens = tokens })
	}
	dup := "duplicate of an earlier block with identical figures"
	m["qwen3.5-9b-h100.md"] = []caseMeta{
		{id: "9b/vllm", label: "vLLM default", p: v17(nil), w: gsg},
		{id: "9b/sglang", label: "SGLang default", p: Params{Engine: "sglang", Version: "0.5.9", Model: "Qwen3.5-9B", GPU: "H100", MaxModelLen: 32768}, w: gsg},
		{id: "9b/vllm-prefix", label: "vLLM --enable-prefix-caching", p: v17(func(p *Params) { p.PrefixCaching = bp(true) }), w: gsg},
		{id: "9b/vllm-mtp4", label: "vLLM MTP speculative decoding, 4 tokens", p: v17(func(p *Params) { p.SpecMethod = "mtp"; p.SpecTokens = 4 }), w: gsg,
			exclude: "incomplete run: only 514 of 1000 requests succeeded (the report skips it too)"},
		{id: "9b/vllm-perf", label: "vLLM --performance-mode=throughput", p: perf(0, 0), w: gsg},
		{id: "9b/vllm-seqs512", label: "vLLM --max-num-seqs=512", p: v17(func(p *Params) { p.MaxNumSeqs = 512 }), w: gsg},
		{id: "9b/vllm-seqs1024", label: "vLLM --max-num-seqs=1024", p: v17(func(p *Params) { p.MaxNumSeqs = 1024 }), w: gsg},
		{id: "9b/vllm-seqs2048", label: "vLLM --max-num-seqs=2048", p: v17(func(p *Params) { p.MaxNumSeqs = 2048 }), w: gsg},
		{id: "9b/vllm-perf-24k", label: "vLLM throughput mode, --max-num-batched-tokens=24576", p: perf(0, 24576), w: gsg},
		{id: "9b/vllm-perf-32k", label: "vLLM throughput mode, --max-num-batched-tokens=32768", p: perf(0, 32768), w: gsg},
		{id: "9b/vllm-perf-seqs256", label: "vLLM throughput mode, --max-num-seqs=256", p: perf(256, 0), w: gsg},
		{id: "9b/vllm-perf-seqs512", label: "vLLM throughput mode, --max-num-seqs=512", p: perf(512, 0), w: gsg},
		{id: "9b/vllm-perf-32k-seqs512", label: "vLLM throughput mode, 32768 batched tokens, 512 seqs", p: perf(512, 32768), w: gsg},
		{id: "9b/vllm-perf-32k-seqs512-b", label: "vLLM throughput mode, 32768 batched tokens, 512 seqs (repeated)", p: perf(512, 32768), w: gsg, exclude: dup},
		{id: "9b/vllm-perf-48k-seqs512", label: "vLLM throughput mode, 49152 batched tokens, 512 seqs", p: perf(512, 49152), w: gsg},
		{id: "9b/vllm-perf-48k-seqs768", label: "vLLM throughput mode, 49152 batched tokens, 768 seqs", p: perf(768, 49152), w: gsg},
		{id: "9b/sharegpt-baseline", label: "ShareGPT profile baseline (repeated)", p: v17(nil), w: gsg, exclude: dup},
		{id: "9b/sharegpt-optimized", label: "ShareGPT profile optimized (repeated)", p: perf(512, 0), w: gsg, exclude: dup},
		{id: "9b/throughput-baseline", label: "Throughput profile (1024 in / 128 out) baseline", p: v17(nil), w: g("random", 1000, 1024, 128, 1000, 512)},
		{id: "9b/throughput-optimized", label: "Throughput profile optimized", p: perf(512, 0), w: g("random", 1000, 1024, 128, 1000, 512)},
		{id: "9b/longctx-baseline", label: "Long context profile (32000 in / 100 out, 1 req/s) baseline", p: v17(nil), w: g("random", 100, 32000, 100, 1, 0)},
		{id: "9b/longctx-optimized", label: "Long context profile optimized", p: perf(512, 0), w: g("random", 100, 32000, 100, 1, 0)},
		{id: "9b/genheavy-baseline", label: "Generation heavy profile (1000 in / 2000 out, 1 req/s) baseline", p: v17(nil), w: g("random", 200, 1000, 2000, 1, 0)},
		{id: "9b/genheavy-optimized", label: "Generation heavy profile optimized", p: perf(512, 0), w: g("random", 200, 1000, 2000, 1, 0)},
	}
	return m
}

var figureRE = map[string]*regexp.Regexp{}

func figure(block, name string) (float64, error) {
	re, ok := figureRE[name]
	if !ok {
		re = regexp.MustCompile(regexp.QuoteMeta(name) + `:\s+([0-9.]+|N/A)`)
		figureRE[name] = re
	}
	m := re.FindStringSubmatch(block)
	if m == nil {
		return 0, fmt.Errorf("no %q", name)
	}
	if m[1] == "N/A" {
		return 0, nil
	}
	return strconv.ParseFloat(m[1], 64)
}

// extractReference reads every result block of the reports and joins them
// with referenceMeta.
func extractReference(dir string) (*Reference, error) {
	meta := referenceMeta()
	ref := &Reference{}
	for _, report := range []string{"qwen3-14b-h100.md", "qwen3-32b-h100.md", "qwen3.5-9b-h100.md"} {
		b, err := os.ReadFile(filepath.Join(dir, report))
		if err != nil {
			return nil, err
		}
		blocks := strings.Split(string(b), "Serving Benchmark Result")[1:]
		ms := meta[report]
		if len(blocks) != len(ms) {
			return nil, fmt.Errorf("%s: %d result blocks, metadata for %d", report, len(blocks), len(ms))
		}
		for i, blk := range blocks {
			if j := strings.Index(blk, "=================================================="); j > 0 {
				blk = blk[:j]
			}
			var f [11]float64
			for k, name := range []string{"Successful requests", "Benchmark duration (s)", "Total Token throughput (tok/s)",
				"Output token throughput (tok/s)", "Mean TTFT (ms)", "Median TTFT (ms)", "Mean TPOT (ms)", "Median TPOT (ms)",
				"Mean ITL (ms)", "Total input tokens", "Total generated tokens"} {
				v, err := figure(blk, name)
				if err != nil {
					return nil, fmt.Errorf("%s block %d: %v", report, i+1, err)
				}
				f[k] = v
			}
			// vllm bench prints the median ITL, guidellm the mean latency.
			medITL, _ := figure(blk, "Median ITL (ms)")
			meanLat, _ := figure(blk, "Mean Latency(s)")
			mt := ms[i]
			w := mt.w
			w.TotalInput, w.TotalOutput = int(f[9]), int(f[10])
			ref.Cases = append(ref.Cases, Case{ID: mt.id, Report: report, Block: i + 1, Label: mt.label, Params: mt.p, Workload: w,
				Exclude: mt.exclude, Note: mt.note,
				Measured: Measured{Completed: int(f[0]), Duration: f[1], TotalTPS: f[2], OutputTPS: f[3], MeanTTFTMs: f[4], MedianTTFT: f[5],
					MeanTPOTMs: f[6], MedianTPOT: f[7], MeanITLMs: f[8], MedianITLMs: medITL, MeanLatencyS: meanLat, TotalInput: int(f[9]), TotalOutput: int(f[10])}})
		}
	}
	// The published decisions (each a ">" the report states or tabulates).
	ord := func(b, w, why string) { ref.Orderings = append(ref.Orderings, Ordering{Better: b, Worse: w, Why: why}) }
	ord("14b/sglang", "14b/trtllm", "engine choice (14B)")
	ord("14b/sglang", "14b/vllm", "engine choice (14B)")
	ord("14b/trtllm", "14b/vllm", "engine choice (14B)")
	ord("14b/sglang-fp8", "14b/sglang", "FP8 quantization (14B, SGLang)")
	ord("14b/sglang-fp8-fa3", "14b/sglang-fp8-flashinfer", "attention backend (14B, SGLang)")
	ord("14b/sglang-fp8-fa3", "14b/sglang-fp8-triton", "attention backend (14B, SGLang)")
	ord("14b/sglang-fp8-triton", "14b/sglang-fp8-flashinfer", "attention backend (14B, SGLang)")
	ord("14b/sglang-fp8", "14b/sglang-fp8-fa3", "attention backend default vs fa3 (14B)")
	for _, wl := range []string{"random-32k", "random-4k", "random-2k", "random-128"} {
		ord("14b/sglang-fp8/"+wl, "14b/vllm/"+wl, "optimized vs baseline (14B "+wl+")")
		ord("32b/trtllm-fp8-chunked/"+wl, "32b/vllm/"+wl, "optimized vs baseline (32B "+wl+")")
	}
	ord("32b/trtllm", "32b/vllm", "engine choice (32B)")
	ord("32b/vllm", "32b/sglang", "engine choice (32B)")
	ord("32b/trtllm", "32b/sglang", "engine choice (32B)")
	ord("32b/trtllm-fp8", "32b/trtllm", "FP8 quantization (32B, TensorRT-LLM)")
	ord("32b/trtllm-fp8-chunked", "32b/trtllm-fp8", "chunked prefill (32B, TensorRT-LLM)")
	ord("9b/vllm", "9b/sglang", "engine choice (9B)")
	ord("9b/vllm", "9b/vllm-prefix", "prefix caching (9B)")
	ord("9b/vllm", "9b/vllm-perf", "performance mode (9B)")
	ord("9b/vllm-seqs1024", "9b/vllm-seqs2048", "max-num-seqs (9B)")
	ord("9b/vllm-perf-32k", "9b/vllm-perf-24k", "max-num-batched-tokens (9B)")
	ord("9b/vllm-perf-seqs512", "9b/vllm-perf-seqs256", "max-num-seqs with throughput mode (9B)")
	ord("9b/vllm-perf-48k-seqs768", "9b/vllm-perf-32k-seqs512", "batched tokens and seqs (9B)")
	ord("9b/throughput-optimized", "9b/throughput-baseline", "optimized vs baseline (9B throughput profile)")
	ord("9b/longctx-optimized", "9b/longctx-baseline", "optimized vs baseline (9B long context)")
	ord("9b/genheavy-optimized", "9b/genheavy-baseline", "optimized vs baseline (9B generation heavy)")
	return ref, nil
}

func TestReferenceData(t *testing.T) {
	dir := filepath.Join(sharedDir(t), "reference")
	ref, err := extractReference(dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(ref); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "reference.json")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, buf.Bytes()) {
		t.Errorf("testdata/reference.json is stale; run go test ./internal/sim -run TestReferenceData -update")
	}
	if len(ref.Cases) != 52 {
		t.Errorf("%d reference blocks, want 15+13+24", len(ref.Cases))
	}
	for _, o := range ref.Orderings {
		if _, ok := ref.Case(o.Better); !ok {
			t.Errorf("ordering names unknown case %q", o.Better)
		}
		if _, ok := ref.Case(o.Worse); !ok {
			t.Errorf("ordering names unknown case %q", o.Worse)
		}
	}
}
