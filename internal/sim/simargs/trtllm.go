package simargs

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/perflab/perflab/internal/sim"

	"github.com/perflab/perflab/internal/safeyaml"
)

// trtllmLLMArgs are TorchLlmArgs fields (tensorrt_llm/llmapi/llm_args.py at
// 1.2.0rc1) accepted at the top level of --extra_llm_api_options; LlmArgs
// forbids extra keys, so anything else is rejected the way pydantic does.
var trtllmLLMArgs = []string{
	"model", "tokenizer", "tokenizer_mode", "skip_tokenizer_init", "trust_remote_code",
	"revision", "dtype", "backend", "max_batch_size", "max_num_tokens", "max_seq_len",
	"max_input_len", "max_beam_width", "tensor_parallel_size", "pipeline_parallel_size",
	"context_parallel_size", "moe_expert_parallel_size", "moe_tensor_parallel_size",
	"moe_cluster_parallel_size", "gpus_per_node", "enable_attention_dp", "attention_dp_config",
	"attn_backend", "kv_cache_config", "cuda_graph_config", "enable_chunked_prefill",
	"speculative_config", "disable_overlap_scheduler", "print_iter_log", "enable_iter_perf_stats",
	"enable_iter_req_stats", "stream_interval", "scheduler_config", "moe_config",
	"enable_autotuner", "torch_compile_config", "quant_config", "sampler_type",
	"enable_layerwise_nvtx_marker", "batch_wait_timeout_ms", "batch_wait_max_tokens_ratio",
	"checkpoint_format", "load_format", "num_postprocess_workers", "reasoning_parser",
	"garbage_collection_gen0_threshold", "cache_transceiver_config", "return_perf_metrics",
	"enable_min_latency", "kv_connector_config", "guided_decoding_backend", "enable_lora",
	"lora_config", "peft_cache_config", "allreduce_strategy", "mm_encoder_only",
	"build_config", "postprocess_tokenizer_dir", "otlp_traces_endpoint",
	"fail_fast_on_attention_window_too_large", "enable_sleep", "perf_metrics_max_requests",
	"max_stats_len", "use_torch_sampler", "disable_flashinfer_sampling", "custom_tokenizer",
}

var trtllmKVCacheKeys = []string{
	"enable_block_reuse", "max_tokens", "max_attention_window", "sink_token_length",
	"free_gpu_memory_fraction", "host_cache_size", "onboard_blocks", "cross_kv_cache_fraction",
	"secondary_offload_min_priority", "event_buffer_max_size", "enable_partial_reuse",
	"copy_on_partial_reuse", "use_uvm", "attention_dp_events_gather_period_ms", "dtype",
	"mamba_ssm_cache_dtype", "tokens_per_block", "max_gpu_total_bytes",
}

var trtllmAttention = []string{"TRTLLM", "FLASHINFER", "VANILLA", "FLASHINFER_STAR_ATTENTION"}

// trtllmSpecTypes maps speculative_config.decoding_type to the simulator's method.
var trtllmSpecTypes = map[string]string{
	"MTP": "mtp", "Eagle": "eagle", "Eagle3": "eagle3", "NGram": "ngram",
	"DraftTarget": "draft_model", "Medusa": "medusa", "Lookahead": "lookahead",
	"UserProvided": "user_provided", "SaveHiddenStates": "save_hidden_states", "AUTO": "auto",
}

