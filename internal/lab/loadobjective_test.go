package lab

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/engine"
)

// loadSpec asks which max_num_seqs sustains the most request rate within a
// TTFT and TPOT bound, on the simulator in process.
const loadSpec = `
name: load
model: Qwen/Qwen3-14B
hardware: {gpu: H100, count: 1}
engines: [{name: vllm, version: 0.11.0}]
tuning: {name: rnd, dataset: random, input_len: 1024, output_len: 256, num_prompts: 600, seed: 42}
no_generalization: true
stages:
  - name: max_num_seqs
    values: ["32", "512"]
combinations: false
search: {max_trials: 1}
repeats: 1
objective:
  metric: max_load_under_slo
  load: {slo: "ttft_p99<=1s,tpot_p99<=40ms,success>=99%", axis: rate, start: 1, max: 64}
`

// TestMaxLoadUnderSLO runs a lab scored by sustainable load on the
// simulator: every config searched lands within the tolerance of the true
// threshold a dense sweep of the same config finds, the search stays within
// its point budget on average, and a rerun on the same store measures
// nothing again.
//
// By default the joint search is off and only the winner is swept (30 s on
// a busy 2-core machine); PERFLAB_LAB_E2E=1 runs the joint search with the
// simulator guide predicting sustainable loads, and sweeps every config.
func TestMaxLoadUnderSLO(t *testing.T) {
	full := os.Getenv("PERFLAB_LAB_E2E") != ""
	spec := loadSpec
	if !full {
		spec = strings.Replace(spec, "search: {max_trials: 1}", "search: {disable: true}", 1)
	}
	s := mustSpec(t, spec)
	if s.Objective.Unit() != "req/s within SLO" {
		t.Fatalf("unit %q", s.Objective.Unit())
	}
	r := &PredictRunner{Predictor: SimPredictor{}, Hardware: s.Hardware, Requests: CachedRequests(StandinRequests)}
	st := newMemStore()
	sum, err := (&Lab{Spec: s, Store: st, Runner: r, Guide: r}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Winner == nil || !(sum.Winner.Score > 0) || !(sum.Baseline.Score > 0) {
		t.Fatalf("no scored winner: baseline %+v winner %+v", sum.Baseline, sum.Winner)
	}
	if len(sum.LoadSearches) < 3 {
		t.Fatalf("%d load searches in the summary", len(sum.LoadSearches))
	}
	opt, _ := s.Objective.Load.options()
	points := 0
	swept := map[string]bool{}
	for _, ls := range sum.LoadSearches {
		sr := ls.Result
		points += len(sr.Points)
		cfg := configOf(t, s, ls.Key, sum)
		at, _ := sr.At(sr.Sustainable)
		if !sr.Found || swept[ConfigHash(cfg)] || !full && at.Ref != sum.Winner.TrialKey {
			continue
		}
		swept[ConfigHash(cfg)] = true
		// The dense sweep: 1% steps from 90% of the answer upwards until
		// the SLO breaks; the true threshold is the last load that held.
		truth := 0.0
		for load := 0.9 * sr.Sustainable; load < 64; load *= 1.01 {
			w := s.Objective.Load.pointWorkload(*s.Tuning, load)
			b, err := r.GuessResult(context.Background(), cfg, w, 0)
			if err != nil {
				t.Fatal(err)
			}
			p, err := w.Point.pointOf(b)
			if err != nil {
				t.Fatal(err)
			}
			if ok, _ := opt.SLO.Check(p); !ok || !p.Scored() {
				break
			}
			truth = load
		}
		if truth == 0 {
			t.Errorf("%s: the sweep finds 90%% of the answer %v already breaking the SLO", ls.Name, sr.Sustainable)
			continue
		}
		rel := math.Abs(sr.Sustainable-truth) / truth
		t.Logf("%s: sustainable %.3f req/s, dense sweep %.3f (%.1f%% apart), %d points", ls.Name, sr.Sustainable, truth, 100*rel, len(sr.Points))
		if rel > sr.Tolerance+0.01 {
			t.Errorf("%s: sustainable %.3f is %.1f%% from the swept threshold %.3f (tolerance %v + the sweep's 1%% step)",
				ls.Name, sr.Sustainable, 100*rel, truth, sr.Tolerance)
		}
	}
	if len(swept) == 0 {
		t.Fatal("swept no config: the winner's trial is no search's sustainable point")
	}
	avg := float64(points) / float64(len(sum.LoadSearches))
	bound := math.Log2(64/1/sum.LoadSearches[0].Result.Tolerance) + 3
	t.Logf("%.2f points per search on average over %d searches (bound %.2f)", avg, len(sum.LoadSearches), bound)
	if avg > bound {
		t.Errorf("%.2f points per search, above log2(range/tolerance)+3 = %.2f", avg, bound)
	}
	// A rerun reads every point back from the store.
	sum2, err := (&Lab{Spec: s, Store: st, Runner: r, Guide: r}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if full && (sum.Joint == nil || len(sum.Joint.Tried) == 0) {
		t.Errorf("the joint search tried nothing under max_load_under_slo: %+v", sum.Joint)
	}
	if sum2.TrialsRun != 0 || sum2.Winner.Score != sum.Winner.Score {
		t.Errorf("rerun ran %d trials (winner %v, was %v)", sum2.TrialsRun, sum2.Winner.Score, sum.Winner.Score)
	}
}

// configOf finds the config of a searched trial key in the summary.
func configOf(t *testing.T, s *Spec, key string, sum *Summary) engine.Config {
	t.Helper()
	var cands []*Candidate
	cands = append(cands, sum.Baseline, sum.Winner)
	for _, st := range sum.Stages {
		for i := range st.Candidates {
			cands = append(cands, &st.Candidates[i])
		}
	}
	if sum.Joint != nil {
		for i := range sum.Joint.Tried {
			cands = append(cands, &sum.Joint.Tried[i])
		}
	}
	hash := strings.Split(key, "/")[1]
	for _, c := range cands {
		if c == nil {
			continue
		}
		if c.ConfigHash == hash {
			if cfg, ok := s.Config(Point(c.Point)); ok {
				return cfg
			}
		}
	}
	t.Fatalf("no candidate has the config of %s", key)
	return engine.Config{}
}

func TestLoadObjectiveSpecErrors(t *testing.T) {
	base := strings.Split(loadSpec, "objective:")[0]
	for _, tc := range []struct{ objective, want string }{
		{"objective: {metric: max_load_under_slo}", "objective max_load_under_slo: needs load"},
		{`objective: {metric: max_load_under_slo, load: {slo: "ttft_p98<=1s"}}`, "want p50, p90, p95 or p99"},
		{`objective: {metric: max_load_under_slo, load: {slo: "ttft_p99<=1s", axis: users}}`, `load axis "users"`},
		{`objective: {metric: max_load_under_slo, load: {slo: "ttft_p99<=1s", tolerance: 1.5}}`, "tolerance 1.5"},
		{`objective: {metric: max_load_under_slo, load: {slo: "ttft_p99<=1s", start: 100, max: 10}}`, "start (100) <= max (10)"},
	} {
		_, err := ParseSpec("test.yaml", []byte(base+tc.objective+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "test.yaml") {
			t.Errorf("%s: error %v, want one naming the file and %q", tc.objective, err, tc.want)
		}
	}
}
