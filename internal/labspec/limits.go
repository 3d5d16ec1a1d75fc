package labspec

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/loadsearch"
)

// The ranges of a spec's numbers, checked when the spec is read (before a
// run is stored, so a run is never resumed into what no longer parses).
// Each is far above real work and far below what would exhaust the
// machine: a number past them is a typo or an attack, and the cost of a
// lab follows from them (docs/lab.md, "Limits").
const (
	// MaxGPUs bounds hardware.count and search.batch: a lab spans one
	// cluster's worth of GPUs at most.
	MaxGPUs = 1024
	// MaxNumPrompts bounds a workload's requests; vLLM's published
	// benchmarks send 1,000 to 10,000.
	MaxNumPrompts = 100_000
	// MaxSeqLen bounds input_len and output_len: a million tokens, the
	// longest context any engine serves.
	MaxSeqLen = 1 << 20
	// MaxWorkloadTokens bounds num_prompts × input_len and num_prompts ×
	// output_len: the prompts a workload draws are held in memory (token
	// ids and text, about 16 bytes a token, twice the tokens at
	// range_ratio near 1), so a workload takes at most about 512 MiB.
	// The reports' largest, 100 prompts of 32,000, is 3.2 million.
	MaxWorkloadTokens = 1 << 24
	// MaxConcurrency bounds max_concurrency and a concurrency load axis.
	MaxConcurrency = 100_000
	// MaxRequestRate bounds a numeric request_rate (req/s); "inf" is not
	// a number here but the open loop with every request due at once.
	MaxRequestRate = 1e6
	// MaxRepeats bounds repeats: the noise floor needs a handful.
	MaxRepeats = 100
	// MaxParallel bounds parallel: trials at once, each holding its
	// workload and, for sim and process, a server.
	MaxParallel = 256
	// MaxTrials bounds budget.max_trials and search.max_trials.
	MaxTrials = 100_000
	// MaxHours bounds budget.max_hours: a year.
	MaxHours = 24 * 366
	// MaxMillis bounds an SLO bound: a day, in milliseconds.
	MaxMillis = 86_400_000
	// MaxSeconds bounds startup_seconds and a benchmark's max_seconds: a
	// week.
	MaxSeconds = 7 * 86_400
	// MaxTimeScale bounds time_scale: the sim runtime's clock a thousand
	// times faster than real time is already far past its default.
	MaxTimeScale = 1000
	// MaxMinGain bounds min_gain, a relative gain (10 = 1,000%).
	MaxMinGain = 10
	// MaxGeneralization bounds how many generalization workloads a spec
	// lists, and MaxLabTokens the prompt tokens of all its workloads
	// together: a lab keeps each workload's sample for its whole run, so
	// these bound its memory (about 1 GiB at 16 bytes a token, twice the
	// tokens at range_ratio near 1, before the engines').
	MaxGeneralization = 64
	MaxLabTokens      = 1 << 25
	// MinLoadStep is the smallest nonzero load.start and load.tolerance:
	// a load search measures about log2(max/start) + log2(1/tolerance)
	// points, so these keep it under 45 (1e-300 would make it 1,000).
	MinLoadStep = 1e-3
)

// rangeError is the SpecError for a number outside its range.
func (s *Spec) rangeError(line func(string) int, path string, v any, lo, hi float64) error {
	name := path[len("$."):]
	val := fmt.Sprint(v)
	if f, ok := v.(float64); ok {
		val = strconv.FormatFloat(f, 'g', -1, 64)
	}
	msg := fmt.Sprintf("%s %s is out of range: want %s to %s (docs/lab.md, Limits)", name, val, num(lo), num(hi))
	return &SpecError{File: s.file, Line: line(path), Field: path, Msg: msg}
}

