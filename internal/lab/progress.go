package lab

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/perflab/perflab/internal/store"
)

// Progress receives the lab's events, for a terminal or a log.
type Progress interface {
	// Start announces the run: planned trials (an estimate) and how many
	// finished trials the store already holds.
	Start(s *Spec, planned, stored int)
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
// bars would be noise.
type LineProgress struct {
	W io.Writer

	mu      sync.Mutex
	start   time.Time
	planned int
	n       int
	ran     int
	ranTime time.Duration
	// aside is time spent on other work than trials (see asider).
	aside time.Duration
	stage string
	best  string
	// top is the highest score measured so far, and unit the objective's.
	top     float64
	topName string
	unit    string
}

var _ Progress = (*LineProgress)(nil)

// Start implements Progress.
func (p *LineProgress) Start(s *Spec, planned, stored int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.start, p.planned, p.unit = time.Now(), planned, s.Objective.Unit()
	fmt.Fprintf(p.W, "lab %s: %s on %dx %s, runtime %s, objective %s; engines %s; at most %d trials (--dry-run tells the path), %d already stored\n",
		s.Name, s.Model, s.Hardware.Count, s.Hardware.GPU, s.Runtime, s.Objective.Metric, s.engineVersions(), planned, stored)
}

// Stage implements Progress.
func (p *LineProgress) Stage(name string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stage = name
	fmt.Fprintf(p.W, "== stage %s: %d candidates\n", name, n)
}

// Trial implements Progress.
func (p *LineProgress) Trial(t TrialSpec, rec store.Trial, score float64, reused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	how := "ran"
	if reused {
		how = "stored"
	} else {
		p.ran++
		p.ranTime += rec.Ended.Sub(rec.Started)
	}
	res := fmt.Sprintf("%.1f", score)
	if rec.Status != "ok" {
		res = "FAILED " + rec.FailureClass
	} else if score > p.top {
		p.top, p.topName = score, t.Name
	}
	fmt.Fprintf(p.W, "  [%d/≤%d] %s %s (%s, repeat %d): %s; %s; ETA %s\n",
		p.n, max(p.planned, p.n), how, t.Name, t.Workload.Name, t.Repeat, res, p.standing(), p.eta())
}

// standing says where the lab is: the incumbent (kept so far) and, when
// another configuration measured higher, that one too; callers hold mu.
func (p *LineProgress) standing() string {
	inc := "incumbent " + p.best
	if p.best == "" {
		inc = "no incumbent yet"
	}
	if p.topName != "" && !strings.HasPrefix(p.best, p.topName+" ") {
		inc += fmt.Sprintf("; top measured %s %.1f %s", p.topName, p.top, p.unit)
	}
	return inc
}

func (p *LineProgress) eta() string { return eta(p.start.Add(p.aside), p.n, p.ran, p.planned) }

// Aside implements asider.
func (p *LineProgress) Aside(d time.Duration) {
	p.mu.Lock()
	p.aside += d
	p.mu.Unlock()
}

// asider is a Progress that keeps time the lab spent on other work than
// trials (the guide's predictions before the joint search) out of the
// trial rate its ETA uses: charged to the trials, a few seconds of
// predictions after fast trials made the ETA jump from seconds to a
// minute.
type asider interface {
	Aside(d time.Duration)
}

var (
	_ asider = (*LineProgress)(nil)
	_ asider = (*BarProgress)(nil)
)

// eta is the time left for the planned trials not yet done, at the wall
// time per trial run here since start ("-" before any trial ran here or
// once the plan is reached). Trials read from the store take no time and
// do not count in the rate: counting them made a resumed lab's first ETA
// tiny and the next ones jump.
func eta(start time.Time, n, ran, planned int) string {
	if ran == 0 || planned <= n {
		return "-"
	}
	per := time.Since(start) / time.Duration(ran)
	return (per * time.Duration(planned-n)).Round(time.Second).String()
}

// Best implements Progress.
func (p *LineProgress) Best(name string, score float64, unit string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.best = fmt.Sprintf("%s %.1f %s", name, score, unit)
}

// Done implements Progress.
func (p *LineProgress) Done(sum *Summary) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sum.Winner != nil {
		fmt.Fprintf(p.W, "winner: %s, %.1f %s (%+.1f%% over baseline); %d tuning trials, %d run now, %d from the store, %s\n",
			sum.Winner.Name, sum.Winner.Score, sum.Unit, 100*sum.Gain, sum.TuningTrials, sum.TrialsRun, sum.TrialsReused,
			time.Since(p.start).Round(time.Millisecond))
	}
	if sum.Stopped != "" {
		fmt.Fprintf(p.W, "stopped early: %s\n", sum.Stopped)
	}
}

// plannedTrials estimates the lab's trials: the stages' candidates from the
// baseline engine's view, the repeats of each decision, the combinations,
// the joint search's budget and the generalization pairs.
func (l *Lab) plannedTrials() int {
	return l.Spec.Plan().Trials
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
func (s *Spec) Plan() Plan {
	var p Plan
	add := func(name string, n, reps int) {
		p.Stages = append(p.Stages, PlanStage{name, n, reps})
		p.Trials += n + reps
	}
	add("baseline", 1, 0)
	reps := 2 * (s.Repeats - 1)
	incPt := Point{KnobEngine: s.baselineEngine()}
	for _, st := range s.Stages {
		n := 0
		for _, e := range s.Engines {
			if st.Knob != KnobEngine && e.Name != incPt[KnobEngine] && len(st.PerEngine) == 0 {
				continue
			}
			cnt := 0
			for _, v := range s.stageValues(st, e.Name) {
				q := Point{KnobEngine: e.Name}.with(st.Knob, v)
				if st.Knob == KnobEngine {
					q = Point{KnobEngine: v}
				}
				if _, ok := s.Config(q); ok {
					cnt++
				}
			}
			n = max(n, cnt)
		}
		if st.Knob == KnobEngine {
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
	p.Grid = len(s.enumerate(Point{KnobEngine: s.baselineEngine()}, s.Axes(s.GridKnobs()), 0))
	return p
}

// NewProgress returns the progress display for w: plain lines (one per
// trial, with stage, best so far and ETA), for logs and pipes.
func NewProgress(w io.Writer) Progress { return &LineProgress{W: w} }

// NewTerminalProgress returns a live bar for a terminal (BarProgress).
func NewTerminalProgress(w io.Writer) Progress { return &BarProgress{W: w} }
