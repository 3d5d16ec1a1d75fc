package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/store"
)

// DryRunPlan is the lab's path as the simulator predicts it: the run
// itself, made on the in-process simulator into a throwaway store. On
// sim-predict it is the run exactly; on a live runtime it is the path the
// run takes where the measurements agree with the predictions.
type DryRunPlan struct {
	// Stages counts the trials of each stage, in the order they ran.
	Stages []DryRunStage
	// Trials is how many trials the path runs; UpperBound how many the
	// spec allows at most, whatever the measurements (Spec.Plan).
	Trials, UpperBound int
	// Exact is true when the path is the run's own (sim-predict).
	Exact bool
	// Starts counts the engine servers the path starts, with one server
	// per config kept between its measurements (see LiveRunner); GPUHours
	// is what its trials hold GPUs for, starts and benchmarks, at
	// StartupSeconds a start. Both are for the spec's runtime, or for the
	// process runtime when the spec's has no servers (what a real run on
	// GPUs would cost).
	Starts int
	// Configs counts the distinct configs the path measures: the fewest
	// starts it could take.
	Configs        int
	GPUHours       float64
	StartupSeconds float64
	// ETA is the run's expected wall time.
	ETA time.Duration
	// Winner is the configuration the path ends on.
	Winner string
}

// DryRunStage is one stage's trials in a dry run.
type DryRunStage struct {
	Name   string
	Trials int
	// Skipped says why a stage of the spec runs nothing on this path
	// (Trials is then 0): left out of the plan, it read as ignored.
	Skipped string
}

// DryRun walks the lab's plan without running anything: the lab itself,
// with guide measuring every trial (the simulator in process, with the
// spec's noise on sim-predict, none elsewhere), into an in-memory store.
// The trial count, the engine starts and the GPU-hours come from that
// path. With progress non-nil it writes a line there for each config the
// path reaches and at least every dryRunEvery meanwhile, with what it has
// projected so far: an SLO lab's walk takes minutes, and silence for that
// long reads as a hang.
func DryRun(ctx context.Context, spec *labspec.Spec, guide *PredictRunner, guideKey string, mem Store, progress io.Writer) (*DryRunPlan, error) {
	sp := *spec
	kind := sp.RuntimeKind()
	runner := *guide
	if !kind.Noisy() {
		runner.Noise = labspec.Noise{}
	}
	l := &Lab{Spec: &sp, Store: mem, Runner: &runner, Guide: guide, GuideKey: guideKey}
	start := time.Now()
	dp := &dryRunProgress{w: progress, spec: spec, start: start, every: dryRunEvery, seen: map[string]bool{}}
	l.Progress = dp
	if progress != nil {
		// Between trials too: the joint search's guide predicts hundreds
		// of configs before its next trial, a minute or more.
		// Ticks finer than the interval, so a quiet spell gets its line
		// every dryRunEvery, not every second tick.
		tick := time.NewTicker(dryRunEvery / 5)
		stop := make(chan struct{})
		defer func() { tick.Stop(); close(stop) }()
		go func() {
			for {
				select {
				case <-tick.C:
					dp.quiet()
				case <-stop:
					return
				}
			}
		}()
	}
	sum, err := l.Run(ctx)
	if err != nil {
		return nil, fmt.Errorf("lab: dry run: %w", err)
	}
	took := time.Since(start)
	trials, err := mem.Trials(ctx, l.StoredRun().ID)
	if err != nil {
		return nil, fmt.Errorf("lab: dry run: %w", err)
	}
	p := &DryRunPlan{Trials: len(trials), UpperBound: PlanOf(spec).Trials, Exact: !kind.Servers()}
	p.Stages = planStages(trials, dp.skipped)
	p.UpperBound = max(p.UpperBound, p.Trials)
	if sum.Winner != nil {
		p.Winner = sum.Winner.Name
	}
	c := projectCost(spec, trials)
	p.StartupSeconds, p.Starts, p.Configs, p.GPUHours = c.startupSeconds, c.starts, c.configs, c.gpuHours
	if kind.Servers() {
		p.ETA = c.eta(spec)
	} else {
		p.ETA = took
	}
	return p, nil
}

// planStages counts trials by stage, in the order they ran, with each
// skipped stage where the path passed it.
func planStages(trials []store.Trial, skipped []stageSkip) []DryRunStage {
	var out []DryRunStage
	k := 0
	flush := func(at int) {
		for ; k < len(skipped) && skipped[k].at <= at; k++ {
			out = append(out, DryRunStage{Name: skipped[k].name, Skipped: skipped[k].why})
		}
	}
	for i, t := range trials {
		flush(i)
		if n := len(out); n > 0 && out[n-1].Name == t.Stage && out[n-1].Skipped == "" {
			out[n-1].Trials++
			continue
		}
		out = append(out, DryRunStage{Name: t.Stage, Trials: 1})
	}
	flush(len(trials))
	return out
}

// stageSkip is a stage that ran nothing, after at trials of the path.
type stageSkip struct {
	at        int
	name, why string
}

// dryRunEvery is how long a dry run stays silent at most while the path
// stays on configs it has already reported.
const dryRunEvery = 5 * time.Second

// dryRunCost is what a path of trials costs on GPUs.
type dryRunCost struct {
	starts, configs int
	startupSeconds  float64
	gpuHours        float64
	// busy is the GPU-seconds the path holds servers, starts included, in
	// wall time at the spec's time scale.
	busy float64
}