func parseTRTLLM(version string, rest []string, env map[string]string, read func(string) ([]byte, error)) (*Result, error) {
	if version == "" {
		version = DefaultVersion(sim.EngineTRTLLM)
	}
	c := trtllm120
	p, perr := c.parse(rest)
	if perr != nil {
		return nil, perr
	}
	res := &Result{Params: sim.Params{Engine: sim.EngineTRTLLM, Version: version}}
	pr := &res.Params
	pr.Model = p.pos[0]
	if fp8Name(pr.Model) {
		pr.Quantization = "fp8"
	}
	pr.TP = p.int("--tp_size")
	if p.int("--ep_size") > 1 {
		pr.EP = true
	}
	pr.MaxNumSeqs = p.int("--max_batch_size")
	pr.MaxNumBatchedTokens = p.int("--max_num_tokens")
	pr.MaxModelLen = p.int("--max_seq_len")
	if p.vals["--enable_chunked_prefill"].on {
		pr.ChunkedPrefill = boolp(true)
	}
	if p.has("--kv_cache_free_gpu_memory_fraction") {
		pr.MemFraction = p.vals["--kv_cache_free_gpu_memory_fraction"].num
	}
	if p.has("--extra_llm_api_options") {
		if err := trtllmExtra(p.str("--extra_llm_api_options"), pr, &res.Server, read); err != nil {
			return nil, err
		}
	}
	if pr.MemFraction != 0 && !(pr.MemFraction > 0 && pr.MemFraction <= 1) {
		return nil, startupError("trtllm", "pydantic_core._pydantic_core.ValidationError",
			fmt.Sprintf("1 validation error for KvCacheConfig\nfree_gpu_memory_fraction\n  Value error, kv_cache_config.free_gpu_memory_fraction must be a float between 0 and 1 [input_value=%g]", pr.MemFraction))
	}
	for n, v := range map[string]int{"max_batch_size": pr.MaxNumSeqs, "max_num_tokens": pr.MaxNumBatchedTokens, "max_seq_len": pr.MaxModelLen, "tensor_parallel_size": pr.TP} {
		if v < 0 || (v == 0 && (p.has("--"+n) || n == "tensor_parallel_size" && p.has("--tp_size"))) {
			return nil, startupError("trtllm", "ValueError", fmt.Sprintf("%s must be positive, got %d", n, v))
		}
	}

	res.Server = Server{Host: p.str("--host"), Port: DefaultPort(sim.EngineTRTLLM), Tokenizer: p.str("--tokenizer"),
		Metrics: res.Server.Metrics} // read from the options file above
	if p.has("--port") {
		res.Server.Port = p.int("--port")
	}
	res.Server.ServedModelNames = []string{TRTLLMListedName(pr.Model)}
	return res, nil
}

// TRTLLMListedName is the name trtllm-serve lists in /v1/models for its
// MODEL argument: model_dir.name, the last path component, when it is an
// existing directory, else the argument as given; there is no
// --served_model_name (tensorrt_llm/serve/openai_server.py,
// OpenAIServer.__init__).
func TRTLLMListedName(model string) string {
	if st, err := os.Stat(model); err == nil && st.IsDir() {
		return filepath.Base(filepath.Clean(model))
	}
	return model
}

