package lab

import (
	"path/filepath"
	"testing"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/labspec"
)

// The spec tests that need the lab: a spec's plan, a lab run under its
// noise rule, the requests a load search's points share.

func TestExamplesParse(t *testing.T) {
	root := repoRoot(t)
	for _, ex := range []string{"qwen3-14b-h100", "qwen3-32b-h100", "qwen3.5-9b-h100", "qwen3-235b-a22b-8xh100"} {
		s, err := labspec.LoadSpec(filepath.Join(root, "examples", ex+".yaml"))
		if err != nil {
			t.Fatalf("%s: %v", ex, err)
		}
		if s.BaselineEngine() != "vllm" || len(s.Generalization) != 4 || s.Tuning.Dataset != "sharegpt" {
			t.Errorf("%s: baseline %s, %d generalization workloads, tuning %s", ex, s.BaselineEngine(), len(s.Generalization), s.Tuning.Dataset)
		}
		if p := PlanOf(s); p.Grid < 100 || p.Trials >= p.Grid {
			t.Errorf("%s: plan %d trials for a grid of %d", ex, p.Trials, p.Grid)
		}
	}
}

func TestNoiseFloor(t *testing.T) {
	tests := []struct {
		a, b []float64
		want float64
	}{
		{[]float64{100}, []float64{105}, 0},
		{[]float64{100, 100, 100}, []float64{105, 105, 105}, 0},
		{[]float64{99, 101}, []float64{100, 100}, 0.04},
		{[]float64{100, 100}, []float64{98, 102}, 0.08},
	}
	for _, tc := range tests {
		if got := NoiseFloor(tc.a, tc.b); got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("NoiseFloor(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestNoiseRuleSkipsSmallGains(t *testing.T) {
	// With 2% noise, the attention-backend stage's sub-percent differences
	// must not be kept, and every skip must say why.
	s := mustSpec(t, smallSpec+"noise: {sigma: 0.02, seed: 11}\n")
	sum, err := analyticLab(s, newMemStore()).Run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	floors := 0
	for _, st := range sum.Stages {
		if st.NoiseFloor > 0 {
			floors++
		}
		for _, c := range st.Candidates {
			if c.Decision != "kept" && c.Reason == "" {
				t.Errorf("stage %s: %s %s without a reason", st.Name, c.Name, c.Decision)
			}
			if c.Decision == "kept" && len(c.RepeatScores) != s.Repeats {
				t.Errorf("stage %s: kept %s on %d repeats, want %d", st.Name, c.Name, len(c.RepeatScores), s.Repeats)
			}
		}
	}
	if floors == 0 || sum.NoiseFloor <= 0 {
		t.Errorf("no noise floor measured with noise on (%d stages with a floor)", floors)
	}
}

// TestCachedRequestsSharesLoadPoints: a load search's points are one
// workload at several loads; they share its sample, so the memory a lab
// keeps does not grow with the points it measures.
func TestCachedRequestsSharesLoadPoints(t *testing.T) {
	calls := 0
	reqs := CachedRequests(func(w labspec.Workload) ([]dataset.Request, error) {
		calls++
		return StandinRequests(w)
	})
	w := labspec.Workload{Name: "t", Dataset: "random", InputLen: 10, OutputLen: 10, NumPrompts: 5}
	o := &labspec.LoadObjective{SLO: "ttft_p99<=2s"}
	for _, load := range []float64{1, 2, 4, 8} {
		if _, err := reqs(pointWorkload(o, w, load)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reqs(w); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("sampled %d times for one workload at five loads, want once", calls)
	}
	other := w
	other.Seed = 7
	reqs(other)
	if calls != 2 {
		t.Errorf("another seed did not sample again")
	}
}
