package simargs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTRTLLMListsDirectoryName: trtllm-serve lists model_dir.name for a
// MODEL that is an existing directory (tensorrt_llm/serve/openai_server.py),
// the argument itself otherwise.
func TestTRTLLMListsDirectoryName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "Qwen3-14B")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for model, want := range map[string]string{dir: "Qwen3-14B", dir + "/": "Qwen3-14B", "Qwen/Qwen3-14B": "Qwen/Qwen3-14B"} {
		r, err := ParseAll("trtllm", "1.2.0rc1", []string{"trtllm-serve", model}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Server.ServedModelNames; len(got) != 1 || got[0] != want {
			t.Errorf("%s: lists %v, want %q", model, got, want)
		}
	}
}

// TestTRTLLMKVBlockDropsFractionFlag: the options file's kv_cache_config
// replaces the KvCacheConfig trtllm-serve built from
// --kv_cache_free_gpu_memory_fraction (a shallow dict union in
// update_llm_args_with_extra_dict), so the flag's fraction is lost unless
// the block repeats it.
func TestTRTLLMKVBlockDropsFractionFlag(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       float64
	}{
		{"no block: the flag stands", "attn_backend: TRTLLM\n", 0.5},
		{"block without fraction: default", "kv_cache_config:\n  dtype: fp8\n", 0},
		{"block with fraction", "kv_cache_config:\n  dtype: fp8\n  free_gpu_memory_fraction: 0.85\n", 0.85},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseFiles("trtllm", "1.2.0rc1",
				[]string{"trtllm-serve", "Qwen/Qwen3-14B", "--kv_cache_free_gpu_memory_fraction", "0.5", "--extra_llm_api_options", "x.yaml"},
				nil, map[string]string{"x.yaml": tc.yaml})
			if err != nil {
				t.Fatal(err)
			}
			if p.MemFraction != tc.want {
				t.Errorf("fraction %g, want %g", p.MemFraction, tc.want)
			}
		})
	}
}

// TestMetricsSwitch: which argv turns each engine's Prometheus metrics on.
func TestMetricsSwitch(t *testing.T) {
	for _, tc := range []struct {
		name, eng string
		argv      []string
		files     map[string]string
		want      bool
	}{
		{"vllm always", "vllm", []string{"vllm", "serve", "M"}, nil, true},
		{"sglang default off", "sglang", []string{"python3", "-m", "sglang.launch_server", "--model-path", "M"}, nil, false},
		{"sglang --enable-metrics", "sglang", []string{"python3", "-m", "sglang.launch_server", "--model-path", "M", "--enable-metrics"}, nil, true},
		{"trtllm default off", "trtllm", []string{"trtllm-serve", "M"}, nil, false},
		{"trtllm return_perf_metrics", "trtllm", []string{"trtllm-serve", "M", "--extra_llm_api_options", "x.yaml"},
			map[string]string{"x.yaml": "return_perf_metrics: true\nenable_iter_perf_stats: true\n"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseAllFiles(tc.eng, "", tc.argv, nil, tc.files)
			if err != nil {
				t.Fatal(err)
			}
			if r.Server.Metrics != tc.want {
				t.Errorf("metrics %v, want %v", r.Server.Metrics, tc.want)
			}
		})
	}
}
