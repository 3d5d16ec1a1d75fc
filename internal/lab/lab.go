package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/report"
	"github.com/perflab/perflab/internal/store"
)

// Store is what the lab needs from internal/store (*store.Store satisfies
// it): one run per spec key and its trials, each saved as it ends.
type Store interface {
	// EnsureRun returns the run with key, creating it; fresh deletes the
	// run's trials first so the lab starts over.
	EnsureRun(ctx context.Context, key, name, spec string, fresh bool) (store.Run, error)
	// Trials lists the run's finished trials.
	Trials(ctx context.Context, runID int64) ([]store.Trial, error)
	// SaveTrial stores one finished trial (t.RunID is set).
	SaveTrial(ctx context.Context, t *store.Trial) error
	// UpdateRun saves the run's status and summary.
	UpdateRun(ctx context.Context, r *store.Run) error
}

var _ Store = (*store.Store)(nil)

// Lab runs one spec end to end.
type Lab struct {
	Spec   *labspec.Spec
	Store  Store
	Runner Runner
	// Guide ranks untested configs for the joint search (nil: no joint
	// search).
	Guide Guide
	// GuideKey identifies the guide's predictions (the simulator's
	// fingerprint and calibration): with one, and a store that keeps
	// them, a prediction is made once and read back on every resume.
	GuideKey string
	// Progress receives events (nil: none).
	Progress Progress
	// Fresh starts the run over; Grid also runs the exhaustive grid.
	Fresh bool
	Grid  bool
	// RetryFailed runs every stored failed trial again. Without it a
	// resumed lab retries, once, only the failures a retry may cure
	// (engine.FailureClass.Transient): a crash mid-benchmark, a hang.
	RetryFailed bool
	// LeaseTTL is how long the run's lease lasts between renewals (0 =
	// 30 s): how soon another lab may take over a run whose owner died on
	// another host. On this host a dead owner is taken over at once.
	LeaseTTL time.Duration

	run    store.Run
	mu     sync.Mutex
	done   map[string]store.Trial // by measurement key
	tuning map[string]bool        // tuning measurements used by the lab
	// pending counts the tuning trials (load searches, under
	// max_load_under_slo) the budget admitted that have not ended: parallel
	// searches each saw room for one more when only one was left, and
	// budget.max_trials was passed.
	pending int
	ran     int
	reused  int
	stopped string
	spent   time.Duration // trial time already in the store
	start   time.Time
	sem     *gpuSem
	sum     *Summary
	// stored holds the measurement keys an earlier invocation stored that
	// this one has not used yet.
	stored map[string]bool
	// guide is Guide, through the store's prediction cache when it has one.
	guide Guide
	// attempts holds the attempt count of each stored failure being
	// retried, by measurement key, so the retry is saved as the next one.
	attempts map[string]int
	// searches holds each config's load search under max_load_under_slo,
	// by measurement key.
	searches map[string]*LoadSearch
}

// result is one measured trial as the method sees it.
type result struct {
	spec   TrialSpec
	trial  store.Trial
	m      Measurement
	score  float64
	failed string     // failure class or "" when it ran
	why    string     // why it is not eligible ("" when eligible)
	kind   report.Why // the kind of why
}

func (r *result) eligible() bool { return r != nil && r.why == "" }

