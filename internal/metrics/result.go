package metrics

import (
	"math"
	"strconv"
)

// PercentileValue is one requested percentile of a latency metric, in ms.
type PercentileValue struct {
	P     float64 `json:"p"`
	Value float64 `json:"value"`
}

// LatencyStats is vLLM's per-metric summary (milliseconds): mean, median,
// population std and the selected percentiles.
type LatencyStats struct {
	Mean        float64           `json:"mean"`
	Median      float64           `json:"median"`
	Std         float64           `json:"std"`
	Percentiles []PercentileValue `json:"percentiles,omitempty"`
}

// Metric names accepted by Options.PercentileMetrics and Result.Percentile,
// spelled as vLLM's --percentile-metrics spells them.
const (
	MetricTTFT               = "ttft"
	MetricTPOT               = "tpot"
	MetricITL                = "itl"
	MetricE2EL               = "e2el"
	MetricClientQueueTime    = "client_queue_time"
	MetricE2ELIncludingQueue = "e2el_including_client_queue"
)

// AllMetrics lists every latency metric in vLLM's print order.
var AllMetrics = []string{MetricTTFT, MetricTPOT, MetricITL, MetricE2EL, MetricClientQueueTime, MetricE2ELIncludingQueue}

// Result is one benchmark's outcome. Its JSON form carries every key that
// `vllm bench serve --save-result` writes (see MarshalJSON), metadata merged
// at the top level as vLLM merges it, plus a "perflab" object with perflab's
// own additions.
type Result struct {
	// Setup keys written by vLLM's main before the metrics.
	Date           string // "20060102-150405", as vLLM formats it
	EndpointType   string // same value as Backend (vLLM keeps it for backward compatibility)
	Backend        string
	Label          string // empty → JSON null
	ModelID        string
	TokenizerID    string
	NumPrompts     int
	RequestRate    float64 // math.Inf(1) (or 0, treated as inf) → "inf"
	Burstiness     float64
	MaxConcurrency int // 0 → null (no limit)
	// RampUpStrategy, RampUpStartRPS and RampUpEndRPS are written only when a
	// ramp-up strategy was used.
	RampUpStrategy string
	RampUpStartRPS int
	RampUpEndRPS   int
	// Metadata holds --metadata KEY=VALUE pairs; vLLM writes them as
	// top-level keys, and so do we.
	Metadata map[string]string

	Duration              float64
	Completed             int
	Failed                int
	TotalInputTokens      int
	TotalOutputTokens     int
	RequestThroughput     float64
	RequestGoodput        float64 // meaningful only when GoodputConfigured
	GoodputConfigured     bool
	OutputThroughput      float64
	TotalTokenThroughput  float64
	MaxOutputTokensPerS   float64
	MaxConcurrentRequests int
	RTFx                  float64

	// Per-metric summaries in milliseconds; only the metrics named in
	// PercentileMetrics are reported (printed and saved), as in vLLM.
	MeanTTFTMs, MedianTTFTMs, StdTTFTMs float64
	MeanTPOTMs, MedianTPOTMs, StdTPOTMs float64
	MeanITLMs, MedianITLMs, StdITLMs    float64
	MeanE2ELMs, MedianE2ELMs, StdE2ELMs float64
	// Client queue time and queue-inclusive E2EL, vLLM's newest metrics.
	MeanClientQueueTimeMs, MedianClientQueueTimeMs, StdClientQueueTimeMs float64
	MeanE2ELInclQueueMs, MedianE2ELInclQueueMs, StdE2ELInclQueueMs       float64
	// Percentiles maps a metric name to its selected percentiles (ms).
	Percentiles map[string][]PercentileValue
	// PercentileMetrics are the metrics reported, in vLLM's order.
	PercentileMetrics []string

	// Detailed is set when the per-request arrays below are to be saved
	// (vLLM's --save-detailed).
	Detailed       bool
	InputLens      []int
	OutputLens     []int
	TTFTs          []float64
	ITLs           [][]float64
	Latencies      []float64
	StartTimes     []float64
	QueueTimes     []float64
	GeneratedTexts []string
	Errors         []string

	// Extra keeps keys of an imported vLLM JSON that perflab does not model
	// (spec_decode_*, rps_change_events, probe_*, ...), so they survive a
	// round trip.
	Extra map[string]any

	// Present, when non-nil, names the vLLM keys (JSON spelling) that were
	// actually present in an imported result: a printed block of an older
	// vLLM lacks some rows, and an absent row must not read as zero. nil
	// means every key applies (a result perflab computed).
	Present map[string]bool

	// Perflab holds perflab's own additions; nil for imported results
	// unless the importer had something to say (source, warnings).
	Perflab *Perflab
}

// Has reports whether the vLLM key (JSON spelling, e.g. "failed",
// "max_concurrent_requests", "p99_ttft_ms") is known for this result.
func (r *Result) Has(key string) bool {
	if r.Present == nil {
		return true
	}
	return r.Present[key]
}

func (r *Result) markPresent(key string) {
	if r.Present == nil {
		r.Present = map[string]bool{}
	}
	r.Present[key] = true
}

