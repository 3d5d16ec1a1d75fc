package engine

// sglang renders `python3 -m sglang.launch_server --model-path MODEL ...`,
// checked against python/sglang/srt/server_args.py at v0.5.5.post1 and v0.5.9.
func (r *renderer) sglang() {
	c := r.cfg
	r.argv = []string{"python3", "-m", "sglang.launch_server", "--model-path", c.ModelPath()}
	if c.ServedModelName != "" {
		r.val("--served-model-name", c.ServedModelName)
	}
	if c.ReasoningParser != "" {
		r.val("--reasoning-parser", c.ReasoningParser)
	}
	if c.TensorParallel > 0 {
		r.val("--tp-size", c.TensorParallel)
	}
	if c.DataParallel > 0 {
		r.val("--dp-size", c.DataParallel)
	}
	if c.ExpertParallel {
		// SGLang sizes EP explicitly; expert parallelism spans the TP group.
		r.val("--ep-size", max(c.TensorParallel, 1))
	}
	if c.Quantization == QuantFP8 {
		r.val("--quantization", "fp8")
	}
	switch c.KVCacheDtype {
	case "":
	case "fp8":
		// SGLang's choices have no bare "fp8"; e4m3 is what "fp8" means elsewhere.
		r.val("--kv-cache-dtype", "fp8_e4m3")
	default:
		r.val("--kv-cache-dtype", c.KVCacheDtype)
	}
	if c.AttentionBackend != "" {
		r.val("--attention-backend", c.AttentionBackend)
	}
	if c.PrefixCaching != nil && !*c.PrefixCaching {
		r.flag("--disable-radix-cache")
	}
	switch {
	case c.ChunkedPrefill != nil && !*c.ChunkedPrefill:
		r.val("--chunked-prefill-size", -1)
		if c.MaxNumBatchedTokens > 0 {
			r.val("--max-prefill-tokens", c.MaxNumBatchedTokens)
		}
	case c.MaxNumBatchedTokens > 0:
		r.val("--chunked-prefill-size", c.MaxNumBatchedTokens)
	}
	if s := c.Speculative; s != nil {
		algo := map[string]string{"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN",
			"ngram": "NGRAM", "draft_model": "STANDALONE"}[s.Method]
		r.val("--speculative-algorithm", algo)
		if s.DraftModel != "" {
			r.val("--speculative-draft-model-path", s.DraftModel)
		}
		if s.Method == "ngram" {
			r.val("--speculative-num-draft-tokens", s.NumSpeculativeTokens)
		} else {
			// A chain (top-k 1) of N steps proposes N tokens; SGLang counts
			// the verified root as a draft token too.
			r.val("--speculative-num-steps", s.NumSpeculativeTokens)
			r.val("--speculative-eagle-topk", 1)
			r.val("--speculative-num-draft-tokens", s.NumSpeculativeTokens+1)
		}
	}
	if c.MaxModelLen > 0 {
		r.val("--context-length", c.MaxModelLen)
	}
	if c.MaxNumSeqs > 0 {
		r.val("--max-running-requests", c.MaxNumSeqs)
	}
	if c.GPUMemoryFraction > 0 {
		r.val("--mem-fraction-static", fmtFloat(c.GPUMemoryFraction))
	}
	if c.EnforceEager {
		r.flag("--disable-cuda-graph")
	}
	if c.CUDAGraphPadding != nil && !*c.CUDAGraphPadding {
		// SGLang pads by default; the flag is its only spelling.
		r.flag("--disable-cuda-graph-padding")
	}
	if c.AsyncScheduling != nil && !*c.AsyncScheduling {
		// SGLang overlaps scheduling with the GPU by default.
		r.flag("--disable-overlap-schedule")
	}
}
