package lab

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/loadsearch"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/report"
	"github.com/perflab/perflab/internal/store"
)

// errConfigFailed stops a config's load search when a point failed the way
// a config fails (crash, OOM): no load can be found for it.
var errConfigFailed = errors.New("lab: config failed")

// pointWorkload is the tuning workload at one load: on the rate axis its
// requests arrive at load req/s (a cap the workload sets stays, and flags
// the point if it closes the loop); on the concurrency axis they are all
// due at once, load of them in flight.
func pointWorkload(o *labspec.LoadObjective, w labspec.Workload, load float64) labspec.Workload {
	opt, _ := w.Resolve()
	n := opt.NumPrompts
	if n == 0 {
		n = 1000
	}
	warm := o.WarmupPrompts
	if warm == 0 {
		warm = n / 10
	}
	p := w
	p.Point = &labspec.LoadPoint{Axis: string(o.LoadAxis()), Load: load, Warmup: warm}
	if o.LoadAxis() == loadsearch.AxisConcurrency {
		p.RequestRate, p.MaxConcurrency = labspec.Rate(math.Inf(1)), int(load)
	} else {
		p.RequestRate = labspec.Rate(load)
	}
	return p
}

// maxPointGrowth is how many times its workload's prompts a load point may
// grow to when its window is too short for a verdict.
const maxPointGrowth = 8

// sized measures a point sized by its evidence: the tuning workload at the
// load, and, while the verdict needs a longer window (loadsearch's
// SLO.Judge says so: too few requests, too short to tell whether the
// server kept up), the same with twice the prompts, up to maxPointGrowth
// times; each size is a trial of its own. The point returned is the
// longest one's, with the requests and seconds of all sizes. The point's
// time limit (pointSeconds) cuts the first size on the rate axis, and a
// size that would pass it is not run: the point ends undecided and Limited
// (a lower load's points last longer), as bench's do.
func sized(o *labspec.LoadObjective, slo loadsearch.SLO, w labspec.Workload, load float64, run func(labspec.Workload) (loadsearch.Point, error)) (loadsearch.Point, error) {
	opt, _ := w.Resolve()
	n := opt.NumPrompts
	if n == 0 {
		n = 1000
	}
	limit := o.PointLimit()
	rate := o.LoadAxis() == loadsearch.AxisRate
	if rate && float64(n) > limit*load {
		n = max(int(limit*load), 1)
	}
	if !rate {
		n = max(n, concurrencyPrompts(o, load))
	}
	sent, secs := 0, 0.0
	for f := 1; ; f *= 2 {
		g := w
		g.NumPrompts = n * f
		p, err := run(pointWorkload(o, g, load))
		if err != nil {
			return p, err
		}
		sent += p.Requests
		secs += p.Seconds
		p.Requests, p.Seconds = sent, secs
		j, more := slo.Judge(p, slo.MinRequests())
		if !more || 2*f > maxPointGrowth {
			return p, nil
		}
		// The next size's length: at the offered rate, or twice this
		// one's on the concurrency axis.
		next := 2 * p.Seconds
		if rate {
			next = float64(2*n*f) / load
		}
		if secs+next > limit {
			p.Flag = fmt.Sprintf("undecided at the point's limit (a run of %d requests would pass point_seconds %gs): %s", 2*n*f, limit, j.Flag)
			p.NeedsMore, p.Limited = false, true
			return p, nil
		}
	}
}

// concurrencyWindows is how many times the concurrency a closed-loop
// point's measured window holds, at least: with fewer requests than the
// concurrency it is never reached (a lab point of 100 prompts at 512 in
// flight peaked at 90), and with one round of them the window is its
// fill-up and drain.
const concurrencyWindows = 2

// concurrencyPrompts is the fewest prompts a point at concurrency load
// takes, its warm-up included, for concurrencyWindows rounds in its window.
func concurrencyPrompts(o *labspec.LoadObjective, load float64) int {
	need := concurrencyWindows * int(math.Ceil(load))
	if o.WarmupPrompts > 0 {
		return o.WarmupPrompts + need
	}
	// The default warm-up is a tenth of the prompts.
	return int(math.Ceil(float64(need)*10/9)) + 1
}

// window leaves a point's warm-up out of its records and asks for every
// figure an SLO may bound; a workload that is no point is left as it is.
func pointWindow(p *labspec.LoadPoint, recs []metrics.Record, dur float64, opt *metrics.Options) ([]metrics.Record, float64) {
	if p == nil {
		return recs, dur
	}
	*opt = loadsearch.MetricsOptions(*opt)
	return loadsearch.Window(recs, dur, p.Warmup)
}