// Stats returns the summary of metric (see AllMetrics).
func (r *Result) Stats(metric string) (LatencyStats, bool) {
	var s LatencyStats
	switch metric {
	case MetricTTFT:
		s = LatencyStats{r.MeanTTFTMs, r.MedianTTFTMs, r.StdTTFTMs, nil}
	case MetricTPOT:
		s = LatencyStats{r.MeanTPOTMs, r.MedianTPOTMs, r.StdTPOTMs, nil}
	case MetricITL:
		s = LatencyStats{r.MeanITLMs, r.MedianITLMs, r.StdITLMs, nil}
	case MetricE2EL:
		s = LatencyStats{r.MeanE2ELMs, r.MedianE2ELMs, r.StdE2ELMs, nil}
	case MetricClientQueueTime:
		s = LatencyStats{r.MeanClientQueueTimeMs, r.MedianClientQueueTimeMs, r.StdClientQueueTimeMs, nil}
	case MetricE2ELIncludingQueue:
		s = LatencyStats{r.MeanE2ELInclQueueMs, r.MedianE2ELInclQueueMs, r.StdE2ELInclQueueMs, nil}
	default:
		return s, false
	}
	s.Percentiles = r.Percentiles[metric]
	return s, true
}

// setStats stores s as metric's summary.
func (r *Result) setStats(metric string, s LatencyStats) {
	switch metric {
	case MetricTTFT:
		r.MeanTTFTMs, r.MedianTTFTMs, r.StdTTFTMs = s.Mean, s.Median, s.Std
	case MetricTPOT:
		r.MeanTPOTMs, r.MedianTPOTMs, r.StdTPOTMs = s.Mean, s.Median, s.Std
	case MetricITL:
		r.MeanITLMs, r.MedianITLMs, r.StdITLMs = s.Mean, s.Median, s.Std
	case MetricE2EL:
		r.MeanE2ELMs, r.MedianE2ELMs, r.StdE2ELMs = s.Mean, s.Median, s.Std
	case MetricClientQueueTime:
		r.MeanClientQueueTimeMs, r.MedianClientQueueTimeMs, r.StdClientQueueTimeMs = s.Mean, s.Median, s.Std
	case MetricE2ELIncludingQueue:
		r.MeanE2ELInclQueueMs, r.MedianE2ELInclQueueMs, r.StdE2ELInclQueueMs = s.Mean, s.Median, s.Std
	default:
		return
	}
	if r.Percentiles == nil {
		r.Percentiles = map[string][]PercentileValue{}
	}
	r.Percentiles[metric] = s.Percentiles
}

// statField returns a pointer to one of metric's mean/median/std fields.
func (r *Result) statField(metric, which string) *float64 {
	var m, md, sd *float64
	switch metric {
	case MetricTTFT:
		m, md, sd = &r.MeanTTFTMs, &r.MedianTTFTMs, &r.StdTTFTMs
	case MetricTPOT:
		m, md, sd = &r.MeanTPOTMs, &r.MedianTPOTMs, &r.StdTPOTMs
	case MetricITL:
		m, md, sd = &r.MeanITLMs, &r.MedianITLMs, &r.StdITLMs
	case MetricE2EL:
		m, md, sd = &r.MeanE2ELMs, &r.MedianE2ELMs, &r.StdE2ELMs
	case MetricClientQueueTime:
		m, md, sd = &r.MeanClientQueueTimeMs, &r.MedianClientQueueTimeMs, &r.StdClientQueueTimeMs
	case MetricE2ELIncludingQueue:
		m, md, sd = &r.MeanE2ELInclQueueMs, &r.MedianE2ELInclQueueMs, &r.StdE2ELInclQueueMs
	default:
		return nil
	}
	switch which {
	case "mean":
		return m
	case "median":
		return md
	case "std":
		return sd
	}
	return nil
}

// setPercentile stores (or replaces) one percentile value of metric.
func (r *Result) setPercentile(metric string, p, v float64) {
	if r.Percentiles == nil {
		r.Percentiles = map[string][]PercentileValue{}
	}
	ps := r.Percentiles[metric]
	for i := range ps {
		if ps[i].P == p {
			ps[i].Value = v
			return
		}
	}
	r.Percentiles[metric] = append(ps, PercentileValue{P: p, Value: v})
}

// Percentile returns metric's p-th percentile in milliseconds, when it was
// computed or imported. p=50 falls back to the median.
func (r *Result) Percentile(metric string, p float64) (float64, bool) {
	for _, pv := range r.Percentiles[metric] {
		if pv.P == p {
			return pv.Value, true
		}
	}
	if p == 50 {
		if f := r.statField(metric, "median"); f != nil && r.Has("median_"+metric+"_ms") && r.reports(metric) {
			return *f, true
		}
	}
	return 0, false
}

// reports tells whether metric is among the reported metrics.
func (r *Result) reports(metric string) bool {
	for _, m := range r.PercentileMetrics {
		if m == metric {
			return true
		}
	}
	return false
}

// pWord spells a percentile as vLLM does: "99" for 99.0, "99.9" otherwise.
func pWord(p float64) string {
	if p == math.Trunc(p) && !math.IsInf(p, 0) {
		return strconv.FormatFloat(p, 'f', 0, 64)
	}
	return strconv.FormatFloat(p, 'f', -1, 64)
}

// RateIsInf reports whether the configured request rate is unbounded.
func (r *Result) RateIsInf() bool {
	return r.RequestRate == 0 || math.IsInf(r.RequestRate, 1)
}
