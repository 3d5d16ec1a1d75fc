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

// TestScored: the load search's answer is typed at the store's boundary:
// decoded out of the result's extras (which then hold only the engine's
// keys), and encoded back to the bytes it was read from, so a stored
// trial's result round-trips unchanged.
func TestScored(t *testing.T) {
	for _, tc := range []struct {
		name, stored string
		want         float64
		extras       int
	}{
		{"sustainable", `{"completed": 9, "num_prompts": 10, "sustainable_load": 12.5, "perflab_test_extra": 1}`, 12.5, 1},
		{"alone among extras", `{"completed": 9, "num_prompts": 10, "sustainable_load": 3}`, 3, 0},
		{"none", `{"completed": 9, "num_prompts": 10, "perflab_test_extra": 1}`, 0, 1},
		{"a zero from elsewhere is kept as written", `{"completed": 9, "num_prompts": 10, "sustainable_load": 0}`, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeResult([]byte(tc.stored))
			if err != nil {
				t.Fatal(err)
			}
			canon, err := r.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			s, err := DecodeScored(canon)
			if err != nil {
				t.Fatal(err)
			}
			if s.SustainableLoad != tc.want || len(s.Result.Extra) != tc.extras {
				t.Errorf("sustainable %v, extras %v; want %v and %d extras", s.SustainableLoad, s.Result.Extra, tc.want, tc.extras)
			}
			if _, left := s.Result.Extra["sustainable_load"]; left && tc.want != 0 {
				t.Error("the sustainable load is still among the result's extras")
			}
			b, err := EncodeScored(s)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != string(canon) {
				t.Errorf("encoded\n%s\nwant the stored\n%s", b, canon)
			}
		})
	}
	if _, err := DecodeScored(nil); !errors.Is(err, ErrNoResult) {
		t.Errorf("no result: err = %v, want ErrNoResult", err)
	}
}
