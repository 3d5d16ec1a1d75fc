package lab

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/report"
	"github.com/perflab/perflab/internal/store"
)

// trialSpec builds the trial for a point on a workload.
func (l *Lab) trialSpec(stage string, p labspec.Point, cfg engine.Config, w labspec.Workload, rep int) TrialSpec {
	return TrialSpec{
		Key: TrialKey(stage, cfg, w, rep), Stage: stage, Name: Label(p),
		Point: p.Clone(), Config: cfg, Workload: w, Repeat: rep,
	}
}

func (l *Lab) measureOne(ctx context.Context, stage string, p labspec.Point, w labspec.Workload, rep int) (*result, error) {
	rs, err := l.measureMany(ctx, stage, []labspec.Point{p}, w, rep)
	if err != nil {
		return nil, err
	}
	return rs[0], nil
}

// measureMany runs points (already checked to apply) on one workload.
func (l *Lab) measureMany(ctx context.Context, stage string, pts []labspec.Point, w labspec.Workload, rep int) ([]*result, error) {
	specs := make([]TrialSpec, 0, len(pts))
	for _, p := range pts {
		cfg, ok := l.Spec.Config(p)
		if !ok {
			return nil, fmt.Errorf("lab: %s: %s does not apply", stage, p)
		}
		specs = append(specs, l.trialSpec(stage, p, cfg, w, rep))
	}
	return l.runSpecs(ctx, specs)
}

// runSpecs runs trials under the budget.
func (l *Lab) runSpecs(ctx context.Context, specs []TrialSpec) ([]*result, error) {
	return kindOf(l.Spec.Objective).run(ctx, l, specs, true)
}

// runSpecsNoBudget runs trials the budget does not stop (generalization).
func (l *Lab) runSpecsNoBudget(ctx context.Context, specs []TrialSpec) ([]*result, error) {
	return kindOf(l.Spec.Objective).run(ctx, l, specs, false)
}

// likelyWinnerLast orders the trials to run (not the results, nor which
// ones the budget allowed) by the guide's predicted score on the tuning
// workload, lowest first. The candidate of a batch that beats the incumbent
// gets its repeats next, and on a GPU that holds one server at a time only
// the last one measured is still up: run last, the likely winner serves its
// repeats without a second start. Trials of the same config keep their
// order; one the guide cannot predict runs first; a batch off the tuning
// workload keeps the spec's order.
func (l *Lab) likelyWinnerLast(ctx context.Context, specs []TrialSpec, todo []int) []int {
	if l.guide == nil || len(todo) < 2 {
		return todo
	}
	tuning := l.Spec.Tuning.KeyName()
	score := map[string]float64{}
	for _, i := range todo {
		t := specs[i]
		if t.Workload.KeyName() != tuning {
			return todo // a generalization batch: one config, its order is the spec's
		}
		h := labspec.ConfigHash(t.Config)
		if _, ok := score[h]; ok {
			continue
		}
		score[h] = math.Inf(-1)
		if o, err := l.guide.Guess(ctx, t.Config, *l.Spec.Tuning, l.Spec.Search.GuidePrompts); err == nil {
			if sc := scoreUnder(l.Spec.Objective, o, labspec.GPUs(t.Config)); sc > 0 && !math.IsInf(sc, 0) {
				score[h] = sc
			}
		}
	}
	if len(score) < 2 {
		return todo
	}
	out := slices.Clone(todo)
	slices.SortStableFunc(out, func(a, b int) int {
		return cmp.Compare(score[labspec.ConfigHash(specs[a].Config)], score[labspec.ConfigHash(specs[b].Config)])
	})
	return out
}

