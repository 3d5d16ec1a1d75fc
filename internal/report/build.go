package report

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/runtimes"
	"github.com/perflab/perflab/internal/store"
)

// Build computes the report of a run from its stored trials and the lab's
// summary. Every figure comes from a stored result; the summary only says
// which trial played which part and why each decision was taken.
func Build(run store.Run, trials []store.Trial) (*Report, error) {
	var sum Summary
	if len(run.Summary) > 0 {
		if err := json.Unmarshal(run.Summary, &sum); err != nil {
			return nil, fmt.Errorf("report: run %d summary: %w", run.ID, err)
		}
	}
	// Per-GPU figures need a count; an unknown one (imported results carry
	// none) divides by 1, while the report itself says it is unknown.
	gpus := max(sum.GPUs, 1)
	r := &Report{
		RunName: nonEmpty(sum.Name, run.Name), Model: sum.Model, GPU: sum.GPU, GPUs: sum.GPUs,
		Runtime: sum.Runtime, Provenance: provenance(sum.Runtime, sum.Provenance), Objective: nonEmpty(sum.Objective, "total_throughput"), Unit: nonEmpty(sum.Unit, "tok/s"), Engines: sum.Engines,
		NoiseFloor: sum.NoiseFloor, Workloads: sum.Workloads,
		EngineStarts: sum.EngineStarts, GPUHours: sum.GPUHours, FreshStarts: sum.FreshStarts,
	}
	r.Title = fmt.Sprintf("Optimizing %s Throughput", nonEmpty(shortModel(r.Model), r.RunName))
	if r.GPU != "" {
		r.Title += fmt.Sprintf(" on NVIDIA %s GPUs", r.GPU)
	}

	ix := newTrialIndex(trials)
	cands := map[string]*Candidate{}
	get := func(key string) *Candidate {
		if key == "" {
			return nil
		}
		if c, ok := cands[key]; ok {
			return c
		}
		t, ok := ix.byKey[key]
		if !ok {
			return nil
		}
		c, err := candidateOf(t, gpus)
		if err != nil {
			r.Warnings = append(r.Warnings, err.Error())
			return nil
		}
		if err := ix.averageRepeats(c, gpus); err != nil {
			r.Warnings = append(r.Warnings, err.Error())
		}
		cands[key] = c
		return c
	}
	// from places a summary candidate on its stored trial; a candidate
	// with no trial (skipped before running) keeps the summary's figures.
	from := func(sc *SummaryCandidate, stage string) *Candidate {
		if sc == nil {
			return nil
		}
		var c Candidate
		if t := get(sc.TrialKey); t != nil {
			c = *t
		} else {
			c = Candidate{Key: sc.TrialKey, Command: sc.Command, GPUs: sc.GPUs, Status: "failed", Failure: sc.FailureClass}
			if sc.Decision == "skipped" && sc.FailureClass == "" {
				// Never launched (unsupported, hopeless, out of budget):
				// nothing failed, and the summary says why.
				c.Status, c.Reason = statusNotRun, sc.Reason
			}
		}
		c.Name, c.Stage, c.Gain = nonEmpty(sc.Name, c.Name), stage, sc.Gain
		if len(c.Repeats) == 0 {
			// The stored repeats were not found (a store trimmed by hand):
			// the lab's own list still shows the spread behind the decision.
			c.Repeats = sc.RepeatScores
		}
		c.Kept = sc.Decision == "kept"
		c.Decision = sc.Decision
		if sc.Reason != "" {
			c.Decision += ": " + sc.Reason
		}
		if c.Command == "" {
			c.Command = sc.Command
		}
		return &c
	}
	for _, t := range trials {
		if c := get(t.Key); c != nil {
			r.Warnings = append(r.Warnings, validate(c)...)
		}
	}

	r.Baseline = from(sum.Baseline, "baseline")
	r.Recommended = from(sum.Winner, "winner")
	for i, s := range sum.Stages {
		st := Stage{Index: i + 1, Name: s.Name, Title: s.Name, Incumbent: from(s.Incumbent, s.Name), NoiseFloor: s.NoiseFloor}
		if s.Skipped != "" {
			st.Title += " (skipped: " + s.Skipped + ")"
			st.Skipped = s.Skipped
		}
		st.Winner = st.Incumbent
		for j := range s.Candidates {
			c := from(&s.Candidates[j], s.Name)
			st.Candidates = append(st.Candidates, *c)
			if c.Kept {
				st.Winner = c
			}
		}
		if st.Incumbent != nil && st.Winner != nil {
			// Metrics are the mean of the repeats, as the decision's are.
			if g := rel(st.Incumbent.Metrics.TotalTPS, st.Winner.Metrics.TotalTPS); g != nil {
				st.Gain = *g
			}
		}
		all := st.Candidates
		if st.Incumbent != nil && !containsKey(all, st.Incumbent.Key) {
			all = append([]Candidate{*st.Incumbent}, all...)
		}
		st.Ranking = ranking(all)
		if best, second, ok := topTwo(all); ok {
			st.Summary = summarySentence(best, second)
		}
		r.Stages = append(r.Stages, st)
		r.Tried = append(r.Tried, st.Candidates...)
	}
	if len(sum.Stages) == 0 && len(trials) > 0 {
		// No lab summary (imported results, or a lab that died before its
		// first stage ended): show every stored result as it is.
		st := Stage{Index: 1, Name: "Results", Title: "Stored results"}
		for _, t := range trials {
			if c := get(t.Key); c != nil {
				st.Candidates = append(st.Candidates, *c)
			}
		}
		st.Ranking = ranking(st.Candidates)
		r.Stages = append(r.Stages, st)
		r.Tried = append(r.Tried, st.Candidates...)
	}
	if j := sum.Joint; j != nil {
		for i := range j.Tried {
			r.Tried = append(r.Tried, *from(&j.Tried[i], "joint search"))
		}
		r.Search = &SearchInfo{Trials: sum.TuningTrials, Note: j.StopReason, LeftOut: j.LeftOut}
		if sum.Staged != nil {
			r.Search.GreedyBest, r.Search.GreedyConfig = sum.Staged.Score, sum.Staged.Name
		}
		if sum.Winner != nil {
			r.Search.FinalBest, r.Search.FinalConfig = sum.Winner.Score, sum.Winner.Name
		}
		if g := sum.Grid; g != nil && g.Best != nil {
			r.Search.GridTrials, r.Search.GridBest, r.Search.GridBestConfig = g.Size, g.Best.Score, g.Best.Name
		}
	}
	if sum.Stopped != "" {
		r.Warnings = append(r.Warnings, "the lab stopped early: "+sum.Stopped)
	}

	if r.Baseline != nil || r.Recommended != nil {
		r.Cases = append(r.Cases, newCase(nonEmpty(sum.Tuning, workloadOf(r.Baseline, "tuning")), r.Baseline, r.Recommended))
	}
	for _, g := range sum.Generalization {
		r.Cases = append(r.Cases, newCase(g.Workload, from(g.Baseline, "generalization"), from(g.Winner, "generalization")))
	}
	r.Load = loadReport(&sum)
	sort.Strings(r.Warnings)
	r.Warnings = dedupe(r.Warnings)
	return r, nil
}

