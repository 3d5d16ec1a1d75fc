package labspec

import (
	"errors"
	"fmt"
	"math"

	"github.com/perflab/perflab/internal/loadsearch"
)

// LoadObjective is the question max_load_under_slo asks of every config:
// the highest load (request rate or concurrency) at which it still meets
// the SLO, found by loadsearch to the tolerance. Each load measured is a
// trial of its own, on the tuning workload with that load, so a resumed
// lab reads it back instead of measuring it again.
type LoadObjective struct {
	// SLO is the compact form, e.g. "ttft_p99<=2s,tpot_p99<=50ms,success>=99%".
	SLO string `yaml:"slo" json:"slo"`
	// Axis is rate (open loop, the default) or concurrency (closed loop).
	Axis string `yaml:"axis,omitempty" json:"axis,omitempty"`
	// Tolerance is the relative precision of the answer (default 0.05).
	Tolerance float64 `yaml:"tolerance,omitempty" json:"tolerance,omitempty"`
	// Start is the first load measured: set, it is every config's start;
	// unset, each config's search starts at the guide's predicted
	// sustainable load, or at 1 without a prediction. Max is the highest
	// load the search may try (default 4096).
	Start float64 `yaml:"start,omitempty" json:"start,omitempty"`
	Max   float64 `yaml:"max,omitempty" json:"max,omitempty"`
	// WarmupPrompts is how many leading requests of each point are not
	// counted (default: a tenth of the workload's prompts).
	WarmupPrompts int `yaml:"warmup_prompts,omitempty" json:"warmup_prompts,omitempty"`
	// PointSeconds bounds a point's benchmark time, all its sizes
	// together, in the engine's seconds (0: no bound; the wall time is
	// that over the time scale). On the rate axis the first size is cut
	// to fit; a point that would need a longer size to decide ends
	// undecided ("undecided at the point's limit"), as bench's
	// --search-point-seconds: at 0.5 req/s, 1,000 prompts were 2,000 s.
	PointSeconds float64 `yaml:"point_seconds,omitempty" json:"point_seconds,omitempty"`
}

// PointLimit is the point limit in force (+Inf: none).
func (o *LoadObjective) PointLimit() float64 {
	if o.PointSeconds > 0 {
		return o.PointSeconds
	}
	return math.Inf(1)
}

// LoadPoint marks a workload a load search derived: the load measured and
// the warm-up left out of its figures.
type LoadPoint struct {
	Axis   string  `json:"axis"`
	Load   float64 `json:"load"`
	Warmup int     `json:"warmup"`
}

// Validate says what is wrong with the load section (nil when a search
// can start from it).
func (o *LoadObjective) Validate() error {
	if o == nil {
		return errors.New("needs load: {slo: ..., axis: rate|concurrency}")
	}
	_, err := o.Options()
	return err
}

// Options are the search's options; the SLO and axis parsed.
func (o *LoadObjective) Options() (loadsearch.Options, error) {
	slo, err := loadsearch.ParseSLO(o.SLO)
	if err != nil {
		return loadsearch.Options{}, fmt.Errorf("slo: %w", err)
	}
	axis := loadsearch.AxisRate
	if o.Axis != "" {
		if axis, err = loadsearch.ParseAxis(o.Axis); err != nil {
			return loadsearch.Options{}, fmt.Errorf("axis: %w", err)
		}
	}
	if o.WarmupPrompts < 0 {
		return loadsearch.Options{}, fmt.Errorf("warmup_prompts %d is negative", o.WarmupPrompts)
	}
	if !(o.PointSeconds >= 0 && o.PointSeconds <= MaxSeconds) {
		return loadsearch.Options{}, fmt.Errorf("point_seconds %v: want 0 (no limit) to %d", o.PointSeconds, MaxSeconds)
	}
	opt := loadsearch.Options{SLO: slo, Axis: axis, Start: o.Start, Max: o.Max, Tolerance: o.Tolerance}
	// A spec must fail when it is read, not when its first search starts.
	return opt, opt.Validate()
}

// LoadAxis is the axis the search moves along (rate unless concurrency
// is named).
func (o *LoadObjective) LoadAxis() loadsearch.Axis {
	if o != nil && o.Axis == string(loadsearch.AxisConcurrency) {
		return loadsearch.AxisConcurrency
	}
	return loadsearch.AxisRate
}

// Unit names the score's unit ("req/s within SLO").
func (o *LoadObjective) Unit() string { return o.LoadAxis().Unit() + " within SLO" }
