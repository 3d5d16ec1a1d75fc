// Package engine turns one normalized serving configuration into each
// engine's exact command line (vLLM, SGLang, TensorRT-LLM, per version),
// checks it against a support matrix, and starts, watches and always tears
// down the resulting server through a Runtime.
package engine

// Config is the normalized serving configuration. Zero values mean "the
// engine's own default": a knob left unset is not spelled on the command line.
type Config struct {
	// Engine is "vllm", "sglang" or "trtllm".
	Engine string `json:"engine" yaml:"engine"`
	// Version is the engine version, e.g. "0.11.0", "0.5.5.post1", "1.2.0rc1".
	Version string `json:"version,omitempty" yaml:"version,omitempty"`
	// Model is the HF repo id or local path (e.g. "Qwen/Qwen3-14B").
	Model string `json:"model" yaml:"model"`
	// ServedModelName overrides the name the API serves.
	ServedModelName string `json:"served_model_name,omitempty" yaml:"served_model_name,omitempty"`
	// Quantization is "" (none), "fp8" (online) or "fp8-checkpoint"
	// (pre-quantized repository such as Qwen/Qwen3-14B-FP8).
	Quantization string `json:"quantization,omitempty" yaml:"quantization,omitempty"`
	// KVCacheDtype is "" (auto) or "fp8" / "fp8_e4m3" / "fp8_e5m2".
	KVCacheDtype string `json:"kv_cache_dtype,omitempty" yaml:"kv_cache_dtype,omitempty"`
	// TensorParallel, ExpertParallel (bool: enable EP) and DataParallel sizes.
	TensorParallel int  `json:"tensor_parallel,omitempty" yaml:"tensor_parallel,omitempty"`
	ExpertParallel bool `json:"expert_parallel,omitempty" yaml:"expert_parallel,omitempty"`
	DataParallel   int  `json:"data_parallel,omitempty" yaml:"data_parallel,omitempty"`
	// AttentionBackend is the engine's own backend name, e.g. "FLASH_ATTN",
	// "FLASHINFER", "TRITON_ATTN", "FLASHMLA" (vLLM); "fa3", "flashinfer",
	// "triton" (SGLang); "TRTLLM", "FLASHINFER" (TensorRT-LLM).
	AttentionBackend string `json:"attention_backend,omitempty" yaml:"attention_backend,omitempty"`
	// MaxNumSeqs caps concurrently running sequences (vLLM --max-num-seqs,
	// SGLang --max-running-requests, TensorRT-LLM --max_batch_size).
	MaxNumSeqs int `json:"max_num_seqs,omitempty" yaml:"max_num_seqs,omitempty"`
	// MaxNumBatchedTokens is the per-step token budget (SGLang: chunked
	// prefill size when ChunkedPrefill is on; TensorRT-LLM --max_num_tokens).
	MaxNumBatchedTokens int `json:"max_num_batched_tokens,omitempty" yaml:"max_num_batched_tokens,omitempty"`
	// ChunkedPrefill and PrefixCaching are tri-state: nil = engine default.
	ChunkedPrefill *bool `json:"chunked_prefill,omitempty" yaml:"chunked_prefill,omitempty"`
	PrefixCaching  *bool `json:"prefix_caching,omitempty" yaml:"prefix_caching,omitempty"`
	// Speculative decoding; nil means off.
	Speculative *Speculative `json:"speculative,omitempty" yaml:"speculative,omitempty"`
	// MaxModelLen caps the context length (0 = model default).
	MaxModelLen int `json:"max_model_len,omitempty" yaml:"max_model_len,omitempty"`
	// GPUMemoryFraction is the engine's memory knob in the engine's own
	// meaning (vLLM: share of total; SGLang: mem-fraction-static; TensorRT-LLM:
	// share of free memory after weights). 0 = default.
	GPUMemoryFraction float64 `json:"gpu_memory_fraction,omitempty" yaml:"gpu_memory_fraction,omitempty"`
	// EnforceEager disables CUDA graphs / torch.compile.
	EnforceEager bool `json:"enforce_eager,omitempty" yaml:"enforce_eager,omitempty"`
	// CUDAGraphPadding pads a decode batch up to the next captured
	// CUDA-graph size so that it replays a graph instead of running
	// eagerly (nil = the engine's default, Kind.PadsGraphs: vLLM and SGLang
	// pad, TensorRT-LLM does not).
	CUDAGraphPadding *bool `json:"cuda_graph_padding,omitempty" yaml:"cuda_graph_padding,omitempty"`
	// AsyncScheduling enables vLLM's --async-scheduling (nil = default).
	AsyncScheduling *bool `json:"async_scheduling,omitempty" yaml:"async_scheduling,omitempty"`
	// ReasoningParser, e.g. "qwen3".
	ReasoningParser string `json:"reasoning_parser,omitempty" yaml:"reasoning_parser,omitempty"`
	// PerformanceMode is vLLM's --performance-mode (0.17+): "balanced",
	// "interactivity" or "throughput" ("" = default).
	PerformanceMode string `json:"performance_mode,omitempty" yaml:"performance_mode,omitempty"`
	// ExtraArgs are appended verbatim; Env is added to the environment.
	ExtraArgs []string          `json:"extra_args,omitempty" yaml:"extra_args,omitempty"`
	Env       map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
}

// Speculative describes speculative decoding.
type Speculative struct {
	// Method is "eagle", "eagle3", "mtp", "ngram" or "draft_model".
	Method string `json:"method" yaml:"method"`
	// DraftModel is the draft/eagle head repository, when the method needs one.
	DraftModel string `json:"draft_model,omitempty" yaml:"draft_model,omitempty"`
	// NumSpeculativeTokens is how many tokens are proposed per step.
	NumSpeculativeTokens int `json:"num_speculative_tokens" yaml:"num_speculative_tokens"`
}

// GPUs is how many GPUs the config occupies: tensor × data parallel (an
// unset size counts as 1).
func (c Config) GPUs() int {
	return max(c.TensorParallel, 1) * max(c.DataParallel, 1)
}
