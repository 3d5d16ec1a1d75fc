package sim

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestWithDefaults(t *testing.T) {
	tests := []struct {
		name             string
		in               Params
		seqs, tokens     int
		chunked, prefix  bool
		memFrac          float64
		maxLen           int
		quant, attention string
	}{
		{"vllm 0.11 h100", Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen/Qwen3-14B", GPU: "H100"}, 1024, 8192, true, true, 0.9, 40960, "", "FLASH_ATTN"},
		{"vllm a100 small defaults", Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen3-8B", GPU: "A100"}, 256, 2048, true, true, 0.9, 40960, "", "FLASH_ATTN"},
		{"vllm 0.17 hybrid no prefix cache", Params{Engine: "vllm", Version: "0.17.1", Model: "Qwen/Qwen3.5-9B", GPU: "H100", MaxModelLen: 32768}, 1024, 8192, true, false, 0.9, 32768, "", "FLASHINFER"},
		{"vllm throughput mode doubles unset budget and max-num-seqs", Params{Engine: "vllm", Version: "0.17.1", Model: "Qwen3.5-9B", GPU: "H100", PerformanceMode: "throughput"}, 2048, 16384, true, false, 0.9, 262144, "", "FLASHINFER"},
		{"sglang fp8 name", Params{Engine: "sglang", Version: "0.5.5.post1", Model: "Qwen/Qwen3-14B-FP8", GPU: "H100"}, 0, 8192, true, true, sglangMemFraction(gpuCatalog[0], 1, 8192, ""), 40960, "fp8", "fa3"},
		{"trtllm", Params{Engine: "trtllm", Model: "Qwen3-32B", GPU: "H100"}, 2048, 8192, false, true, 0.9, 40960, "", "TRTLLM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.in.WithDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if p.MaxNumSeqs != tt.seqs || p.MaxNumBatchedTokens != tt.tokens || *p.ChunkedPrefill != tt.chunked ||
				*p.PrefixCaching != tt.prefix || p.MemFraction != tt.memFrac || p.MaxModelLen != tt.maxLen ||
				p.Quantization != tt.quant || p.AttentionBackend != tt.attention {
				t.Errorf("got %s mem=%g maxlen=%d", p, p.MemFraction, p.MaxModelLen)
			}
		})
	}
}

func TestWithDefaultsRejects(t *testing.T) {
	for _, p := range []Params{
		{Engine: "ollama", Model: "Qwen3-8B"},
		{Engine: "vllm", Model: "NoSuchModel-7B"},
		{Engine: "vllm", Model: "Qwen3-8B", GPU: "TPUv5"},
		{Engine: "vllm", Version: "0.11.0", Model: "Qwen3-8B", PerformanceMode: "throughput"},
		{Engine: "sglang", Model: "Qwen3-8B", PerformanceMode: "throughput"},
		{Engine: "vllm", Model: "Qwen3-8B", TP: 4, GPUs: 2},
		{Engine: "vllm", Model: "Qwen3-8B", Quantization: "awq"},
		{Engine: "vllm", Model: "Qwen3-8B", MemFraction: 1.5},
	} {
		if _, err := p.WithDefaults(); !errors.Is(err, ErrBadParams) {
			t.Errorf("%+v: err = %v, want ErrBadParams", p, err)
		}
	}
}

func TestParamCounts(t *testing.T) {
	// Published sizes: Qwen3-14B 14.8B, Qwen3-32B 32.8B, Llama-3.1-8B 8.03B,
	// Llama-3.1-70B 70.6B, Qwen3-30B-A3B 30.5B total / 3.3B active.
	for _, tt := range []struct {
		model  string
		total  float64
		active float64
	}{
		{"Qwen3-14B", 14.8e9, 0}, {"Qwen3-32B", 32.8e9, 0}, {"Llama-3.1-8B", 8.03e9, 0},
		{"Llama-3.1-70B", 70.6e9, 0}, {"Qwen3-30B-A3B", 30.5e9, 3.3e9}, {"Qwen3-235B-A22B", 235e9, 22e9},
	} {
		a, err := LookupModel(tt.model)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.TotalParams(); got < tt.total*0.97 || got > tt.total*1.03 {
			t.Errorf("%s total params %.3g, want %.3g", tt.model, got, tt.total)
		}
		if tt.active > 0 {
			if got := a.ActiveParams(); got < tt.active*0.85 || got > tt.active*1.15 {
				t.Errorf("%s active params %.3g, want %.3g", tt.model, got, tt.active)
			}
		}
	}
}

// vLLM will not start with chunked prefill off and a token budget below the
// context length; the simulator refuses the same command.
func TestVLLMNoChunkedPrefillNeedsBudget(t *testing.T) {
	off := false
	p := Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen/Qwen3-14B", GPU: "H100", ChunkedPrefill: &off, MaxNumBatchedTokens: 16384}
	if _, err := p.WithDefaults(); err == nil || !strings.Contains(err.Error(), "max_num_batched_tokens (16384) is smaller than max_model_len") {
		t.Fatalf("err = %v", err)
	}
	p.MaxModelLen = 16384
	if _, err := p.WithDefaults(); err != nil {
		t.Fatalf("budget equal to the context: %v", err)
	}
}

// SGLang's default --mem-fraction-static reserves MiB for the prefill's
// activations, CUDA graphs, TP and a draft model (server_args.
// _handle_gpu_memory_settings); worked by hand for an H100 of 79.2 GiB
// (81,101 MiB).
func TestSGLangMemFraction(t *testing.T) {
	h100, _ := LookupGPU("H100")
	for _, tt := range []struct {
		name  string
		tp    int
		chunk int
		spec  string
		want  float64
	}{
		// 512 + 1.5×8192 + 2×256 + 1024/8 = 13,440 MiB.
		{"tp1 default chunk", 1, 8192, "", 0.834},
		// 512 + 1.5×8192 + 2×512 + 1024 = 14,848 MiB.
		{"tp8", 8, 8192, "", 0.817},
		// 512 + 1.5×2048 + 512 + 128 = 4,224, raised to the 10 GiB floor.
		{"small chunk", 1, 2048, "", 0.874},
		// No chunking: the 16,384-token prefill, 512 + 24,576 + 512 + 128.
		{"unchunked", 1, -1, "", 0.683},
		// A draft model: 2 GiB more.
		{"eagle", 1, 8192, "EAGLE3", 0.809},
		{"ngram", 1, 8192, "ngram", 0.834},
	} {
		if got := sglangMemFraction(h100, tt.tp, tt.chunk, tt.spec); got != tt.want {
			t.Errorf("%s: %.3f, want %.3f", tt.name, got, tt.want)
		}
	}
	// The default follows a chunked-prefill size given on the command line.
	p, err := Params{Engine: EngineSGLang, Version: "0.5.5.post1", Model: "Qwen3-32B", GPU: "H100", MaxNumBatchedTokens: 16384}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if want := sglangMemFraction(h100, 1, 16384, ""); p.MemFraction != want || want >= 0.834 {
		t.Errorf("chunk 16384: fraction %.3f, want %.3f below the default chunk's 0.834", p.MemFraction, want)
	}
}

// TestSGLangVisionShare: SGLang lowers its default memory fraction for a
// multimodal checkpoint by its vision tower (adjust_mem_fraction_for_vlm,
// v0.5.9), worked by hand: Qwen3.5's tower names its depth "depth", so
// SGLang reads 24 layers of 1,152: 1152²/1024² = 1.2656, 1 − 0.1 × 0.2656
// = 0.97344, × 0.95 = 0.92477. A text-only model keeps the fraction; a
// huge tower is held at the 0.8 floor (0.76).
func TestSGLangVisionShare(t *testing.T) {
	for _, tt := range []struct {
		name string
		v    *VisionTower
		want float64
	}{
		{"text only", nil, 1},
		{"Qwen3.5 (no num_hidden_layers)", &VisionTower{HiddenSize: 1152}, 0.92477},
		{"ViT-L", &VisionTower{NumHiddenLayers: 24, HiddenSize: 1024}, 0.95},
		{"huge tower", &VisionTower{NumHiddenLayers: 64, HiddenSize: 4096}, 0.76},
	} {
		if got := sglangVisionShare(tt.v); math.Abs(got-tt.want) > 5e-6 {
			t.Errorf("%s: %.5f, want %.5f", tt.name, got, tt.want)
		}
	}
	arch, err := LookupModel("Qwen/Qwen3.5-9B")
	if err != nil || arch.Vision == nil || arch.Vision.HiddenSize != 1152 || arch.Vision.NumHiddenLayers != 0 {
		t.Fatalf("Qwen3.5-9B's vision tower: %+v (%v), want hidden 1152 and no num_hidden_layers", arch.Vision, err)
	}
	p, err := Params{Engine: EngineSGLang, Version: "0.5.9", Model: "Qwen3.5-9B", GPU: "H100"}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	h100, _ := LookupGPU("H100")
	if want := sglangMemFraction(h100, 1, 8192, "") * 0.92477; math.Abs(p.MemFraction-want) > 1e-5 {
		t.Errorf("Qwen3.5-9B on SGLang: fraction %.4f, want %.4f", p.MemFraction, want)
	}
}

// TestSGLangHybridOverlap: SGLang v0.5.9 turns its overlap scheduler off
// for a hybrid model whose radix cache holds the states without a
// ping-pong buffer (the default), and keeps it on with the radix cache
// off or for a full-attention model.
func TestSGLangHybridOverlap(t *testing.T) {
	for _, tt := range []struct {
		model string
		radix *bool
		want  bool
		spec  string
	}{
		{"Qwen3.5-9B", nil, false, ""},
		{"Qwen3.5-9B", boolPtr(false), true, ""},
		{"Qwen3-8B", nil, true, ""},
		// Speculative decoding turns overlap off for every model.
		{"Qwen3-8B", nil, false, "eagle3"},
		{"Qwen3.5-9B", nil, false, "mtp"},
	} {
		p, err := Params{Engine: EngineSGLang, Version: "0.5.9", Model: tt.model, GPU: "H100", PrefixCaching: tt.radix, SpecMethod: tt.spec}.WithDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if *p.AsyncScheduling != tt.want {
			t.Errorf("%s, radix %v, spec %q: overlap %v, want %v", tt.model, *p.PrefixCaching, tt.spec, *p.AsyncScheduling, tt.want)
		}
		if tt.spec != "" && p.MaxNumSeqs != 48 {
			t.Errorf("%s, spec %q: max running requests %d, want SGLang's 48", tt.model, tt.spec, p.MaxNumSeqs)
		}
	}
}

// TestMTPNeedsMTPLayers: vLLM refuses MTP on a checkpoint with no MTP
// layers before anything loads (SpeculativeConfig.__post_init__: the target
// drafts for itself and its model type is no MTP type, "Unsupported
// speculative method: 'mtp'"); the simulator priced Qwen3-14B's MTP at
// +31%. A config.json's layer count is read under either spelling.
func TestMTPNeedsMTPLayers(t *testing.T) {
	_, err := Params{Engine: "vllm", Model: "Qwen3-14B", GPU: "H100", SpecMethod: "mtp", SpecTokens: 2}.WithDefaults()
	if !errors.Is(err, ErrBadParams) || !strings.Contains(err.Error(), "NotImplementedError: Unsupported speculative method: 'mtp'") {
		t.Errorf("MTP on Qwen3-14B: %v, want vLLM's refusal", err)
	}
	if _, err := (Params{Engine: "vllm", Model: "Qwen3.5-9B", GPU: "H100", SpecMethod: "mtp", SpecTokens: 2}).WithDefaults(); err != nil {
		t.Errorf("MTP on Qwen3.5-9B, which has an MTP layer: %v", err)
	}
	for _, cfg := range []string{
		`{"hidden_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 8, "intermediate_size": 2048, "vocab_size": 1000, "max_position_embeddings": 4096, "num_nextn_predict_layers": 1}`,
		`{"text_config": {"hidden_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 8, "intermediate_size": 2048, "vocab_size": 1000, "max_position_embeddings": 4096, "mtp_num_hidden_layers": 1}}`,
	} {
		a, err := parseModelConfig([]byte(cfg))
		if err != nil || a.MTPLayers != 1 {
			t.Errorf("%s: MTP layers %d (%v), want 1", cfg, a.MTPLayers, err)
		}
	}
}