// pointOf reads a point from a stored result.
func pointOf(p *labspec.LoadPoint, result []byte) (loadsearch.Point, error) {
	res, err := metrics.ParseJSON(result)
	if err != nil {
		return loadsearch.Point{}, fmt.Errorf("lab: read load point %g: %w", p.Load, err)
	}
	pt := loadsearch.FromResult(res, loadsearch.Axis(p.Axis), p.Load, p.Warmup)
	pt.Requests, pt.Seconds = res.NumPrompts+p.Warmup, res.Duration
	return pt, nil
}

// LoadSearch is one config's search as the summary keeps it.
type LoadSearch struct {
	// Key is the trial key of the search (its config on the tuning
	// workload); each point's trial is in Points[i].Ref.
	Key    string             `json:"key"`
	Name   string             `json:"name"`
	Result *loadsearch.Result `json:"result"`
}

// searchLoads scores each spec by a load search: the specs' searches run
// side by side, each point through run2 (so through the store, the GPU
// semaphore and the budget). A spec asked for twice is searched once.
func (l *Lab) searchLoads(ctx context.Context, specs []TrialSpec, budget bool) ([]*result, error) {
	out := make([]*result, len(specs))
	errs := make([]error, len(specs))
	first := map[string]int{}
	done := make([]chan struct{}, len(specs))
	// On servers, no more searches at once than the GPUs hold: searches
	// taking turns on one GPU point by point stopped each other's server
	// (42-44 starts for 29 configs on the 14B example); one after another
	// each config starts once and keeps its server for all its points.
	var slots chan struct{}
	// turns[r] is closed once the search ranked r has taken its slot (or
	// has none to take): searches take the slots in the order
	// likelyWinnerLast gives, lowest predicted load first, so the step's
	// likely best is the last server up and serves its repeats. In the
	// order the goroutines happened to queue, the 14B example's
	// TensorRT-LLM search ran before SGLang's and its server started again
	// for its repeats (21 starts for 20 configs).
	var turns []chan struct{}
	rank := make([]int, len(specs))
	if l.Spec.RuntimeKind().Servers() {
		slots = make(chan struct{}, max(l.sem.cap, 1))
		todo := make([]int, len(specs))
		for i := range todo {
			todo[i] = i
		}
		for r, i := range l.likelyWinnerLast(ctx, specs, todo) {
			rank[i] = r
		}
		turns = make([]chan struct{}, len(specs)+1)
		for r := range turns {
			turns[r] = make(chan struct{})
		}
		close(turns[0])
	}
	passTurn := func(i int) {
		if turns != nil {
			close(turns[rank[i]+1])
		}
	}
	// A resumed lab first replays the searches the store holds whole:
	// they measure nothing and take no budget place (searches side by side
	// used to race for the places, and a search all of whose points were
	// stored could lose its place to one that then measured new points,
	// taking another path than the interrupted lab). They count in
	// max_trials as they did then, before any search measures.
	replayed := make([]bool, len(specs))
	if l.hasStored() {
		seen := map[string]bool{}
		for i, t := range specs {
			mk := measurementKey(t.Key)
			if seen[mk] {
				continue
			}
			seen[mk] = true
			r, err := l.searchLoad(ctx, t, budget, true)
			switch {
			case errors.Is(err, errNotStored):
				continue
			case err != nil:
				return nil, err
			}
			out[i], replayed[i] = r, true
		}
	}
	for i, t := range specs {
		done[i] = make(chan struct{})
		mk := measurementKey(t.Key)
		if replayed[i] {
			first[mk] = i
			go func() {
				defer close(done[i])
				if turns != nil {
					<-turns[rank[i]]
					passTurn(i)
				}
			}()
			continue
		}
		if j, ok := first[mk]; ok {
			go func() {
				defer close(done[i])
				if turns != nil {
					select {
					case <-turns[rank[i]]:
					case <-ctx.Done():
					}
					passTurn(i)
				}
				<-done[j]
				if out[j] != nil {
					r := *out[j]
					r.spec = t
					out[i] = &r
				}
			}()
			continue
		}
		first[mk] = i
		go func() {
			defer close(done[i])
			if slots != nil {
				passed := false
				defer func() {
					if !passed {
						passTurn(i)
					}
				}()
				select {
				case <-turns[rank[i]]:
				case <-ctx.Done():
					errs[i] = ctx.Err()
					return
				}
				select {
				case slots <- struct{}{}:
					defer func() { <-slots }()
				case <-ctx.Done():
					errs[i] = ctx.Err()
					return
				}
				passed = true
				passTurn(i)
			}
			out[i], errs[i] = l.searchLoad(ctx, t, budget, false)
		}()
	}
	for _, d := range done {
		<-d
	}
	var budgetErr error
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, ErrBudget):
			budgetErr = ErrBudget
		default:
			return nil, err
		}
	}
	return out, budgetErr
}

