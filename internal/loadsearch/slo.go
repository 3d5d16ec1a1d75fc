// Package loadsearch finds the highest load a server sustains within a
// service-level objective: a doubling bracket, then bisection to a relative
// tolerance, over an abstract measurement of one load point. It also parses
// the compact SLO form ("ttft_p99<=200ms,tpot_p99<=30ms,success>=99%") and
// says when a measured point cannot be trusted because the client did not
// deliver the load it was asked for.
package loadsearch

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/perflab/perflab/internal/metrics"
)

// Latency metrics an SLO may bound, spelled as vLLM's --percentile-metrics.
const (
	MetricTTFT = "ttft"
	MetricTPOT = "tpot"
	MetricITL  = "itl"
	MetricE2EL = "e2el"
)

// Percentiles are the percentiles an SLO bound may name; every point
// reports all of them so one measurement serves any SLO.
var Percentiles = []float64{50, 90, 95, 99}

// Metrics are the latency metrics every point reports.
var Metrics = []string{MetricTTFT, MetricTPOT, MetricITL, MetricE2EL}

// Bound is one latency bound: the percentile P of Metric must be at most
// MaxMs milliseconds.
type Bound struct {
	Metric string  `json:"metric"`
	P      float64 `json:"p"`
	MaxMs  float64 `json:"max_ms"`
}

// SLO is a set of latency bounds and a minimum share of requests that must
// succeed (MinSuccess 0: no bound on it).
type SLO struct {
	Bounds []Bound `json:"bounds"`
	// MinSuccess is the minimum success rate, a fraction in [0, 1].
	MinSuccess float64 `json:"min_success,omitempty"`
}

// tailSamples is how many measured requests must lie beyond the highest
// percentile an SLO names: with fewer, the percentile is an interpolation
// between the slowest one or two requests and moves with a single outlier.
const tailSamples = 5

// ParseSLO reads the compact form: comma-separated terms, each either
// METRIC_pNN<=VALUE with METRIC one of ttft, tpot, itl, e2el (e2e is
// accepted for e2el), NN one of 50, 90, 95, 99 and VALUE a duration with
// unit us, ms or s (ms when none is given); or success>=X% (or a fraction
// such as 0.99).
func ParseSLO(s string) (SLO, error) {
	var out SLO
	if strings.TrimSpace(s) == "" {
		return out, fmt.Errorf("loadsearch: slo: empty (want e.g. ttft_p99<=200ms,tpot_p99<=30ms,success>=99%%)")
	}
	seen := map[string]bool{}
	for i, term := range strings.Split(s, ",") {
		term = strings.TrimSpace(term)
		where := fmt.Sprintf("slo term %d %q", i+1, term)
		if k, v, ok := strings.Cut(term, ">="); ok {
			if strings.TrimSpace(k) != "success" {
				return out, fmt.Errorf("loadsearch: %s: only success takes >= (latency bounds take <=)", where)
			}
			f, err := parseShare(strings.TrimSpace(v))
			if err != nil {
				return out, fmt.Errorf("loadsearch: %s: %w", where, err)
			}
			if seen["success"] {
				return out, fmt.Errorf("loadsearch: %s: success given twice", where)
			}
			seen["success"] = true
			out.MinSuccess = f
			continue
		}
		k, v, ok := strings.Cut(term, "<=")
		if !ok {
			return out, fmt.Errorf("loadsearch: %s: want METRIC_pNN<=VALUE or success>=X%%", where)
		}
		k = strings.ToLower(strings.TrimSpace(k))
		m, p, ok := strings.Cut(k, "_p")
		if !ok {
			return out, fmt.Errorf("loadsearch: %s: want METRIC_pNN, e.g. ttft_p99", where)
		}
		if m == "e2e" {
			m = MetricE2EL
		}
		if !slices.Contains(Metrics, m) {
			return out, fmt.Errorf("loadsearch: %s: unknown metric %q (want ttft, tpot, itl or e2el)", where, m)
		}
		pv, err := strconv.ParseFloat(p, 64)
		if err != nil || !slices.Contains(Percentiles, pv) || p != strconv.FormatFloat(pv, 'g', -1, 64) {
			return out, fmt.Errorf("loadsearch: %s: percentile p%s: want p50, p90, p95 or p99", where, p)
		}
		ms, err := parseMs(strings.TrimSpace(v))
		if err != nil {
			return out, fmt.Errorf("loadsearch: %s: %w", where, err)
		}
		key := m + "_p" + p
		if seen[key] {
			return out, fmt.Errorf("loadsearch: %s: %s given twice", where, key)
		}
		seen[key] = true
		out.Bounds = append(out.Bounds, Bound{Metric: m, P: pv, MaxMs: ms})
	}
	if len(out.Bounds) == 0 && out.MinSuccess == 0 {
		return out, fmt.Errorf("loadsearch: slo %q bounds nothing", s)
	}
	return out, nil
}

