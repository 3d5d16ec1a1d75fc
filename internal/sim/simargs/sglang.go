package simargs

import (
	"fmt"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/sim"
)

func sglangCLI(version string) *cli {
	if engine.VersionAtLeast(version, "0.5.9") {
		return sglang059
	}
	return sglang055
}

func parseSGLang(version string, rest []string, env map[string]string) (*Result, error) {
	if version == "" {
		version = DefaultVersion(sim.EngineSGLang)
	}
	c := sglangCLI(version)
	p, perr := c.parse(rest)
	if perr != nil {
		return nil, perr
	}
	if !p.has("--model-path") {
		return nil, c.fail("the following arguments are required: --model-path/--model")
	}
	res := &Result{Params: sim.Params{Engine: sim.EngineSGLang, Version: version}}
	pr := &res.Params
	pr.Model = p.str("--model-path")
	pr.TP = p.int("--tensor-parallel-size")
	pr.DP = p.int("--data-parallel-size")
	pr.EP = p.int("--expert-parallel-size") > 1
	if p.has("--quantization") {
		pr.Quantization = p.str("--quantization")
		if pr.Quantization == "w8a8_fp8" || pr.Quantization == "modelopt_fp8" {
			pr.Quantization = "fp8"
		}
	} else if fp8Name(pr.Model) {
		pr.Quantization = "fp8"
	}
	pr.KVCacheDtype = kvDtype(p.str("--kv-cache-dtype"))
	switch {
	case p.has("--attention-backend"):
		pr.AttentionBackend = p.str("--attention-backend")
	case p.has("--decode-attention-backend"):
		// Decode dominates step time; the prefill backend is not modelled separately.
		pr.AttentionBackend = p.str("--decode-attention-backend")
	}
	pr.MaxNumSeqs = p.int("--max-running-requests")
	if p.has("--chunked-prefill-size") {
		n := p.int("--chunked-prefill-size")
		switch {
		case n == -1:
			pr.ChunkedPrefill = boolp(false)
			pr.MaxNumBatchedTokens = p.int("--max-prefill-tokens")
		case n > 0:
			pr.ChunkedPrefill = boolp(true)
			pr.MaxNumBatchedTokens = n
		default:
			return nil, startupError("sglang", "ValueError", fmt.Sprintf("chunked_prefill_size must be positive or -1 (disabled), got %d", n))
		}
	}
	if p.vals["--disable-radix-cache"].on {
		pr.PrefixCaching = boolp(false)
	}
	pr.MixedChunk = p.vals["--enable-mixed-chunk"].on
	pr.AttentionDP = p.vals["--enable-dp-attention"].on
	if p.vals["--disable-overlap-schedule"].on {
		pr.AsyncScheduling = boolp(false)
	}
	pr.EnforceEager = p.vals["--disable-cuda-graph"].on
	pr.MaxModelLen = p.int("--context-length")
	if p.has("--mem-fraction-static") {
		f := p.vals["--mem-fraction-static"].num
		if !(f > 0 && f < 1) {
			return nil, startupError("sglang", "ValueError", fmt.Sprintf("mem_fraction_static must be in (0, 1), got %s", p.str("--mem-fraction-static")))
		}
		pr.MemFraction = f
	}
	for _, n := range []string{"--tensor-parallel-size", "--data-parallel-size", "--expert-parallel-size", "--max-running-requests", "--context-length"} {
		if p.has(n) && p.vals[n].num < 1 {
			return nil, startupError("sglang", "ValueError", fmt.Sprintf("%s must be a positive integer, got %s", n, p.str(n)))
		}
	}
	if p.has("--speculative-algorithm") {
		pr.SpecMethod = map[string]string{"EAGLE": "eagle", "EAGLE3": "eagle3", "NEXTN": "mtp", "NGRAM": "ngram", "STANDALONE": "draft_model"}[p.str("--speculative-algorithm")]
		switch {
		case p.has("--speculative-num-steps"):
			pr.SpecTokens = p.int("--speculative-num-steps")
		case p.has("--speculative-num-draft-tokens"):
			// With topk 1 the draft tree is a chain of steps plus the root.
			pr.SpecTokens = p.int("--speculative-num-draft-tokens") - 1
		default:
			pr.SpecTokens = 3 // SGLang's auto-chosen steps for EAGLE-style drafts
		}
		if pr.SpecTokens < 1 {
			return nil, startupError("sglang", "ValueError", "speculative_num_steps must be at least 1")
		}
	}

	res.Server = Server{Host: p.str("--host"), Port: DefaultPort(sim.EngineSGLang), APIKey: p.str("--api-key"), Tokenizer: p.str("--tokenizer-path")}
	if res.Server.Host == "" {
		res.Server.Host = "127.0.0.1"
	}
	if p.has("--port") {
		res.Server.Port = p.int("--port")
	}
	// /metrics exists only with --enable-metrics
	// (python/sglang/srt/entrypoints/http_server.py).
	res.Server.Metrics = p.vals["--enable-metrics"].on
	res.Server.ServedModelNames = []string{pr.Model}
	if p.has("--served-model-name") {
		res.Server.ServedModelNames = []string{p.str("--served-model-name")}
	}
	return res, nil
}
