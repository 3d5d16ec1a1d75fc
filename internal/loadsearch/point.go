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

// behindShare is how much slower than offered the client may send before
// a point is flagged: 1% of the offered rate.
const behindShare = 0.01

// stallShare is the longest a send may lag its schedule, as a share of the
// window's span, before the point is flagged: a lag that long is a stall
// that moved a material part of the arrivals, even when the client caught
// up afterwards. A lag that stays constant shifts the schedule and changes
// nothing the server sees, which is why the lag alone flags nothing below
// this.
const stallShare = 0.5

// overloadShare is the least growth that counts as overload: requests in
// flight growing by more than overloadShare/(1+overloadShare) of the
// arrival rate, or a latency growing by overloadShare seconds a second of
// arrival time, which is what a FIFO queue fed 5% above its capacity
// shows.
const overloadShare = 0.05

// minTrend is the fewest requests sent after the fill-up that a window
// needs to be judged (metrics fits no trend to fewer).
const minTrend = 10

// trendT is the t statistic a trend must exceed to count: well beyond
// noise even when consecutive requests' latencies are correlated, which
// inflates a least-squares t.
const trendT = 3

// settleFills is how many median end-to-end latencies the window's span
// must last for a pass: the first is the fill-up of an empty server (the
// keep-up trends skip it), the rest show whether the server holds.
const settleFills = 3

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
	// PeakConcurrency is the most requests in flight in the window.
	PeakConcurrency int `json:"peak_concurrency,omitempty"`
	// KeepUp holds the window's keep-up figures (nil for a result without
	// them, e.g. one stored before they were recorded).
	KeepUp *metrics.KeepUp `json:"keep_up,omitempty"`
	// Overload, when set, says how the server failed to keep up with the
	// arrivals: the point misses the SLO whatever its percentiles say,
	// since they grow for as long as such a load lasts.
	Overload string `json:"overload,omitempty"`
	// Short, when set, says why the window is too short to tell whether
	// the server kept up; a point that breaks no bound is then not scored
	// (a longer point decides it), overloaded or not.
	Short string `json:"short,omitempty"`
	// NeedsMore says that Flag is SLO.Judge's for want of evidence (too
	// few requests, too short a window): a longer point may decide it.
	NeedsMore bool `json:"needs_more,omitempty"`
	// Limited says that the point reached its limits (time, requests)
	// without a verdict: a lower rate, whose runs last longer, will not
	// do better.
	Limited bool `json:"limited,omitempty"`
	// Requests and Seconds are what the point cost: the requests it sent,
	// warm-up included, and its wall-clock (or simulated) seconds.
	Requests int     `json:"requests,omitempty"`
	Seconds  float64 `json:"seconds,omitempty"`
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
	base.KeepUp = true
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
// result computed with MetricsOptions). It flags the point when the client
// did not deliver the load: on the rate axis, requests leaving more than 1%
// slower (or, catching up, faster) than offered and more than one request
// behind (ahead of) the schedule by the end, or a send stalled for half the
// window's span, or a
// concurrency cap that made requests wait for a slot; on the concurrency
// axis, a window that never had that many requests in flight. It also
// judges from the keep-up figures whether the server kept up (Overload)
// and whether the window was long enough to tell (Short).
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
	p.PeakConcurrency = pf.PeakConcurrency
	p.KeepUp = pf.KeepUp
	if axis == AxisConcurrency {
		// A closed loop cannot overload the server (a request leaves
		// before the next enters), but it can fail to reach its load: a
		// window with fewer requests than the concurrency, or a server
		// answering faster than the client refills.
		if n := p.Completed + p.Failed; n > 0 && float64(pf.PeakConcurrency) < (1-behindShare)*load {
			p.Flag = fmt.Sprintf("concurrency %g not reached: at most %d requests were in flight (%d in the measured window)", load, pf.PeakConcurrency, n)
		}
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
	// How many requests the sends ended behind (ahead of, when < 0) the
	// schedule: the offered rate times the drift of the lag. Fewer than
	// one is a jitter of the last sends, not a different load.
	behind := 0.0
	if n := p.Completed + p.Failed; p.OfferedRate > 0 && p.AchievedRate > 0 && n > 1 {
		behind = float64(n-1) * (p.OfferedRate/p.AchievedRate - 1)
	}
	switch {
	case res.MaxConcurrency > 0 && p.ClientQueueMaxMs > behindShare*span:
		p.Flag = fmt.Sprintf("a concurrency cap of %d closed the loop: requests waited up to %.1f ms for a slot", res.MaxConcurrency, p.ClientQueueMaxMs)
	case behind > 1 && p.AchievedRate < (1-behindShare)*p.OfferedRate:
		p.Flag = fmt.Sprintf("client fell behind: achieved %.4g of %.4g req/s offered", p.AchievedRate, p.OfferedRate)
	case behind < -1 && p.AchievedRate > (1+behindShare)*p.OfferedRate:
		// Late sends caught up in a burst: the server saw a faster
		// rate than the one offered.
		p.Flag = fmt.Sprintf("client fell behind and caught up in a burst: sent %.4g req/s against %.4g offered", p.AchievedRate, p.OfferedRate)
	case span > 0 && late > stallShare*span:
		p.Flag = fmt.Sprintf("client fell behind: a request left %.1f ms late, over half the %.0f ms schedule", late, span)
	}
	p.Overload, p.Short = keptUp(p.KeepUp)
	return p
}

// keptUp judges the keep-up figures of an open-loop window: overload is
// requests in flight growing (arrivals outpacing completions) together
// with a growing TTFT or end-to-end latency, each by more than
// overloadShare and with a t statistic above trendT, the test guidellm's
// over-saturation detection makes on the same two series; short is a
// window that lasted under settleFills median latencies (or had under
// minTrend requests after the first), in which a stable server may not
// have filled yet. Without figures both are "".
func keptUp(k *metrics.KeepUp) (overload, short string) {
	if k == nil {
		return "", ""
	}
	rate := 0.0
	if k.SpanS > 0 {
		rate = float64(k.Arrivals-1) / k.SpanS
	}
	growing := rate > 0 && k.InFlightSlope > overloadShare/(1+overloadShare)*rate && k.InFlightT > trendT
	ttft := k.TTFTSlope > overloadShare && k.TTFTT > trendT
	e2e := k.E2ESlope > overloadShare && k.E2ET > trendT
	if growing && (ttft || e2e) {
		what := fmt.Sprintf("TTFT grew %.2f s a second (median %.0f ms, then %.0f ms)", k.TTFTSlope, k.TTFTEarlyMs, k.TTFTLateMs)
		if !ttft {
			what = fmt.Sprintf("end-to-end latency grew %.2f s a second", k.E2ESlope)
		}
		overload = fmt.Sprintf("overloaded: requests in flight grew %.3g a second (%.0f%% of the %.4g req/s arriving), %s; %d of %d requests finished within the %.1f s of arrivals",
			k.InFlightSlope, 100*k.InFlightSlope/rate, rate, what, k.CompletedInSpan, k.Arrivals, k.SpanS)
	}
	if k.Trended == 0 || k.SpanS < settleFills*k.MedianE2ES {
		short = fmt.Sprintf("window too short to tell whether the server kept up: %.1f s of arrivals (%d requests), under %d median latencies of %.1f s or %d requests after the first",
			k.SpanS, k.Arrivals, settleFills, k.MedianE2ES, minTrend)
	}
	return overload, short
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