// run2 runs trials in parallel where the GPUs allow, reusing every finished
// trial from the store, and saves each new one as it ends.
func (l *Lab) run2(ctx context.Context, specs []TrialSpec, budget bool) ([]*result, error) {
	out := make([]*result, len(specs))
	var todo []int
	// The same measurement asked twice in one batch (the baseline and a
	// winner that is the baseline) runs once.
	first := map[string]int{}
	dup := map[int]int{}
	for i, t := range specs {
		mk := measurementKey(t.Key)
		if j, ok := first[mk]; ok {
			dup[i] = j
			continue
		}
		first[mk] = i
		l.mu.Lock()
		prev, ok := l.done[mk]
		l.mu.Unlock()
		if ok {
			l.mu.Lock()
			// A measurement is "from the store" the first time this
			// invocation uses one an earlier invocation stored; asked for
			// again (a later stage, a repeat pair) it is neither a trial
			// nor news.
			fromStore := l.stored[mk]
			delete(l.stored, mk)
			if fromStore {
				l.reused++
			}
			if t.Workload.KeyName() == l.Spec.Tuning.KeyName() && t.Stage != "grid" {
				l.tuning[mk] = true
			}
			l.mu.Unlock()
			out[i] = l.evaluate(t, prev)
			if l.Progress != nil && fromStore {
				l.Progress.Trial(t, prev, out[i].score, true)
			}
			continue
		}
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		for i, j := range dup {
			r := *out[j]
			r.spec = specs[i]
			out[i] = &r
		}
		return out, nil
	}
	truncated := false
	admitted := 0 // budget places held, under l.mu
	if budget {
		allowed, err := l.budgetAllows(len(todo))
		if err != nil {
			return nil, err
		}
		if allowed < len(todo) {
			todo, truncated = todo[:allowed], true
		}
		// Each admitted trial gives its place back as it is counted in
		// l.tuning; those that failed or never started, at the end.
		admitted = allowed
		defer func() { l.release(admitted) }()
	}
	if l.Spec.RuntimeKind().Servers() {
		todo = l.likelyWinnerLast(ctx, specs, todo)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(specs))
	for _, i := range todo {
		t := specs[i]
		gpus := 1
		if l.Spec.RuntimeKind().Servers() {
			gpus = labspec.GPUs(t.Config)
		}
		if err := l.sem.acquire(ctx, gpus); err != nil {
			errs[i] = err
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer l.sem.release(gpus)
			if ts, ok := l.Progress.(trialStarter); ok {
				ts.TrialStarted(t)
			}
			started := time.Now()
			m, err := l.Runner.Run(ctx, t)
			if err != nil {
				errs[i] = err
				return
			}
			rec, err := trialRecord(t, m, started)
			if err != nil {
				errs[i] = fmt.Errorf("lab: trial %s: %w", t.Key, err)
				return
			}
			rec.RunID = l.run.ID
			l.mu.Lock()
			rec.Attempt = l.attempts[measurementKey(t.Key)] + 1
			l.mu.Unlock()
			if rec.Ended.IsZero() {
				rec.Ended = time.Now()
			}
			// Saved with a context that a cancel does not cut, so a finished
			// trial is never lost to a Ctrl-C.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := l.Store.SaveTrial(sctx, &rec); err != nil {
				errs[i] = fmt.Errorf("lab: save trial %s: %w", rec.Key, err)
				return
			}
			mk := measurementKey(t.Key)
			l.mu.Lock()
			l.done[mk] = rec
			l.ran++
			if t.Workload.KeyName() == l.Spec.Tuning.KeyName() && t.Stage != "grid" {
				l.tuning[mk] = true
			}
			if admitted > 0 {
				admitted--
				l.pending--
			}
			l.mu.Unlock()
			out[i] = l.evaluate(t, rec)
			if l.Progress != nil {
				l.Progress.Trial(t, rec, out[i].score, false)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	for i, j := range dup {
		if out[j] != nil {
			r := *out[j]
			r.spec = specs[i]
			out[i] = &r
		}
	}
	if truncated {
		// What fit the budget is stored; the caller stops here.
		return out, ErrBudget
	}
	return out, nil
}

// budgetAllows says how many of n more tuning trials fit the budget, and
// ErrBudget when none does. Those it allows are pending until release:
// trials admitted but not ended count against max_trials.
func (l *Lab) budgetAllows(n int) (int, error) {
	b := l.Spec.Budget
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.hoursLeftLocked(); err != nil {
		return 0, err
	}
	if b.MaxTrials > 0 {
		left := b.MaxTrials - len(l.tuning) - l.pending
		if left <= 0 {
			l.stopped = "budget: max_trials"
			return 0, ErrBudget
		}
		if left < n {
			l.stopped = "budget: max_trials"
			n = left
		}
	}
	l.pending += n
	return n, nil
}

// release gives back n places budgetAllows admitted: those of trials
// that did not end up in l.tuning.
func (l *Lab) release(n int) {
	l.mu.Lock()
	l.pending -= n
	l.mu.Unlock()
}

// hoursLeft is ErrBudget once budget.max_hours is spent.
func (l *Lab) hoursLeft() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hoursLeftLocked()
}

func (l *Lab) hoursLeftLocked() error {
	if h := l.Spec.Budget.MaxHours; h > 0 && (l.spent+time.Since(l.start)).Hours() >= h {
		l.stopped = "budget: max_hours"
		return ErrBudget
	}
	return nil
}

// evaluate reads a stored trial: its observation, score and eligibility
// under the keep rules (no failure, success rate, SLO).
func (l *Lab) evaluate(t TrialSpec, rec store.Trial) *result {
	r := &result{spec: t, trial: rec}
	if rec.Status != "ok" {
		r.failed = rec.FailureClass
		if r.failed == "" {
			r.failed = FailCrashDuringBench
		}
		r.why, r.kind = "crash: "+r.failed, report.WhyFailed
		if rec.Reason != "" {
			r.why += " (" + firstLine(rec.Reason) + ")"
		}
		return r
	}
	m, err := measurementOf(rec)
	if err != nil {
		r.failed, r.why, r.kind = FailCrashDuringBench, "unreadable result: "+err.Error(), report.WhyFailed
		return r
	}
	r.m = m
	obj := l.Spec.Objective
	r.score = scoreUnder(obj, m, labspec.GPUs(t.Config))
	if sr := m.SuccessRate(); sr < l.Spec.MinSuccessRate {
		r.why, r.kind = fmt.Sprintf("success rate %.1f%% < %.1f%%", 100*sr, 100*l.Spec.MinSuccessRate), report.WhyLowSuccess
		return r
	}
	// A figure the objective or an SLO needs but the result lacks reads as
	// 0 and would pass a P99 bound or score every trial 0; say so instead.
	if k := missingFigures(obj, m); k != "" {
		r.why, r.kind = "SLO: the result has no "+k+" to check it against", report.WhySLO
		return r
	}
	if v := sloViolation(obj, m); v != "" {
		r.why, r.kind = "SLO: "+v, report.WhySLO
		return r
	}
	// A score that is not a positive number cannot be compared (a gain
	// over it is NaN or infinite): not eligible, with the reason.
	if !(r.score > 0) || math.IsInf(r.score, 0) {
		r.why, r.kind = fmt.Sprintf("objective is %.4g %s", r.score, ObjectiveUnit(obj))+kindOf(obj).noScoreHint(), report.WhyNoScore
	}
	return r
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	if len(s) > 160 {
		return s[:160]
	}
	return s
}

// gpuSem admits trials while their GPUs fit and at most slots run at once.
type gpuSem struct {
	mu    sync.Mutex
	cond  *sync.Cond
	cap   int
	free  int
	slots int
	// conc is how many trials may run at once: slots when none runs. It
	// never changes, so it is read without the lock (slots is not: the
	// joint search's guide read it while trials took and gave back slots).
	conc int
}

func newGPUSem(units, maxConc int) *gpuSem {
	units, maxConc = max(units, 1), max(maxConc, 1)
	s := &gpuSem{cap: units, free: units, slots: maxConc, conc: maxConc}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// clip keeps a trial wider than the node runnable (alone).
func (s *gpuSem) clip(n int) int { return min(max(n, 1), s.cap) }

func (s *gpuSem) acquire(ctx context.Context, n int) error {
	n = s.clip(n)
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for (s.free < n || s.slots == 0) && ctx.Err() == nil {
		s.cond.Wait()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.free -= n
	s.slots--
	return nil
}

func (s *gpuSem) release(n int) {
	n = s.clip(n)
	s.mu.Lock()
	s.free += n
	s.slots++
	s.cond.Broadcast()
	s.mu.Unlock()
}
