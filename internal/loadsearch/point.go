package loadsearch

import (
	"fmt"
	"math"
	"strconv"

	"github.com/perflab/perflab/internal/metrics"
)

// Axis is what a search varies: the request rate of an open-loop test
// (Poisson arrivals, no cap on requests in flight) or the number of
// requests kept in flight by a closed loop.
type Axis string

// The load axes.
const (
	AxisRate        Axis = "rate"
	AxisConcurrency Axis = "concurrency"
)

// ParseAxis reads "rate" or "concurrency".
func ParseAxis(s string) (Axis, error) {
	switch Axis(s) {
	case AxisRate, AxisConcurrency:
		return Axis(s), nil
	}
	return "", fmt.Errorf("loadsearch: load axis %q: want rate or concurrency", s)
}

// Unit names the axis's unit.
func (a Axis) Unit() string {
	if a == AxisConcurrency {
		return "concurrent requests"
	}
	return "req/s"
}

// behindShare is how far the client may fall behind the offered schedule
// before a point is flagged: 1% of the schedule's span.
const behindShare = 0.01

// Point is one measured load: the figures of its measured window (warm-up
// excluded) and whether the client delivered the load it was asked for.
type Point struct {
	// Load is the request rate (req/s) or the concurrency measured.
	Load float64 `json:"load"`
	// Warmup is how many leading requests ran but were not counted.
	Warmup int `json:"warmup"`
	// Completed and Failed count the measured window's requests.
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	// SuccessRate is Completed over the requests of the window.
	SuccessRate float64 `json:"success_rate"`
	// OfferedRate is the rate the schedule asked for and AchievedRate the
	// rate at which requests actually left the client (req/s); both 0 on
	// a closed loop, which offers no rate.
	OfferedRate  float64 `json:"offered_rate"`
	AchievedRate float64 `json:"achieved_rate"`
	// DispatchLagP99Ms and DispatchLagMaxMs are how late the client sent
	// requests against their schedule, the wait for a concurrency slot
	// excluded; ClientQueueMaxMs is the longest such wait.
	DispatchLagP99Ms float64 `json:"dispatch_lag_p99_ms"`
	DispatchLagMaxMs float64 `json:"dispatch_lag_max_ms"`
	ClientQueueMaxMs float64 `json:"client_queue_max_ms"`
	// RequestThroughput (req/s), OutputThroughput and TotalThroughput
	// (tok/s) over the measured window.
	RequestThroughput float64 `json:"request_throughput"`
	OutputThroughput  float64 `json:"output_throughput"`
	TotalThroughput   float64 `json:"total_token_throughput"`
	// Latencies holds each metric's percentiles in ms, keyed
	// "ttft_p99" (see Metrics and Percentiles).
	Latencies map[string]float64 `json:"latencies_ms"`
	// Flag, when set, says why the point cannot be scored (the client fell
	// behind, a cap closed the loop, too few requests): the search treats
	// it as unmeasured.
	Flag string `json:"flag,omitempty"`
	// Meets says whether the point met the SLO; Why names the bound it
	// broke. Both are set by Search.
	Meets bool   `json:"meets"`
	Why   string `json:"why,omitempty"`
	// Ref locates the measurement (a trial key, a result file); opaque
	// here.
	Ref string `json:"ref,omitempty"`
}

// Latency returns the metric's percentile p in ms.
func (p Point) Latency(metric string, pct float64) (float64, bool) {
	v, ok := p.Latencies[latencyKey(metric, pct)]
	return v, ok
}

func latencyKey(metric string, p float64) string {
	return metric + "_p" + strconv.FormatFloat(p, 'g', -1, 64)
}

// Scored says whether the search may use the point.
func (p Point) Scored() bool { return p.Flag == "" }

// MetricsOptions are the metrics.Compute options a point needs: every
// metric an SLO may bound, at every percentile it may name.
func MetricsOptions(base metrics.Options) metrics.Options {
	base.PercentileMetrics = append([]string(nil), Metrics...)
	base.Percentiles = append([]float64(nil), Percentiles...)
	return base
}

