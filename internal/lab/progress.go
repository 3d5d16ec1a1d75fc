package lab

import (
	"fmt"
	"io"
	"time"

	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/report"
	"github.com/perflab/perflab/internal/store"
)

// Progress receives the lab's events, for a terminal or a log.
type Progress interface {
	// Start announces the run: planned trials (an estimate) and how many
	// finished trials the store already holds.
	Start(s *labspec.Spec, planned, stored int)
	// Stage announces a stage with n candidates.
	Stage(name string, n int)
	// Trial reports one finished trial; reused is true when it came from
	// the store (a resumed run).
	Trial(t TrialSpec, rec store.Trial, score float64, reused bool)
	// Best reports a new incumbent: the configuration kept so far (which
	// the next stages build on), not merely the highest figure measured.
	Best(name string, score float64, unit string)
	// Done reports the end.
	Done(sum *Summary)
}

// LineProgress writes one plain line per event: for logs and pipes, where
// bars would be noise. It is a Sink of Events, which computes what it
// prints.
type LineProgress struct {
	W io.Writer
}

var _ Sink = (*LineProgress)(nil)

// Event implements Sink.
func (p *LineProgress) Event(e Event) {
	switch e.Type {
	case EventStart:
		fmt.Fprintf(p.W, "lab %s: %s on %dx %s, runtime %s, objective %s; engines %s; at most %d trials (--dry-run tells the path), %d already stored\n",
			e.Name, e.Model, e.GPUs, e.GPU, e.Runtime, e.Objective, e.Engines, e.Planned, e.Stored)
	case EventStage:
		fmt.Fprintf(p.W, "== stage %s: %d candidates\n", e.Stage, e.Candidates)
	case EventTrialEnded:
		t := e.Trial
		how := "ran"
		if t.Reused {
			how = "stored"
		}
		res := fmt.Sprintf("%.1f", t.Score)
		switch {
		case t.Status != "ok":
			res = "FAILED " + t.FailureClass
		case t.SLO != "":
			res = "SLO " + t.SLO
		}
		fmt.Fprintf(p.W, "  [%d/≤%d] %s %s (%s, repeat %d): %s; %s; ETA %s\n",
			e.Done, e.Planned, how, t.Name, t.Workload, t.Repeat, res, standing(e), e.etaText())
	case EventDone:
		printDone(p.W, e)
	}
}

// standing says where the lab is: the incumbent (kept so far) and, when
// another configuration measured higher, that one too.
func standing(e Event) string {
	inc := "no incumbent yet"
	if e.Incumbent != nil {
		inc = "incumbent " + e.Incumbent.text()
	}
	if e.Top != nil {
		inc += "; top measured " + e.Top.text()
	}
	return inc
}

// text is how the terminal shows a score: "name 1234.5 tok/s".
func (s *Score) text() string { return fmt.Sprintf("%s %.1f %s", s.Name, s.Score, s.Unit) }

// printDone prints the lab's last lines: the winner, and why it stopped
// early if it did.
func printDone(w io.Writer, e Event) {
	sum := e.Summary
	if sum == nil {
		return
	}
	if sum.Winner != nil {
		gain := fmt.Sprintf("%+.1f%% over baseline", 100*sum.Gain)
		// A score that is no measurement (a load search stopped below a
		// load the client could not deliver) has no gain against it.
		switch b := sum.Baseline; {
		case sum.Winner.Why == report.WhyUnmeasured:
			gain = "no score, no gain: " + sum.Winner.Reason
		case b != nil && b.Why == report.WhyUnmeasured:
			gain = "no gain: the baseline has no score: " + b.Reason
		}
		fmt.Fprintf(w, "winner: %s, %.1f %s (%s); %d tuning trials, %d run now, %d from the store, %s\n",
			sum.Winner.Name, sum.Winner.Score, sum.Unit, gain, sum.TuningTrials, sum.TrialsRun, sum.TrialsReused,
			time.Duration(e.ElapsedSeconds*float64(time.Second)).Round(time.Millisecond))
	}
	if sum.Stopped != "" {
		fmt.Fprintf(w, "stopped early: %s\n", sum.Stopped)
	}
}

