package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/loadsearch"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/objective"
	"github.com/perflab/perflab/internal/store"
)

// ObjectiveKind is one objective a spec may name in objective.metric: how
// it scores a trial, the unit of that score, what it needs from a trial,
// and how it runs a candidate. How a spec's objective section is checked
// and normalized is the spec language's (labspec's objective rules).
// Each kind is registered once, below; nothing else in lab asks which
// objective it has.
type ObjectiveKind interface {
	// Name is the objective.metric that selects the kind.
	Name() string
	// Score is a measurement's score, higher is better; gpus is how many
	// GPUs the config occupies.
	Score(m Measurement, gpus int) float64
	// Unit names the score's unit for messages.
	Unit(obj labspec.Objective) string
	// Lacks names the result figures the score reads that m's result
	// lacks: such a trial is not eligible (it would score 0).
	Lacks(m Measurement) []string

	// run measures candidates: one benchmark each, or a load search.
	run(ctx context.Context, l *Lab, specs []TrialSpec, budget bool) ([]*result, error)
	// guide adapts the lab's guide to predict this objective's score.
	guide(g Guide, obj labspec.Objective) Guide
	// loadSLO is the SLO a load search checks (nil when none runs).
	loadSLO(obj labspec.Objective) *loadsearch.SLO
	// noScoreHint says why a score may be 0 ("" when nothing to add).
	noScoreHint() string
	// prunes says whether a candidate the guide's range cannot lift above
	// the incumbent is left unmeasured (Lab.hopeless): worth it where a
	// candidate costs a load search, not one benchmark.
	prunes() bool
}

// objectives is the registry, by name; the spec parser looks names up here.
var objectives = map[string]ObjectiveKind{}

// registerObjective adds k; a second kind of the same name is a bug.
func registerObjective(k ObjectiveKind) {
	if _, dup := objectives[k.Name()]; dup {
		panic("lab: objective " + k.Name() + " registered twice")
	}
	// The report says an objective's words from its name alone.
	if !objective.Known(k.Name()) {
		panic("lab: objective " + k.Name() + " has no words in package objective")
	}
	// A spec names it only if the spec language knows its section's rules.
	if !labspec.KnownObjective(k.Name()) {
		panic("lab: objective " + k.Name() + " has no rules in package labspec")
	}
	objectives[k.Name()] = k
}

func init() {
	registerObjective(totalThroughput{})
	registerObjective(throughputPerGPU{})
	registerObjective(goodput{})
	registerObjective(maxLoadUnderSLO{})
}

// LookupObjective returns the objective kind named name ("" names the
// default, total_throughput).
func LookupObjective(name string) (ObjectiveKind, bool) {
	if name == "" {
		name = labspec.ObjectiveTotalThroughput
	}
	k, ok := objectives[name]
	return k, ok
}

