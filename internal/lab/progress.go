package lab

import (
	"io"
	"time"

	"github.com/perflab/perflab/internal/labprogress"
	"github.com/perflab/perflab/internal/labspec"
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

// stageSkipper is a Progress that is told of a stage that runs nothing,
// so a user sees why on the console and in a dry run's plan, not only in
// the report: a value the spec names that its engine cannot run, or a knob
// with nothing to try on the incumbent's engine (padding on vLLM, which
// always pads). Silence read as the stage being ignored.
type stageSkipper interface {
	StageSkipped(name, why string)
}

// stageNoter is a Progress that is told, with a stage's size, which of its
// values it runs no trial for and why in a few words: a value that spells
// the engine's default vanished from the console before, and the stage
// read as having ignored it.
type stageNoter interface {
	StageNotRun(name string, n int, notRun []string)
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
	withDevice(s)
	p.Grid = len(s.Enumerate(labspec.Point{labspec.KnobEngine: s.BaselineEngine()}, s.Axes(s.GridKnobs()), 0))
	return p
}

// NewProgress returns the progress display for w: plain lines (one per
// trial, with stage, best so far and ETA), for logs and pipes. More sinks
// (the server's stream) may be added to the Events it returns.
func NewProgress(w io.Writer) *Events { return NewEvents(&labprogress.LineProgress{W: w}) }

// NewTerminalProgress returns a live bar for a terminal (BarProgress).
func NewTerminalProgress(w io.Writer) *Events { return NewEvents(&labprogress.BarProgress{W: w}) }