// parseMs reads "200ms", "2s", "500us" or a bare number of milliseconds.
func parseMs(v string) (float64, error) {
	scale := 1.0
	num := v
	switch {
	case strings.HasSuffix(v, "ms"):
		num = strings.TrimSuffix(v, "ms")
	case strings.HasSuffix(v, "us"):
		num, scale = strings.TrimSuffix(v, "us"), 1e-3
	case strings.HasSuffix(v, "s"):
		num, scale = strings.TrimSuffix(v, "s"), 1e3
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("bound %q: want a positive duration such as 200ms or 2s", v)
	}
	return f * scale, nil
}

// parseShare reads "99%", "99.5%" or "0.99".
func parseShare(v string) (float64, error) {
	pct := strings.HasSuffix(v, "%")
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("success %q: want a percentage such as 99%% or a fraction such as 0.99", v)
	}
	if pct {
		f /= 100
	}
	if f < 0 || f > 1 {
		return 0, fmt.Errorf("success %q: must lie within 0%% and 100%%", v)
	}
	return f, nil
}

// String writes the compact form ParseSLO reads.
func (s SLO) String() string {
	var parts []string
	for _, b := range s.Bounds {
		parts = append(parts, fmt.Sprintf("%s_p%s<=%sms", b.Metric, strconv.FormatFloat(b.P, 'g', -1, 64), strconv.FormatFloat(b.MaxMs, 'g', -1, 64)))
	}
	if s.MinSuccess > 0 {
		// A percentage reads best, but not every fraction survives the
		// trip through one exactly.
		if pct := 100 * s.MinSuccess; pct/100 == s.MinSuccess {
			parts = append(parts, "success>="+strconv.FormatFloat(pct, 'g', -1, 64)+"%")
		} else {
			parts = append(parts, "success>="+strconv.FormatFloat(s.MinSuccess, 'g', -1, 64))
		}
	}
	return strings.Join(parts, ",")
}

// Bound returns the bound on metric at percentile p, if the SLO has one.
func (s SLO) Bound(metric string, p float64) (float64, bool) {
	for _, b := range s.Bounds {
		if b.Metric == metric && b.P == p {
			return b.MaxMs, true
		}
	}
	return 0, false
}

// MinRequests is how many completed requests a point's measured window
// needs for the highest percentile the SLO names: enough that
// tailSamples of them lie beyond it (p99: 500, p95: 100, p90: 50, p50:
// 10).
func (s SLO) MinRequests() int {
	p := 50.0
	for _, b := range s.Bounds {
		p = max(p, b.P)
	}
	return int(math.Ceil(tailSamples*100/(100-p) - 1e-9))
}

// Check says whether a point meets the SLO; why names the first bound it
// breaks ("" when it meets them all).
func (s SLO) Check(p Point) (ok bool, why string) {
	if p.SuccessRate < s.MinSuccess {
		return false, fmt.Sprintf("success %.2f%% < %.2f%%", 100*p.SuccessRate, 100*s.MinSuccess)
	}
	for _, b := range s.Bounds {
		v, have := p.Latency(b.Metric, b.P)
		if !have {
			return false, fmt.Sprintf("no %s p%g measured", b.Metric, b.P)
		}
		if v > b.MaxMs {
			return false, fmt.Sprintf("%s p%g %.1f ms > %g ms", b.Metric, b.P, v, b.MaxMs)
		}
	}
	return true, ""
}