// Run executes the lab and returns its summary; the summary is also stored
// on the run. A canceled context stops it with what was finished stored.
func (l *Lab) Run(ctx context.Context) (*Summary, error) {
	s := l.Spec
	withDevice(s)
	l.start = time.Now()
	l.done = map[string]store.Trial{}
	l.tuning = map[string]bool{}
	// A runtime with servers holds the spec's GPUs: as many trials run at
	// once as their GPUs fit (the runner's allocator names the devices).
	// Predictions hold none: two at a time, each counted as one unit.
	par := s.Parallel
	units := s.Hardware.Count
	if !s.RuntimeKind().Servers() {
		if par == 0 {
			par = 2
		}
		units = par
	} else if par == 0 {
		par = s.Hardware.Count
	}
	l.sem = newGPUSem(units, par)
	ls, leasing := l.Store.(leaser)
	run, err := l.Store.EnsureRun(ctx, s.Key(), s.Name, s.YAML(), l.Fresh && !leasing)
	if err != nil {
		return nil, fmt.Errorf("lab: open run: %w", err)
	}
	l.run = run
	if leasing {
		// One live lab per run: a second one would measure every trial
		// again, race the first for each key, and on a real runtime book
		// the same GPUs twice.
		stopLease, lctx, err := l.holdRun(ctx, ls)
		if err != nil {
			return nil, err
		}
		defer stopLease()
		ctx = lctx
		if l.Fresh {
			if err := ls.ResetRun(ctx, run.ID); err != nil {
				return nil, fmt.Errorf("lab: start run %d over: %w", run.ID, err)
			}
			l.run.Status, l.run.Summary, l.run.Spec = "running", nil, s.YAML()
		}
		if l.run.Status != "running" {
			// A resumed run runs: listed as interrupted (or failed) while
			// it does, it would look stopped and resumable to everyone.
			l.run.Status = "running"
			if err := l.Store.UpdateRun(ctx, &l.run); err != nil {
				return nil, fmt.Errorf("lab: mark run %d running: %w", run.ID, err)
			}
		}
	}
	if sw, ok := l.Runner.(sweeper); ok {
		// Now that this lab holds the run, whatever servers are still up
		// under its key were left by a lab killed before it could stop
		// them: they hold GPUs this one is about to hand out.
		names, err := sw.Sweep(ctx)
		if err != nil {
			return nil, fmt.Errorf("lab: run %s: remove the servers an earlier lab left: %w", s.Name, err)
		}
		if len(names) > 0 {
			slog.Info("removed the servers an earlier lab of this run left", "run", s.Name, "servers", names)
		}
	}
	prev, err := l.Store.Trials(ctx, run.ID)
	if err != nil {
		return nil, fmt.Errorf("lab: read trials of run %d: %w", run.ID, err)
	}
	if len(prev) == 0 && !l.Fresh {
		if prev, err = l.adoptLegacy(ctx); err != nil {
			return nil, err
		}
	}
	l.guide = l.Guide
	if l.Guide != nil {
		l.guide = kindOf(s.Objective).guide(l.Guide, s.Objective)
	}
	if gc, ok := l.Store.(guideCache); ok && l.guide != nil && l.GuideKey != "" {
		slo, _ := json.Marshal(s.Objective.SLO)
		prefix := fmt.Sprintf("%s|%s|%d|%s", l.GuideKey, s.Hardware.GPU, s.Hardware.Count, slo)
		if s.Objective.Load != nil {
			ld, _ := json.Marshal(s.Objective.Load)
			prefix += "|" + string(ld)
		}
		l.guide = &cachedGuide{inner: l.guide, cache: gc, prefix: prefix}
	}
	l.attempts = map[string]int{}
	l.searches = map[string]*LoadSearch{}
	l.stored = map[string]bool{}
	stored := 0
	for _, t := range prev {
		if !t.Ended.IsZero() && t.Ended.After(t.Started) {
			l.spent += t.Ended.Sub(t.Started)
		}
		if l.retry(t) {
			l.attempts[measurementKey(t.Key)] = max(t.Attempt, 1)
			continue
		}
		l.done[measurementKey(t.Key)] = t
		l.stored[measurementKey(t.Key)] = true
		stored++
	}
	l.sum = &Summary{
		Version: SummaryVersion, Name: s.Name, Model: s.Model, Runtime: s.Runtime, Provenance: s.RuntimeKind().Provenance(),
		Objective: s.Objective.Metric, Unit: ObjectiveUnit(s.Objective), GPU: s.Hardware.GPU, GPUs: s.Hardware.Count,
		Repeats: s.Repeats, MinSuccessRate: s.MinSuccessRate, Engines: engineVersions(s.Engines), Tuning: s.Tuning.Name,
	}
	for _, w := range append([]labspec.Workload{*s.Tuning}, s.Generalization...) {
		l.sum.Workloads = append(l.sum.Workloads, workloadInfo(w, s.Model))
	}
	if s.RuntimeKind().Noisy() {
		l.sum.NoiseSigma = s.Noise.Sigma
	}
	if l.Progress != nil {
		l.Progress.Start(s, l.plannedTrials(), stored)
	}
	err = l.method(ctx)
	if c, ok := l.Runner.(io.Closer); ok {
		// The servers a runner keeps up between measurements go with the
		// lab that asked for them.
		if cerr := c.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("lab: stop the engines: %w", cerr)
		}
	}
	if errors.Is(err, ErrBudget) {
		err = nil
	}
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause // the lease was lost: say so, not just "canceled"
	}
	l.sum.TuningTrials = len(l.tuning)
	l.sum.Load, l.sum.LoadSearches = summaryLoad(s.Objective.Load, l.loadSearches())
	l.sum.TrialsRun, l.sum.TrialsReused, l.sum.Stopped = l.ran, l.reused, l.stopped
	l.mu.Lock()
	for _, t := range l.done {
		if t.Cost.EngineStart {
			l.sum.EngineStarts++
		}
		l.sum.GPUHours += t.Cost.GPUHours()
	}
	l.mu.Unlock()
	l.sum.FreshStarts = s.FreshStartPerRepeat
	status := "done"
	if !l.anySucceeded() {
		status = "failed" // not one configuration ran: nothing to recommend
	}
	if err != nil {
		status = "failed"
		if ctx.Err() != nil || store.IsDiskFull(err) {
			// A rerun resumes it: what it finished is stored, and a full
			// disk is no fault of the configurations tried.
			status = store.StatusInterrupted
		}
	}
	l.run.Status = status
	l.run.Summary = l.sum.JSON()
	// Store the summary even when interrupted, with a fresh context so a
	// canceled one does not lose it.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err != nil && leasing && stored == 0 && l.ran == 0 {
		// It stopped before its first trial: a run with nothing in it
		// would only hide the last complete one from `perflab report`.
		if derr := ls.DeleteRun(uctx, l.run.ID); derr != nil {
			err = errors.Join(err, fmt.Errorf("lab: remove the empty run %d: %w", l.run.ID, derr))
		}
		l.run = store.Run{}
		if l.Progress != nil {
			l.Progress.Done(l.sum)
		}
		return l.sum, err
	}
	if uerr := l.Store.UpdateRun(uctx, &l.run); uerr != nil && err == nil {
		err = fmt.Errorf("lab: save run summary: %w", uerr)
	}
	if l.Progress != nil {
		l.Progress.Done(l.sum)
	}
	return l.sum, err
}

// anySucceeded says whether any trial the run holds succeeded (true for a
// run without trials, which has not failed either).
func (l *Lab) anySucceeded() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.done) == 0 {
		return true
	}
	for _, t := range l.done {
		if t.Status == "ok" {
			return true
		}
	}
	return false
}

// sweeper is a Runner that can remove the servers a killed lab of the
// same run left behind (LiveRunner on a runtime whose servers outlive
// perflab).
type sweeper interface {
	Sweep(ctx context.Context) ([]string, error)
}

var _ sweeper = (*LiveRunner)(nil)

// leaser is the part of *store.Store that makes one live lab the owner of a
// run; a Store without it (a test's in-memory one) is never shared.
type leaser interface {
	AcquireRun(ctx context.Context, runID int64, owner store.Owner, ttl time.Duration) error
	RenewLease(ctx context.Context, runID int64, owner store.Owner, ttl time.Duration) error
	ReleaseRun(ctx context.Context, runID int64, owner store.Owner) error
	ResetRun(ctx context.Context, runID int64) error
	DeleteRun(ctx context.Context, runID int64) error
}

var _ leaser = (*store.Store)(nil)

// holdRun takes the run's lease and keeps renewing it until stop is
// called. The returned context is canceled if the lease is lost (this lab
// stalled past its TTL and another took the run over), so two labs never
// write the same run.
func (l *Lab) holdRun(ctx context.Context, ls leaser) (stop func(), _ context.Context, _ error) {
	ttl := l.LeaseTTL
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	owner := store.NewOwner()
	if err := ls.AcquireRun(ctx, l.run.ID, owner, ttl); err != nil {
		return nil, nil, fmt.Errorf("lab: run %s: %w", l.Spec.Name, err)
	}
	lctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), ttl/3)
				err := ls.RenewLease(rctx, l.run.ID, owner, ttl)
				rcancel()
				var held *store.HeldError
				if errors.As(err, &held) {
					cancel(fmt.Errorf("lab: lost run %s: %w", l.Spec.Name, err))
					return
				}
			}
		}
	}()
	stop = func() {
		close(done)
		wg.Wait()
		cancel(nil)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		_ = ls.ReleaseRun(rctx, l.run.ID, owner)
	}
	return stop, lctx, nil
}

// retry says whether a stored trial is run again rather than reused: a
// failure a retry may cure, on its first attempt, or any failure when the
// user asks for it.
func (l *Lab) retry(t store.Trial) bool {
	if t.Status == "ok" {
		return false
	}
	if l.RetryFailed {
		return true
	}
	return engine.FailureClass(t.FailureClass).Transient() && t.Attempt <= 1
}