func containsKey(cs []Candidate, key string) bool {
	for _, c := range cs {
		if c.Key == key {
			return true
		}
	}
	return false
}

func workloadOf(c *Candidate, def string) string {
	if c == nil || c.Workload == "" {
		return def
	}
	return c.Workload
}

func newCase(workload string, base, opt *Candidate) Case {
	c := Case{Workload: workload, Baseline: base, Optimized: opt}
	if base != nil && opt != nil {
		b, o := base.Metrics.TotalTPS, opt.Metrics.TotalTPS
		if base.GPUs != opt.GPUs && base.GPUs > 0 && opt.GPUs > 0 {
			b, o, c.PerGPU = base.Metrics.TotalTPS/float64(base.GPUs), opt.Metrics.TotalTPS/float64(opt.GPUs), true
		}
		c.Change = rel(b, o)
		c.TPOTChange = rel(base.Metrics.MeanTPOTMs, opt.Metrics.MeanTPOTMs)
	}
	return c
}

func topTwo(cs []Candidate) (Candidate, Candidate, bool) {
	var ok []Candidate
	for _, c := range cs {
		if c.Status == "ok" && c.Metrics.TotalTPS > 0 {
			ok = append(ok, c)
		}
	}
	if len(ok) < 2 {
		return Candidate{}, Candidate{}, false
	}
	sort.SliceStable(ok, func(i, j int) bool { return ok[i].Metrics.TotalTPS > ok[j].Metrics.TotalTPS })
	return ok[0], ok[1], true
}

