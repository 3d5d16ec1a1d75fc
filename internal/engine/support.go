package engine

import (
	"fmt"
	"slices"
	"strings"
)

// Attention backend names each engine accepts. vLLM's are its
// AttentionBackendEnum names (VLLM_ATTENTION_BACKEND before 0.14,
// --attention-backend from 0.14); SGLang's are --attention-backend choices;
// TensorRT-LLM's are the LLM API's attn_backend values.
var (
	vllmAttention = []string{"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION",
		"TREE_ATTN", "FLASHMLA", "FLASH_ATTN_MLA", "CUTLASS_MLA", "TRITON_MLA", "FLASHINFER_MLA", "XFORMERS"}
	sglangAttention = []string{"fa3", "flashinfer", "triton", "torch_native", "flex_attention",
		"flashmla", "cutlass_mla", "trtllm_mha", "trtllm_mla", "fa4", "aiter", "wave", "nsa"}
	trtllmAttention = []string{"TRTLLM", "FLASHINFER", "VANILLA"}
)

// vLLM version gates (first version where the behaviour holds).
const (
	vllmAttentionFlagSince   = "0.14.0" // --attention-backend replaces VLLM_ATTENTION_BACKEND
	vllmNoXformersSince      = "0.12.0" // XFORMERS backend removed
	vllmPerformanceModeSince = "0.17.0" // --performance-mode added
	vllmDraftModelSince      = "0.12.0" // V1 engine gets draft-model speculation back
)

// support returns an UnsupportedError for every knob the config's engine
// and version cannot honour. It runs before Render, so nothing launches.
func support(c Config) []error {
	ver := c.EffectiveVersion()
	v, err := parseVersion(ver)
	if err != nil {
		return []error{&ValidationError{Field: "version", Value: ver, Reason: err.Error()}}
	}
	var errs []error
	no := func(knob, value, hint string) {
		errs = append(errs, &UnsupportedError{Engine: c.Engine, Version: ver, Knob: knob, Value: value, Hint: hint})
	}
	attn := c.AttentionBackend
	switch c.Engine {
	case VLLM:
		if attn != "" {
			switch {
			case !slices.Contains(vllmAttention, attn):
				no("attention_backend", attn, "vLLM backends are "+strings.Join(vllmAttention[:len(vllmAttention)-1], ", "))
			case attn == "XFORMERS" && v.atLeast(vllmNoXformersSince):
				no("attention_backend", attn, "XFORMERS was removed in vLLM "+vllmNoXformersSince)
			}
		}
		if c.PerformanceMode != "" && !v.atLeast(vllmPerformanceModeSince) {
			no("performance_mode", c.PerformanceMode, "--performance-mode exists from vLLM "+vllmPerformanceModeSince)
		}
		if s := c.Speculative; s != nil && s.Method == "draft_model" && !v.atLeast(vllmDraftModelSince) {
			no("speculative.method", s.Method, "the V1 engine of this version has no draft-model speculation; use eagle3, mtp or ngram")
		}
	case SGLang:
		if attn != "" && !slices.Contains(sglangAttention, attn) {
			no("attention_backend", attn, "SGLang backends are "+strings.Join(sglangAttention, ", "))
		}
		if c.PerformanceMode != "" {
			no("performance_mode", c.PerformanceMode, "performance mode is a vLLM knob")
		}
	case TRTLLM:
		if attn != "" && !slices.Contains(trtllmAttention, attn) {
			no("attention_backend", attn, "TensorRT-LLM attn_backend values are "+strings.Join(trtllmAttention, ", "))
		}
		if c.PerformanceMode != "" {
			no("performance_mode", c.PerformanceMode, "performance mode is a vLLM knob")
		}
		if c.ServedModelName != "" {
			no("served_model_name", c.ServedModelName, "trtllm-serve serves the model under its MODEL argument")
		}
		if c.Quantization == QuantFP8 {
			no("quantization", c.Quantization, `trtllm-serve has no online quantization; use "fp8-checkpoint" (the -FP8 repository)`)
		}
		if c.KVCacheDtype == "fp8_e5m2" {
			no("kv_cache_dtype", c.KVCacheDtype, "the KV cache dtype is fp8 (e4m3) or auto")
		}
		if c.DataParallel > 1 {
			no("data_parallel", fmt.Sprint(c.DataParallel), "trtllm-serve runs one replica; attention DP (enable_attention_dp) is not modelled")
		}
		if s := c.Speculative; s != nil && s.Method == "eagle" {
			no("speculative.method", s.Method, "the PyTorch backend only runs EAGLE-3 drafts; use eagle3")
		}
	}
	return errs
}
