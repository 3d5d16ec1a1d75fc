package engine

import (
	"encoding/json"
)

// vllm renders `vllm serve MODEL ...`, checked against
// vllm/engine/arg_utils.py at v0.11.0 and v0.17.1.
func (r *renderer) vllm() {
	c := r.cfg
	r.argv = []string{"vllm", "serve", c.ModelPath()}
	if c.ServedModelName != "" {
		r.val("--served-model-name", c.ServedModelName)
	}
	if c.ReasoningParser != "" {
		r.val("--reasoning-parser", c.ReasoningParser)
	}
	if c.TensorParallel > 0 {
		r.val("--tensor-parallel-size", c.TensorParallel)
	}
	if c.DataParallel > 0 {
		r.val("--data-parallel-size", c.DataParallel)
	}
	if c.ExpertParallel {
		r.flag("--enable-expert-parallel")
	}
	if c.Quantization == QuantFP8 {
		r.val("--quantization", "fp8")
	}
	if c.KVCacheDtype != "" {
		r.val("--kv-cache-dtype", c.KVCacheDtype)
	}
	if c.AttentionBackend != "" {
		if r.v.atLeast(vllmAttentionFlagSince) {
			r.val("--attention-backend", c.AttentionBackend)
		} else {
			r.env["VLLM_ATTENTION_BACKEND"] = c.AttentionBackend
		}
	}
	boolFlag(r, "--enable-prefix-caching", "--no-enable-prefix-caching", c.PrefixCaching)
	boolFlag(r, "--enable-chunked-prefill", "--no-enable-chunked-prefill", c.ChunkedPrefill)
	if s := c.Speculative; s != nil {
		r.val("--speculative-config", vllmSpeculative(s))
	}
	if c.PerformanceMode != "" {
		r.val("--performance-mode", c.PerformanceMode)
	}
	if c.MaxModelLen > 0 {
		r.val("--max-model-len", c.MaxModelLen)
	}
	if c.MaxNumBatchedTokens > 0 {
		r.val("--max-num-batched-tokens", c.MaxNumBatchedTokens)
	}
	if c.MaxNumSeqs > 0 {
		r.val("--max-num-seqs", c.MaxNumSeqs)
	}
	if c.GPUMemoryFraction > 0 {
		r.val("--gpu-memory-utilization", fmtFloat(c.GPUMemoryFraction))
	}
	if c.EnforceEager {
		r.flag("--enforce-eager")
	}
	boolFlag(r, "--async-scheduling", "--no-async-scheduling", c.AsyncScheduling)
}

// boolFlag spells a tri-state knob with argparse's BooleanOptionalAction
// pair; nil leaves the engine default.
func boolFlag(r *renderer, on, off string, b *bool) {
	if b == nil {
		return
	}
	if *b {
		r.flag(on)
	} else {
		r.flag(off)
	}
}

// vllmSpeculative is the --speculative-config JSON, compact and in a fixed
// key order (method, model, num_speculative_tokens) as the reports write it.
func vllmSpeculative(s *Speculative) string {
	v := struct {
		Method string `json:"method"`
		Model  string `json:"model,omitempty"`
		N      int    `json:"num_speculative_tokens"`
	}{s.Method, s.DraftModel, s.NumSpeculativeTokens}
	b, _ := json.Marshal(v) // cannot fail: strings and an int
	return string(b)
}
