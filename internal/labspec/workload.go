package labspec

import (
	"math"

	"github.com/perflab/perflab/internal/dataset"
)

// Goodput turns the per-request SLO bounds into vLLM's --goodput map.
func (s SLO) Goodput() map[string]float64 {
	g := map[string]float64{}
	if s.TPOTMs > 0 {
		g["tpot"] = s.TPOTMs
	}
	if s.TTFTMs > 0 {
		g["ttft"] = s.TTFTMs
	}
	if s.E2ELMs > 0 {
		g["e2el"] = s.E2ELMs
	}
	return g
}

// LoadShape is the client side of a workload.
type LoadShape struct {
	// Rate is the request rate, +Inf for all at once.
	Rate float64
	// MaxConcurrency caps in-flight requests (0 = none).
	MaxConcurrency int
	// Seed is the dataset and schedule seed.
	Seed int64
}

// Resolve turns a workload into dataset options and a load, starting from
// its named profile when it has one; explicit fields win.
func (w Workload) Resolve() (dataset.Options, LoadShape) {
	var opt dataset.Options
	ld := LoadShape{Rate: math.Inf(1)}
	if w.Profile != "" {
		if p, ok := dataset.LookupProfile(w.Profile); ok {
			opt, ld.Rate, ld.MaxConcurrency = p.Dataset, p.RequestRate, p.MaxConcurrency
		}
	}
	if w.Dataset != "" {
		opt.Name = w.Dataset
	}
	if w.Path != "" {
		opt.Path = ResolvePath(w.Path)
	}
	if w.NumPrompts > 0 {
		opt.NumPrompts = w.NumPrompts
	}
	if w.InputLen > 0 {
		opt.RandomInputLen = w.InputLen
	}
	if w.OutputLen > 0 {
		opt.RandomOutputLen = w.OutputLen
	}
	if w.RangeRatio > 0 {
		opt.RandomRangeRatio = w.RangeRatio
	}
	if w.Seed != 0 {
		opt.Seed = w.Seed
	}
	if w.RequestRate != 0 {
		ld.Rate = w.RequestRate.Value()
	}
	if w.MaxConcurrency > 0 {
		ld.MaxConcurrency = w.MaxConcurrency
	}
	ld.Seed = opt.Seed
	return opt, ld
}
