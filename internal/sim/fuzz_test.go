package sim

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzModelConfig: any config.json either fails to parse with an error or
// gives an architecture the engine can start with or refuse (OOM, bad
// parameters), and a started engine serves a few requests to the end in
// finite time, with finite timings: no panic, hang or NaN.
func FuzzModelConfig(f *testing.F) {
	f.Add([]byte(`{"hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":8,"intermediate_size":14336,"vocab_size":128256,"max_position_embeddings":131072}`))
	f.Add([]byte(`{"text_config":{"hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":16,"num_key_value_heads":4,"head_dim":256,"intermediate_size":12288,"vocab_size":248320,"max_position_embeddings":262144,"full_attention_interval":4,"linear_num_key_heads":16,"linear_num_value_heads":32,"linear_key_head_dim":128,"linear_value_head_dim":128,"linear_conv_kernel_dim":4}}`))
	f.Add([]byte(`{"hidden_size":2048,"num_hidden_layers":48,"num_attention_heads":32,"num_key_value_heads":4,"head_dim":128,"intermediate_size":6144,"vocab_size":151936,"max_position_embeddings":40960,"num_experts":128,"num_experts_per_tok":8,"moe_intermediate_size":768}`))
	f.Add([]byte(`{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":-1,"intermediate_size":128,"vocab_size":100,"max_position_embeddings":64}`))
	f.Add([]byte(`{"hidden_size":64,"num_hidden_layers":4,"num_attention_heads":2,"intermediate_size":128,"vocab_size":100,"max_position_embeddings":4096,"layer_types":["linear_attention","full_attention","linear_attention","full_attention"],"linear_num_key_heads":2,"linear_num_value_heads":4,"linear_key_head_dim":16,"linear_value_head_dim":16}`))
	f.Add([]byte(`{"hidden_size":64,"num_hidden_layers":2,"num_attention_heads":2,"head_dim":-32,"intermediate_size":128,"vocab_size":100,"max_position_embeddings":4096}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := parseModelConfig(b)
		if err != nil {
			return
		}
		path := filepath.Join(dir, "config.json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := a.checkCounts(); err != nil {
			t.Fatalf("parsed an impossible architecture: %v", err)
		}
		e, err := New(Params{Engine: "vllm", Model: "fuzz", ModelConfig: path, GPU: "H100", MaxModelLen: 1024}, nil)
		if err != nil {
			if !errors.Is(err, ErrOOM) && !errors.Is(err, ErrBadParams) {
				t.Fatalf("New: %v (want an OOM or a parameter error)", err)
			}
			return
		}
		done := make(chan *Prediction, 1)
		go func() {
			pr, err := e.run(fixedReqs(4, 100, 20), Load{}, true)
			if err != nil {
				t.Errorf("run: %v", err)
			}
			done <- pr
		}()
		select {
		case pr := <-done:
			if pr == nil {
				return
			}
			for _, r := range pr.Records {
				if math.IsNaN(r.Latency) || math.IsInf(r.Latency, 0) || r.Latency < 0 {
					t.Fatalf("request %s latency %v", r.ID, r.Latency)
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatal("four requests did not finish in 10 s of CPU")
		}
	})
}

// TestCatalogCounts: every embedded architecture passes the checks a
// user's config.json must pass.
func TestCatalogCounts(t *testing.T) {
	for _, name := range ModelNames() {
		a, err := LookupModel(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.checkCounts(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzCoefficients: any coefficients document either fails to parse or
// drives an engine to finite timings (a user's --coefficients file reaches
// the simulator this way).
func FuzzCoefficients(f *testing.F) {
	f.Add([]byte(`{"entries":{"*":{"gemm_eff":0.6,"fp8_eff":0.45,"mem_eff":0.75,"attn_eff":0.4,"step_ms":4,"seq_us":20,"frontend_ms":1,"eager_ms":8}}}`))
	f.Add(embeddedCoefficients)
	f.Add([]byte(`{"entries":{"*":{"gemm_eff":1e-300,"fp8_eff":1e-300,"mem_eff":1e-300,"attn_eff":1e-300,"scan_eff":1e-300,"backend":{"fa3":-1}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCoefficients(b)
		if err != nil {
			return
		}
		for _, model := range []string{"Qwen3-8B", "Qwen3.5-9B"} {
			pr, err := PredictWith(Params{Engine: "sglang", Model: model, GPU: "H100", MaxModelLen: 4096}, c, fixedReqs(3, 50, 5), Load{})
			if err != nil {
				continue
			}
			for _, r := range pr.Records {
				if math.IsNaN(r.Latency) || math.IsInf(r.Latency, 0) || r.Latency < 0 {
					t.Fatalf("%s: request %s latency %v", model, r.ID, r.Latency)
				}
			}
		}
	})
}
