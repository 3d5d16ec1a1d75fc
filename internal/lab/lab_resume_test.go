package lab

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/store"
)

// TestKeyIgnoresRunControl: the run key changes with what changes results
// and not with how the run is driven.
func TestKeyIgnoresRunControl(t *testing.T) {
	base := smallSpec + "noise: {sigma: 0.01, seed: 3}\n"
	ref := mustSpec(t, base).Key()
	cases := []struct {
		name  string
		extra string
		same  bool
	}{
		{"parallel", "parallel: 1\n", true},
		{"budget", "budget: {max_trials: 5, max_hours: 2}\n", true},
		{"startup estimate", "startup_seconds: 30\n", true},
		{"time scale off the sim runtime", "time_scale: 40\n", true},
		{"repeats", "repeats: 5\n", false},
		{"min gain", "min_gain: 0.02\n", false},
		{"objective", "objective: {metric: throughput_per_gpu}\n", false},
		{"search batch", "search:\n  batch: 4\n", false},
		{"simulator fingerprint", "simulator: r2-000000000000\n", false},
	}
	for _, tc := range cases {
		text := base + tc.extra
		if k, _, _ := strings.Cut(tc.extra, ":"); strings.Contains(base, "\n"+k+":") {
			// The spec has the field already: replace it, not repeat it.
			text = replaceLine(t, base, k, tc.extra)
		}
		if got := mustSpec(t, text).Key(); (got == ref) != tc.same {
			t.Errorf("%s: key %s vs %s, want same: %v", tc.name, got, ref, tc.same)
		}
	}
	// The noise seed changes the numbers of sim-predict trials only.
	seed4 := replaceLine(t, base, "noise", "noise: {sigma: 0.01, seed: 4}\n")
	if mustSpec(t, seed4).Key() == ref {
		t.Error("another noise seed on sim-predict kept the key")
	}
	proc := mustSpec(t, base+"runtime: process\n").Key()
	if mustSpec(t, replaceLine(t, base, "noise", "noise: {sigma: 0.01, seed: 4}\n")+"runtime: process\n").Key() != proc {
		t.Error("the noise seed changed the key of a process run, where no noise applies")
	}
}

