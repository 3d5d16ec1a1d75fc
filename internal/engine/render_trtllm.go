package engine

import (
	"github.com/goccy/go-yaml"
)

// TRTLLMOptionsFile is the name of the extra LLM-API options file written
// into the working directory when a knob has no trtllm-serve flag.
const TRTLLMOptionsFile = "extra_llm_api_options.yaml"

// trtllm renders `trtllm-serve MODEL ...`, checked against
// tensorrt_llm/commands/serve.py and llmapi/llm_args.py at v1.2.0rc1. The
// PyTorch backend is trtllm-serve's default, so --backend is not spelled.
func (r *renderer) trtllm() {
	c := r.cfg
	r.argv = []string{"trtllm-serve", c.ModelPath()}
	var kv yaml.MapSlice
	switch c.KVCacheDtype {
	case "fp8", "fp8_e4m3":
		kv = append(kv, yaml.MapItem{Key: "dtype", Value: "fp8"})
	case "auto":
		kv = append(kv, yaml.MapItem{Key: "dtype", Value: "auto"})
	}
	if c.PrefixCaching != nil {
		kv = append(kv, yaml.MapItem{Key: "enable_block_reuse", Value: *c.PrefixCaching})
	}
	if c.ReasoningParser != "" {
		r.val("--reasoning_parser", c.ReasoningParser)
	}
	if c.TensorParallel > 0 {
		r.val("--tp_size", c.TensorParallel)
	}
	if c.ExpertParallel {
		r.val("--ep_size", max(c.TensorParallel, 1))
	}
	if c.MaxNumSeqs > 0 {
		r.val("--max_batch_size", c.MaxNumSeqs)
	}
	if c.MaxNumBatchedTokens > 0 {
		r.val("--max_num_tokens", c.MaxNumBatchedTokens)
	}
	if c.MaxModelLen > 0 {
		r.val("--max_seq_len", c.MaxModelLen)
	}
	// trtllm-serve builds KvCacheConfig(free_gpu_memory_fraction=flag)
	// and then merges the options file over the args with a shallow dict
	// union (llm_args | yaml_dict, update_llm_args_with_extra_dict in
	// tensorrt_llm/llmapi/llm_args.py): a kv_cache_config block in the file
	// replaces the flag's whole KvCacheConfig, and the fraction falls back
	// to the default 0.9. With a block, the fraction goes in it instead.
	if c.GPUMemoryFraction > 0 {
		if len(kv) > 0 {
			kv = append(kv, yaml.MapItem{Key: "free_gpu_memory_fraction", Value: c.GPUMemoryFraction})
		} else {
			r.val("--kv_cache_free_gpu_memory_fraction", fmtFloat(c.GPUMemoryFraction))
		}
	}
	if c.ChunkedPrefill != nil && *c.ChunkedPrefill {
		// Off by default; a flag with no "off" spelling, so false renders nothing.
		r.flag("--enable_chunked_prefill")
	}

	// Knobs without a flag go to the LLM-API YAML, keys in a fixed order.
	var opts yaml.MapSlice
	if c.AttentionBackend != "" {
		opts = append(opts, yaml.MapItem{Key: "attn_backend", Value: c.AttentionBackend})
	}
	if len(kv) > 0 {
		opts = append(opts, yaml.MapItem{Key: "kv_cache_config", Value: kv})
	}
	switch {
	case c.EnforceEager:
		// A null cuda_graph_config turns CUDA graphs off.
		opts = append(opts, yaml.MapItem{Key: "cuda_graph_config", Value: nil})
	case c.CUDAGraphPadding != nil && *c.CUDAGraphPadding:
		// The block replaces the default CudaGraphConfig whole; its other
		// fields keep their defaults (graphs up to 128), and with padding
		// on CudaGraphConfig._generate_cuda_graph_batch_sizes captures 1,
		// 2, 4 and every multiple of 8 (llmapi/llm_args.py), and a batch
		// between two of them replays the larger.
		opts = append(opts, yaml.MapItem{Key: "cuda_graph_config", Value: yaml.MapSlice{{Key: "enable_padding", Value: true}}})
	}
	if c.AsyncScheduling != nil && !*c.AsyncScheduling {
		opts = append(opts, yaml.MapItem{Key: "disable_overlap_scheduler", Value: true})
	}
	if s := c.Speculative; s != nil {
		var sc yaml.MapSlice
		switch s.Method {
		case "mtp":
			sc = yaml.MapSlice{{Key: "decoding_type", Value: "MTP"}, {Key: "num_nextn_predict_layers", Value: s.NumSpeculativeTokens}}
		case "eagle3":
			sc = yaml.MapSlice{{Key: "decoding_type", Value: "Eagle3"}, {Key: "max_draft_len", Value: s.NumSpeculativeTokens},
				{Key: "speculative_model_dir", Value: s.DraftModel}}
		case "ngram":
			sc = yaml.MapSlice{{Key: "decoding_type", Value: "NGram"}, {Key: "max_draft_len", Value: s.NumSpeculativeTokens}}
		case "draft_model":
			sc = yaml.MapSlice{{Key: "decoding_type", Value: "DraftTarget"}, {Key: "max_draft_len", Value: s.NumSpeculativeTokens},
				{Key: "speculative_model_dir", Value: s.DraftModel}}
		}
		opts = append(opts, yaml.MapItem{Key: "speculative_config", Value: sc})
	}
	if len(opts) > 0 {
		b, err := yaml.Marshal(opts)
		if err != nil {
			// Only strings, ints, bools and nil go in: cannot fail.
			panic("engine: marshal trtllm options: " + err.Error())
		}
		if len(b) > 0 && b[len(b)-1] != '\n' {
			b = append(b, '\n')
		}
		r.files[TRTLLMOptionsFile] = string(b)
		r.val("--extra_llm_api_options", TRTLLMOptionsFile)
	}
}