// projectCost prices trials on the spec's runtime, or on the process
// runtime when the spec's starts no server (what a real run on GPUs would
// cost).
func projectCost(spec *labspec.Spec, trials []store.Trial) dryRunCost {
	kind := spec.RuntimeKind()
	c := dryRunCost{startupSeconds: spec.StartupSeconds}
	if c.startupSeconds == 0 {
		c.startupSeconds = kind.StartupSeconds()
		if !kind.Servers() {
			c.startupSeconds = processStartupSeconds
		}
	}
	starts := projectStarts(trials, spec.Hardware.Count, spec.FreshStartPerRepeat)
	configs := map[string]bool{}
	for i, t := range trials {
		if cfg := labspec.ConfigHash(trialConfig(t)); !configs[cfg] {
			configs[cfg] = true
			c.configs++
		}
		m, _ := decodeMeasurement(t.Result)
		cost := store.Cost{GPUs: labspec.GPUs(trialConfig(t)), BenchSeconds: m.res().Duration}
		if starts[i] {
			c.starts++
			cost.StartupSeconds = c.startupSeconds
		}
		c.gpuHours += cost.GPUHours()
		c.busy += cost.StartupSeconds + spec.Scale().Wall(cost.BenchSeconds)
	}
	return c
}

// eta is the path's wall time on the spec's parallel servers.
func (c dryRunCost) eta(spec *labspec.Spec) time.Duration {
	par := spec.Parallel
	if par <= 0 {
		par = max(spec.Hardware.Count, 1)
	}
	return time.Duration(c.busy / float64(par) * float64(time.Second))
}

// dryRunProgress prints a dry run's projection as the path grows. The lab
// calls Progress from its search goroutines, hence the lock.
type dryRunProgress struct {
	w      io.Writer
	spec   *labspec.Spec
	start  time.Time
	every  time.Duration
	mu     sync.Mutex
	trials []store.Trial
	seen   map[string]bool
	last   time.Time
	// skipped are the stages that ran nothing, for the plan's table.
	skipped []stageSkip
}

var (
	_ Progress     = (*dryRunProgress)(nil)
	_ stageSkipper = (*dryRunProgress)(nil)
)

// StageSkipped implements stageSkipper.
func (p *dryRunProgress) StageSkipped(name, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.skipped = append(p.skipped, stageSkip{at: len(p.trials), name: name, why: why})
}

func (p *dryRunProgress) Start(*labspec.Spec, int, int) {}
func (p *dryRunProgress) Stage(string, int)             {}
func (p *dryRunProgress) Best(string, float64, string)  {}
func (p *dryRunProgress) Done(*Summary)                 {}

// Trial implements Progress: a line when the path reaches a new config,
// or when the last line is older than every.
func (p *dryRunProgress) Trial(t TrialSpec, rec store.Trial, _ float64, _ bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trials = append(p.trials, rec)
	key := labspec.ConfigHash(trialConfig(rec))
	now := time.Now()
	if p.seen[key] && now.Sub(p.last) < p.every {
		return
	}
	p.seen[key] = true
	p.line(now, fmt.Sprintf("at %s, stage %s", t.Name, rec.Stage))
}

// quiet writes a line when none was written for every: the path is in
// the guide's predictions, between trials.
func (p *dryRunProgress) quiet() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.last) >= p.every {
		p.line(now, "the guide predicting")
	}
}

// line writes the projection so far; callers hold mu.
func (p *dryRunProgress) line(now time.Time, where string) {
	p.last = now
	if p.w == nil {
		return
	}
	c := projectCost(p.spec, p.trials)
	fmt.Fprintf(p.w, "dry run %s: %d trials, %d configs, %d starts, %.2f GPU-hours so far (%s)\n",
		now.Sub(p.start).Round(time.Second), len(p.trials), c.configs, c.starts, c.gpuHours, where)
}

// processStartupSeconds is a real engine's start on a GPU (model load,
// CUDA graphs), for what a sim-predict plan would cost on GPUs.
const processStartupSeconds = 180

// trialConfig decodes a stored trial's engine config (zero on error).
func trialConfig(t store.Trial) engine.Config {
	var cfg engine.Config
	_ = json.Unmarshal(t.Config, &cfg)
	return cfg
}

// projectStarts replays trials in order on capacity GPUs with the live
// runner's policy, and says which of them start a server: a config's
// server is kept after a clean measurement when its engine can reset its
// cache (and fresh is false), and idle servers are stopped, least recently
// used first, when a trial needs their GPUs.
func projectStarts(trials []store.Trial, capacity int, fresh bool) []bool {
	type kept struct {
		key  string
		gpus int
		used int
	}
	var idle []kept
	free := max(capacity, 1)
	out := make([]bool, len(trials))
	for i, t := range trials {
		cfg := trialConfig(t)
		key, n := labspec.ConfigHash(cfg), min(max(labspec.GPUs(cfg), 1), max(capacity, 1))
		j := slices.IndexFunc(idle, func(k kept) bool { return k.key == key })
		if j >= 0 {
			free += idle[j].gpus
			idle = slices.Delete(idle, j, j+1)
		} else {
			out[i] = true
			for free < n && len(idle) > 0 {
				oldest := 0
				for m := range idle {
					if idle[m].used < idle[oldest].used {
						oldest = m
					}
				}
				free += idle[oldest].gpus
				idle = slices.Delete(idle, oldest, oldest+1)
			}
		}
		if t.Status == "ok" && !fresh && engine.Reusable(cfg) {
			free -= n
			idle = append(idle, kept{key: key, gpus: n, used: i})
		}
	}
	return out
}