// runFinder is the part of *store.Store that finds a run without creating
// one; a Store without it has no legacy runs to adopt.
type runFinder interface {
	RunByKey(ctx context.Context, key string) (store.Run, error)
	Runs(ctx context.Context) ([]store.Run, error)
}

// The real store must keep offering it, or old runs silently start over.
var _ runFinder = (*store.Store)(nil)

// adoptLegacy copies into the new run the trials of a run this spec was
// stored under before Spec.Key left out the run-control options, so an old
// run resumes instead of starting over. It is the run under this spec's
// LegacyKey (the spec rerun exactly as it was), else the latest run of the
// same name whose stored spec has this Key (rerun with another --parallel
// or budget). The old run is left as it was, readable by its id or name.
func (l *Lab) adoptLegacy(ctx context.Context) ([]store.Trial, error) {
	f, ok := l.Store.(runFinder)
	if !ok {
		return nil, nil
	}
	old, err := f.RunByKey(ctx, l.Spec.LegacyKey())
	if errors.Is(err, store.ErrNotFound) {
		runs, lerr := f.Runs(ctx) // newest first
		if lerr != nil {
			return nil, fmt.Errorf("lab: look for an earlier run of %s: %w", l.Spec.Name, lerr)
		}
		for _, r := range runs {
			if r.ID == l.run.ID || r.Name != l.Spec.Name {
				continue
			}
			// Only a run whose spec measures what this one does.
			prev, perr := labspec.ParseSpec("stored run "+strconv.FormatInt(r.ID, 10), []byte(r.Spec))
			if perr == nil && prev.Key() == l.run.Key {
				old, err = r, nil
				break
			}
		}
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && old.ID == l.run.ID) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lab: look for an earlier run of %s: %w", l.Spec.Name, err)
	}
	trials, err := l.Store.Trials(ctx, old.ID)
	if err != nil {
		return nil, fmt.Errorf("lab: read trials of earlier run %d: %w", old.ID, err)
	}
	rename := renamedWorkloads(old)
	out := make([]store.Trial, 0, len(trials))
	for _, t := range trials {
		t.ID, t.RunID = 0, l.run.ID
		t.Key = rename(t.Key)
		if err := l.Store.SaveTrial(ctx, &t); err != nil {
			return nil, fmt.Errorf("lab: copy trial %s from earlier run %d: %w", t.Key, old.ID, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// renamedWorkloads maps a trial key stored by an earlier run to today's
// form: its workload named by the dataset's content rather than its
// absolute path (see contentID), so the adopted trials count as measured.
// A stored spec that no longer parses leaves keys as they are (those
// trials are then measured again, nothing is lost).
func renamedWorkloads(old store.Run) func(string) string {
	prev, err := labspec.ParseSpec("stored run "+strconv.FormatInt(old.ID, 10), []byte(old.Spec))
	if err != nil {
		return func(k string) string { return k }
	}
	names := map[string]string{}
	for _, w := range append([]labspec.Workload{*prev.Tuning}, prev.Generalization...) {
		names[w.PathKeyName()] = w.KeyName()
	}
	return func(k string) string {
		parts := strings.Split(k, "/")
		if len(parts) == 4 { // stage/config/workload/repeat (TrialKey)
			if n, ok := names[parts[2]]; ok {
				parts[2] = n
			}
		}
		return strings.Join(parts, "/")
	}
}

// Run returns the stored run (valid after Run).
func (l *Lab) StoredRun() store.Run { return l.run }

func (l *Lab) method(ctx context.Context) error {
	s := l.Spec
	// Baseline: vLLM with its defaults in BF16, as the reports.
	basePt := labspec.Point{labspec.KnobEngine: s.BaselineEngine()}
	if l.Progress != nil {
		l.Progress.Stage("baseline", 1)
	}
	base, err := l.measureOne(ctx, "baseline", basePt, *s.Tuning, 0)
	if err != nil {
		return err
	}
	if err := l.baselineFollowUps(ctx, base); err != nil {
		return err
	}
	l.sum.Baseline = l.candidate(base, nil)
	l.sum.Baseline.Decision = "baseline"
	inc := base
	if !base.eligible() {
		inc = nil
	}
	incScore := l.incumbentScore(inc)
	l.progressBest(inc, incScore)
	budgetHit := false
	for _, st := range s.Stages {
		if inc, incScore, err = l.stage(ctx, st, inc, incScore); err != nil {
			if !errors.Is(err, ErrBudget) {
				return err
			}
			budgetHit = true
			break
		}
	}
	if *s.Combinations && !budgetHit {
		if inc, incScore, err = l.combinations(ctx, inc, incScore); err != nil {
			if !errors.Is(err, ErrBudget) {
				return err
			}
			budgetHit = true
		}
	}
	l.sum.Staged = l.candidate(inc, l.repeatScores(inc))
	if !s.Search.Disable && l.Guide != nil && inc != nil && !budgetHit {
		if inc, incScore, err = l.joint(ctx, inc, incScore); err != nil && !errors.Is(err, ErrBudget) {
			return err
		}
	}
	l.sum.Winner = l.candidate(inc, l.repeatScores(inc))
	// Baseline and winner are both reported as the mean of their repeats
	// when they have some, so the gain compares like with like.
	l.sum.Baseline = l.candidate(base, l.repeatScores(base))
	l.sum.Baseline.Decision = "baseline"
	switch {
	case inc == nil || !base.eligible():
		// No comparison: the gain stays 0 and the winner says why.
	case labspec.ConfigHash(inc.spec.Config) == labspec.ConfigHash(base.spec.Config):
		// The winner is the baseline config: no gain, exactly, even when
		// its repeats were averaged differently along the way.
		l.sum.Winner.Gain, l.sum.Gain = 0, 0
	default:
		// The reported scores of both (the mean of their repeats), so the
		// gain is the ratio of the two figures the report prints.
		if g, ok := relGain(l.sum.Winner.Score, l.sum.Baseline.Score); ok {
			l.sum.Gain, l.sum.Winner.Gain = g, g
		}
	}
	if err := l.generalize(ctx, basePt, inc); err != nil {
		return err
	}
	if l.Grid {
		if err := l.grid(ctx, base, inc); err != nil {
			return err
		}
	}
	return nil
}

// baselineFollowUps measures, right after a working baseline, what the lab
// will ask of it later anyway: its repeats (the first stage whose best
// beats it compares against them, and the report prints their mean) and
// its generalization workloads. Run now they use the server that just
// measured it; run when asked, each would start it again, since on one GPU
// the stages' candidates take its place in between (the 14B example: 3 of
// its 23 starts). Later stages and generalize find them stored. A budget
// that stops the repeats stops nothing else here: the stages meet it next.
func (l *Lab) baselineFollowUps(ctx context.Context, base *result) error {
	if !base.eligible() {
		return nil // a failed baseline is not tried again for nothing
	}
	s := l.Spec
	var reps []TrialSpec
	for rep := 1; rep < s.Repeats; rep++ {
		reps = append(reps, l.trialSpec("baseline", base.spec.Point, base.spec.Config, *s.Tuning, rep))
	}
	gens := l.generalizationSpecs(base.spec.Point, base.spec.Config)
	if n := len(reps) + len(gens); n > 0 && l.Progress != nil {
		l.Progress.Stage("baseline repeats and generalization", n)
	}
	if _, err := l.runSpecs(ctx, reps); err != nil && !errors.Is(err, ErrBudget) {
		return err
	}
	if _, err := l.runSpecsNoBudget(ctx, gens); err != nil {
		return err
	}
	return nil
}

// incumbentFollowUps measures a joint search's new incumbent on the
// generalization workloads while its server is up (decide has just run its
// repeats on it). The joint search is the last to change the winner, and on
// one GPU the candidates it tries next take the incumbent's place, so
// measured at the end, as generalize would, the winner starts a second time
// (the 14B example: 19 starts for 18 configs). The joint search calls it
// only when no untested config is predicted to beat the new incumbent (the
// search goes on on the exploration bonus alone): these trials are wasted
// if a later candidate wins after all, and four generalization benchmarks
// cost more than one start (eagerly for every new incumbent, the 14B plan
// took 1.76 GPU-hours against 1.66). generalize finds them stored.
func (l *Lab) incumbentFollowUps(ctx context.Context, inc *result) error {
	if !inc.eligible() || len(l.Spec.Generalization) == 0 {
		return nil
	}
	_, err := l.runSpecsNoBudget(ctx, l.generalizationSpecs(inc.spec.Point, inc.spec.Config))
	return err
}

// generalizationSpecs are a config's trials on every generalization
// workload: the same keys whichever step asks for them first, so generalize
// finds stored what the follow-ups measured.
func (l *Lab) generalizationSpecs(p labspec.Point, cfg engine.Config) []TrialSpec {
	var specs []TrialSpec
	for _, w := range l.Spec.Generalization {
		specs = append(specs, l.trialSpec("generalization", p, cfg, w, 0))
	}
	return specs
}

// allWhy says whether every candidate was left out for one of the given
// reasons (a batch limit the workload never reaches, the incumbent's own
// server): nothing the engine refused.
func allWhy(cs []Candidate, whys ...report.Why) bool {
	for _, c := range cs {
		if !slices.Contains(whys, c.Why) {
			return false
		}
	}
	return len(cs) > 0
}

// firstWhy is the reason of the first candidate left out as why.
func firstWhy(cs []Candidate, why report.Why) string {
	for _, c := range cs {
		if c.Why == why {
			return c.Reason
		}
	}
	return ""
}

// defaultAdmits says whether every given engine, at its version, left to
// its default running-request cap on device d (or, where d and the
// version do not settle it, the least cap it picks on any GPU), admits n
// requests at once.
func defaultAdmits(n int, d engine.Device, versions map[string]string, engines ...string) bool {
	for _, e := range engines {
		k, ok := engine.KindOf(e)
		if !ok || max(k.BatchDefaults(engine.Config{Engine: e, Version: versions[e]}, d).MaxNumSeqs, k.LeastMaxNumSeqs) < n {
			return false
		}
	}
	return len(engines) > 0
}

// inFlightCap is the most requests the tuning workload has in flight, 0
// when it is not fixed: a load search sweeps the load.
func (l *Lab) inFlightCap() int {
	if kindOf(l.Spec.Objective).loadSLO(l.Spec.Objective) != nil {
		return 0
	}
	return l.Spec.Tuning.InFlightCap()
}

// stage runs one stage against the incumbent and returns the new incumbent.
func (l *Lab) stage(ctx context.Context, st labspec.Stage, inc *result, incScore float64) (*result, float64, error) {
	s := l.Spec
	ss := StageSummary{Name: st.Name, Knob: st.Knob, Incumbent: l.candidate(inc, l.repeatScores(inc))}
	defer func() { l.sum.Stages = append(l.sum.Stages, ss) }()
	var incPt labspec.Point
	eng := s.BaselineEngine()
	if inc != nil {
		incPt, eng = inc.spec.Point, inc.spec.Point[labspec.KnobEngine]
	} else {
		incPt = labspec.Point{labspec.KnobEngine: eng}
	}
	var pts []labspec.Point
	seen := map[string]bool{}
	var incH, incSrv string
	if inc != nil {
		incH, incSrv = labspec.ConfigHash(inc.spec.Config), labspec.SameServer(inc.spec.Config, s.Hardware.Device)
		seen[incH], seen[incSrv] = true, true
	}
	values := s.StageValues(st, eng)
	var own []string                // values that are the incumbent's own server
	var unreached map[string]string // value: why it is not run
	if n := l.inFlightCap(); n > 0 && st.Knob == labspec.KnobMaxNumSeqs {
		// The incumbent admits every request already when its limit is
		// unset and its engine's least default reaches n, or set at n or
		// more: then no limit at or above n is a change.
		admits := defaultAdmits(n, s.Hardware.Device, s.EngineVersions(), eng)
		if v := incPt[st.Knob]; v != "" {
			m, err := strconv.Atoi(v)
			admits = err == nil && m >= n
		}
		kept, dropped := labspec.TrimUnbinding(values, n, incPt[st.Knob], admits)
		same := "the incumbent admits them all already"
		for _, v := range kept {
			if m, err := strconv.Atoi(v); err == nil && m >= n && v != incPt[st.Knob] {
				same = fmt.Sprintf("%s=%s, which this stage runs, admits them all too", st.Knob, v)
			}
		}
		unreached = map[string]string{}
		for _, v := range dropped {
			unreached[v] = fmt.Sprintf("%s never has more than %d requests in flight, and %s", s.Tuning.Name, n, same)
		}
	}
	for _, v := range values {
		p := incPt.With(st.Knob, v)
		if st.Knob == labspec.KnobEngine {
			p = l.switchEngine(incPt, v)
		}
		cfg, ok := s.Config(p)
		if !ok {
			continue
		}
		// A candidate that starts the server the incumbent or an earlier
		// candidate starts is the same measurement.
		h, srv := labspec.ConfigHash(cfg), labspec.SameServer(cfg, s.Hardware.Device)
		if seen[h] || seen[srv] {
			if inc != nil && (h == incH || srv == incSrv) {
				own = append(own, st.Knob+"="+v)
				if incPt[st.Knob] != v {
					// A value that spells the engine's default is said, so
					// that it does not vanish from the console and the
					// report (the incumbent's own value needs no word).
					why := fmt.Sprintf("the incumbent's own server: %s picks %s=%s unset on %s, so the command is the incumbent's",
						engine.DisplayName(eng), st.Knob, v, s.Hardware.GPU)
					ss.Candidates = append(ss.Candidates, l.unrun(p, cfg, report.WhyIncumbentServer, why))
				}
			}
			continue
		}
		seen[h], seen[srv] = true, true
		// What the engine package knows the engine/version cannot run is
		// not worth a trial (it would only fail as invalid_config).
		if why := labspec.Unsupported(cfg); why != "" {
			ss.Candidates = append(ss.Candidates, l.unrun(p, cfg, report.WhyUnsupported, "unsupported: "+why))
			continue
		}
		if why, ok := unreached[v]; ok {
			ss.Candidates = append(ss.Candidates, l.unrun(p, cfg, report.WhyUnreached, why))
			continue
		}
		if why, hopeless := l.hopeless(ctx, cfg, inc, incScore); hopeless {
			ss.Candidates = append(ss.Candidates, l.unrun(p, cfg, report.WhyHopeless, why))
			continue
		}
		pts = append(pts, p)
	}
	if len(pts) == 0 {
		why := ""
		switch {
		case len(own) > 0 && (len(ss.Candidates) == 0 || allWhy(ss.Candidates, report.WhyIncumbentServer)):
			// Say which values, so "parallelism on 1 GPU" does not read as
			// a knob the engine lacks.
			ss.Skipped = fmt.Sprintf("nothing to try on %s: %s starts the incumbent's own server", eng, strings.Join(own, ", "))
			why = ss.Skipped
		case len(ss.Candidates) == 0:
			ss.Skipped = fmt.Sprintf("no candidate applies to %s", eng)
			why = ss.Skipped
		case allWhy(ss.Candidates, report.WhyUnreached, report.WhyIncumbentServer):
			ss.Skipped = fmt.Sprintf("nothing to try on %s: %s", eng, firstWhy(ss.Candidates, report.WhyUnreached))
			why = ss.Skipped
		default:
			ss.Skipped = fmt.Sprintf("no candidate %s can run is left", eng)
			c := ss.Candidates[0]
			why = fmt.Sprintf("%s: %s: %s", ss.Skipped, c.Name, c.Reason)
		}
		if sk, ok := l.Progress.(stageSkipper); ok {
			sk.StageSkipped(st.Name, why)
		}
		return inc, incScore, nil
	}
	if nr, ok := l.Progress.(stageNoter); ok && len(ss.Candidates) > 0 {
		nr.StageNotRun(st.Name, len(pts), notRunNotes(ss.Candidates))
	} else if l.Progress != nil {
		l.Progress.Stage(st.Name, len(pts))
	}
	res, err := l.measureMany(ctx, st.Name, pts, *s.Tuning, 0)
	if err != nil {
		ss.Candidates = append(ss.Candidates, l.undecided(pts, res, err)...)
		return inc, incScore, err
	}
	newInc, newScore, floor, err := l.decide(ctx, st.Name, inc, incScore, res, &ss.Candidates)
	ss.NoiseFloor = floor
	if newInc != inc {
		ss.Kept = newInc.spec.Name
	}
	return newInc, newScore, err
}

// unrun is the summary entry of a candidate that was not run, with why.
// notRunNotes is each not-run candidate with its kind of reason in a few
// words, for the stage's console line (the report has the sentence).
func notRunNotes(cs []Candidate) []string {
	short := map[report.Why]string{
		report.WhyIncumbentServer: "the incumbent's own server",
		report.WhyUnsupported:     "unsupported",
		report.WhyUnreached:       "above the batches the workload reaches",
		report.WhyHopeless:        "the guide's range is below the incumbent",
	}
	var out []string
	for _, c := range cs {
		why, ok := short[c.Why]
		if !ok {
			why = string(c.Why)
		}
		out = append(out, c.Name+": "+why)
	}
	return out
}

func (l *Lab) unrun(p labspec.Point, cfg engine.Config, kind report.Why, why string) Candidate {
	return Candidate{
		Name: Label(p), Point: map[string]string(p.Clone()), ConfigHash: labspec.ConfigHash(cfg), GPUs: labspec.GPUs(cfg),
		Decision: "skipped", Reason: why, Why: kind,
	}
}

// undecided records the candidates of a step the budget stopped before its
// decision: the ones measured with their figures, the others as not run.
// None is kept or compared: a decision needs the whole step's evidence.
func (l *Lab) undecided(pts []labspec.Point, res []*result, err error) []Candidate {
	if !errors.Is(err, ErrBudget) {
		return nil
	}
	var out []Candidate
	for i, p := range pts {
		if i < len(res) && res[i] != nil {
			c := l.candidate(res[i], nil)
			c.Decision = "skipped"
			if res[i].failed != "" {
				c.Decision = "failed"
			}
			c.Reason, c.Why = "stopped by budget before the stage's decision", report.WhyBudget
			if res[i].why != "" {
				c.Reason = res[i].why + "; " + c.Reason
			}
			out = append(out, *c)
			continue
		}
		cfg, _ := l.Spec.Config(p)
		out = append(out, l.unrun(p, cfg, report.WhyBudget, "not run: budget spent"))
	}
	return out
}

// relGain is a/b - 1, and false when it is not a number a decision may
// rest on (b not positive, either not finite): such a gain must never
// reach a keep test, where NaN compares false with every threshold.
func relGain(a, b float64) (float64, bool) {
	if !(b > 0) || math.IsInf(b, 0) || math.IsNaN(a) || math.IsInf(a, 0) {
		return 0, false
	}
	return a/b - 1, true
}

// switchEngine moves a point to another engine, dropping the knob values
// that do not apply there (another engine's backend names).
func (l *Lab) switchEngine(p labspec.Point, eng string) labspec.Point {
	q := p.With(labspec.KnobEngine, eng)
	for _, k := range labspec.KnobOrder[1:] {
		if _, has := q[k]; !has {
			continue
		}
		if _, ok := l.Spec.Config(q); !ok {
			delete(q, k)
		}
	}
	if _, ok := l.Spec.Config(q); !ok {
		return labspec.Point{labspec.KnobEngine: eng}
	}
	return q
}

// decide applies the keep rules to one stage's results: eligible (no
// failure, success rate, SLO), best by score, positive gain, and a gain over
// the incumbent larger than the noise floor measured from repeats of both.
func (l *Lab) decide(ctx context.Context, stage string, inc *result, incScore float64, res []*result, out *[]Candidate) (*result, float64, float64, error) {
	var best *result
	for _, r := range res {
		if r.eligible() && (best == nil || r.score > best.score) {
			best = r
		}
	}
	cands := make([]Candidate, len(res))
	for i, r := range res {
		c := l.candidate(r, nil)
		if g, ok := relGain(r.score, incScore); inc != nil && ok && r.eligible() {
			c.Gain = g
		}
		switch {
		case r.failed != "":
			c.Decision, c.Reason, c.Why = "failed", r.why, r.kind
		case !r.eligible():
			c.Decision, c.Reason, c.Why = "skipped", r.why, r.kind
		case r != best:
			// Name the run it lost to: the stage compares one run of each,
			// and the report's ranking beside it shows the winner's mean
			// over its repeats, which may lie below this run.
			c.Decision, c.Why = "skipped", report.WhyNotBest
			c.Reason = fmt.Sprintf("not the best in stage (%+.2f%%): one run each, %s", 100*c.Gain,
				versus(Label(best.spec.Point), best.score, r.score, ObjectiveUnit(l.Spec.Objective)))
		}
		cands[i] = *c
	}
	defer func() { *out = append(*out, cands...) }()
	if best == nil {
		return inc, incScore, 0, nil
	}
	bi := indexOf(res, best)
	if inc == nil {
		// No working incumbent yet (the baseline failed): the best working
		// candidate becomes it.
		cands[bi].Decision, cands[bi].Reason, cands[bi].Why = "kept", "first working configuration", report.WhyFirstWorking
		return best, l.incumbentScore(best), 0, nil
	}
	gain1, ok := relGain(best.score, incScore)
	if !ok {
		// The incumbent's score cannot be compared with (evaluate makes
		// this unreachable for a measured incumbent; kept as the guard).
		cands[bi].Decision = "skipped"
		cands[bi].Reason = fmt.Sprintf("no comparable incumbent score (%.4g %s)", incScore, ObjectiveUnit(l.Spec.Objective))
		cands[bi].Why = report.WhyNoIncumbentScore
		return inc, incScore, 0, nil
	}
	if gain1 <= 0 {
		cands[bi].Decision, cands[bi].Reason, cands[bi].Why = "skipped", fmt.Sprintf("no gain (%+.2f%%)", 100*gain1), report.WhyNoGain
		return inc, incScore, 0, nil
	}
	incScores, bestScores, err := l.repeatPair(ctx, stage, inc, best)
	if err != nil {
		if errors.Is(err, ErrBudget) {
			// Half-run repeats are no evidence either way: not kept, and
			// its single-run gain is shown as such.
			cands[bi].Decision = "skipped"
			cands[bi].Reason = fmt.Sprintf("stopped by budget before its repeats (single run %+.2f%%)", 100*gain1)
			cands[bi].Why = report.WhyBudget
		}
		return inc, incScore, 0, err
	}
	floor := NoiseFloor(incScores, bestScores)
	if floor > l.sum.NoiseFloor {
		l.sum.NoiseFloor = floor
	}
	thr := math.Max(floor, l.Spec.MinGain)
	if bestScores == nil {
		// A repeat failed: a config that does not run reliably is not kept.
		cands[bi].RepeatScores, cands[bi].Score, cands[bi].Gain = nil, 0, 0
		cands[bi].Decision, cands[bi].Reason, cands[bi].Why = "skipped", "a repeat failed", report.WhyRepeatFailed
		return inc, incScore, floor, nil
	}
	// A runner-up whose one run lies within the noise floor of the best's
	// is not beaten: one run each cannot tell them apart (the README lab's
	// engine stage chose SGLang over TensorRT-LLM on 6,959.9 against
	// 6,952.3 tok/s). It gets its repeats, and the higher mean goes on.
	// Under a zero floor (every repeat read the same, and no min_gain) a
	// run is its repeats: the runner-up's would read its one run again.
	for i, r := range res {
		if r == best || !r.eligible() || thr == 0 {
			continue
		}
		if g, ok := relGain(best.score, r.score); !ok || g > thr {
			continue
		}
		rs, err := l.repeatOne(ctx, stage, r)
		if err != nil {
			if errors.Is(err, ErrBudget) {
				cands[bi].Decision, cands[bi].Why = "skipped", report.WhyBudget
				cands[bi].Reason = fmt.Sprintf("stopped by budget before the repeats of %s, within the noise floor of it", Label(r.spec.Point))
			}
			return inc, incScore, floor, err
		}
		if rs == nil {
			cands[i].Reason += "; a repeat failed"
			continue
		}
		unit := ObjectiveUnit(l.Spec.Objective)
		cands[i].RepeatScores, cands[i].Score = rs, mean(rs)
		if g, ok := relGain(mean(rs), mean(incScores)); ok {
			cands[i].Gain = g
		}
		if mean(rs) <= mean(bestScores) {
			cands[i].Reason = fmt.Sprintf("not the best in stage (%+.2f%%): over %d runs each, %s%s", 100*cands[i].Gain, len(rs),
				versus(Label(best.spec.Point), mean(bestScores), mean(rs), unit), tie(mean(bestScores), mean(rs), thr))
			continue
		}
		cands[bi].RepeatScores, cands[bi].Score = bestScores, mean(bestScores)
		if g, ok := relGain(mean(bestScores), mean(incScores)); ok {
			cands[bi].Gain = g
		}
		cands[bi].Decision, cands[bi].Why = "skipped", report.WhyNotBest
		cands[bi].Reason = fmt.Sprintf("not the best in stage (%+.2f%%): over %d runs each, %s%s", 100*cands[bi].Gain, len(rs),
			versus(Label(r.spec.Point), mean(rs), mean(bestScores), unit), tie(mean(rs), mean(bestScores), thr))
		best, bi, bestScores = r, i, rs
		cands[bi].Decision, cands[bi].Reason, cands[bi].Why = "", "", ""
		floor = NoiseFloor(incScores, bestScores)
		if floor > l.sum.NoiseFloor {
			l.sum.NoiseFloor = floor
		}
		thr = math.Max(floor, l.Spec.MinGain)
	}
	gain, ok := relGain(mean(bestScores), mean(incScores))
	cands[bi].RepeatScores, cands[bi].Score = bestScores, mean(bestScores)
	if !ok {
		cands[bi].Decision = "skipped"
		cands[bi].Reason = fmt.Sprintf("no comparable incumbent score over its repeats (%.4g %s)", mean(incScores), ObjectiveUnit(l.Spec.Objective))
		cands[bi].Why = report.WhyNoIncumbentScore
		return inc, incScore, floor, nil
	}
	cands[bi].Gain = gain
	if gain <= 0 {
		// Its one run led; its repeats did not: no gain, not a gain too
		// small to trust.
		cands[bi].Decision = "skipped"
		cands[bi].Reason = fmt.Sprintf("no gain over %d runs each (%+.2f%%)", len(bestScores), 100*gain)
		cands[bi].Why = report.WhyNoGain
		return inc, mean(incScores), floor, nil
	}
	if gain <= thr {
		cands[bi].Decision = "skipped"
		cands[bi].Reason = fmt.Sprintf("below noise floor (%+.2f%% <= %.2f%%)", 100*gain, 100*thr)
		cands[bi].Why = report.WhyBelowNoise
		return inc, mean(incScores), floor, nil
	}
	cands[bi].Decision = "kept"
	cands[bi].Reason = fmt.Sprintf("%+.2f%% > noise floor %.2f%%", 100*gain, 100*thr)
	cands[bi].Why = report.WhyBeatNoise
	l.progressBest(best, mean(bestScores))
	return best, mean(bestScores), floor, nil
}

func indexOf(rs []*result, r *result) int {
	for i := range rs {
		if rs[i] == r {
			return i
		}
	}
	return -1
}

// repeatPair runs the incumbent and the candidate Repeats times each (the
// first run of each is reused) and returns both score lists; the second is
// nil when a repeat of the candidate failed.
func (l *Lab) repeatPair(ctx context.Context, stage string, inc, cand *result) ([]float64, []float64, error) {
	n := l.Spec.Repeats
	if n <= 1 {
		return []float64{inc.score}, []float64{cand.score}, nil
	}
	// One config's repeats run back to back, so a kept server serves them
	// all: the incumbent's, then the candidate's (on one GPU, alternating
	// would start a server for every repeat).
	res, err := l.runSpecs(ctx, append(l.repeatSpecs(stage, inc), l.repeatSpecs(stage, cand)...))
	if err != nil {
		return nil, nil, err
	}
	incS, candS := []float64{inc.score}, []float64{cand.score}
	candOK := true
	for i, r := range res {
		if i < n-1 {
			if r.eligible() {
				incS = append(incS, r.score)
			}
		} else if r.eligible() {
			candS = append(candS, r.score)
		} else {
			candOK = false
		}
	}
	if !candOK {
		return incS, nil, nil
	}
	return incS, candS, nil
}

// versus says how the winner's score compares with a loser's:
// "SGLang 6938.12 > 6927.18 tok/s", or "SGLang measured the same
// (5833.93 tok/s), and the first in the stage's order goes on" when they
// are equal at the precision shown.
func versus(winner string, w, loser float64, unit string) string {
	if sameShown(w, loser) {
		return fmt.Sprintf("%s measured the same (%.2f %s), and the first in the stage's order goes on", winner, w, unit)
	}
	return fmt.Sprintf("%s %.2f > %.2f %s", winner, w, loser, unit)
}

// sameShown says whether two scores print the same at the two decimals
// the reasons show: "x > x" would read as false.
func sameShown(a, b float64) bool { return fmt.Sprintf("%.2f", a) == fmt.Sprintf("%.2f", b) }

// tie says when two means lie within the noise floor thr of each other:
// the higher goes on, but the measurements do not tell them apart.
func tie(w, loser, thr float64) string {
	g, ok := relGain(w, loser)
	if !ok || g > thr || sameShown(w, loser) {
		return "" // versus says "the same"
	}
	return fmt.Sprintf(", a tie within the noise floor (%.2f%% <= %.2f%%): the higher mean goes on", 100*g, 100*thr)
}

// repeatOne runs r Repeats times in all (its first run reused) and returns
// its scores, nil when a repeat failed.
func (l *Lab) repeatOne(ctx context.Context, stage string, r *result) ([]float64, error) {
	res, err := l.runSpecs(ctx, l.repeatSpecs(stage, r))
	if err != nil {
		return nil, err
	}
	out := []float64{r.score}
	for _, x := range res {
		if !x.eligible() {
			return nil, nil
		}
		out = append(out, x.score)
	}
	return out, nil
}

// repeatSpecs are r's repeats beyond its first run, on the tuning workload.
func (l *Lab) repeatSpecs(stage string, r *result) []TrialSpec {
	var specs []TrialSpec
	for rep := 1; rep < l.Spec.Repeats; rep++ {
		specs = append(specs, l.trialSpec(stage, r.spec.Point, r.spec.Config, *l.Spec.Tuning, rep))
	}
	return specs
}

// repeatScores returns the stored repeat scores of a result's config.
func (l *Lab) repeatScores(r *result) []float64 {
	if r == nil || l.Spec.Repeats <= 1 {
		return nil
	}
	var out []float64
	for rep := 0; rep < l.Spec.Repeats; rep++ {
		t, ok := l.used(measurementKey(TrialKey("", r.spec.Config, *l.Spec.Tuning, rep)))
		if !ok {
			continue
		}
		if rr := l.evaluate(r.spec, t); rr.eligible() {
			out = append(out, rr.score)
		}
	}
	if len(out) <= 1 {
		return nil
	}
	return out
}

// incumbentScore is the mean of the stored repeats of r (its score alone
// when it has none).
func (l *Lab) incumbentScore(r *result) float64 {
	if r == nil {
		return 0
	}
	if rs := l.repeatScores(r); len(rs) > 0 {
		return mean(rs)
	}
	return r.score
}

// NoiseFloor is the relative noise floor from repeated measurements of two
// configurations: twice the larger relative spread ((max-min)/mean) of the
// two samples. With one run each it is 0 (nothing measured). Twice the
// spread makes a difference count only when it exceeds what reruns of the
// same config already show, with margin.
func NoiseFloor(a, b []float64) float64 {
	return 2 * math.Max(relSpread(a), relSpread(b))
}

func relSpread(x []float64) float64 {
	if len(x) < 2 {
		return 0
	}
	lo, hi := x[0], x[0]
	for _, v := range x {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	m := mean(x)
	if m <= 0 {
		return 0
	}
	return (hi - lo) / m
}

func mean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// combinations is the "&&" step: each stage's best candidate that gained on
// its own but was not kept (below the floor) is tried together with the
// others, all subsets of two or more, as the 9B report combines
// performance mode, max-num-seqs and max-num-batched-tokens.
func (l *Lab) combinations(ctx context.Context, inc *result, incScore float64) (*result, float64, error) {
	if inc == nil {
		return inc, incScore, nil
	}
	type kv struct{ k, v string }
	var helpful []kv
	for _, st := range l.sum.Stages {
		if st.Kept != "" || st.Knob == labspec.KnobEngine {
			continue
		}
		var best *Candidate
		for i := range st.Candidates {
			c := &st.Candidates[i]
			if c.Decision == "failed" || c.Why == report.WhyLowSuccess || c.Gain <= 0 {
				continue
			}
			if best == nil || c.Gain > best.Gain {
				best = c
			}
		}
		if best != nil {
			if v, ok := best.Point[st.Knob]; ok {
				helpful = append(helpful, kv{st.Knob, v})
			}
		}
	}
	if len(helpful) > 4 {
		helpful = helpful[:4]
	}
	if len(helpful) < 2 {
		return inc, incScore, nil
	}
	var pts []labspec.Point
	// A subset that starts a server already measured (vLLM's throughput
	// mode with max_num_seqs 2048 on an H100 is throughput mode alone) is
	// not measured again.
	dev := l.Spec.Hardware.Device
	seen := map[string]bool{labspec.SameServer(inc.spec.Config, dev): true}
	for _, st := range l.sum.Stages {
		for _, c := range st.Candidates {
			if cfg, ok := l.Spec.Config(c.Point); ok && c.TrialKey != "" {
				seen[labspec.SameServer(cfg, dev)] = true
			}
		}
	}
	for mask := 1; mask < 1<<len(helpful); mask++ {
		if popcount(mask) < 2 {
			continue
		}
		p := inc.spec.Point.Clone()
		for i, h := range helpful {
			if mask&(1<<i) != 0 {
				p = p.With(h.k, h.v)
			}
		}
		cfg, ok := l.Spec.Config(p)
		if !ok || labspec.Unsupported(cfg) != "" {
			continue
		}
		if srv := labspec.SameServer(cfg, dev); !seen[srv] {
			seen[srv] = true
			pts = append(pts, p)
		}
	}
	ss := StageSummary{Name: "combinations", Knob: "&&", Incumbent: l.candidate(inc, l.repeatScores(inc))}
	defer func() { l.sum.Stages = append(l.sum.Stages, ss) }()
	if len(pts) == 0 {
		ss.Skipped = "nothing to try: every combination starts a server already measured"
		if sk, ok := l.Progress.(stageSkipper); ok {
			sk.StageSkipped("combinations", ss.Skipped)
		}
		return inc, incScore, nil
	}
	if l.Progress != nil {
		l.Progress.Stage("combinations", len(pts))
	}
	res, err := l.measureMany(ctx, "combinations", pts, *l.Spec.Tuning, 0)
	if err != nil {
		ss.Candidates = append(ss.Candidates, l.undecided(pts, res, err)...)
		return inc, incScore, err
	}
	newInc, newScore, floor, err := l.decide(ctx, "combinations", inc, incScore, res, &ss.Candidates)
	ss.NoiseFloor = floor
	if newInc != inc {
		ss.Kept = newInc.spec.Name
	}
	return newInc, newScore, err
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// generalize runs the baseline and the winner on every generalization
// workload. The trial budget does not stop it: the comparison is the point
// of the report.
func (l *Lab) generalize(ctx context.Context, basePt labspec.Point, win *result) error {
	if len(l.Spec.Generalization) == 0 {
		return nil
	}
	if l.Progress != nil {
		l.Progress.Stage("generalization", 2*len(l.Spec.Generalization))
	}
	// The baseline on every workload, then the winner on every workload:
	// each config's server serves all its workloads.
	winPt := basePt
	if win != nil {
		winPt = win.spec.Point
	}
	nw := len(l.Spec.Generalization)
	var specs []TrialSpec
	for _, p := range []labspec.Point{basePt, winPt} {
		cfg, _ := l.Spec.Config(p)
		specs = append(specs, l.generalizationSpecs(p, cfg)...)
	}
	res, err := l.runSpecsNoBudget(ctx, specs)
	if err != nil {
		return err
	}
	for i, w := range l.Spec.Generalization {
		b, wn := res[i], res[nw+i]
		g := GeneralizationPair{Workload: w.Name, Baseline: l.candidate(b, nil), Winner: l.candidate(wn, nil)}
		if gain, ok := relGain(wn.score, b.score); ok && b.eligible() && wn.eligible() {
			g.Gain, g.Winner.Gain = gain, gain
		}
		l.sum.Generalization = append(l.sum.Generalization, g)
	}
	return nil
}

// candidate turns a result into its summary entry.
func (l *Lab) candidate(r *result, repeats []float64) *Candidate {
	if r == nil {
		return nil
	}
	c := &Candidate{
		Name: r.spec.Name, Point: map[string]string(r.spec.Point.Clone()), ConfigHash: labspec.ConfigHash(r.spec.Config),
		Command: r.trial.Command, TrialKey: r.trial.Key, GPUs: labspec.GPUs(r.spec.Config), Score: r.score,
		TotalThroughput: r.m.res().TotalTokenThroughput, MeanTPOTMs: r.m.res().MeanTPOTMs, P99TPOTMs: r.m.P99TPOTMs(),
		SuccessRate: r.m.SuccessRate(), FailureClass: r.failed,
	}
	if len(repeats) > 1 {
		c.RepeatScores, c.Score = repeats, mean(repeats)
	}
	if r.why != "" {
		c.Reason, c.Why = r.why, r.kind
	}
	return c
}

func (l *Lab) progressBest(r *result, score float64) {
	if l.Progress != nil && r != nil {
		l.Progress.Best(r.spec.Name, score, ObjectiveUnit(l.Spec.Objective))
	}
}

// Label is a human name for a point: "SGLang + FP8 + fa3".
func Label(p labspec.Point) string {
	parts := []string{engine.DisplayName(p[labspec.KnobEngine])}
	for _, k := range labspec.KnobOrder[1:] {
		v, ok := p[k]
		if !ok || labspec.IsDefault(v) {
			continue
		}
		switch k {
		case labspec.KnobQuantization:
			parts = append(parts, strings.ToUpper(strings.TrimSuffix(v, "-checkpoint")))
		case labspec.KnobAttentionBackend, labspec.KnobParallelism:
			parts = append(parts, v)
		default:
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, " + ")
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// hasStored says whether the store holds measurements an earlier
// invocation made that this one has not used yet (a resumed lab).
func (l *Lab) hasStored() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.stored) > 0
}

// used returns a tuning measurement only if this invocation has already
// asked for it (run or taken from the store). A resumed lab must decide
// with what the interrupted one knew at the same point, not with trials the
// store holds from later in the run, or it would take another path.
func (l *Lab) used(mk string) (store.Trial, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.tuning[mk] {
		return store.Trial{}, false
	}
	t, ok := l.done[mk]
	return t, ok
}
