package lab

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestLoadBudgetHoldsUnderParallelSearches (issue 27: the progress line
// read "[56/≤56]" past "at most 55"): under max_load_under_slo
// budget.max_trials counts searched configs, and a stage's searches run
// side by side. Each used to see room for one more while only one place
// was left, and all of them ran; a search now takes its place before its
// first point.
func TestLoadBudgetHoldsUnderParallelSearches(t *testing.T) {
	spec := strings.Replace(loadSpec, "search: {max_trials: 3}", "search: {disable: true}\nbudget: {max_trials: 2}", 1)
	spec = strings.Replace(spec, `values: ["32", "512"]`, `values: ["8", "32", "128", "512"]`, 1)
	s := mustSpec(t, spec)
	r := &PredictRunner{Predictor: SimPredictor{}, Hardware: s.Hardware, Requests: CachedRequests(StandinRequests)}
	st := newMemStore()
	var progress bytes.Buffer
	l := &Lab{Spec: s, Store: st, Runner: r, Guide: r, Progress: NewProgress(&progress)}
	sum, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	trials, err := st.Trials(context.Background(), l.StoredRun().ID)
	if err != nil {
		t.Fatal(err)
	}
	// Every point measured belongs to a config the budget let in: a
	// search cut short by the budget has spent its points all the same.
	measured := map[string]bool{}
	for _, tr := range trials {
		measured[ConfigHash(trialConfig(tr))] = true
	}
	t.Logf("%d configs measured in %d points, %d searches kept, stopped %q", len(measured), len(trials), len(sum.LoadSearches), sum.Stopped)
	if len(measured) > s.Budget.MaxTrials {
		t.Errorf("%d configs measured under budget.max_trials %d", len(measured), s.Budget.MaxTrials)
	}
	// The progress counts what the plan counts, searched configs, so its
	// count stays within the plan announced at the start.
	var planned int
	for _, line := range strings.Split(progress.String(), "\n") {
		if i := strings.Index(line, "at most "); i >= 0 && planned == 0 {
			fmt.Sscanf(line[i:], "at most %d trials", &planned)
		}
		var done, of int
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "[%d/≤%d]", &done, &of); err == nil && (done > planned || of != planned) {
			t.Errorf("progress %q past the plan of %d", line, planned)
		}
	}
	if planned == 0 {
		t.Fatalf("no plan in the progress:\n%s", progress.String())
	}
	if sum.Stopped != "budget: max_trials" {
		t.Errorf("stopped %q, want the budget named", sum.Stopped)
	}
}
