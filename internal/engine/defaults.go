package engine

import "strings"

// Device is what an engine's start-up defaults read of the GPU it runs
// on: the name the driver reports and the memory it reports as total.
// The zero Device is a GPU not known; no default that depends on the GPU
// is assumed for it.
type Device struct {
	// Name is the GPU's name ("H100", "NVIDIA A100-SXM4-80GB").
	Name string
	// MemGiB is its total memory in GiB.
	MemGiB float64
}

// Known reports whether the device's memory is known.
func (d Device) Known() bool { return d.MemGiB > 0 }

// BatchLimits are the two batch limits a server runs with: the running
// requests and the tokens of one step. A zero field is a limit that the
// config and the device alone do not settle (SGLang sizes its running
// requests from the KV pool; vLLM raises an unchunked token budget to the
// model's context).
type BatchLimits struct {
	// MaxNumSeqs is the running-request cap (Config.MaxNumSeqs).
	MaxNumSeqs int
	// MaxNumBatchedTokens is the per-step token budget
	// (Config.MaxNumBatchedTokens).
	MaxNumBatchedTokens int
}

// BatchDefaults are the limits the engine at c's version starts with on d
// when c leaves them unset; what c sets of them is not read, only the
// knobs the defaults depend on (the performance mode, speculative
// decoding, chunked prefill). The simulator starts its engines with these
// too, so a lab and the simulator agree on what an unset limit is.
func (k *Kind) BatchDefaults(c Config, d Device) BatchLimits {
	if k.batch == nil {
		return BatchLimits{}
	}
	return k.batch(k, c, d)
}

// WithoutDefaults is c with each batch limit that equals the engine's
// default on d left unset: the config a server started from c behaves as.
// Two configs that differ only in spelling such a default start the same
// server (vLLM's --max-num-batched-tokens 8192 on an H100 is its default).
func WithoutDefaults(c Config, d Device) Config {
	k, ok := KindOf(c.Engine)
	if !ok {
		return c
	}
	bare := c
	bare.MaxNumSeqs, bare.MaxNumBatchedTokens = 0, 0
	def := k.BatchDefaults(bare, d)
	if def.MaxNumSeqs > 0 && c.MaxNumSeqs == def.MaxNumSeqs {
		c.MaxNumSeqs = 0
	}
	if def.MaxNumBatchedTokens > 0 && c.MaxNumBatchedTokens == def.MaxNumBatchedTokens {
		c.MaxNumBatchedTokens = 0
	}
	return c
}

// vllmBatch is vLLM's EngineArgs.get_batch_defaults for the API server
// (vllm/engine/arg_utils.py, the same at v0.11.0 and v0.17.1): on a GPU of
// at least 70 GiB whose name does not hold "a100", 1024 running requests
// and 8192 tokens a step; otherwise 256 and 2048 (PR #17885 keeps the
// A100 on the small ones). The performance mode "throughput" (0.17 on)
// doubles both. An unchunked budget is raised to max_model_len, which the
// config alone does not give; before the V1 engine (ChunksSince) the
// defaults were others.
func vllmBatch(k *Kind, c Config, d Device) BatchLimits {
	v := c.Version
	if v == "" {
		v = k.DefaultVersion
	}
	if !d.Known() || !VersionAtLeast(v, k.ChunksSince) {
		return BatchLimits{}
	}
	b := BatchLimits{MaxNumSeqs: 256, MaxNumBatchedTokens: 2048}
	if d.MemGiB >= 70 && !strings.Contains(strings.ToLower(d.Name), "a100") {
		b = BatchLimits{MaxNumSeqs: 1024, MaxNumBatchedTokens: 8192}
	}
	if c.PerformanceMode == "throughput" {
		b.MaxNumSeqs *= 2
		b.MaxNumBatchedTokens *= 2
	}
	if c.ChunkedPrefill != nil && !*c.ChunkedPrefill {
		b.MaxNumBatchedTokens = 0
	}
	return b
}

// sglangBatch is SGLang's ServerArgs defaults (python/sglang/srt/
// server_args.py at v0.5.5.post1 and v0.5.9): the chunked-prefill size
// follows the GPU's memory (_handle_gpu_memory_settings); the running
// requests follow the KV pool, except under speculative decoding, where
// an unset max_running_requests becomes 48 (_handle_speculative_decoding).
// Unchunked, the budget is --max-prefill-tokens, not read here.
func sglangBatch(_ *Kind, c Config, d Device) BatchLimits {
	var b BatchLimits
	if c.Speculative != nil {
		b.MaxNumSeqs = 48
	}
	if d.Known() && (c.ChunkedPrefill == nil || *c.ChunkedPrefill) {
		b.MaxNumBatchedTokens = SGLangChunkedPrefillSize(d)
	}
	return b
}

// SGLangChunkedPrefillSize is SGLang's default --chunked-prefill-size on d
// (server_args._handle_gpu_memory_settings): 2048 below 35 GiB, 4096
// below 60, 8192 below 160, 16384 above.
func SGLangChunkedPrefillSize(d Device) int {
	switch {
	case d.MemGiB < 35:
		return 2048
	case d.MemGiB < 60:
		return 4096
	case d.MemGiB < 160:
		return 8192
	default:
		return 16384
	}
}

// trtllmBatch is trtllm-serve's defaults on any GPU: --max_batch_size
// 2048 and --max_num_tokens 8192 (tensorrt_llm/commands/serve.py, the
// BuildConfig defaults), chunked or not.
func trtllmBatch(*Kind, Config, Device) BatchLimits {
	return BatchLimits{MaxNumSeqs: 2048, MaxNumBatchedTokens: 8192}
}
