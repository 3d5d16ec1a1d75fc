package lab

import (
	"testing"

	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/store"
)

// TestMeasurementOf reads stored trials the way a resumed lab does: a
// result any version wrote, a failure, and results lacking a figure an SLO
// bounds (absent or null), which must read as missing, not as 0.
func TestMeasurementOf(t *testing.T) {
	obj := labspec.Objective{Metric: labspec.ObjectiveGoodput, SLO: labspec.SLO{TPOTMs: 50, P99TTFTMs: 500}}
	cases := []struct {
		name, result string
		score        float64
		missing      string
		sustainable  float64
	}{
		{"all figures", `{"completed": 9, "num_prompts": 10, "total_token_throughput": 700, "request_goodput": 2.5, "p99_ttft_ms": 400}`, 2.5, "", 0},
		{"goodput null", `{"completed": 9, "num_prompts": 10, "request_goodput": null, "p99_ttft_ms": 400}`, 0, "request_goodput", 0},
		{"p99 null", `{"completed": 9, "num_prompts": 10, "request_goodput": 1, "p99_ttft_ms": null}`, 1, "p99_ttft_ms", 0},
		{"neither", `{"completed": 9, "num_prompts": 10}`, 0, "request_goodput, p99_ttft_ms", 0},
		// A load search's scored trial keeps its answer among the extras.
		{"sustainable", `{"completed": 9, "num_prompts": 10, "request_goodput": 1, "p99_ttft_ms": 1, "sustainable_load": 12.5}`, 1, "", 12.5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := measurementOf(store.Trial{Status: "ok", Result: []byte(tc.result), Cost: store.Cost{GPUs: 2}})
			if err != nil {
				t.Fatal(err)
			}
			if got := scoreUnder(obj, m, 1); got != tc.score {
				t.Errorf("score %v, want %v", got, tc.score)
			}
			if got := missingFigures(obj, m); got != tc.missing {
				t.Errorf("missing %q, want %q", got, tc.missing)
			}
			if m.SustainableLoad != tc.sustainable || m.Cost.GPUs != 2 || m.SuccessRate() != 0.9 {
				t.Errorf("sustainable %v, cost %+v, success %v", m.SustainableLoad, m.Cost, m.SuccessRate())
			}
			// What the guide cache writes reads back the same.
			b, err := encodeMeasurement(m)
			if err != nil {
				t.Fatal(err)
			}
			back, err := decodeMeasurement(b)
			if err != nil {
				t.Fatal(err)
			}
			if scoreUnder(obj, back, 1) != tc.score || missingFigures(obj, back) != tc.missing || back.SustainableLoad != tc.sustainable {
				t.Errorf("round trip changed it: %s", b)
			}
		})
	}
	m, err := measurementOf(store.Trial{Status: "failed", FailureClass: "oom", Reason: "CUDA out of memory"})
	if err != nil || m.Failure == nil || m.Failure.Class != "oom" || m.Result != nil {
		t.Fatalf("failed trial: %+v, %v", m, err)
	}
	if _, err := measurementOf(store.Trial{Status: "ok", Result: []byte(`[`)}); err == nil {
		t.Fatal("an unreadable result read")
	}
}