// candidateOf turns a stored trial into a candidate with its figures and
// its vLLM result block.
func candidateOf(t store.Trial, defaultGPUs int) (*Candidate, error) {
	gpus := trialGPUs(t.Config, defaultGPUs)
	cfg, _ := configOf(t.Config)
	m, v, err := decodeMetrics(t.Result, gpus)
	if err != nil {
		return nil, fmt.Errorf("trial %s: %w", t.Key, err)
	}
	c := &Candidate{
		Key: t.Key, Name: t.Name, Stage: t.Stage, Workload: t.Workload, Command: t.Command,
		Engine: cfg.Engine, GPUs: gpus, Status: t.Status, Failure: t.FailureClass,
		Reason: t.Reason, Metrics: m, EngineMetrics: t.EngineMetrics, Runs: 1,
	}
	if t.Status == "ok" && len(t.Result) > 0 && m.Completed == 0 && m.Failed > 0 {
		// Every request failed: whatever the runner called it, there is no
		// throughput to show, only the failure.
		c.Status, c.Failure = "failed", nonEmpty(c.Failure, "low_success")
		c.Reason = nonEmpty(c.Reason, fmt.Sprintf("0 of %d requests succeeded", m.NumPrompts))
	}
	if t.Status == "ok" && len(t.Result) > 0 {
		c.Block, c.Warnings, c.Assumptions, err = resultBlock(t.Result)
		if err != nil {
			return nil, fmt.Errorf("trial %s: %w", t.Key, err)
		}
	}
	if v == nil {
		return c, nil
	}
	c.TTFTs = scale(v.TTFTs, 1000)
	c.TPOTs = tpots(v)
	if q := v.Perflab; q != nil && len(c.TTFTs) == 0 {
		c.TTFTs = q.Quantiles[metrics.MetricTTFT]
	}
	if q := v.Perflab; q != nil && len(c.TPOTs) == 0 {
		c.TPOTs = q.Quantiles[metrics.MetricTPOT]
	}
	return c, nil
}

// tpots derives per-request TPOT (ms) from the detailed arrays, when the
// result kept them, the way vLLM defines TPOT.
func tpots(v *metrics.Result) []float64 {
	if len(v.ITLs) == 0 || len(v.ITLs) != len(v.OutputLens) {
		return nil
	}
	var out []float64
	for i, itl := range v.ITLs {
		if v.OutputLens[i] > 1 {
			var sum float64
			for _, x := range itl {
				sum += x
			}
			out = append(out, 1000*sum/float64(v.OutputLens[i]-1))
		}
	}
	return out
}

func scale(xs []float64, k float64) []float64 {
	if len(xs) == 0 {
		return nil
	}
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * k
	}
	return out
}

// configOf reads a stored trial's config (ok is false when it has none, or
// one that is no engine.Config).
func configOf(raw json.RawMessage) (c engine.Config, ok bool) {
	if len(raw) == 0 || json.Unmarshal(raw, &c) != nil {
		return engine.Config{}, false
	}
	return c, true
}

// trialGPUs is how many GPUs a stored trial's config occupies (def when
// its config cannot be read).
func trialGPUs(raw json.RawMessage, def int) int {
	c, ok := configOf(raw)
	if !ok {
		return def
	}
	return c.GPUs()
}

func shortModel(m string) string {
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		return m[i+1:]
	}
	return m
}

func dedupe(xs []string) []string {
	var out []string
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// validate flags values no real run can produce; they are reported, not
// silently accepted (the 9B reference shows a 20,132,659 tok/s "peak").
func validate(c *Candidate) []string {
	if c.Status != "ok" {
		return nil
	}
	var w []string
	m := c.Metrics
	name := fmt.Sprintf("%s (%s, %s)", c.Name, c.Stage, c.Workload)
	if m.TotalTPS < 0 || m.MeanTPOTMs < 0 || m.MeanTTFTMs < 0 {
		w = append(w, name+": negative figure in the result")
	}
	if m.OutputTPS > m.TotalTPS && m.TotalTPS > 0 {
		w = append(w, fmt.Sprintf("%s: output throughput %.2f exceeds total throughput %.2f", name, m.OutputTPS, m.TotalTPS))
	}
	if m.NumPrompts > 0 && m.Completed > m.NumPrompts {
		w = append(w, fmt.Sprintf("%s: %d completed of %d prompts", name, m.Completed, m.NumPrompts))
	}
	// The result's own warnings: stored with it on import and raised again
	// by the metrics package on decoding (an implausible peak output rate
	// among them), so a stored result is checked whoever stored it.
	for _, x := range c.Warnings {
		w = append(w, name+": "+x)
	}
	return w
}

// provenance is where a run's figures come from: as its summary recorded
// it, or, for a run stored before summaries did, as its runtime's name
// tells ("" for GPU measurements or a runtime this build does not know).
func provenance(runtime, recorded string) string {
	if recorded != "" {
		return recorded
	}
	if k, err := runtimes.Lookup(runtime); err == nil {
		return k.Provenance()
	}
	return ""
}
