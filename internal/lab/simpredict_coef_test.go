package lab

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/sim"
)

// TestSimPredictorCoefficients: a calibration of the user's own (as `perflab
// sim calibrate` writes) replaces the embedded one in the lab's predictions,
// and a slower GPU calibration predicts less throughput.
func TestSimPredictorCoefficients(t *testing.T) {
	slow, err := sim.ParseCoefficients([]byte(`{"entries":{"*":{"gemm_eff":0.2,"fp8_eff":0.15,"mem_eff":0.25,"attn_eff":0.15,"step_ms":8,"seq_us":40,"frontend_ms":2,"eager_ms":8}}}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{Engine: engine.VLLM, Model: "Qwen/Qwen3-14B"}
	hw := labspec.Hardware{GPU: "H100", Count: 1}
	w := labspec.Workload{Name: "random", Dataset: "random", InputLen: 1000, OutputLen: 200, NumPrompts: 200, MaxConcurrency: 64}
	reqs, err := StandinRequests(w)
	if err != nil {
		t.Fatal(err)
	}
	def, err := SimPredictor{}.Predict(context.Background(), cfg, hw, reqs, w)
	if err != nil || def.FailureClass != "" {
		t.Fatalf("embedded: %v %s %s", err, def.FailureClass, def.Reason)
	}
	own, err := SimPredictor{Coefficients: slow}.Predict(context.Background(), cfg, hw, reqs, w)
	if err != nil || own.FailureClass != "" {
		t.Fatalf("own calibration: %v %s %s", err, own.FailureClass, own.Reason)
	}
	tps := func(raw json.RawMessage) float64 {
		var r struct {
			TotalTokenThroughput float64 `json:"total_token_throughput"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		return r.TotalTokenThroughput
	}
	d, o := tps(def.Result), tps(own.Result)
	if !(o > 0 && o < 0.8*d) {
		t.Errorf("total tok/s: embedded %.0f, slower calibration %.0f; want it clearly lower", d, o)
	}
}
