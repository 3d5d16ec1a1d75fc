package simargs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/engine"
)

// TestRenderedCommandsParse renders every knob for every engine version with
// the engine package and checks the simulator accepts the command and reads
// the knob back: the two sides of "config → command → simulator" agree.
func TestRenderedCommandsParse(t *testing.T) {
	bp := func(b bool) *bool { return &b }
	knobs := []struct {
		name  string
		set   func(*engine.Config)
		check func(t *testing.T, r *Result)
	}{
		{"plain", func(*engine.Config) {}, nil},
		{"fp8 checkpoint", func(c *engine.Config) { c.Model = "Qwen/Qwen3-14B-FP8"; c.Quantization = "fp8-checkpoint" }, func(t *testing.T, r *Result) {
			if r.Params.Quantization != "fp8" {
				t.Errorf("quantization %q", r.Params.Quantization)
			}
		}},
		{"fp8 online", func(c *engine.Config) { c.Quantization = "fp8" }, func(t *testing.T, r *Result) {
			if r.Params.Quantization != "fp8" {
				t.Errorf("quantization %q", r.Params.Quantization)
			}
		}},
		{"kv fp8", func(c *engine.Config) { c.KVCacheDtype = "fp8_e4m3" }, func(t *testing.T, r *Result) {
			if r.Params.KVCacheDtype != "fp8" {
				t.Errorf("kv dtype %q", r.Params.KVCacheDtype)
			}
		}},
		{"tp2", func(c *engine.Config) { c.TensorParallel = 2 }, func(t *testing.T, r *Result) {
			if r.Params.TP != 2 {
				t.Errorf("tp %d", r.Params.TP)
			}
		}},
		{"tp2 dp2 ep", func(c *engine.Config) { c.TensorParallel = 2; c.DataParallel = 2; c.ExpertParallel = true }, func(t *testing.T, r *Result) {
			if !r.Params.EP {
				t.Errorf("ep off: %+v", r.Params)
			}
		}},
		{"max seqs", func(c *engine.Config) { c.MaxNumSeqs = 256 }, func(t *testing.T, r *Result) {
			if r.Params.MaxNumSeqs != 256 {
				t.Errorf("max seqs %d", r.Params.MaxNumSeqs)
			}
		}},
		{"batched tokens", func(c *engine.Config) { c.MaxNumBatchedTokens = 8192 }, func(t *testing.T, r *Result) {
			if r.Params.MaxNumBatchedTokens != 8192 {
				t.Errorf("batched tokens %d", r.Params.MaxNumBatchedTokens)
			}
		}},
		{"chunked on", func(c *engine.Config) { c.ChunkedPrefill = bp(true) }, nil},
		{"chunked off", func(c *engine.Config) { c.ChunkedPrefill = bp(false) }, func(t *testing.T, r *Result) {
			if r.Params.ChunkedPrefill != nil && *r.Params.ChunkedPrefill {
				t.Errorf("chunked prefill on")
			}
		}},
		{"prefix on", func(c *engine.Config) { c.PrefixCaching = bp(true) }, nil},
		{"prefix off", func(c *engine.Config) { c.PrefixCaching = bp(false) }, func(t *testing.T, r *Result) {
			if r.Params.PrefixCaching == nil || *r.Params.PrefixCaching {
				t.Errorf("prefix caching not off: %v", r.Params.PrefixCaching)
			}
		}},
		{"spec mtp", func(c *engine.Config) { c.Speculative = &engine.Speculative{Method: "mtp", NumSpeculativeTokens: 4} }, func(t *testing.T, r *Result) {
			if r.Params.SpecMethod != "mtp" || r.Params.SpecTokens < 1 {
				t.Errorf("spec %q %d", r.Params.SpecMethod, r.Params.SpecTokens)
			}
		}},
		{"spec eagle3", func(c *engine.Config) {
			c.Speculative = &engine.Speculative{Method: "eagle3", DraftModel: "AngelSlim/Qwen3-14B_eagle3", NumSpeculativeTokens: 3}
		}, func(t *testing.T, r *Result) {
			if r.Params.SpecMethod != "eagle3" || r.Params.SpecTokens != 3 {
				t.Errorf("spec %q %d", r.Params.SpecMethod, r.Params.SpecTokens)
			}
		}},
		{"max model len", func(c *engine.Config) { c.MaxModelLen = 32768 }, func(t *testing.T, r *Result) {
			if r.Params.MaxModelLen != 32768 {
				t.Errorf("max model len %d", r.Params.MaxModelLen)
			}
		}},
		{"mem fraction", func(c *engine.Config) { c.GPUMemoryFraction = 0.85 }, func(t *testing.T, r *Result) {
			if r.Params.MemFraction != 0.85 {
				t.Errorf("mem fraction %g", r.Params.MemFraction)
			}
		}},
		{"eager", func(c *engine.Config) { c.EnforceEager = true }, func(t *testing.T, r *Result) {
			if !r.Params.EnforceEager {
				t.Errorf("not eager")
			}
		}},
		{"async off", func(c *engine.Config) { c.AsyncScheduling = bp(false) }, func(t *testing.T, r *Result) {
			if r.Params.AsyncScheduling == nil || *r.Params.AsyncScheduling {
				t.Errorf("async %v", r.Params.AsyncScheduling)
			}
		}},
		{"async on", func(c *engine.Config) { c.AsyncScheduling = bp(true) }, nil},
		{"reasoning", func(c *engine.Config) { c.ReasoningParser = "qwen3" }, nil},
		{"perf mode", func(c *engine.Config) { c.PerformanceMode = "throughput" }, func(t *testing.T, r *Result) {
			if r.Params.PerformanceMode != "throughput" {
				t.Errorf("performance mode %q", r.Params.PerformanceMode)
			}
		}},
		{"served name", func(c *engine.Config) { c.ServedModelName = "qwen" }, func(t *testing.T, r *Result) {
			if r.Server.ServedModelNames[0] != "qwen" {
				t.Errorf("served names %v", r.Server.ServedModelNames)
			}
		}},
	}
	backends := map[string][]string{"vllm": {"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"}, "sglang": {"fa3", "flashinfer", "triton"}, "trtllm": {"TRTLLM", "FLASHINFER"}}
	matrix := []struct{ engine, version string }{{"vllm", "0.11.0"}, {"vllm", "0.17.1"}, {"sglang", "0.5.5.post1"}, {"sglang", "0.5.9"}, {"trtllm", "1.2.0rc1"}}
	for _, m := range matrix {
		for _, b := range backends[m.engine] {
			be := b
			knobs = append(knobs, struct {
				name  string
				set   func(*engine.Config)
				check func(t *testing.T, r *Result)
			}{"backend " + m.engine + " " + be, func(c *engine.Config) { c.AttentionBackend = be }, func(t *testing.T, r *Result) {
				if !strings.EqualFold(r.Params.AttentionBackend, be) {
					t.Errorf("attention backend %q, want %q", r.Params.AttentionBackend, be)
				}
			}})
		}
	}
	rendered := 0
	for _, m := range matrix {
		for _, k := range knobs {
			if strings.HasPrefix(k.name, "backend ") && !strings.HasPrefix(k.name, "backend "+m.engine+" ") {
				continue
			}
			t.Run(m.engine+" "+m.version+" "+k.name, func(t *testing.T) {
				cfg := engine.Config{Engine: m.engine, Version: m.version, Model: "Qwen/Qwen3-14B"}
				k.set(&cfg)
				cmd, err := engine.RenderForLaunch(cfg, "127.0.0.1", 18123)
				if err != nil {
					t.Skipf("engine does not support it: %v", err)
				}
				rendered++
				dir := t.TempDir()
				for name, content := range cmd.Files {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				t.Chdir(dir)
				r, err := ParseAll(m.engine, m.version, cmd.Argv, cmd.Env)
				if err != nil {
					t.Fatalf("simulator rejects the rendered command %s\n%s: %v", cmd.String(), strings.Join(cmd.Argv, " "), err)
				}
				if r.Server.Host != "127.0.0.1" || r.Server.Port != 18123 {
					t.Errorf("listen address %s:%d, want 127.0.0.1:18123", r.Server.Host, r.Server.Port)
				}
				if k.check != nil {
					k.check(t, r)
				}
			})
		}
	}
	if rendered < 100 {
		t.Errorf("only %d commands rendered; the engine package supports fewer knobs than expected", rendered)
	}
}
