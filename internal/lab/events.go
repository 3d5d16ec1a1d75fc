package lab

import (
	"sync"
	"time"

	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/loadsearch"
	"github.com/perflab/perflab/internal/store"
)

// EventType names a progress event.
type EventType string

// The lab's progress events, in the order a lab emits them: one start, then
// stages, trials and incumbents, then one done.
const (
	EventStart        EventType = "start"
	EventStage        EventType = "stage"
	EventTrialStarted EventType = "trial_started"
	EventTrialEnded   EventType = "trial_ended"
	EventBest         EventType = "best"
	EventDone         EventType = "done"
)

// Score is a named configuration's objective.
type Score struct {
	Name  string  `json:"name"`
	Score float64 `json:"score"`
	Unit  string  `json:"unit,omitempty"`
}

// TrialEvent is the trial a trial_started or trial_ended event is about.
type TrialEvent struct {
	Key      string `json:"key"`
	Name     string `json:"name"`
	Stage    string `json:"stage,omitempty"`
	Workload string `json:"workload,omitempty"`
	Repeat   int    `json:"repeat"`
	// Status, FailureClass, Score and GPUHours are set when it ended.
	Status       string  `json:"status,omitempty"`
	FailureClass string  `json:"failure_class,omitempty"`
	Score        float64 `json:"score,omitempty"`
	// Reused is true for a trial taken from the store (a resumed run).
	Reused   bool    `json:"reused,omitempty"`
	GPUHours float64 `json:"gpu_hours,omitempty"`
	// SLO is a load point's verdict under max_load_under_slo ("within",
	// "over: ttft p99 2310.0 ms > 2000 ms", "not scored: client fell
	// behind ..."): a point has no score of its own, its config's score is
	// the sustainable load the search ends on.
	SLO string `json:"slo,omitempty"`
}

// Event is one step of a lab's progress with the lab's state after it. The
// state (counts, ETA, incumbent, GPU-hours) is computed once, by Events,
// for every consumer: the terminal's lines and bar and the server's event
// stream render the same values, so they cannot disagree.
type Event struct {
	Type EventType `json:"type"`
	Time time.Time `json:"time"`

	// Set on start.
	Name      string `json:"name,omitempty"`
	Model     string `json:"model,omitempty"`
	Runtime   string `json:"runtime,omitempty"`
	Objective string `json:"objective,omitempty"`
	GPU       string `json:"gpu,omitempty"`
	GPUs      int    `json:"gpus,omitempty"`
	// Engines lists the engines with their versions ("vllm 0.11.0, ...").
	Engines string `json:"engines,omitempty"`
	Stored  int    `json:"stored,omitempty"`

	// Stage is the current stage; Candidates its size (stage events).
	Stage      string      `json:"stage,omitempty"`
	Candidates int         `json:"candidates,omitempty"`
	Trial      *TrialEvent `json:"trial,omitempty"`

	// Done counts the trials ended so far (stored ones included), Ran
	// those run now; Planned is the plan's estimate, never below Done.
	Done    int `json:"done"`
	Ran     int `json:"ran"`
	Planned int `json:"planned"`
	// ETASeconds is the time left at the rate of the trials run so far:
	// nil before the first trial ran or once the plan is reached.
	ETASeconds *float64 `json:"eta_seconds"`
	// Incumbent is the configuration kept so far (what the next stages
	// build on); Top the highest score measured on the tuning workload,
	// when another one.
	Incumbent *Score  `json:"incumbent,omitempty"`
	Top       *Score  `json:"top,omitempty"`
	Unit      string  `json:"unit,omitempty"`
	GPUHours  float64 `json:"gpu_hours"`
	// Elapsed is the lab's wall time so far.
	ElapsedSeconds float64 `json:"elapsed_seconds"`

	// Set on done.
	Winner  *Score  `json:"winner,omitempty"`
	Gain    float64 `json:"gain,omitempty"`
	Stopped string  `json:"stopped,omitempty"`
	// Summary is the lab's summary (done only; not sent on the wire, the
	// run carries it).
	Summary *Summary `json:"-"`
}

// ETA returns the ETA as a duration rounded to the second, and whether
// there is one.
func (e Event) ETA() (time.Duration, bool) {
	if e.ETASeconds == nil {
		return 0, false
	}
	return time.Duration(*e.ETASeconds * float64(time.Second)).Round(time.Second), true
}

// etaText is the ETA as the terminal prints it ("-" without one).
func (e Event) etaText() string {
	if d, ok := e.ETA(); ok {
		return d.String()
	}
	return "-"
}

// Sink consumes progress events. Events calls it in event order, one at a
// time, so a sink must return quickly.
type Sink interface {
	Event(e Event)
}

// SinkFunc is a function as a Sink.
type SinkFunc func(e Event)

// Event implements Sink.
func (f SinkFunc) Event(e Event) { f(e) }

// Events is the lab's Progress as a stream: it turns each call into an
// Event carrying the lab's state and hands it to every sink (the terminal's
// display, the server's stream). One Events serves one lab at a time.
type Events struct {
	mu    sync.Mutex
	sinks []Sink

	start   time.Time
	aside   time.Duration
	planned int
	n, ran  int
	stage   string
	unit    string
	best    *Score
	top     *Score
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
)

// NewEvents returns an Events feeding sinks.
func NewEvents(sinks ...Sink) *Events { return &Events{sinks: sinks} }

// Add adds a sink; it sees the events from the next one on.
func (e *Events) Add(s Sink) {
	e.mu.Lock()
	e.sinks = append(e.sinks, s)
	e.mu.Unlock()
}

// emit fills in the state and hands ev to the sinks; callers hold mu.
func (e *Events) emit(ev Event) {
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
	e.emit(Event{Type: EventStart, Name: s.Name, Model: s.Model, Runtime: s.Runtime, Objective: s.Objective.Metric,
		GPU: s.Hardware.GPU, GPUs: s.Hardware.Count, Engines: s.EngineVersionsText(), Stored: stored})
}

// Stage implements Progress.
func (e *Events) Stage(name string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stage = name
	e.emit(Event{Type: EventStage, Candidates: n})
}

// TrialStarted implements trialStarter.
func (e *Events) TrialStarted(t TrialSpec) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.emit(Event{Type: EventTrialStarted, Trial: &TrialEvent{Key: t.Key, Name: t.Name, Stage: t.Stage, Workload: t.Workload.Name, Repeat: t.Repeat}})
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
	te := &TrialEvent{Key: rec.Key, Name: t.Name, Stage: t.Stage, Workload: t.Workload.Name, Repeat: t.Repeat,
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
			e.top = &Score{Name: t.Name, Score: score, Unit: e.unit}
		}
	}
	e.emit(Event{Type: EventTrialEnded, Trial: te})
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
	e.best = &Score{Name: name, Score: score, Unit: unit}
	e.emit(Event{Type: EventBest})
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
	ev := Event{Type: EventDone, Summary: sum}
	if sum != nil {
		if sum.Winner != nil {
			ev.Winner = &Score{Name: sum.Winner.Name, Score: sum.Winner.Score, Unit: sum.Unit}
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
