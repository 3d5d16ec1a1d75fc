package lab

import (
	"sync"
	"time"

	"github.com/perflab/perflab/internal/labprogress"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/loadsearch"
	"github.com/perflab/perflab/internal/store"
)

// Events is the lab's Progress as a stream: it turns each call into an
// Event carrying the lab's state and hands it to every sink (the terminal's
// display, the server's stream). One Events serves one lab at a time.
type Events struct {
	mu    sync.Mutex
	sinks []labprogress.Sink

	start   time.Time
	aside   time.Duration
	planned int
	n, ran  int
	stage   string
	unit    string
	best    *labprogress.Score
	top     *labprogress.Score
	// tuning names the tuning workload: only its trials compete for top.
	tuning string
	// slo judges load points, under max_load_under_slo.
	slo  *loadsearch.SLO
	gpuH float64
}

var (
	_ Progress     = (*Events)(nil)
	_ asider       = (*Events)(nil)
	_ trialStarter = (*Events)(nil)
	_ searchEnder  = (*Events)(nil)
	_ stageSkipper = (*Events)(nil)
	_ stageNoter   = (*Events)(nil)
)

// NewEvents returns an Events feeding sinks.
func NewEvents(sinks ...labprogress.Sink) *Events { return &Events{sinks: sinks} }

// Add adds a sink; it sees the events from the next one on.
func (e *Events) Add(s labprogress.Sink) {
	e.mu.Lock()
	e.sinks = append(e.sinks, s)
	e.mu.Unlock()
}

// emit fills in the state and hands ev to the sinks; callers hold mu.
func (e *Events) emit(ev labprogress.Event) {
	ev.Time = time.Now()
	if ev.Stage == "" {
		ev.Stage = e.stage
	}
	ev.Done, ev.Ran, ev.Planned = e.n, e.ran, max(e.planned, e.n)
	if e.ran > 0 && e.planned > e.n {
		per := time.Since(e.start.Add(e.aside)) / time.Duration(e.ran)
		s := (per * time.Duration(e.planned-e.n)).Seconds()
		ev.ETASeconds = &s
	}
	if e.best != nil {
		b := *e.best
		ev.Incumbent = &b
	}
	if e.top != nil && (e.best == nil || e.top.Name != e.best.Name) {
		t := *e.top
		ev.Top = &t
	}
	ev.Unit, ev.GPUHours = e.unit, e.gpuH
	if !e.start.IsZero() {
		ev.ElapsedSeconds = time.Since(e.start).Seconds()
	}
	for _, s := range e.sinks {
		s.Event(ev)
	}
}

// Start implements Progress.
func (e *Events) Start(s *labspec.Spec, planned, stored int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.start, e.aside, e.planned, e.n, e.ran = time.Now(), 0, planned, 0, 0
	e.stage, e.best, e.top, e.gpuH, e.unit = "", nil, nil, 0, ObjectiveUnit(s.Objective)
	e.slo, e.tuning = nil, ""
	if s.Tuning != nil {
		e.tuning = s.Tuning.PathKeyName()
	}
	e.slo = kindOf(s.Objective).loadSLO(s.Objective)
	e.emit(labprogress.Event{Type: labprogress.EventStart, Name: s.Name, Model: s.Model, Runtime: s.Runtime, Objective: s.Objective.Metric,
		GPU: s.Hardware.GPU, GPUs: s.Hardware.Count, Engines: s.EngineVersionsText(), Stored: stored})
}

// Stage implements Progress.
func (e *Events) Stage(name string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stage = name
	e.emit(labprogress.Event{Type: labprogress.EventStage, Candidates: n})
}

// StageNotRun implements stageNoter.
func (e *Events) StageNotRun(name string, n int, notRun []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stage = name
	e.emit(labprogress.Event{Type: labprogress.EventStage, Candidates: n, NotRun: notRun})
}

// StageSkipped implements stageSkipper.
func (e *Events) StageSkipped(name, why string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stage = name
	e.emit(labprogress.Event{Type: labprogress.EventStage, Skipped: why})
}

