package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labprogress"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/loadsearch"
	"github.com/perflab/perflab/internal/racetest"
	"github.com/perflab/perflab/internal/report"
	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/store"
	"github.com/perflab/perflab/internal/tokenizer"
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
search: {max_trials: 3}
repeats: 1
objective:
  metric: max_load_under_slo
  load: {slo: "ttft_p99<=1s,tpot_p99<=40ms,success>=99%", axis: rate, max: 64}
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
	// A search's results on the simulator, 43 s under -race; the parallel
	// searches' goroutines are TestLoadBudgetHoldsUnderParallelSearches'.
	racetest.SkipCPUBound(t)
	full := os.Getenv("PERFLAB_LAB_E2E") != ""
	spec := loadSpec
	if !full {
		spec = strings.Replace(spec, "search: {max_trials: 3}", "search: {disable: true}", 1)
	}
	s := mustSpec(t, spec)
	if ObjectiveUnit(s.Objective) != "req/s within SLO" {
		t.Fatalf("unit %q", ObjectiveUnit(s.Objective))
	}
	r := simRunner(s)
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
	opt, _ := s.Objective.Load.Options()
	points := 0
	swept := map[string]bool{}
	for _, ls := range sum.LoadSearches {
		sr := ls.Result
		points += len(sr.Points)
		cfg := configOf(t, s, ls.Key, sum)
		at, _ := sr.At(sr.Sustainable)
		if !sr.Found || swept[labspec.ConfigHash(cfg)] || !full && at.Ref != sum.Winner.TrialKey {
			continue
		}
		swept[labspec.ConfigHash(cfg)] = true
		// The dense sweep: 1% steps from 90% of the answer upwards until
		// the SLO breaks; the true threshold is the last load that held.
		truth := 0.0
		for load := 0.9 * sr.Sustainable; load < 64; load *= 1.01 {
			p, err := sized(s.Objective.Load, opt.SLO, *s.Tuning, load, func(w labspec.Workload) (loadsearch.Point, error) {
				b, err := r.GuessResult(context.Background(), cfg, w, 0)
				if err != nil {
					return loadsearch.Point{}, err
				}
				return pointOf(w.Point, b)
			})
			if err != nil {
				t.Fatal(err)
			}
			// Judged as the search judges: an overloaded point misses.
			if p, _ = opt.SLO.Judge(p, opt.SLO.MinRequests()); !p.Meets {
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
	if sum.Joint != nil {
		// A config searched once is measured: the joint search must not
		// try it again (it once did, until its budget ran out).
		tried := map[string]bool{}
		for _, c := range sum.Joint.Tried {
			if tried[c.ConfigHash] {
				t.Errorf("the joint search tried %s twice", c.Name)
			}
			tried[c.ConfigHash] = true
		}
	}
	if sum2.TrialsRun != 0 || sum2.Winner.Score != sum.Winner.Score {
		t.Errorf("rerun ran %d trials (winner %v, was %v)", sum2.TrialsRun, sum2.Winner.Score, sum.Winner.Score)
	}
}

// configOf finds the config of a searched trial key in the summary.
func configOf(t *testing.T, s *labspec.Spec, key string, sum *Summary) engine.Config {
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
			if cfg, ok := s.Config(labspec.Point(c.Point)); ok {
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
		_, err := labspec.ParseSpec("test.yaml", []byte(base+tc.objective+"\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "test.yaml") {
			t.Errorf("%s: error %v, want one naming the file and %q", tc.objective, err, tc.want)
		}
	}
}

// slowClient flags every point above limit req/s the way a client that
// falls behind shows in a result: it achieved 90% of the offered rate.
type slowClient struct {
	inner Runner
	limit float64
}

func (c slowClient) Run(ctx context.Context, t TrialSpec) (Measurement, error) {
	m, err := c.inner.Run(ctx, t)
	if err != nil || t.Workload.Point == nil || t.Workload.Point.Load <= c.limit || m.Failure != nil {
		return m, err
	}
	pf := m.Result.Perflab
	pf.AchievedRate = 0.9 * pf.OfferedRate
	return m, nil
}

// TestLoadReport runs a max_load_under_slo lab into a real SQLite store
// with a client that cannot deliver more than 2.5 req/s, and builds the
// report from the store: the curves charts (PNG, SVG inlined in the HTML)
// and the tables, where the points above 2.5 req/s are flagged, not scored,
// and no sustainable load exceeds 2.5 req/s.
func TestLoadReport(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "lab.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	spec := strings.Replace(strings.Replace(loadSpec, "search: {max_trials: 3}", "search: {disable: true}", 1), `values: ["32", "512"]`, `values: ["8", "512"]`, 1)
	s := mustSpec(t, spec)
	pr := simRunner(s)
	var lines bytes.Buffer
	sum, err := (&Lab{Spec: s, Store: st, Runner: slowClient{pr, 2.5}, Guide: pr, Progress: NewEvents(&labprogress.LineProgress{W: &lines})}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A load point has no score of its own: its progress line gives its
	// verdict against the SLO, never "0.0", and it is never the "top
	// measured" configuration.
	verdicts := map[string]int{}
	for _, ln := range strings.Split(lines.String(), "\n") {
		if !strings.Contains(ln, " req/s (") {
			continue
		}
		switch {
		case strings.Contains(ln, "): SLO within;"):
			verdicts["within"]++
		case strings.Contains(ln, "): SLO over: "):
			verdicts["over"]++
		case strings.Contains(ln, "): SLO not scored: client fell behind"):
			verdicts["not scored"]++
		default:
			t.Errorf("load point line without its verdict: %s", ln)
		}
		if strings.Contains(ln, "top measured") && strings.Contains(ln[strings.Index(ln, "top measured"):], " @ ") {
			t.Errorf("a load point is the top measured: %s", ln)
		}
	}
	t.Logf("load point verdicts %v", verdicts)
	if verdicts["within"] == 0 || verdicts["not scored"] == 0 {
		t.Errorf("load point verdicts %v: want points within the SLO and points the slow client left unscored", verdicts)
	}
	for _, ls := range sum.LoadSearches {
		if ls.Result.Sustainable > 2.5 {
			t.Errorf("%s: sustainable %v above what the client delivered", ls.Name, ls.Result.Sustainable)
		}
	}
	// A search stopped below a point the client could not deliver found
	// a lower bound, not a score: no gain is reported against it (a busy
	// host once made a baseline 0.94 req/s and a winner "+593.3%").
	if sum.Baseline.Why != report.WhyUnmeasured || sum.Gain != 0 || sum.Winner.Gain != 0 {
		t.Errorf("baseline %q (%s), gain %v: a search the client cut short was scored", sum.Baseline.Why, sum.Baseline.Reason, sum.Gain)
	}
	if !strings.Contains(lines.String(), "no gain") || strings.Contains(lines.String(), "over baseline") {
		t.Errorf("the last line reports a gain over an unmeasured baseline:\n%s", lines.String()[max(0, lines.Len()-600):])
	}
	runRec, err := st.RunByName(ctx, "load")
	if err != nil {
		t.Fatal(err)
	}
	trials, err := st.Trials(ctx, runRec.ID)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Build(runRec, trials)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Load == nil || len(rep.Load.Curves) == 0 || !strings.Contains(rep.Load.Curves[0].Role, "baseline") {
		t.Fatal("report has no load curve for the baseline")
	}
	dir := os.Getenv("PERFLAB_LOAD_REPORT_DIR") // to look at the charts
	if dir == "" {
		dir = t.TempDir()
	}
	if _, err := report.WriteAll(rep, dir, "md", "html"); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Load within the SLO", "![Throughput vs P99 TTFT across loads](load-ttft.png)",
		"![Throughput vs P99 TPOT across loads](load-tpot.png)", "**flagged, not scored**: client fell behind", "(sustainable)", "| vLLM | baseline"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(html, []byte("<svg")); n < 2 || !bytes.Contains(html, []byte("flagged, not scored")) {
		t.Errorf("report.html: %d inline charts, flagged points shown: %v", n, bytes.Contains(html, []byte("flagged, not scored")))
	}
	for _, f := range []string{"load-ttft.png", "load-tpot.png"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() < 1000 {
			t.Errorf("chart %s: %v", f, err)
		}
	}
}

func TestSLOExamplesParse(t *testing.T) {
	root := repoRoot(t)
	for _, ex := range []string{"qwen3-14b-h100-slo", "qwen3.5-9b-h100-slo"} {
		s, err := labspec.LoadSpec(filepath.Join(root, "examples", ex+".yaml"))
		if err != nil {
			t.Fatalf("%s: %v", ex, err)
		}
		opt, err := s.Objective.Load.Options()
		if s.Objective.Metric != labspec.ObjectiveMaxLoadUnderSLO || err != nil || s.Tuning.Dataset != "sharegpt" {
			t.Fatalf("%s: objective %s (%v), tuning %s", ex, s.Objective.Metric, err, s.Tuning.Dataset)
		}
		// Every point must count enough requests for the SLO's P99.
		w := pointWorkload(s.Objective.Load, *s.Tuning, 1)
		dopt, _ := w.Resolve()
		if n := dopt.NumPrompts - w.Point.Warmup; n < opt.SLO.MinRequests() {
			t.Errorf("%s: %d measured requests a point, the SLO needs %d", ex, n, opt.SLO.MinRequests())
		}
	}
}

// TestSLOExampleSweep checks a finished run of the 14B SLO example: each
// plotted config's (baseline, winner, kept) sustainable load against the
// true threshold a dense sweep (1% steps, the simulator in process, no
// noise) of the same config finds. It reads the run from the store that
// PERFLAB_SLO_EXAMPLE_DB names:
//
//	perflab lab examples/qwen3-14b-h100-slo.yaml --db /tmp/slo.db
//	PERFLAB_SLO_EXAMPLE_DB=/tmp/slo.db go test ./internal/lab -run TestSLOExampleSweep -v
func TestSLOExampleSweep(t *testing.T) {
	db := os.Getenv("PERFLAB_SLO_EXAMPLE_DB")
	if db == "" {
		t.Skip("PERFLAB_SLO_EXAMPLE_DB names no store of a finished 14B SLO example run")
	}
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := labspec.LoadSpec(filepath.Join(repoRoot(t), "examples", "qwen3-14b-h100-slo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.RunByName(ctx, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	var sum Summary
	if err := json.Unmarshal(run.Summary, &sum); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(shareddata.Path(t, "data", "tokenizers", "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	r := &PredictRunner{Predictor: SimPredictor{}, Hardware: s.Hardware, Requests: CachedRequests(DatasetRequests(tok))}
	opt, _ := s.Objective.Load.Options()
	cands := []*Candidate{sum.Baseline, sum.Winner}
	for _, st := range sum.Stages {
		for i := range st.Candidates {
			if st.Candidates[i].Decision == "kept" {
				cands = append(cands, &st.Candidates[i])
			}
		}
	}
	if sum.Joint != nil {
		for i := range sum.Joint.Tried {
			if sum.Joint.Tried[i].Decision == "kept" {
				cands = append(cands, &sum.Joint.Tried[i])
			}
		}
	}
	points, searches := 0, 0
	for _, ls := range sum.LoadSearches {
		points += len(ls.Result.Points)
		searches++
	}
	// The blind search's bound, from the default start of 1 when the
	// spec leaves the start to the guide.
	start := max(s.Objective.Load.Start, 1)
	t.Logf("%d searches, %.2f points each on average (bound log2(%g/%g/%g)+3 = %.2f)", searches, float64(points)/float64(searches),
		s.Objective.Load.Max, start, opt.Tolerance, math.Log2(s.Objective.Load.Max/start/s.Objective.Load.Tolerance)+3)
	seen := map[string]bool{}
	for _, c := range cands {
		if c == nil || seen[c.ConfigHash] {
			continue
		}
		seen[c.ConfigHash] = true
		var sr *loadsearch.Result
		for _, ls := range sum.LoadSearches {
			for _, p := range ls.Result.Points {
				if p.Ref == c.TrialKey {
					sr = ls.Result
				}
			}
		}
		if sr == nil || !sr.Found {
			t.Errorf("%s: no search with a sustainable load", c.Name)
			continue
		}
		cfg, ok := s.Config(labspec.Point(c.Point))
		if !ok {
			t.Fatalf("%s: config does not apply", c.Name)
		}
		truth := 0.0
		for load := 0.9 * sr.Sustainable; load < s.Objective.Load.Max; load *= 1.01 {
			p, err := sized(s.Objective.Load, opt.SLO, *s.Tuning, load, func(w labspec.Workload) (loadsearch.Point, error) {
				b, err := r.GuessResult(ctx, cfg, w, 0)
				if err != nil {
					return loadsearch.Point{}, err
				}
				return pointOf(w.Point, b)
			})
			if err != nil {
				t.Fatal(err)
			}
			// Judged as the search judges: an overloaded point misses.
			if p, _ = opt.SLO.Judge(p, opt.SLO.MinRequests()); !p.Meets {
				break
			}
			truth = load
		}
		rel := math.Abs(sr.Sustainable-truth) / truth
		t.Logf("%s: sustainable %.3f req/s, dense sweep %.3f (%.1f%% apart), %d points", c.Name, sr.Sustainable, truth, 100*rel, len(sr.Points))
		if truth == 0 || rel > sr.Tolerance+0.01 {
			if why := noiseBracket(s, sr, opt.SLO, truth); why != "" {
				t.Logf("%s: %s", c.Name, why)
				continue
			}
			t.Errorf("%s: sustainable %.3f, swept threshold %.3f: more than the tolerance %v + the sweep's 1%% step apart", c.Name, sr.Sustainable, truth, sr.Tolerance)
		}
	}
}

// noiseBracket says why a search ended below the noise-free threshold when
// the reason is the spec's seeded noise: the lab measures each point with a
// noise draw (sim-predict's stand-in for run-to-run variance) and the sweep
// predicts without one, so a point just under the threshold is judged over
// when its draw slows it. It names the search's lowest point above the
// answer that was judged over, when the sweep found that load within the
// SLO and the point's draw made it slower; otherwise it returns "".
func noiseBracket(s *labspec.Spec, sr *loadsearch.Result, slo loadsearch.SLO, truth float64) string {
	var over *loadsearch.Point
	for i := range sr.Points {
		p := &sr.Points[i]
		if p.Load > sr.Sustainable && p.Scored() && !p.Meets && (over == nil || p.Load < over.Load) {
			over = p
		}
	}
	if over == nil || over.Load > truth || s.Noise.Sigma <= 0 {
		return ""
	}
	f := noiseFactor(s.Noise, measurementKey(over.Ref))
	if f >= 1 {
		return ""
	}
	why := over.Why
	return fmt.Sprintf("the point at %.3g req/s, within the SLO without noise (the sweep's threshold is %.3f), was judged over (%s) with its noise draw x%.4f (latencies /%.4f): the search is off by that draw, not by its method",
		over.Load, truth, why, f, f)
}