// asider is a Progress that keeps time the lab spent on other work than
// trials (the guide's predictions before the joint search) out of the
// trial rate its ETA uses: charged to the trials, a few seconds of
// predictions after fast trials made the ETA jump from seconds to a
// minute. The ETA counts only trials run here: trials read from the store
// take no time, and counting them made a resumed lab's first ETA tiny and
// the next ones jump.
type asider interface {
	Aside(d time.Duration)
}

// plannedTrials estimates the lab's trials: the stages' candidates from the
// baseline engine's view, the repeats of each decision, the combinations,
// the joint search's budget and the generalization pairs.
func (l *Lab) plannedTrials() int {
	return PlanOf(l.Spec).Trials
}

// Plan is what --dry-run prints.
type Plan struct {
	Stages []PlanStage
	// Trials is the estimated number of trials (upper bound for the joint
	// search), Grid the size of the exhaustive grid.
	Trials int
	Grid   int
	// TrialSeconds is the estimated seconds per trial; ETA the total.
	TrialSeconds float64
	ETA          time.Duration
}

// PlanStage is one stage in the plan.
type PlanStage struct {
	Name       string
	Candidates int
	Repeats    int
}

// Plan estimates the lab's stages and trials. The ETA is filled by
// EstimateETA, which needs the runtime.
func PlanOf(s *labspec.Spec) Plan {
	var p Plan
	add := func(name string, n, reps int) {
		p.Stages = append(p.Stages, PlanStage{name, n, reps})
		p.Trials += n + reps
	}
	add("baseline", 1, 0)
	reps := 2 * (s.Repeats - 1)
	incPt := labspec.Point{labspec.KnobEngine: s.BaselineEngine()}
	for _, st := range s.Stages {
		n := 0
		for _, e := range s.Engines {
			if st.Knob != labspec.KnobEngine && e.Name != incPt[labspec.KnobEngine] && len(st.PerEngine) == 0 {
				continue
			}
			cnt := 0
			for _, v := range s.StageValues(st, e.Name) {
				q := labspec.Point{labspec.KnobEngine: e.Name}.With(st.Knob, v)
				if st.Knob == labspec.KnobEngine {
					q = labspec.Point{labspec.KnobEngine: v}
				}
				if _, ok := s.Config(q); ok {
					cnt++
				}
			}
			n = max(n, cnt)
		}
		if st.Knob == labspec.KnobEngine {
			n-- // the baseline engine is already measured
		}
		add(st.Name, max(n, 0), reps)
	}
	if *s.Combinations {
		add("combinations", 4, reps)
	}
	if !s.Search.Disable {
		add("joint search (at most)", s.Search.MaxTrials, reps)
	}
	add("generalization", 2*len(s.Generalization), 0)
	if s.Budget.MaxTrials > 0 && p.Trials > s.Budget.MaxTrials+2*len(s.Generalization) {
		p.Trials = s.Budget.MaxTrials + 2*len(s.Generalization)
	}
	p.Grid = len(s.Enumerate(labspec.Point{labspec.KnobEngine: s.BaselineEngine()}, s.Axes(s.GridKnobs()), 0))
	return p
}

// NewProgress returns the progress display for w: plain lines (one per
// trial, with stage, best so far and ETA), for logs and pipes. More sinks
// (the server's stream) may be added to the Events it returns.
func NewProgress(w io.Writer) *Events { return NewEvents(&LineProgress{W: w}) }

// NewTerminalProgress returns a live bar for a terminal (BarProgress).
func NewTerminalProgress(w io.Writer) *Events { return NewEvents(&BarProgress{W: w}) }