// errNotStored stops a replayed search (searchLoad's stored) at its
// first point the store lacks.
var errNotStored = errors.New("lab: load point not stored")

// searchLoad runs one config's search and returns the result that scores
// it: the trial at its sustainable load, scored by that load. With stored
// it only replays the search from the store, taking no budget place, and
// returns errNotStored at the first point the store lacks, having read
// only stored points (as the search run next reads them again).
func (l *Lab) searchLoad(ctx context.Context, t TrialSpec, budget, stored bool) (*result, error) {
	lo := l.Spec.Objective.Load
	opt, err := lo.Options()
	if err != nil {
		return nil, fmt.Errorf("lab: objective.load: %w", err)
	}
	// budget.max_trials counts searched configs: the search takes its
	// place before its first point and holds it until searched counts it,
	// so searches running side by side cannot all take the last one.
	// Its points are held by max_hours alone.
	held := false
	if budget && !stored {
		if _, err := l.budgetAllows(1); err != nil {
			return nil, err
		}
		held = true
		defer func() {
			if held {
				l.release(1)
			}
		}()
	}
	at := map[float64]*result{}
	var failed *result
	ran := false // a point was measured now, not read from the store
	ended := false
	defer func() {
		if se, ok := l.Progress.(searchEnder); ok && ended {
			se.SearchEnded(t, !ran)
		}
	}()
	measure := func(ctx context.Context, load float64) (loadsearch.Point, error) {
		return sized(lo, opt.SLO, t.Workload, load, func(pw labspec.Workload) (loadsearch.Point, error) {
			ps := t
			ps.Workload, ps.Key = pw, TrialKey(t.Stage, t.Config, pw, t.Repeat)
			// The name (not part of the key) says which load the trial
			// was, in the progress lines and the store.
			ps.Name = fmt.Sprintf("%s @ %.4g %s", t.Name, load, lo.LoadAxis().Unit())
			l.mu.Lock()
			_, have := l.done[measurementKey(ps.Key)]
			l.mu.Unlock()
			if stored && !have {
				return loadsearch.Point{}, errNotStored
			}
			// A stored point costs no time: max_hours stops only the
			// points to measure (a resumed lab whose stored trials had
			// spent the hours could not read its own baseline back).
			if budget && !have {
				if err := l.hoursLeft(); err != nil {
					return loadsearch.Point{}, err
				}
			}
			ran = ran || !have
			rs, err := l.run2(ctx, []TrialSpec{ps}, false)
			if err != nil {
				return loadsearch.Point{}, err
			}
			r := rs[0]
			if r.failed != "" {
				failed = r
				return loadsearch.Point{}, errConfigFailed
			}
			p, err := pointOf(pw.Point, r.trial.Result)
			if err != nil {
				r.failed, r.why, r.kind = FailCrashDuringBench, "unreadable result: "+err.Error(), report.WhyFailed
				failed = r
				return loadsearch.Point{}, errConfigFailed
			}
			p.Ref = r.trial.Key
			at[load] = r
			return p, nil
		})
	}
	opt = l.guidedStart(ctx, t, opt)
	sr, err := loadsearch.Search(ctx, opt, measure)
	if errors.Is(err, errNotStored) {
		return nil, err
	}
	ended = true
	switch {
	case errors.Is(err, errConfigFailed):
		r := *failed
		r.spec = t
		l.searched(t, nil, r.trial, &held)
		return &r, nil
	case err != nil:
		return nil, fmt.Errorf("lab: %s: load search: %w", t.Name, err)
	}
	base := at[sr.Sustainable]
	if !sr.Found {
		base = at[sr.Points[0].Load]
	}
	// The config's own measurement is the trial at its sustainable load
	// with the load in its result, which is what the joint search reads
	// back (l.used) to calibrate the guide and to skip configs it has.
	tr := base.trial
	// Its cost is the point's, already counted once.
	tr.Key, tr.Cost = t.Key, store.Cost{}
	if tr.Result, err = withSustainable(base.trial.Result, sr.Sustainable); err != nil {
		return nil, fmt.Errorf("lab: %s: %w", t.Name, err)
	}
	l.searched(t, sr, tr, &held)
	r := *base
	r.spec = t
	r.m.SustainableLoad = sr.Sustainable
	r.score = sr.Sustainable
	// On the concurrency axis the score is what the client reached: a
	// point passes with its peak in flight a little short of the load
	// (loadsearch flags it only past behindShare), and a config is not
	// credited with requests it never had in flight.
	if at, ok := sr.At(sr.Sustainable); ok && lo.LoadAxis() == loadsearch.AxisConcurrency && at.PeakConcurrency > 0 {
		r.score = min(r.score, float64(at.PeakConcurrency))
	}
	r.why, r.kind = "", ""
	switch {
	case !sr.Found:
		r.why, r.kind = "SLO: "+sr.Summary(), report.WhySLO
	case sr.Unmeasured:
		r.why, r.kind = fmt.Sprintf("no score: %.4g %s is only a lower bound (%s)", sr.Sustainable, lo.LoadAxis().Unit(), sr.Limit), report.WhyUnmeasured
	case r.m.SuccessRate() < l.Spec.MinSuccessRate:
		r.why, r.kind = fmt.Sprintf("success rate %.1f%% < %.1f%% at its sustainable load", 100*r.m.SuccessRate(), 100*l.Spec.MinSuccessRate), report.WhyLowSuccess
	}
	return &r, nil
}