// replaceLine swaps the spec's line starting with "key:" for repl.
func replaceLine(t *testing.T, text, key, repl string) string {
	t.Helper()
	prefix := key + ":"
	var out []byte
	found := false
	for _, line := range splitLines(text) {
		if len(line) >= len(prefix) && line[:len(prefix)] == prefix {
			out = append(out, repl...)
			found = true
			continue
		}
		out = append(out, line...)
		out = append(out, '\n')
	}
	if !found {
		t.Fatalf("no %q line in the spec", prefix)
	}
	return string(out)
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// TestResumeWithAnotherParallel: a rerun that only changes parallel (and
// the budget) reuses every trial and reaches the same winner.
func TestResumeWithAnotherParallel(t *testing.T) {
	base := smallSpec + "noise: {sigma: 0.01, seed: 3}\n"
	st := newMemStore()
	first, err := analyticLab(mustSpec(t, base+"parallel: 2\n"), st).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if first.TrialsRun < 12 || first.Joint == nil || len(first.Joint.Tried) == 0 {
		t.Fatalf("first lab ran %d trials (joint %+v): too few to show a resume", first.TrialsRun, first.Joint)
	}
	again, err := analyticLab(mustSpec(t, base+"parallel: 1\nbudget: {max_trials: 500}\n"), st).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if again.TrialsRun != 0 || again.TrialsReused < first.TrialsRun {
		t.Errorf("rerun with parallel 1 ran %d trials and reused %d, want 0 run and all %d reused",
			again.TrialsRun, again.TrialsReused, first.TrialsRun)
	}
	if again.Winner.ConfigHash != first.Winner.ConfigHash || again.Gain != first.Gain {
		t.Errorf("rerun winner %s %+.4f, first %s %+.4f", again.Winner.Name, again.Gain, first.Winner.Name, first.Gain)
	}
	if len(st.runs) != 1 {
		t.Errorf("store holds %d runs, want the one resumed", len(st.runs))
	}
}

// finderStore is a memStore that can look a run up without creating it,
// as *store.Store can.
type finderStore struct{ *memStore }

var _ runFinder = finderStore{}

func (f finderStore) RunByKey(_ context.Context, key string) (store.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.runs[key]; ok {
		return r, nil
	}
	return store.Run{}, store.ErrNotFound
}

func (f finderStore) Runs(_ context.Context) ([]store.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.Run
	for _, r := range f.runs {
		out = append(out, r)
	}
	// Newest first, as the store lists them (a later run has a larger id).
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	return out, nil
}

// legacyRun runs s into a new store and moves the run to s's legacy key, as
// an older perflab stored it.
func legacyRun(t *testing.T, s *labspec.Spec) (*memStore, store.Run, *Summary) {
	t.Helper()
	ms := newMemStore()
	first, err := analyticLab(s, ms).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	old := ms.runs[s.Key()]
	delete(ms.runs, s.Key())
	old.Key = s.LegacyKey()
	ms.runs[old.Key] = old
	return ms, old, first
}

// TestResumeLegacyRun: a run stored under the old whole-spec key is adopted
// when the spec is rerun as it was, or with another parallel (found by name
// and the new key of its stored spec): its trials are reused and copied
// into the new run, so its report is whole, and the old run keeps its own.
func TestResumeLegacyRun(t *testing.T) {
	for _, rerun := range []string{"parallel: 2\n", "parallel: 1\n"} {
		s := mustSpec(t, smallSpec+"parallel: 2\n")
		if s.LegacyKey() == s.Key() {
			t.Fatal("legacy key equals the new key: the test shows nothing")
		}
		ms, old, first := legacyRun(t, s)
		oldTrials := len(ms.trials[old.ID])

		again, err := analyticLab(mustSpec(t, smallSpec+rerun), finderStore{ms}).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if again.TrialsRun != 0 || again.TrialsReused < first.TrialsRun {
			t.Errorf("rerun with %s adopting the legacy run ran %d trials and reused %d, want 0 and %d", rerun, again.TrialsRun, again.TrialsReused, first.TrialsRun)
		}
		nr, ok := ms.runs[s.Key()]
		if !ok {
			t.Fatal("no run under the new key")
		}
		if len(ms.trials[nr.ID]) != oldTrials || len(ms.trials[old.ID]) != oldTrials {
			t.Errorf("rerun with %s: new run holds %d trials, legacy run %d; want %d each", rerun, len(ms.trials[nr.ID]), len(ms.trials[old.ID]), oldTrials)
		}
	}
	// A run on the simulator adopts nothing stored without its fingerprint:
	// that may come from another model or calibration. (Both the legacy
	// key and the new key of a stored spec hash the fingerprint, so no
	// adoption path crosses simulators.)
	{
		ms, _, first := legacyRun(t, mustSpec(t, smallSpec+"parallel: 2\n"))
		again, err := analyticLab(mustSpec(t, smallSpec+"parallel: 2\nsimulator: r2-000000000000\n"), finderStore{ms}).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if again.TrialsRun != first.TrialsRun {
			t.Errorf("a fingerprinted simulator run adopted a legacy run: ran %d trials, a fresh run ran %d", again.TrialsRun, first.TrialsRun)
		}
	}
	// A run of the same name that measures something else is not adopted.
	ms := newMemStore()
	if _, err := analyticLab(mustSpec(t, smallSpec), ms).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	other, err := analyticLab(mustSpec(t, strings.Replace(smallSpec, "repeats: 3", "repeats: 2", 1)), finderStore{ms}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if other.TrialsRun == 0 {
		t.Error("a spec with other repeats adopted the earlier run of its name")
	}
}
