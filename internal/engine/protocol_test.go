package engine

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestServedName: the name each engine lists in /v1/models. trtllm-serve
// lists model_dir.name for a model that is an existing directory
// (tensorrt_llm/serve/openai_server.py, OpenAIServer.__init__), the
// argument otherwise; vLLM and SGLang list the argument as written.
func TestServedName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "models", "Qwen3-14B")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "weights.bin")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"trtllm local directory", Config{Engine: TRTLLM, Model: dir}, "Qwen3-14B"},
		{"trtllm local directory, trailing slash", Config{Engine: TRTLLM, Model: dir + "/"}, "Qwen3-14B"},
		{"trtllm HF id", Config{Engine: TRTLLM, Model: "Qwen/Qwen3-14B"}, "Qwen/Qwen3-14B"},
		{"trtllm HF id, fp8 checkpoint", Config{Engine: TRTLLM, Model: "Qwen/Qwen3-14B", Quantization: QuantFP8Checkpoint}, "Qwen/Qwen3-14B-FP8"},
		{"trtllm a file is not a directory", Config{Engine: TRTLLM, Model: file}, file},
		// Where perflab's host does not have the path, the server does
		// (a pod's PVC or hostPath, a container path): an absolute path
		// is never a repo id, so the server lists its last component.
		{"trtllm directory only in the pod", Config{Engine: TRTLLM, Model: "/root/.cache/huggingface/models/Qwen3-14B"}, "Qwen3-14B"},
		{"trtllm relative name, not here", Config{Engine: TRTLLM, Model: "models/Qwen3-14B"}, "models/Qwen3-14B"},
		{"vllm local directory", Config{Engine: VLLM, Model: dir}, dir},
		{"vllm served name", Config{Engine: VLLM, Model: dir, ServedModelName: "q"}, "q"},
		{"sglang local directory", Config{Engine: SGLang, Model: dir}, dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.ServedName(); got != tc.want {
				t.Errorf("ServedName = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTRTLLMFractionInOptionsFile: trtllm-serve merges the options file
// over the flags with a shallow dict union (update_llm_args_with_extra_dict
// in tensorrt_llm/llmapi/llm_args.py), so a kv_cache_config block drops
// the --kv_cache_free_gpu_memory_fraction flag's KvCacheConfig whole. With
// a block, the fraction must be in it; without one, the flag stands.
func TestTRTLLMFractionInOptionsFile(t *testing.T) {
	on := true
	for _, tc := range []struct {
		name string
		cfg  Config
		flag bool   // the fraction is a flag
		file string // the options file holds this
	}{
		{"no block: the flag", Config{Engine: TRTLLM, Model: "m", GPUMemoryFraction: 0.85}, true, ""},
		{"fp8 KV cache", Config{Engine: TRTLLM, Model: "m", GPUMemoryFraction: 0.85, KVCacheDtype: "fp8"}, false,
			"kv_cache_config:\n  dtype: fp8\n  free_gpu_memory_fraction: 0.85\n"},
		{"prefix caching", Config{Engine: TRTLLM, Model: "m", GPUMemoryFraction: 0.7, PrefixCaching: &on}, false,
			"kv_cache_config:\n  enable_block_reuse: true\n  free_gpu_memory_fraction: 0.7\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, err := Render(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			argv := strings.Join(cmd.Argv, " ")
			if got := strings.Contains(argv, "--kv_cache_free_gpu_memory_fraction="); got != tc.flag {
				t.Errorf("argv %q: fraction flag %v, want %v", argv, got, tc.flag)
			}
			if !strings.Contains(cmd.Files[TRTLLMOptionsFile], tc.file) {
				t.Errorf("options file %q lacks %q", cmd.Files[TRTLLMOptionsFile], tc.file)
			}
		})
	}
}

// TestWithMetrics: each engine is launched with its Prometheus endpoint
// on, where it is: SGLang's /metrics needs --enable-metrics; trtllm-serve
// mounts /prometheus/metrics only with return_perf_metrics in its LLM
// args (openai_server.py register_routes → mount_metrics), its /metrics
// being JSON iteration stats; vLLM's /metrics is always there.
func TestWithMetrics(t *testing.T) {
	render := func(cfg Config) Command {
		t.Helper()
		cmd, err := Render(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	t.Run("paths", func(t *testing.T) {
		for eng, want := range map[string]string{VLLM: "/metrics", SGLang: "/metrics", TRTLLM: "/prometheus/metrics"} {
			if got := ProtocolFor(eng).MetricsPath(); got != want {
				t.Errorf("%s metrics at %q, want %q", eng, got, want)
			}
		}
	})
	t.Run("vllm unchanged", func(t *testing.T) {
		cfg := Config{Engine: VLLM, Model: "m"}
		if got, want := WithMetrics(cfg, render(cfg)).String(), render(cfg).String(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("sglang flag", func(t *testing.T) {
		cfg := Config{Engine: SGLang, Model: "m"}
		cmd := render(cfg)
		got := WithMetrics(cfg, cmd)
		if !slices.Contains(got.Argv, "--enable-metrics") || slices.Contains(cmd.Argv, "--enable-metrics") {
			t.Errorf("argv %q (rendered %q)", got.Argv, cmd.Argv)
		}
	})
	t.Run("trtllm without options file", func(t *testing.T) {
		cfg := Config{Engine: TRTLLM, Model: "m"}
		got := WithMetrics(cfg, render(cfg))
		if !slices.Contains(got.Argv, "--extra_llm_api_options="+TRTLLMOptionsFile) {
			t.Errorf("argv %q", got.Argv)
		}
		if f := got.Files[TRTLLMOptionsFile]; f != "enable_iter_perf_stats: true\nreturn_perf_metrics: true\n" {
			t.Errorf("options file %q", f)
		}
	})
	t.Run("trtllm with options file", func(t *testing.T) {
		cfg := Config{Engine: TRTLLM, Model: "m", KVCacheDtype: "fp8", GPUMemoryFraction: 0.85}
		cmd := render(cfg)
		got := WithMetrics(cfg, cmd)
		want := cmd.Files[TRTLLMOptionsFile] + "enable_iter_perf_stats: true\nreturn_perf_metrics: true\n"
		if got.Files[TRTLLMOptionsFile] != want {
			t.Errorf("options file %q, want %q", got.Files[TRTLLMOptionsFile], want)
		}
		if n := strings.Count(strings.Join(got.Argv, " "), "--extra_llm_api_options"); n != 1 {
			t.Errorf("argv %q names the options file %d times", got.Argv, n)
		}
		if cmd.Files[TRTLLMOptionsFile] == got.Files[TRTLLMOptionsFile] {
			t.Error("the rendered command was changed in place")
		}
	})
	t.Run("trtllm user's own options file", func(t *testing.T) {
		cfg := Config{Engine: TRTLLM, Model: "m", ExtraArgs: []string{"--extra_llm_api_options=mine.yaml"}}
		cmd := render(cfg)
		if got := WithMetrics(cfg, cmd); got.String() != cmd.String() || len(got.Files) != 0 {
			t.Errorf("got %q files %v", got.String(), got.Files)
		}
	})
}