// Judge gives a measured point its verdict against the SLO and says
// whether more evidence (a longer window) could change it. In order: a
// point the client could not deliver is not scored; nor is one with too
// few requests for the SLO's percentile; a broken bound is a miss, since a
// window's fill-up only flatters the latency; a window too short to tell
// whether the server kept up (Point.Short) is not scored; a server that did
// not keep up (Point.Overload) is a miss; the rest meets the SLO. more is true for
// the two verdicts a longer window could change: too few requests, too
// short.
func (s SLO) Judge(p Point, minRequests int) (out Point, more bool) {
	p.Meets, p.Why = false, ""
	if p.NeedsMore {
		// Judged before: the flag was this function's, not the client's.
		p.Flag, p.NeedsMore = "", false
	}
	if p.Flag != "" {
		p.Why = "not scored: " + p.Flag
		return p, false
	}
	if p.SuccessRate >= s.MinSuccess && p.Completed < minRequests {
		p.Flag = fmt.Sprintf("too few requests: %d completed in the measured window, the SLO's percentile needs %d", p.Completed, minRequests)
		p.Why, p.NeedsMore = "not scored: "+p.Flag, true
		return p, true
	}
	if ok, why := s.Check(p); !ok {
		p.Why = why
		return p, false
	}
	if p.Short != "" {
		// Before the overload test: in a window shorter than a few
		// latencies the server may still be filling, which looks like
		// the start of an overload.
		p.Flag = p.Short
		p.Why, p.NeedsMore = "not scored: "+p.Flag, true
		return p, true
	}
	if p.Overload != "" {
		p.Why = p.Overload
		return p, false
	}
	p.Meets = true
	return p, false
}

// worst is the bound the point misses by the largest factor, and that
// factor (measured over bound; 0 when no bound was measured).
func (s SLO) worst(p Point) (Bound, float64) {
	var wb Bound
	w := 0.0
	for _, b := range s.Bounds {
		if v, ok := p.Latency(b.Metric, b.P); ok && v/b.MaxMs > w {
			wb, w = b, v/b.MaxMs
		}
	}
	return wb, w
}

// certainty counts, as a run's window requests finish, those over each
// latency bound: once more are over a bound than the percentile allows of
// the whole window, the bound is broken whatever the others do.
type certainty struct {
	s        SLO
	window   int
	queue    bool
	over     []int
	finished int
}

func (s SLO) certainty(window int, includeQueue bool) *certainty {
	return &certainty{s: s, window: window, queue: includeQueue, over: make([]int, len(s.Bounds))}
}

// add counts a finished request and says whether a bound is now certainly
// broken. Failed requests count against no latency bound (vLLM leaves them
// out of the percentiles), and ITL, a per-chunk figure, is not counted.
func (c *certainty) add(r metrics.Record) bool {
	c.finished++
	if !r.Success || c.window <= 0 {
		return false
	}
	for i, b := range c.s.Bounds {
		v, ok := recordMs(r, b.Metric, c.queue)
		if !ok || v <= b.MaxMs {
			continue
		}
		c.over[i]++
		// numpy's linear percentile of N values lies at or above the
		// value at floor(p/100·(N-1)) in ascending order: once
		// N-floor(p/100·(N-1)) values exceed the bound, that one does.
		// The count needed only falls with N, so a run stopped here
		// (fewer values) breaks the bound too.
		if c.over[i] >= c.window-int(math.Floor(b.P/100*float64(c.window-1))) {
			return true
		}
	}
	return false
}

// recordMs is a request's value of an SLO metric in ms.
func recordMs(r metrics.Record, metric string, includeQueue bool) (float64, bool) {
	switch metric {
	case MetricTTFT:
		t := r.TTFT
		if includeQueue {
			t += r.QueueTime
		}
		return 1000 * t, true
	case MetricE2EL:
		return 1000 * r.Latency, true
	case MetricTPOT:
		if r.OutputLen <= 1 {
			return 0, false
		}
		return 1000 * (r.Latency - r.TTFT) / float64(r.OutputLen-1), true
	}
	return 0, false
}