// TrialStarted implements trialStarter.
func (e *Events) TrialStarted(t TrialSpec) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.emit(labprogress.Event{Type: labprogress.EventTrialStarted, Trial: &labprogress.TrialEvent{Key: t.Key, Name: t.Name, Stage: t.Stage, Workload: t.Workload.Name, Repeat: t.Repeat}})
}

// Trial implements Progress.
func (e *Events) Trial(t TrialSpec, rec store.Trial, score float64, reused bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	// Under max_load_under_slo the plan and budget.max_trials count
	// searched configs, so the count does too (SearchEnded): counting
	// points against a plan of configs read "[56/≤56]" past "at most 55".
	if t.Workload.Point == nil || e.slo == nil {
		e.n++
		if !reused {
			e.ran++
		}
	}
	gh := rec.Cost.GPUHours()
	e.gpuH += gh
	te := &labprogress.TrialEvent{Key: rec.Key, Name: t.Name, Stage: t.Stage, Workload: t.Workload.Name, Repeat: t.Repeat,
		Status: rec.Status, FailureClass: rec.FailureClass, Reused: reused, GPUHours: gh}
	switch {
	case rec.Status != "ok":
	case t.Workload.Point != nil && e.slo != nil:
		te.SLO = pointVerdict(t.Workload.Point, rec.Result, *e.slo)
	default:
		te.Score = score
		// A generalization workload's score is on another scale (a short
		// prompt runs at twice ShareGPT's tok/s): it is no candidate's.
		if t.Workload.PathKeyName() != e.tuning {
			break
		}
		if e.top == nil || score > e.top.Score {
			e.top = &labprogress.Score{Name: t.Name, Score: score, Unit: e.unit}
		}
	}
	e.emit(labprogress.Event{Type: labprogress.EventTrialEnded, Trial: te})
}

// pointVerdict says how a load point's result stands against the SLO, as
// the search will judge it.
func pointVerdict(lp *labspec.LoadPoint, result []byte, slo loadsearch.SLO) string {
	p, err := pointOf(lp, result)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	p, _ = slo.Judge(p, slo.MinRequests())
	switch {
	case !p.Scored():
		return "not scored: " + p.Flag
	case !p.Meets:
		return "over: " + p.Why
	}
	return "within"
}

// Best implements Progress.
func (e *Events) Best(name string, score float64, unit string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.best = &labprogress.Score{Name: name, Score: score, Unit: unit}
	e.emit(labprogress.Event{Type: labprogress.EventBest})
}

// Aside implements asider.
func (e *Events) Aside(d time.Duration) {
	e.mu.Lock()
	e.aside += d
	e.mu.Unlock()
}

// Done implements Progress.
func (e *Events) Done(sum *Summary) {
	e.mu.Lock()
	defer e.mu.Unlock()
	// The plan was an estimate: at the end what ran is the plan, and
	// there is no time left.
	e.planned = e.n
	ev := labprogress.Event{Type: labprogress.EventDone, Summary: sum}
	if sum != nil {
		if sum.Winner != nil {
			ev.Winner = &labprogress.Score{Name: sum.Winner.Name, Score: sum.Winner.Score, Unit: sum.Unit}
		}
		ev.Gain, ev.Stopped = sum.Gain, sum.Stopped
	}
	e.emit(ev)
}

// SearchEnded implements searchEnder: one more config searched, with
// reused true when its every point came from the store.
func (e *Events) SearchEnded(_ TrialSpec, reused bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if !reused {
		e.ran++
	}
}

// searchEnder is a Progress told when a config's load search ends: under
// max_load_under_slo the unit the plan counts.
type searchEnder interface {
	SearchEnded(t TrialSpec, reused bool)
}

// trialStarter is a Progress told when a trial starts running (not when
// one is taken from the store).
type trialStarter interface {
	TrialStarted(t TrialSpec)
}
