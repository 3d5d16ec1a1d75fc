package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeConfig(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string // substring; "" = success
		check   func(*testing.T, Config)
	}{
		{name: "yaml", in: "engine: vllm\nmodel: Qwen/Qwen3-14B\nchunked_prefill: false\nspeculative:\n  method: mtp\n  num_speculative_tokens: 2\nenv:\n  HF_HUB_OFFLINE: \"1\"\n",
			check: func(t *testing.T, c Config) {
				if c.ChunkedPrefill == nil || *c.ChunkedPrefill || c.Speculative.NumSpeculativeTokens != 2 || c.Env["HF_HUB_OFFLINE"] != "1" {
					t.Errorf("decoded %+v", c)
				}
			}},
		{name: "json", in: `{"engine": "sglang", "model": "m", "max_num_seqs": 64}`,
			check: func(t *testing.T, c Config) {
				if c.Engine != SGLang || c.MaxNumSeqs != 64 {
					t.Errorf("decoded %+v", c)
				}
			}},
		{name: "unknown field has line:col", in: "engine: vllm\nmodel: m\nmax_num_seq: 3\n", wantErr: "cfg.yaml:3:1: unknown field \"max_num_seq\""},
		{name: "nested unknown field", in: "engine: vllm\nmodel: m\nspeculative:\n  method: mtp\n  num_tokens: 2\n", wantErr: "cfg.yaml:5:3:"},
		{name: "type mismatch", in: "engine: vllm\nmodel: m\nmax_num_seqs: lots\n", wantErr: "cfg.yaml:3:"},
		{name: "duplicate key", in: "engine: vllm\nmodel: m\nmodel: n\n", wantErr: "cfg.yaml:3:"},
		{name: "json unknown field", in: "{\n  \"engine\": \"vllm\",\n  \"model\": \"m\",\n  \"bogus\": 1\n}", wantErr: "cfg.yaml:4:"},
		{name: "syntax error", in: "engine: [vllm\n", wantErr: "cfg.yaml:"},
		{name: "empty", in: "  \n", wantErr: "empty config"},
		{name: "validation", in: "engine: vllm\nmodel: m\ngpu_memory_fraction: 2\n", wantErr: "gpu_memory_fraction"},
		{name: "unsupported", in: "engine: sglang\nmodel: m\nperformance_mode: throughput\n", wantErr: "does not support performance_mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DecodeConfig([]byte(tt.in), "cfg.yaml")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestLoadConfigErrors(t *testing.T) {
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
	// Every problem is reported at once.
	_, err := DecodeConfig([]byte("engine: nope\nmodel: ''\ntensor_parallel: -1\n"), "x")
	var ves ValidationErrors
	if !errors.As(err, &ves) || len(ves) != 3 {
		t.Fatalf("err = %v, want 3 validation errors", err)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "engine" || ve.Value != "nope" {
		t.Errorf("first error = %+v", ve)
	}
}

func FuzzDecodeConfig(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "reference", "*.yaml"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"engine":"trtllm","model":"m","speculative":{"method":"eagle3","draft_model":"d","num_speculative_tokens":3}}`))
	f.Add([]byte("engine: vllm\nmodel: m\nenv: {A: b}\nextra_args: [--x]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeConfig(data, "fuzz")
		if err != nil {
			return
		}
		// A config that decodes and validates must render.
		if _, err := Render(c); err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("valid config fails to render: %v\n%s", err, data)
			}
		}
	})
}

// TestLabSpecIsNotAnEngineConfig (issue 11, defect 9: `perflab engine
// command examples/qwen3-14b-h100.yaml` said only `unknown field
// "hardware"`): a lab spec given as an engine config is named as such, with
// the command that runs it; the repository's engine config example loads.
func TestLabSpecIsNotAnEngineConfig(t *testing.T) {
	root := filepath.Join("..", "..", "examples")
	_, err := LoadConfig(filepath.Join(root, "qwen3-14b-h100.yaml"))
	var ne *NotEngineConfigError
	if !errors.As(err, &ne) || !strings.Contains(err.Error(), "perflab lab") || !strings.Contains(err.Error(), "engines:") {
		t.Fatalf("lab spec as engine config: %v", err)
	}
	cfg, err := LoadConfig(filepath.Join(root, "engine-vllm-qwen3-14b.yaml"))
	if err != nil {
		t.Fatalf("the example engine config: %v", err)
	}
	if _, err := Render(cfg); err != nil {
		t.Fatalf("render the example: %v", err)
	}
	// One stray field is a typo in an engine config, reported as such.
	_, err = DecodeConfig([]byte("engine: vllm\nmodel: m\nstages: []\n"), "typo.yaml")
	if errors.As(err, &ne) || !strings.Contains(err.Error(), "typo.yaml:3") {
		t.Errorf("a stray field: %v, want a positioned unknown-field error", err)
	}
}