// Window drops the first warmup records (in request order) and shortens the
// duration by the time the first measured request was due, so the figures
// cover the measured window only. Records are not copied.
func Window(recs []metrics.Record, duration float64, warmup int) ([]metrics.Record, float64) {
	if warmup <= 0 || len(recs) == 0 {
		return recs, duration
	}
	warmup = min(warmup, len(recs))
	rest := recs[warmup:]
	if len(rest) == 0 {
		return rest, 0
	}
	t0 := rest[0].Scheduled
	for _, r := range rest {
		t0 = min(t0, r.Scheduled)
	}
	return rest, max(duration-t0, 0)
}

// FromResult reads a point from the metrics of its measured window (a
// result computed with MetricsOptions), and flags it when the client did
// not deliver the load: on the rate axis, requests leaving more than 1%
// slower than offered, a dispatch lag above 1% of the schedule's span, or a
// concurrency cap that made requests wait for a slot.
func FromResult(res *metrics.Result, axis Axis, load float64, warmup int) Point {
	p := Point{Load: load, Warmup: warmup, Latencies: map[string]float64{}}
	if res == nil {
		p.Flag = "no result"
		return p
	}
	p.Completed, p.Failed = res.Completed, res.Failed
	if n := res.Completed + res.Failed; n > 0 {
		p.SuccessRate = float64(res.Completed) / float64(n)
	}
	p.RequestThroughput, p.OutputThroughput, p.TotalThroughput = res.RequestThroughput, res.OutputThroughput, res.TotalTokenThroughput
	for _, m := range Metrics {
		for _, pc := range Percentiles {
			if v, ok := res.Percentile(m, pc); ok && !math.IsNaN(v) {
				p.Latencies[latencyKey(m, pc)] = v
			}
		}
	}
	pf := res.Perflab
	if pf == nil {
		p.Flag = "no dispatch record: cannot tell whether the client kept up"
		return p
	}
	p.DispatchLagP99Ms = pctOf(pf.DispatchLag, 99)
	p.DispatchLagMaxMs = pctOf(pf.DispatchLag, 100)
	p.ClientQueueMaxMs = pctOf(pf.ClientQueue, 100)
	if axis == AxisConcurrency {
		return p
	}
	p.OfferedRate, p.AchievedRate = finite(pf.OfferedRate), finite(pf.AchievedRate)
	span := 0.0
	if n := p.Completed + p.Failed; pf.OfferedRate > 0 && !math.IsInf(pf.OfferedRate, 0) && n > 1 {
		span = float64(n-1) / pf.OfferedRate * 1000
	}
	// Without a cap, the wait between a request's hand-off and its write
	// (a connection to open, a busy sender) is the client's lateness too;
	// the summaries cannot be summed request by request, so their maxima
	// are, which errs towards flagging.
	late := p.DispatchLagMaxMs
	if res.MaxConcurrency == 0 {
		late += p.ClientQueueMaxMs
	}
	switch {
	case res.MaxConcurrency > 0 && p.ClientQueueMaxMs > behindShare*span:
		p.Flag = fmt.Sprintf("a concurrency cap of %d closed the loop: requests waited up to %.1f ms for a slot", res.MaxConcurrency, p.ClientQueueMaxMs)
	case p.OfferedRate > 0 && p.AchievedRate < (1-behindShare)*p.OfferedRate:
		p.Flag = fmt.Sprintf("client fell behind: achieved %.4g of %.4g req/s offered", p.AchievedRate, p.OfferedRate)
	case late > behindShare*span:
		p.Flag = fmt.Sprintf("client fell behind: requests left up to %.1f ms late, over 1%% of the %.0f ms schedule", late, span)
	}
	return p
}

func pctOf(s metrics.LatencyStats, p float64) float64 {
	for _, pv := range s.Percentiles {
		if pv.P == p {
			return pv.Value
		}
	}
	return 0
}

// finite keeps JSON-encodable rates: an all-at-once schedule has none.
func finite(x float64) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return 0
	}
	return x
}
