package store

import (
	"errors"
	"testing"

	"github.com/perflab/perflab/internal/metrics"
)

func TestTrialMetrics(t *testing.T) {
	tr := Trial{Key: "k", Result: []byte(`{"completed": 3, "num_prompts": 4, "total_token_throughput": 12.5, "p99_tpot_ms": 7}`)}
	r, err := tr.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := r.Percentile(metrics.MetricTPOT, 99); r.Completed != 3 || r.TotalTokenThroughput != 12.5 || !ok || p != 7 {
		t.Fatalf("decoded %+v (p99 %v %v)", r, p, ok)
	}
	r.Completed = 4
	if err := tr.SetMetrics(r); err != nil {
		t.Fatal(err)
	}
	if back, err := tr.Metrics(); err != nil || back.Completed != 4 || back.NumPrompts != 4 {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	if _, err := (Trial{}).Metrics(); !errors.Is(err, ErrNoResult) {
		t.Fatalf("empty result: %v", err)
	}
	if _, err := (Trial{Result: []byte(`{`)}).Metrics(); err == nil {
		t.Fatal("a broken result decoded")
	}
}
