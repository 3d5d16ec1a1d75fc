package lab

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/loadsearch"
	"github.com/perflab/perflab/internal/racetest"
	"github.com/perflab/perflab/internal/report"
	"github.com/perflab/perflab/internal/store"
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
	r := simRunner(s)
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
		measured[labspec.ConfigHash(trialConfig(tr))] = true
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

// TestLoadPointSeconds (issue 27: a lab point took about 128 s at time
// scale 20, 2,560 engine seconds, with no limit): objective.load's
// point_seconds bounds a point, all its sizes together. The first size is
// cut to fit on the rate axis, a size that would pass it is not run, and
// the point ends undecided and Limited, as bench's do; without the
// limit, the point grows as its evidence asks.
func TestLoadPointSeconds(t *testing.T) {
	slo, err := loadsearch.ParseSLO("ttft_p99<=1s")
	if err != nil {
		t.Fatal(err)
	}
	w := labspec.Workload{Name: "rnd", Dataset: "random", InputLen: 16, OutputLen: 4, NumPrompts: 1000}
	// Every size is too short for a verdict: a third of its requests
	// complete, fewer than the p99 needs until the point is large.
	fake := func(spent *float64, sizes *[]int) func(labspec.Workload) (loadsearch.Point, error) {
		return func(pw labspec.Workload) (loadsearch.Point, error) {
			*sizes = append(*sizes, pw.NumPrompts)
			secs := float64(pw.NumPrompts) / pw.Point.Load
			*spent += secs
			return loadsearch.Point{Load: pw.Point.Load, Completed: pw.NumPrompts / 3, SuccessRate: 1,
				Latencies: map[string]float64{"ttft_p99": 10}, Requests: pw.NumPrompts, Seconds: secs}, nil
		}
	}
	for _, tc := range []struct {
		limit, load float64
		wantLimited bool
	}{
		{limit: 0, load: 0.5},
		{limit: 300, load: 0.5, wantLimited: true},
		{limit: 300, load: 5, wantLimited: true},
	} {
		o := &labspec.LoadObjective{SLO: "ttft_p99<=1s", PointSeconds: tc.limit}
		var spent float64
		var sizes []int
		p, err := sized(o, slo, w, tc.load, fake(&spent, &sizes))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("limit %v at %v req/s: sizes %v, %.0f s, %q", tc.limit, tc.load, sizes, spent, p.Flag)
		if tc.limit > 0 && spent > tc.limit {
			t.Errorf("limit %v at %v req/s: the point ran %.0f s (sizes %v)", tc.limit, tc.load, spent, sizes)
		}
		if p.Limited != tc.wantLimited || p.Seconds != spent {
			t.Errorf("limit %v at %v req/s: limited %v (want %v), %v s reported of %v", tc.limit, tc.load, p.Limited, tc.wantLimited, p.Seconds, spent)
		}
		if j, _ := slo.Judge(p, slo.MinRequests()); tc.wantLimited && (j.Scored() || j.Meets) {
			t.Errorf("limit %v at %v req/s: a point undecided at its limit judged %+v", tc.limit, tc.load, j)
		}
	}
	if err := (&labspec.LoadObjective{SLO: "ttft_p99<=1s", PointSeconds: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "point_seconds") {
		t.Errorf("point_seconds -1: %v", err)
	}
}

// shyClient keeps its peak in flight a little below the concurrency asked
// (within what loadsearch lets pass), as a client refilling a slot late
// does.
type shyClient struct{ inner Runner }

func (c shyClient) Run(ctx context.Context, t TrialSpec) (Measurement, error) {
	m, err := c.inner.Run(ctx, t)
	if err != nil || t.Workload.Point == nil || m.Failure != nil || m.Result == nil || m.Result.Perflab == nil {
		return m, err
	}
	pf := m.Result.Perflab
	pf.PeakConcurrency = min(pf.PeakConcurrency, int(math.Ceil(0.995*t.Workload.Point.Load)))
	return m, nil
}

// TestLoadConcurrencyReached (issue 27: "sustainable load: 512 concurrent
// requests" for a run whose peak was 90): on the concurrency axis a lab
// point holds enough prompts to reach its concurrency (100 prompts never
// had more than 90 in flight, so every config's search ended on "not
// reached" with no score), and a config is scored by the concurrency its
// client reached at its sustainable load, not the one it asked for.
func TestLoadConcurrencyReached(t *testing.T) {
	spec := strings.Replace(loadSpec, "search: {max_trials: 3}", "search: {disable: true}", 1)
	spec = strings.Replace(spec, `axis: rate, max: 64`, `axis: concurrency, start: 16, max: 512`, 1)
	spec = strings.Replace(spec, `num_prompts: 600`, `num_prompts: 100`, 1)
	spec = strings.Replace(spec, `ttft_p99<=1s,tpot_p99<=40ms,success>=99%`, `ttft_p50<=20s,success>=99%`, 1)
	spec = strings.Replace(spec, `values: ["32", "512"]`, `values: ["512"]`, 1)
	s := mustSpec(t, spec)
	r := simRunner(s)
	sum, err := (&Lab{Spec: s, Store: newMemStore(), Runner: shyClient{r}, Guide: r}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Baseline.Why != "" || !(sum.Baseline.Score > 90) {
		t.Fatalf("baseline scored %v (%s %s): want a concurrency above the 90 that 100 prompts reach", sum.Baseline.Score, sum.Baseline.Why, sum.Baseline.Reason)
	}
	checked := false
	for _, ls := range sum.LoadSearches {
		sr := ls.Result
		for _, p := range sr.Points {
			if strings.Contains(p.Flag, "not reached") {
				t.Errorf("%s: point %v flagged %q", ls.Name, p.Load, p.Flag)
			}
		}
		at, _ := sr.At(sr.Sustainable)
		t.Logf("%s: sustainable %v, peak there %d", ls.Name, sr.Sustainable, at.PeakConcurrency)
		if at.Ref != sum.Baseline.TrialKey && ls.Key != sum.Baseline.TrialKey {
			continue
		}
		checked = true
		if sum.Baseline.Score != float64(at.PeakConcurrency) {
			t.Errorf("baseline scored %v, its client reached %d at %v", sum.Baseline.Score, at.PeakConcurrency, sr.Sustainable)
		}
	}
	if !checked {
		t.Errorf("no load search is the baseline's (%s)", sum.Baseline.TrialKey)
	}
}

// TestLoadGuidedStart (issue 27: the 14B SLO example measured 350 points
// for 29 configs): with a guide, each config's search starts at the
// guide's predicted sustainable load with a small first step, and lands
// on the same answers, within the tolerance, in fewer points; on the
// simulator in process (guide and measurement agree) five points a config
// at most, on average.
func TestLoadGuidedStart(t *testing.T) {
	racetest.SkipCPUBound(t) // whole simulated lab runs; the searches' goroutines are raced in TestLoadBudgetHoldsUnderParallelSearches
	spec := strings.Replace(loadSpec, "search: {max_trials: 3}", "search: {disable: true}", 1)
	s := mustSpec(t, spec)
	r := simRunner(s)
	run := func(guide Guide) (map[string]float64, float64) {
		sum, err := (&Lab{Spec: s, Store: newMemStore(), Runner: r, Guide: guide}).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got, points := map[string]float64{}, 0
		for _, ls := range sum.LoadSearches {
			got[ls.Key] = ls.Result.Sustainable
			points += len(ls.Result.Points)
		}
		return got, float64(points) / float64(len(sum.LoadSearches))
	}
	blind, blindAvg := run(nil)
	guided, guidedAvg := run(r)
	t.Logf("points per config: %.2f blind, %.2f from the guide's prediction", blindAvg, guidedAvg)
	if guidedAvg > 5 || guidedAvg >= blindAvg {
		t.Errorf("%.2f points per config from the guide (blind %.2f): want at most 5, and fewer", guidedAvg, blindAvg)
	}
	tol := s.Objective.Load.Tolerance
	if tol == 0 {
		tol = loadsearch.DefaultTolerance
	}
	for k, b := range blind {
		if g, ok := guided[k]; !ok || math.Abs(g-b) > tol*b {
			t.Errorf("%s: %v guided, %v blind", k, g, b)
		}
	}
}

// TestLoadDryRunOneStartPerConfig (issue 27: 42-44 engine starts for 29
// configs, then 21 for 20): on a runtime with servers a stage's searches
// take turns by config, not by point, so each config's server starts once
// and serves all its points; and they take them likely winner last, so
// the stage's best is still up for its repeats (the values are listed
// best first here: searched in that order, 512's server was stopped by the
// others' before its repeat). The dry run, which replays the live
// runner's policy, counts no more starts than configs.
func TestLoadDryRunOneStartPerConfig(t *testing.T) {
	racetest.SkipCPUBound(t) // whole simulated lab runs; the searches' goroutines are raced in TestLoadBudgetHoldsUnderParallelSearches
	spec := strings.Replace(loadSpec, "search: {max_trials: 3}", "search: {disable: true}\nruntime: process", 1)
	spec = strings.Replace(spec, `values: ["32", "512"]`, `values: ["512", "128", "32", "8"]`, 1)
	spec = strings.Replace(spec, "repeats: 1", "repeats: 2", 1)
	s := mustSpec(t, spec)
	mem, err := store.Open(context.Background(), "sqlite::memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	guide := &PredictRunner{Predictor: SimPredictor{}, Hardware: s.Hardware, Requests: CachedRequests(StandinRequests)}
	p, err := DryRun(context.Background(), s, guide, "sim", mem, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d points, %d starts for %d configs, %.2f GPU-hours", p.Trials, p.Starts, p.Configs, p.GPUHours)
	if p.Starts > p.Configs {
		t.Errorf("%d engine starts for %d configs", p.Starts, p.Configs)
	}
}

// TestLoadHopelessNotSearched (issue 27): under max_load_under_slo a
// candidate costs a whole load search, so one whose guide range tops out
// below the incumbent's measured sustainable load is not searched: it is
// recorded as skipped with the reason (kind hopeless), no point of it is
// measured, and the winner is the one a lab without a guide (which
// searches every candidate) picks.
func TestLoadHopelessNotSearched(t *testing.T) {
	racetest.SkipCPUBound(t) // whole simulated lab runs; the searches' goroutines are raced in TestLoadBudgetHoldsUnderParallelSearches
	spec := strings.Replace(loadSpec, "search: {max_trials: 3}", "search: {disable: true}", 1)
	spec = strings.Replace(spec, `values: ["32", "512"]`, `values: ["4", "512"]`, 1)
	s := mustSpec(t, spec)
	r := simRunner(s)
	run := func(guide Guide) (*Summary, []store.Trial) {
		st := newMemStore()
		l := &Lab{Spec: s, Store: st, Runner: r, Guide: guide}
		sum, err := l.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		trials, err := st.Trials(context.Background(), l.StoredRun().ID)
		if err != nil {
			t.Fatal(err)
		}
		return sum, trials
	}
	blind, _ := run(nil)
	sum, trials := run(r)
	var hopeless *Candidate
	for _, st := range sum.Stages {
		for i, c := range st.Candidates {
			if c.Point[labspec.KnobMaxNumSeqs] == "4" {
				hopeless = &st.Candidates[i]
			}
		}
	}
	if hopeless == nil || hopeless.Why != report.WhyHopeless || hopeless.Decision != "skipped" {
		t.Fatalf("max_num_seqs=4: %+v, want skipped as hopeless", hopeless)
	}
	t.Logf("max_num_seqs=4: %s", hopeless.Reason)
	for _, tr := range trials {
		if trialConfig(tr).MaxNumSeqs == 4 {
			t.Errorf("trial %s measured max_num_seqs=4", tr.Key)
		}
	}
	if sum.Winner == nil || blind.Winner == nil || sum.Winner.ConfigHash != blind.Winner.ConfigHash {
		t.Errorf("winner %v, searching every candidate %v", sum.Winner, blind.Winner)
	}
}

// TestLoadSpecStartWins (issue 27): a start the spec sets is where every
// config's search starts, guide or not (the guided start used to override
// it); without one the search starts at the guide's prediction.
func TestLoadSpecStartWins(t *testing.T) {
	racetest.SkipCPUBound(t) // whole simulated lab runs; the searches' goroutines are raced in TestLoadBudgetHoldsUnderParallelSearches
	spec := strings.Replace(loadSpec, "search: {max_trials: 3}", "search: {disable: true}", 1)
	spec = strings.Replace(spec, `values: ["32", "512"]`, `values: ["512"]`, 1)
	for _, tc := range []struct {
		start  string
		guided bool
	}{{start: ", start: 2"}, {start: "", guided: true}} {
		s := mustSpec(t, strings.Replace(spec, "axis: rate, max: 64", "axis: rate"+tc.start+", max: 64", 1))
		r := simRunner(s)
		st := newMemStore()
		l := &Lab{Spec: s, Store: st, Runner: r, Guide: r}
		if _, err := l.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		trials, err := st.Trials(context.Background(), l.StoredRun().ID)
		if err != nil {
			t.Fatal(err)
		}
		// The trials are stored in the order measured; a point's name
		// says its load.
		first := trials[0].Name
		if strings.HasSuffix(first, " @ 2 req/s") == tc.guided {
			t.Errorf("start %q: the first point is %q (guided start %v)", tc.start, first, tc.guided)
		}
	}
}

// clone copies a memStore, so each resume starts from the same store.
func (m *memStore) clone() *memStore {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := newMemStore()
	c.nextID = m.nextID
	for k, r := range m.runs {
		c.runs[k] = r
	}
	for id, ts := range m.trials {
		c.trials[id] = append([]store.Trial(nil), ts...)
	}
	return c
}

// TestLoadResumeTakesNoPlaceForStoredSearch (issue 27): a resumed lab
// replays the searches the store holds whole before any search takes a
// budget place, and a stored point costs no time. Each search took its
// place before its first point, stored or not: resumed after its stored
// trials had spent budget.max_hours, a lab could not even read its own
// baseline back (and side by side, a search the budget had left out could
// win a place from one all of whose points were stored). Resumed, the lab
// measures nothing and reads back every search the first run made.
func TestLoadResumeTakesNoPlaceForStoredSearch(t *testing.T) {
	racetest.SkipCPUBound(t) // whole simulated lab runs; the searches' goroutines are raced in TestLoadBudgetHoldsUnderParallelSearches
	spec := strings.Replace(loadSpec, "search: {max_trials: 3}", "search: {disable: true}\nbudget: {max_trials: 3}", 1)
	spec = strings.Replace(spec, `values: ["32", "512"]`, `values: ["8", "32", "128", "512"]`, 1)
	s := mustSpec(t, spec)
	r := simRunner(s)
	st := newMemStore()
	first, err := (&Lab{Spec: s, Store: st, Runner: r, Guide: r}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first run: %d trials, %d searches, stopped %q", first.TrialsRun, len(first.LoadSearches), first.Stopped)
	// The same spec (the budget is not part of its key) with an hour's
	// budget, which the stored trials, an hour each, have spent.
	again := *s
	again.Budget.MaxHours = 1
	resumed := st.clone()
	for id, ts := range resumed.trials {
		for i := range ts {
			ts[i].Ended = ts[i].Started.Add(time.Hour)
		}
		resumed.trials[id] = ts
	}
	sum, err := (&Lab{Spec: &again, Store: resumed, Runner: r, Guide: r}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.TrialsRun != 0 || len(sum.LoadSearches) != len(first.LoadSearches) || sum.Baseline == nil || sum.Baseline.Score != first.Baseline.Score {
		t.Errorf("resumed: %d points measured, %d searches (first run: %d), baseline %+v (first run %+v)",
			sum.TrialsRun, len(sum.LoadSearches), len(first.LoadSearches), sum.Baseline, first.Baseline)
	}
}

// TestLoadGeneralization (issue 27): under max_load_under_slo the
// generalization step asks the same question of the baseline and the
// winner on each generalization workload: a load search there (its rate
// replaced by each point's), scored by its sustainable load, and the gain
// is the ratio of the two loads.
func TestLoadGeneralization(t *testing.T) {
	racetest.SkipCPUBound(t) // whole simulated lab runs; the searches' goroutines are raced in TestLoadBudgetHoldsUnderParallelSearches
	spec := strings.Replace(loadSpec, "search: {max_trials: 3}", "search: {disable: true}", 1)
	spec = strings.Replace(spec, "no_generalization: true", "generalization: [{name: short, dataset: random, input_len: 256, output_len: 128, num_prompts: 600, seed: 7}]", 1)
	s := mustSpec(t, spec)
	r := simRunner(s)
	sum, err := (&Lab{Spec: s, Store: newMemStore(), Runner: r, Guide: r}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Generalization) != 1 {
		t.Fatalf("%d generalization pairs, want 1", len(sum.Generalization))
	}
	g := sum.Generalization[0]
	found := map[string]float64{}
	for _, ls := range sum.LoadSearches {
		found[ls.Key] = ls.Result.Sustainable
	}
	for _, c := range []*Candidate{g.Baseline, g.Winner} {
		if c == nil || !(c.Score > 0) || c.Why != "" {
			t.Fatalf("%s: %+v, want a sustainable load", g.Workload, c)
		}
		// The config's search on that workload.
		var keys []string
		for k := range found {
			if strings.HasPrefix(k, "generalization/"+c.ConfigHash+"/") {
				keys = append(keys, k)
			}
		}
		if len(keys) != 1 || found[keys[0]] != c.Score {
			t.Errorf("%s: %s scored %v; its searches there %v of %v", g.Workload, c.Name, c.Score, keys, found)
		}
		// The short workload sustains more than the tuning one (256
		// tokens in, not 1,024).
		t.Logf("%s: %s %.4g req/s", g.Workload, c.Name, c.Score)
	}
	if want := g.Winner.Score/g.Baseline.Score - 1; sum.Winner.ConfigHash != sum.Baseline.ConfigHash && math.Abs(g.Gain-want) > 1e-9 {
		t.Errorf("gain %v, want %v", g.Gain, want)
	}
}

// TestLoadRepeatStartsAtFirstAnswer (issue 27: ≤ 5 points a config): a
// repeat's search starts at the answer the config's first run found, with
// a step of the tolerance, so on a noise-free simulator it re-measures the
// answer in two points. From the guide's prediction it took four (the 14B
// SLO example's baseline: 12 of its 82 points for three repeats).
func TestLoadRepeatStartsAtFirstAnswer(t *testing.T) {
	spec := strings.Replace(loadSpec, "search: {max_trials: 3}", "search: {disable: true}", 1)
	spec = strings.Replace(spec, `values: ["32", "512"]`, `values: ["512"]`, 1)
	spec = strings.Replace(spec, "repeats: 1", "repeats: 3", 1)
	s := mustSpec(t, spec)
	s.Noise = labspec.Noise{}
	r := simRunner(s)
	l := &Lab{Spec: s, Store: newMemStore(), Runner: r, Guide: r}
	sum, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byRepeat := map[string][]int{}
	answers := map[string][]float64{}
	for _, ls := range sum.LoadSearches {
		cfg := ls.Key[strings.IndexByte(ls.Key, '/')+1 : strings.LastIndexByte(ls.Key, '/')]
		byRepeat[cfg] = append(byRepeat[cfg], len(ls.Result.Points))
		answers[cfg] = append(answers[cfg], ls.Result.Sustainable)
	}
	repeated := 0
	for cfg, pts := range byRepeat {
		if len(pts) < 2 {
			continue
		}
		repeated++
		for i := 1; i < len(pts); i++ {
			if pts[i] > 2 {
				t.Errorf("%s: repeat %d took %d points (first run %d): want 2 at the first run's answer", cfg, i, pts[i], pts[0])
			}
			if answers[cfg][i] != answers[cfg][0] {
				t.Errorf("%s: repeat %d found %v, the first run %v, on a noise-free simulator", cfg, i, answers[cfg][i], answers[cfg][0])
			}
		}
	}
	if repeated == 0 {
		t.Fatalf("no config was repeated: searches %v", byRepeat)
	}
}
