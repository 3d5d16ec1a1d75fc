package lab

import (
	"testing"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/labspec"
)

// The points of a load search sample the same dataset: one sampling for
// all of them, whatever their load (issue 27: a *LoadPoint in the key made
// every point sample and tokenize ShareGPT again). A workload that asks
// for other requests is sampled anew.
func TestCachedRequestsKeysOnTheDataset(t *testing.T) {
	calls := 0
	f := CachedRequests(func(w labspec.Workload) ([]dataset.Request, error) {
		calls++
		return make([]dataset.Request, w.NumPrompts), nil
	})
	base := labspec.Workload{Name: "random", Dataset: "random", NumPrompts: 50, InputLen: 100, OutputLen: 10}
	for i, load := range []float64{1, 2, 4, 8} {
		w := base
		w.RequestRate = labspec.Rate(load)
		w.Point = &labspec.LoadPoint{Axis: "rate", Load: load, Warmup: i}
		if _, err := f(w); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Errorf("four points of one workload sampled %d times, want once", calls)
	}
	other := base
	other.NumPrompts = 60
	if r, _ := f(other); len(r) != 60 || calls != 2 {
		t.Errorf("another prompt count: %d requests after %d samplings, want 60 after 2", len(r), calls)
	}
}