// trtllmExtra applies the --extra_llm_api_options YAML, which overrides the
// trtllm-serve flags it repeats.
func trtllmExtra(path string, pr *sim.Params, srv *Server, read func(string) ([]byte, error)) error {
	b, err := read(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return startupError("trtllm", "FileNotFoundError", fmt.Sprintf("[Errno 2] No such file or directory: '%s'", path))
		}
		return fmt.Errorf("simargs: trtllm: read %s: %w", path, err)
	}
	if err := safeyaml.Check(b, safeyaml.Defaults); err != nil {
		return fmt.Errorf("simargs: trtllm: %s: %w", path, err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return startupError("trtllm", "yaml.scanner.ScannerError", fmt.Sprintf("%s: %v", path, err))
	}
	if m == nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var extra []string
	for _, k := range keys {
		if !contains(trtllmLLMArgs, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		return pydanticExtra(path, "TorchLlmArgs", extra)
	}
	bad := func(field, want string, v any) error {
		return startupError("trtllm", "pydantic_core._pydantic_core.ValidationError",
			fmt.Sprintf("1 validation error for TorchLlmArgs (%s)\n%s\n  Input should be %s [input_value=%v]", path, field, want, v))
	}
	getInt := func(field string, v any) (int, error) {
		switch x := v.(type) {
		case uint64:
			if x > math.MaxInt32 {
				return 0, bad(field, "a valid integer", v)
			}
			return int(x), nil
		case int64:
			return int(x), nil
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < math.MaxInt32 {
				return int(x), nil
			}
		}
		return 0, bad(field, "a valid integer", v)
	}
	getBool := func(field string, v any) (bool, error) {
		if x, ok := v.(bool); ok {
			return x, nil
		}
		return false, bad(field, "a valid boolean", v)
	}
	for _, k := range keys {
		v := m[k]
		var err error
		switch k {
		case "attn_backend":
			s, _ := v.(string)
			if !contains(trtllmAttention, strings.ToUpper(s)) {
				return bad(k, quoteList(trtllmAttention, ", "), v)
			}
			pr.AttentionBackend = strings.ToUpper(s)
		case "max_batch_size":
			pr.MaxNumSeqs, err = getInt(k, v)
		case "max_num_tokens":
			pr.MaxNumBatchedTokens, err = getInt(k, v)
		case "max_seq_len":
			pr.MaxModelLen, err = getInt(k, v)
		case "tensor_parallel_size":
			pr.TP, err = getInt(k, v)
		case "moe_expert_parallel_size":
			var n int
			n, err = getInt(k, v)
			pr.EP = n > 1
		case "enable_attention_dp":
			pr.AttentionDP, err = getBool(k, v)
		case "enable_chunked_prefill":
			var on bool
			on, err = getBool(k, v)
			pr.ChunkedPrefill = boolp(on)
		case "disable_overlap_scheduler":
			var off bool
			off, err = getBool(k, v)
			pr.AsyncScheduling = boolp(!off)
		case "cuda_graph_config":
			err = trtllmGraphs(path, v, pr, getInt, getBool, bad)
		case "kv_cache_config":
			err = trtllmKV(path, v, pr, getInt, getBool, bad)
		case "return_perf_metrics":
			// Prometheus text at /prometheus/metrics
			// (tensorrt_llm/serve/openai_server.py, mount_metrics).
			srv.Metrics, err = getBool(k, v)
		case "speculative_config":
			err = trtllmSpec(v, pr, getInt, bad)
		case "quant_config":
			if q, ok := v.(map[string]any); ok {
				if algo, _ := q["quant_algo"].(string); strings.HasPrefix(strings.ToUpper(algo), "FP8") {
					pr.Quantization = "fp8"
				}
				if kv, _ := q["kv_cache_quant_algo"].(string); strings.EqualFold(kv, "FP8") {
					pr.KVCacheDtype = "fp8"
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func trtllmKV(path string, v any, pr *sim.Params, getInt func(string, any) (int, error), getBool func(string, any) (bool, error), bad func(string, string, any) error) error {
	kv, ok := v.(map[string]any)
	if !ok {
		if v == nil {
			return nil
		}
		return bad("kv_cache_config", "a valid dictionary or instance of KvCacheConfig", v)
	}
	var extra []string
	for k := range kv {
		if !contains(trtllmKVCacheKeys, k) {
			extra = append(extra, "kv_cache_config."+k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return pydanticExtra(path, "KvCacheConfig", extra)
	}
	// The block replaces the KvCacheConfig trtllm-serve built from its
	// flags (llm_args | yaml_dict in update_llm_args_with_extra_dict,
	// tensorrt_llm/llmapi/llm_args.py): a fraction given as
	// --kv_cache_free_gpu_memory_fraction is dropped for the default.
	pr.MemFraction = 0
	if x, ok := kv["free_gpu_memory_fraction"]; ok {
		switch f := x.(type) {
		case float64:
			pr.MemFraction = f
		case uint64:
			pr.MemFraction = float64(f)
		case int64:
			pr.MemFraction = float64(f)
		default:
			return bad("kv_cache_config.free_gpu_memory_fraction", "a valid number", x)
		}
	}
	if x, ok := kv["enable_block_reuse"]; ok {
		on, err := getBool("kv_cache_config.enable_block_reuse", x)
		if err != nil {
			return err
		}
		pr.PrefixCaching = boolp(on)
	}
	if x, ok := kv["dtype"]; ok {
		s, _ := x.(string)
		switch strings.ToLower(s) {
		case "auto":
			pr.KVCacheDtype = ""
		case "fp8":
			pr.KVCacheDtype = "fp8"
		case "nvfp4":
			pr.KVCacheDtype = "nvfp4"
		default:
			return bad("kv_cache_config.dtype", "'auto', 'fp8' or 'nvfp4'", x)
		}
	}
	return nil
}

// trtllmGraphs applies cuda_graph_config: null disables CUDA graphs; a
// mapping (even empty) enables them, with the sizes TorchLlmArgs'
// validate_cuda_graph_config settles on (tensorrt_llm/llmapi/llm_args.py):
// batch_sizes sorted, or generated from max_batch_size (128 when 0) and
// enable_padding; both given must agree.
func trtllmGraphs(path string, v any, pr *sim.Params, getInt func(string, any) (int, error), getBool func(string, any) (bool, error), bad func(string, string, any) error) error {
	pr.EnforceEager = v == nil
	if v == nil {
		return nil
	}
	g, ok := v.(map[string]any)
	if !ok {
		return bad("cuda_graph_config", "a valid dictionary or instance of CudaGraphConfig", v)
	}
	var extra []string
	for k := range g {
		if !contains([]string{"batch_sizes", "max_batch_size", "enable_padding"}, k) {
			extra = append(extra, "cuda_graph_config."+k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return pydanticExtra(path, "CudaGraphConfig", extra)
	}
	padding, maxBS := false, 0
	var err error
	if x, ok := g["enable_padding"]; ok {
		if padding, err = getBool("cuda_graph_config.enable_padding", x); err != nil {
			return err
		}
	}
	if x, ok := g["max_batch_size"]; ok {
		if maxBS, err = getInt("cuda_graph_config.max_batch_size", x); err != nil {
			return err
		}
		if maxBS < 0 {
			return bad("cuda_graph_config.max_batch_size", "greater than or equal to 0", x)
		}
	}
	var sizes []int
	if x, ok := g["batch_sizes"]; ok && x != nil {
		list, ok := x.([]any)
		if !ok {
			return bad("cuda_graph_config.batch_sizes", "a valid list", x)
		}
		for i, e := range list {
			n, err := getInt(fmt.Sprintf("cuda_graph_config.batch_sizes.%d", i), e)
			if err != nil {
				return err
			}
			if n < 1 {
				return bad(fmt.Sprintf("cuda_graph_config.batch_sizes.%d", i), "greater than 0", e)
			}
			sizes = append(sizes, n)
		}
	}
	switch {
	case len(sizes) == 0:
		sizes = sim.TRTLLMGraphSizes(maxBS, padding)
	default:
		sort.Ints(sizes)
		if maxBS != 0 && !slices.Equal(sizes, sim.TRTLLMGraphSizes(maxBS, padding)) {
			return startupError("trtllm", "ValueError", fmt.Sprintf("%s: Please don't set both cuda_graph_config.batch_sizes and cuda_graph_config.max_batch_size.\ncuda_graph_config.batch_sizes: %s, cuda_graph_config.max_batch_size: %d", path, pyInts(sizes), maxBS))
		}
	}
	pr.GraphBatchSizes, pr.GraphPadding = sizes, padding
	return nil
}

// pyInts prints a list of ints as Python does.
func pyInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func trtllmSpec(v any, pr *sim.Params, getInt func(string, any) (int, error), bad func(string, string, any) error) error {
	sc, ok := v.(map[string]any)
	if !ok {
		if v == nil {
			return nil
		}
		return bad("speculative_config", "a valid dictionary", v)
	}
	dt, _ := sc["decoding_type"].(string)
	method, ok := trtllmSpecTypes[dt]
	if !ok {
		names := make([]string, 0, len(trtllmSpecTypes))
		for k := range trtllmSpecTypes {
			names = append(names, k)
		}
		sort.Strings(names)
		return bad("speculative_config.decoding_type", quoteList(names, ", "), sc["decoding_type"])
	}
	n := 0
	var err error
	switch {
	case sc["max_draft_len"] != nil:
		n, err = getInt("speculative_config.max_draft_len", sc["max_draft_len"])
	case sc["num_nextn_predict_layers"] != nil:
		n, err = getInt("speculative_config.num_nextn_predict_layers", sc["num_nextn_predict_layers"])
	default:
		n = 1
	}
	if err != nil {
		return err
	}
	if n < 1 {
		return bad("speculative_config.max_draft_len", "greater than 0", n)
	}
	pr.SpecMethod, pr.SpecTokens = method, n
	return nil
}

func pydanticExtra(path, model string, keys []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d validation error", len(keys))
	if len(keys) > 1 {
		b.WriteString("s")
	}
	fmt.Fprintf(&b, " for %s (%s)", model, path)
	for _, k := range keys {
		fmt.Fprintf(&b, "\n%s\n  Extra inputs are not permitted [type=extra_forbidden]", k)
	}
	return startupError("trtllm", "pydantic_core._pydantic_core.ValidationError", b.String())
}