// guideStep is the bracket's first step from the guide's predicted load:
// within 10% a prediction brackets the answer in two points, and the step
// gallops to doubling when it is off (loadsearch.Options.Step).
const guideStep = 0.1

// guidedStart starts a config's search at the guide's predicted
// sustainable load with a small first step, where there is a guide and it
// predicts one: on the 14B SLO example a blind start at 1 req/s took
// about 12 points a config. A start the spec sets wins: the user asked for
// it (the guided start used to override it). Without either the start is
// 1, and the lowest load the search may try is start/1024.
func (l *Lab) guidedStart(ctx context.Context, t TrialSpec, opt loadsearch.Options) loadsearch.Options {
	if l.Spec.Objective.Load.Start > 0 {
		return opt
	}
	var g, step float64
	if a := l.firstRepeatAnswer(t); a > 0 {
		// A repeat re-measures an answer already found: starting there,
		// a step of the tolerance brackets it in two points when it holds
		// (four a repeat from the guide's prediction), and the step
		// gallops as from a guess when the repeat's draw moved it.
		g, step = a, opt.Tolerance
		if step == 0 {
			step = loadsearch.DefaultTolerance
		}
	} else {
		if l.guide == nil {
			return opt
		}
		m, err := l.guide.Guess(ctx, t.Config, t.Workload, l.Spec.Search.GuidePrompts)
		if err != nil || !(m.SustainableLoad > 0) {
			return opt
		}
		// Three significant digits: a point's load is in its name and
		// key, and 19.99 reads better than 19.991128939107984, with no
		// loss that a 10% step would see.
		g, step = m.SustainableLoad, guideStep
		if e := math.Pow(10, math.Floor(math.Log10(g))-2); opt.Axis == loadsearch.AxisRate {
			g = math.Round(g/e) * e
		}
	}
	start := opt.Start
	if start == 0 {
		start = 1
	}
	if opt.Min == 0 {
		opt.Min = start / 1024
		if opt.Axis == loadsearch.AxisConcurrency {
			opt.Min = 1
		}
	}
	hi := opt.Max
	if hi == 0 {
		hi = 4096
	}
	opt.Start, opt.Step = math.Min(math.Max(g, opt.Min), hi), step
	return opt
}

// firstRepeatAnswer is the sustainable load the first run of t's config
// found on t's workload, when t is a later repeat and that run found one
// (0 otherwise).
func (l *Lab) firstRepeatAnswer(t TrialSpec) float64 {
	if t.Repeat == 0 {
		return 0
	}
	l.mu.Lock()
	tr, ok := l.done[measurementKey(TrialKey("", t.Config, t.Workload, 0))]
	l.mu.Unlock()
	if !ok {
		return 0
	}
	m, err := decodeMeasurement(tr.Result)
	if err != nil {
		return 0
	}
	return m.SustainableLoad
}

// searched records a config's finished search: its measurement (the
// trial at its sustainable load, or the failure), the search for the
// summary, and, on the tuning workload, its place in the budget, whose
// max_trials counts searched configs (a point is a part of one). The
// search's budget place, when *held, is given back as it is counted.
func (l *Lab) searched(t TrialSpec, sr *loadsearch.Result, tr store.Trial, held *bool) {
	mk := measurementKey(t.Key)
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.Workload.KeyName() == l.Spec.Tuning.KeyName() && t.Stage != "grid" {
		l.tuning[mk] = true
	}
	if *held {
		*held = false
		l.pending--
	}
	l.done[mk] = tr
	if sr != nil {
		l.searches[mk] = &LoadSearch{Key: t.Key, Name: t.Name, Result: sr}
	}
}