// ObjectiveNames lists the registered objectives, sorted.
func ObjectiveNames() []string {
	names := make([]string, 0, len(objectives))
	for n := range objectives {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Kind is the objective's registered kind; a name the registry does not
// hold (a spec not yet validated) reads as the default.
func kindOf(obj labspec.Objective) ObjectiveKind {
	if k, ok := LookupObjective(obj.Metric); ok {
		return k
	}
	k, _ := LookupObjective("")
	return k
}

// Score scores a measurement under the spec's objective; higher is
// better. gpus is how many GPUs the config occupies.
func scoreUnder(obj labspec.Objective, m Measurement, gpus int) float64 {
	return kindOf(obj).Score(m, gpus)
}

// Unit names the objective's unit for messages.
func ObjectiveUnit(obj labspec.Objective) string { return kindOf(obj).Unit(obj) }

// sloViolation says which P99 bound a measurement breaks ("" if none).
// For goodput the bounds are per request and already in the score.
func sloViolation(obj labspec.Objective, m Measurement) string {
	if obj.SLO.P99TPOTMs > 0 && m.P99TPOTMs() > obj.SLO.P99TPOTMs {
		return fmt.Sprintf("P99 TPOT %.1f ms > %.1f ms", m.P99TPOTMs(), obj.SLO.P99TPOTMs)
	}
	if obj.SLO.P99TTFTMs > 0 && m.P99TTFTMs() > obj.SLO.P99TTFTMs {
		return fmt.Sprintf("P99 TTFT %.1f ms > %.1f ms", m.P99TTFTMs(), obj.SLO.P99TTFTMs)
	}
	return ""
}

// missing names the figures the objective's score and SLO read that the
// measurement's result lacks ("" when it has them all): a figure absent
// would read as 0 and pass a P99 bound or score every trial 0. The names
// are vLLM's keys, as the user knows them.
func missingFigures(obj labspec.Objective, m Measurement) string {
	ks := kindOf(obj).Lacks(m)
	if _, ok := m.p99(metrics.MetricTPOT); obj.SLO.P99TPOTMs > 0 && !ok {
		ks = append(ks, "p99_tpot_ms")
	}
	if _, ok := m.p99(metrics.MetricTTFT); obj.SLO.P99TTFTMs > 0 && !ok {
		ks = append(ks, "p99_ttft_ms")
	}
	return strings.Join(ks, ", ")
}

// benchmarked is the part of every objective that one benchmark per
// candidate answers; the kinds embed it.
type benchmarked struct{}

func (benchmarked) Lacks(Measurement) []string                { return nil }
func (benchmarked) guide(g Guide, _ labspec.Objective) Guide  { return g }
func (benchmarked) loadSLO(labspec.Objective) *loadsearch.SLO { return nil }
func (benchmarked) noScoreHint() string                       { return "" }
func (benchmarked) prunes() bool                              { return false }
func (benchmarked) run(ctx context.Context, l *Lab, specs []TrialSpec, budget bool) ([]*result, error) {
	return l.run2(ctx, specs, budget)
}

// totalThroughput scores total tokens/s (vLLM's total_token_throughput).
type totalThroughput struct{ benchmarked }

func (totalThroughput) Name() string                       { return labspec.ObjectiveTotalThroughput }
func (totalThroughput) Score(m Measurement, _ int) float64 { return m.res().TotalTokenThroughput }
func (totalThroughput) Unit(labspec.Objective) string      { return "tok/s" }

// throughputPerGPU scores total tokens/s divided by the config's GPUs.
type throughputPerGPU struct{ benchmarked }

func (throughputPerGPU) Name() string                  { return labspec.ObjectiveThroughputPerGPU }
func (throughputPerGPU) Unit(labspec.Objective) string { return "tok/s/GPU" }
func (throughputPerGPU) Score(m Measurement, gpus int) float64 {
	return m.res().TotalTokenThroughput / float64(max(gpus, 1))
}

// goodput scores requests/s meeting every per-request bound (vLLM's
// request_goodput under --goodput).
type goodput struct{ benchmarked }

func (goodput) Name() string                       { return labspec.ObjectiveGoodput }
func (goodput) Score(m Measurement, _ int) float64 { return m.res().RequestGoodput }
func (goodput) Unit(labspec.Objective) string      { return "req/s within SLO" }
func (goodput) Lacks(m Measurement) []string {
	if !m.res().GoodputConfigured {
		return []string{"request_goodput"}
	}
	return nil
}
func (goodput) noScoreHint() string { return ": no request met the SLO" }

// maxLoadUnderSLO scores a config by the highest load it sustains within
// objective.load's SLO, found by a load search per candidate
// (loadobjective.go).
type maxLoadUnderSLO struct{}

func (maxLoadUnderSLO) Name() string                               { return labspec.ObjectiveMaxLoadUnderSLO }
func (maxLoadUnderSLO) Score(m Measurement, _ int) float64         { return m.SustainableLoad }
func (maxLoadUnderSLO) Unit(obj labspec.Objective) string          { return obj.Load.Unit() }
func (maxLoadUnderSLO) Lacks(Measurement) []string                 { return nil }
func (maxLoadUnderSLO) noScoreHint() string                        { return "" }
func (maxLoadUnderSLO) guide(g Guide, obj labspec.Objective) Guide { return loadGuide(g, obj.Load) }
func (maxLoadUnderSLO) prunes() bool                               { return true }

func (maxLoadUnderSLO) run(ctx context.Context, l *Lab, specs []TrialSpec, budget bool) ([]*result, error) {
	return l.searchLoads(ctx, specs, budget)
}

func (maxLoadUnderSLO) loadSLO(obj labspec.Objective) *loadsearch.SLO {
	o, err := obj.Load.Options()
	if err != nil {
		return nil
	}
	return &o.SLO
}

// ScoreTrial is a stored trial's score under the objective, as the lab
// scored it when the trial ended (eligible or not); ok is false for a
// trial that has none: it failed, or its result or config is unreadable.
// The API sends it so no client derives scores of its own.
func ScoreTrial(obj labspec.Objective, t store.Trial) (score float64, ok bool) {
	m, err := measurementOf(t)
	if err != nil || m.Failure != nil {
		return 0, false
	}
	var cfg engine.Config
	if err := json.Unmarshal(t.Config, &cfg); err != nil {
		return 0, false
	}
	return scoreUnder(obj, m, labspec.GPUs(cfg)), true
}
