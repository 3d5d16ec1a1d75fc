package labprogress

import (
	"fmt"
	"strings"
	"time"

	"github.com/perflab/perflab/internal/report"
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
	Stage      string `json:"stage,omitempty"`
	Candidates int    `json:"candidates,omitempty"`
	// Skipped says why a stage runs no candidate though it had some: each
	// was one its engine cannot run, or one the guide ruled out (stage
	// events).
	Skipped string `json:"skipped,omitempty"`
	// NotRun names the stage's values it runs no trial for, and why in a
	// few words ("SGLang + fa3: the incumbent's own server"), when it runs
	// the others (stage events).
	NotRun []string    `json:"not_run,omitempty"`
	Trial  *TrialEvent `json:"trial,omitempty"`

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
	Summary *report.Summary `json:"-"`
}

// ETA returns the ETA as a duration rounded to the second, and whether
// there is one.
func (e Event) ETA() (time.Duration, bool) {
	if e.ETASeconds == nil {
		return 0, false
	}
	return time.Duration(*e.ETASeconds * float64(time.Second)).Round(time.Second), true
}

// ETAText is the ETA as the terminal prints it ("-" without one).
func (e Event) ETAText() string {
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

// StageLine is the line a stage event prints: its candidates, or why it
// runs none.
func (e Event) StageLine() string {
	if e.Skipped != "" {
		return fmt.Sprintf("== stage %s: skipped, %s\n", e.Stage, e.Skipped)
	}
	noun := "candidates"
	if e.Candidates == 1 {
		noun = "candidate"
	}
	if len(e.NotRun) > 0 {
		return fmt.Sprintf("== stage %s: %d %s; not run: %s\n", e.Stage, e.Candidates, noun, strings.Join(e.NotRun, "; "))
	}
	return fmt.Sprintf("== stage %s: %d %s\n", e.Stage, e.Candidates, noun)
}