// withSustainable adds the sustainable load to a result JSON, through
// the typed measurement.
func withSustainable(result []byte, load float64) ([]byte, error) {
	m, err := decodeMeasurement(result)
	if err != nil {
		return nil, fmt.Errorf("read result at the sustainable load: %w", err)
	}
	m.SustainableLoad = load
	return encodeMeasurement(m)
}

// rawGuesser is a guide that can give a prediction's whole result JSON,
// which a load point needs (its percentiles, its dispatch record).
type rawGuesser interface {
	GuessResult(ctx context.Context, cfg engine.Config, w labspec.Workload, prompts int) ([]byte, error)
}

// GuessResult predicts without noise on the first prompts requests and
// returns the result JSON.
func (r *PredictRunner) GuessResult(ctx context.Context, cfg engine.Config, w labspec.Workload, prompts int) ([]byte, error) {
	reqs, err := r.Requests(w)
	if err != nil {
		return nil, err
	}
	if prompts > 0 && prompts < len(reqs) {
		reqs = reqs[:prompts]
	}
	p, err := r.Predictor.Predict(ctx, cfg, r.Hardware, reqs, w)
	if err != nil {
		return nil, err
	}
	if p.FailureClass != "" {
		return nil, fmt.Errorf("%s: %s", p.FailureClass, p.Reason)
	}
	return p.Result, nil
}

// loadGuideT predicts a config's sustainable load: the same search, each
// point a prediction in process.
type loadGuideT struct {
	inner rawGuesser
	lo    *labspec.LoadObjective
}

// loadGuide wraps a guide for max_load_under_slo; a guide that cannot give
// whole results is kept as it is (its scores then rank nothing).
func loadGuide(g Guide, lo *labspec.LoadObjective) Guide {
	if rg, ok := g.(rawGuesser); ok {
		return loadGuideT{inner: rg, lo: lo}
	}
	return g
}

// Upside implements Ranged with the inner guide's throughput range: a
// sustainable load scales with the throughput a config reaches.
func (g loadGuideT) Upside(cfg engine.Config) (float64, bool) { return upside(g.inner, cfg) }

// Guess implements Guide: the observation at the predicted sustainable
// load, with SustainableLoad set (0 when no load meets the SLO).
func (g loadGuideT) Guess(ctx context.Context, cfg engine.Config, w labspec.Workload, prompts int) (Measurement, error) {
	opt, err := g.lo.Options()
	if err != nil {
		return Measurement{}, err
	}
	if opt.Axis == loadsearch.AxisRate {
		// A point at a low rate is the costliest to simulate (every decode
		// step of a long, sparse run), and the guide ranks hundreds of
		// configs: its search starts near the answer instead, at half the
		// request throughput predicted with every request due at once,
		// which no sustainable rate exceeds by much.
		b, err := g.inner.GuessResult(ctx, cfg, w, prompts)
		if err != nil {
			return Measurement{}, err
		}
		if m, err := decodeMeasurement(b); err == nil && m.res().RequestThroughput > 0 {
			lo, hi := opt.Min, opt.Max
			if lo == 0 {
				lo = opt.Start / 1024
			}
			if hi == 0 {
				hi = 4096
			}
			opt.Start = math.Min(math.Max(m.res().RequestThroughput/2, lo), hi)
			opt.Min = lo
		}
	}
	raw := map[float64][]byte{}
	sr, err := loadsearch.Search(ctx, opt, func(ctx context.Context, load float64) (loadsearch.Point, error) {
		return sized(g.lo, opt.SLO, w, load, func(pw labspec.Workload) (loadsearch.Point, error) {
			b, err := g.inner.GuessResult(ctx, cfg, pw, prompts)
			if err != nil {
				return loadsearch.Point{}, err
			}
			raw[load] = b
			return pointOf(pw.Point, b)
		})
	})
	if err != nil {
		return Measurement{}, err
	}
	if !sr.Found {
		return Measurement{}, nil
	}
	m, err := decodeMeasurement(raw[sr.Sustainable])
	m.SustainableLoad = sr.Sustainable
	return m, err
}

var (
	_ Guide  = loadGuideT{}
	_ Ranged = loadGuideT{}
)
var _ rawGuesser = (*PredictRunner)(nil)

// loadSearches lists the searches run or read back, by key.
func (l *Lab) loadSearches() []*LoadSearch {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*LoadSearch, 0, len(l.searches))
	for _, k := range sortedKeys(l.searches) {
		out = append(out, l.searches[k])
	}
	return out
}
