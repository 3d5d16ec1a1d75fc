package sim

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// AWQ and GPTQ checkpoints (issue 26: "no architecture for model") are the
// base architecture streaming 4 or 8 bits a weight plus a scale and a zero
// point per 128, multiplied in BF16.
func TestWeightOnlyQuantizedCheckpoints(t *testing.T) {
	for _, c := range []struct {
		model string
		name  string
		bits  int
	}{
		{"Qwen/Qwen3-14B-AWQ", "Qwen3-14B-AWQ", 4},
		{"Qwen/Qwen3-8B-GPTQ-Int8", "Qwen3-8B-GPTQ-Int8", 8},
		{"Qwen3-32B-gptq-int4", "Qwen3-32B-GPTQ-Int4", 4},
	} {
		a, err := LookupModel(c.model)
		if err != nil {
			t.Fatalf("%s: %v", c.model, err)
		}
		if a.Name != c.name || a.WeightBits != c.bits || a.FP8Weights {
			t.Errorf("%s: name %q bits %d fp8 %v, want %q %d false", c.model, a.Name, a.WeightBits, a.FP8Weights, c.name, c.bits)
		}
	}

	reqs := fixedReqs(1, 512, 256)
	tpot := map[string]float64{}
	kv := map[string]int{}
	for _, m := range []string{"Qwen3-14B", "Qwen3-14B-FP8", "Qwen3-14B-AWQ"} {
		pr, err := Predict(Params{Engine: EngineVLLM, Model: m, GPU: "H100"}, reqs, Load{})
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if err := pr.Err(); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if pr.Params.Quantization == "" && m == "Qwen3-14B-AWQ" {
			t.Errorf("%s: quantization not set from the checkpoint", m)
		}
		tpot[m], kv[m] = pr.Result.MeanTPOTMs, pr.KVCapacityTokens
	}
	// One sequence decoding is bound by the weight stream: a quarter of
	// the bytes (plus the BF16 embeddings and LM head) is faster than FP8,
	// which is faster than BF16, and leaves the most room for KV cache.
	if !(tpot["Qwen3-14B-AWQ"] < tpot["Qwen3-14B-FP8"] && tpot["Qwen3-14B-FP8"] < tpot["Qwen3-14B"]) {
		t.Errorf("TPOT at one sequence: BF16 %.2f, FP8 %.2f, AWQ %.2f ms; want AWQ < FP8 < BF16", tpot["Qwen3-14B"], tpot["Qwen3-14B-FP8"], tpot["Qwen3-14B-AWQ"])
	}
	if !(kv["Qwen3-14B-AWQ"] > kv["Qwen3-14B-FP8"] && kv["Qwen3-14B-FP8"] > kv["Qwen3-14B"]) {
		t.Errorf("KV capacity: BF16 %d, FP8 %d, AWQ %d tokens; want AWQ > FP8 > BF16", kv["Qwen3-14B"], kv["Qwen3-14B-FP8"], kv["Qwen3-14B-AWQ"])
	}

	// A config.json says so through its quantization_config.
	dir := t.TempDir()
	cfg := `{"architectures":["Qwen3ForCausalLM"],"hidden_size":5120,"num_hidden_layers":40,"num_attention_heads":40,
"num_key_value_heads":8,"head_dim":128,"intermediate_size":17408,"vocab_size":151936,"max_position_embeddings":40960,
"quantization_config":{"quant_method":"awq","bits":4,"group_size":128}}`
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := LoadModelConfig(path)
	if err != nil || a.WeightBits != 4 {
		t.Errorf("AWQ config.json: bits %d, err %v; want 4", a.WeightBits, err)
	}

	// --quantization awq on a BF16 checkpoint is the engine's error too.
	_, err = Predict(Params{Engine: EngineVLLM, Model: "Qwen3-14B", GPU: "H100", Quantization: "awq_marlin"}, reqs, Load{})
	if !errors.Is(err, ErrBadParams) {
		t.Errorf("awq_marlin on a BF16 checkpoint: err = %v, want ErrBadParams", err)
	}
	if _, err := Predict(Params{Engine: EngineVLLM, Model: "Qwen3-14B-AWQ", GPU: "H100", Quantization: "awq_marlin"}, reqs, Load{}); err != nil {
		t.Errorf("awq_marlin on an AWQ checkpoint: %v", err)
	}
}