func num(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// checkRanges refuses the first number outside its range, in the order of
// the spec's fields.
func (s *Spec) checkRanges(line func(string) int) error {
	type intField struct {
		path   string
		v      int
		lo, hi int
	}
	type floatField struct {
		path   string
		v      float64
		lo, hi float64
	}
	ints := []intField{
		{"$.hardware.count", s.Hardware.Count, 0, MaxGPUs},
		{"$.repeats", s.Repeats, 0, MaxRepeats},
		{"$.parallel", s.Parallel, 0, MaxParallel},
		{"$.budget.max_trials", s.Budget.MaxTrials, 0, MaxTrials},
		{"$.search.max_trials", s.Search.MaxTrials, 0, MaxTrials},
		{"$.search.guide_prompts", s.Search.GuidePrompts, 0, MaxNumPrompts},
		{"$.search.batch", s.Search.Batch, 0, MaxGPUs},
	}
	floats := []floatField{
		{"$.time_scale", s.TimeScale, 0, MaxTimeScale},
		{"$.budget.max_hours", s.Budget.MaxHours, 0, MaxHours},
		{"$.min_gain", s.MinGain, 0, MaxMinGain},
		{"$.startup_seconds", s.StartupSeconds, 0, MaxSeconds},
		{"$.objective.slo.p99_tpot_ms", s.Objective.SLO.P99TPOTMs, 0, MaxMillis},
		{"$.objective.slo.p99_ttft_ms", s.Objective.SLO.P99TTFTMs, 0, MaxMillis},
		{"$.objective.slo.tpot_ms", s.Objective.SLO.TPOTMs, 0, MaxMillis},
		{"$.objective.slo.ttft_ms", s.Objective.SLO.TTFTMs, 0, MaxMillis},
		{"$.objective.slo.e2el_ms", s.Objective.SLO.E2ELMs, 0, MaxMillis},
	}
	if l := s.Objective.Load; l != nil {
		maxLoad := float64(MaxRequestRate)
		if l.LoadAxis() == loadsearch.AxisConcurrency {
			maxLoad = MaxConcurrency
		}
		floats = append(floats,
			floatField{"$.objective.load.start", l.Start, 0, maxLoad},
			floatField{"$.objective.load.max", l.Max, 0, maxLoad},
			floatField{"$.objective.load.tolerance", l.Tolerance, 0, 1},
			floatField{"$.objective.load.point_seconds", l.PointSeconds, 0, MaxSeconds})
		ints = append(ints, intField{"$.objective.load.warmup_prompts", l.WarmupPrompts, 0, MaxNumPrompts})
	}
	if l := s.Objective.Load; l != nil {
		for _, f := range []floatField{{"$.objective.load.start", l.Start, 0, 0}, {"$.objective.load.tolerance", l.Tolerance, 0, 0}} {
			if f.v != 0 && f.v < MinLoadStep {
				return &SpecError{File: s.file, Line: line(f.path), Field: f.path,
					Msg: fmt.Sprintf("%s %v is below the least %v (0: the default) (docs/lab.md, Limits)", f.path[len("$."):], f.v, MinLoadStep)}
			}
		}
	}
	if n := len(s.Generalization); n > MaxGeneralization {
		return &SpecError{File: s.file, Line: line("$.generalization"), Field: "$.generalization",
			Msg: fmt.Sprintf("generalization lists %d workloads, over the limit of %d (docs/lab.md, Limits)", n, MaxGeneralization)}
	}
	for _, f := range ints {
		if f.v < f.lo || f.v > f.hi {
			return s.rangeError(line, f.path, f.v, float64(f.lo), float64(f.hi))
		}
	}
	for _, f := range floats {
		// Written so that NaN fails too.
		if !(f.v >= f.lo && f.v <= f.hi) {
			return s.rangeError(line, f.path, f.v, f.lo, f.hi)
		}
	}
	total := 0
	if s.Tuning != nil {
		if err := s.Tuning.checkRanges(s, line, "$.tuning"); err != nil {
			return err
		}
		total += s.Tuning.tokens()
	}
	for i := range s.Generalization {
		if err := s.Generalization[i].checkRanges(s, line, fmt.Sprintf("$.generalization[%d]", i)); err != nil {
			return err
		}
		total += s.Generalization[i].tokens()
	}
	if total > MaxLabTokens {
		return &SpecError{File: s.file, Line: line("$.generalization"), Field: "$.generalization",
			Msg: fmt.Sprintf("the workloads' prompts total %d tokens, over the limit of %d a lab may hold (docs/lab.md, Limits)", total, MaxLabTokens)}
	}
	return nil
}

// tokens is what the workload's random prompts total: num_prompts (1,000
// when unset) × input_len, a profile's where the workload names one; a
// ShareGPT workload's lengths come from its file, bounded by num_prompts.
func (w *Workload) tokens() int {
	opt, _ := w.Resolve()
	n := opt.NumPrompts
	if n == 0 {
		n = dataset.DefaultNumPrompts
	}
	return n * opt.RandomInputLen
}

// checkRanges bounds one workload's numbers, and the tokens its prompts
// may total (what its sample holds in memory).
func (w *Workload) checkRanges(s *Spec, line func(string) int, p string) error {
	for _, f := range []struct {
		field string
		v, hi int
	}{
		{"num_prompts", w.NumPrompts, MaxNumPrompts},
		{"input_len", w.InputLen, MaxSeqLen},
		{"output_len", w.OutputLen, MaxSeqLen},
		{"max_concurrency", w.MaxConcurrency, MaxConcurrency},
	} {
		if f.v < 0 || f.v > f.hi {
			return s.rangeError(line, p+"."+f.field, f.v, 0, float64(f.hi))
		}
	}
	if r := float64(w.RequestRate); !math.IsInf(r, 1) && r > MaxRequestRate {
		return s.rangeError(line, p+".request_rate", r, 0, MaxRequestRate)
	}
	// The sample as it will be drawn: a profile supplies what the
	// workload does not say (very-long: 32,000-token prompts).
	opt, _ := w.Resolve()
	if err := CheckSample(opt); err != nil {
		var se *SampleError
		errors.As(err, &se)
		field := p + "." + se.Field
		if w.Profile != "" && se.Field != "num_prompts" && w.InputLen == 0 && w.OutputLen == 0 {
			field = p + ".profile"
		}
		return &SpecError{File: s.file, Line: line(field), Field: field,
			Msg: fmt.Sprintf("%s: %v (docs/lab.md, Limits)", p[len("$."):], err)}
	}
	return nil
}

// SampleError is a sample too large to draw: the field at fault
// (num_prompts, input_len or output_len) and why.
type SampleError struct {
	Field string
	Msg   string
}

func (e *SampleError) Error() string { return e.Msg }

// CheckSample refuses dataset options whose sample would pass the
// limits: more than MaxNumPrompts requests, lengths past MaxSeqLen, or
// more than MaxWorkloadTokens prompt or output tokens in all (a sample is
// held in memory while it is sent). A lab's workloads and a benchmark's
// profile both pass through it.
func CheckSample(opt dataset.Options) error {
	n := opt.NumPrompts
	if n == 0 {
		n = dataset.DefaultNumPrompts
	}
	if n < 0 || n > MaxNumPrompts {
		return &SampleError{Field: "num_prompts", Msg: fmt.Sprintf("num_prompts %d is out of range: want 0 to %d", n, MaxNumPrompts)}
	}
	for _, f := range []struct {
		field string
		v     int
	}{{"input_len", opt.RandomInputLen}, {"output_len", opt.RandomOutputLen}} {
		if f.v < 0 || f.v > MaxSeqLen {
			return &SampleError{Field: f.field, Msg: fmt.Sprintf("%s %d is out of range: want 0 to %d", f.field, f.v, MaxSeqLen)}
		}
		// n <= 100,000 < 2^17 and f.v <= 2^20 here: no overflow.
		if tokens := n * f.v; tokens > MaxWorkloadTokens {
			return &SampleError{Field: f.field, Msg: fmt.Sprintf("num_prompts %d × %s %d = %d tokens, over the limit of %d a workload may hold",
				n, f.field, f.v, tokens, MaxWorkloadTokens)}
		}
	}
	return nil
}
