package engine

import (
	"fmt"
	"slices"
	"strings"
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
	if c.EnforceEager && c.CUDAGraphPadding != nil {
		no("cuda_graph_padding", fmt.Sprint(*c.CUDAGraphPadding), "enforce_eager runs without CUDA graphs, so there is no batch to pad")
	}
	if k, ok := KindOf(c.Engine); ok {
		k.support(k, c, v, no)
	}
	return errs
}

// vllmSupport: the attention backends, performance mode and draft-model
// speculation vLLM's versions lack.
func vllmSupport(k *Kind, c Config, v version, no func(knob, value, hint string)) {
	names := k.AttentionBackends
	if attn := c.AttentionBackend; attn != "" {
		switch {
		case !slices.Contains(names, attn):
			no("attention_backend", attn, "vLLM backends are "+strings.Join(names[:len(names)-1], ", "))
		case attn == "XFORMERS" && v.atLeast(vllmNoXformersSince):
			no("attention_backend", attn, "XFORMERS was removed in vLLM "+vllmNoXformersSince)
		}
	}
	if c.PerformanceMode != "" && !v.atLeast(vllmPerformanceModeSince) {
		no("performance_mode", c.PerformanceMode, "--performance-mode exists from vLLM "+vllmPerformanceModeSince)
	}
	if c.CUDAGraphPadding != nil && !*c.CUDAGraphPadding {
		no("cuda_graph_padding", "false", "vLLM always pads a batch to the next captured size (compilation_config.cudagraph_capture_sizes); it has no switch to turn that off")
	}
	if s := c.Speculative; s != nil && s.Method == "draft_model" && !v.atLeast(vllmDraftModelSince) {
		no("speculative.method", s.Method, "the V1 engine of this version has no draft-model speculation; use eagle3, mtp or ngram")
	}
}

// sglangSupport: SGLang's attention backends; it has no performance mode.
func sglangSupport(k *Kind, c Config, _ version, no func(knob, value, hint string)) {
	names := k.AttentionBackends
	if attn := c.AttentionBackend; attn != "" && !slices.Contains(names, attn) {
		no("attention_backend", attn, "SGLang backends are "+strings.Join(names, ", "))
	}
	if c.PerformanceMode != "" {
		no("performance_mode", c.PerformanceMode, "performance mode is a vLLM knob")
	}
}

// trtllmSupport: what trtllm-serve's PyTorch backend cannot be asked for.
func trtllmSupport(k *Kind, c Config, _ version, no func(knob, value, hint string)) {
	names := k.AttentionBackends
	if attn := c.AttentionBackend; attn != "" && !slices.Contains(names, attn) {
		no("attention_backend", attn, "TensorRT-LLM attn_backend values are "+strings.Join(names, ", "))
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
