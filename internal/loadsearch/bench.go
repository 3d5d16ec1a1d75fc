package loadsearch

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/perflab/perflab/internal/bench"
	"github.com/perflab/perflab/internal/metrics"
)

// Bench measures points against a live endpoint with internal/bench: each
// point is one run of Config's requests at the load (the request rate, no
// cap added; or the concurrency, all due at once), its first Warmup
// requests left out of the figures.
type Bench struct {
	// Config is the run every point starts from; its RequestRate and, on
	// the concurrency axis, MaxConcurrency are set per point.
	Config bench.Config
	Axis   Axis
	// Warmup is how many leading requests of each point are not counted.
	Warmup int
	// OnPoint, when set, is called after each point is measured.
	OnPoint func(Point)

	mu      sync.Mutex
	results map[float64]*metrics.Result
}

// Measure runs one point; it is a Measure.
func (b *Bench) Measure(ctx context.Context, load float64) (Point, error) {
	cfg := b.Config
	cfg.Schedule = nil
	switch b.Axis {
	case AxisConcurrency:
		cfg.RequestRate, cfg.MaxConcurrency = math.Inf(1), int(load)
	default:
		cfg.RequestRate = load
	}
	out, err := bench.Run(ctx, cfg)
	if err != nil {
		return Point{}, err
	}
	recs, dur := Window(out.Records, out.Duration, b.Warmup)
	opt := MetricsOptions(cfg.Metrics)
	opt.RequestRate, opt.MaxConcurrency, opt.Burstiness = cfg.RequestRate, cfg.MaxConcurrency, cfg.Burstiness
	res := metrics.Compute(recs, dur, opt)
	if res != nil {
		full := out.Result
		res.Backend, res.EndpointType, res.ModelID = full.Backend, full.EndpointType, full.ModelID
		res.NumPrompts, res.RequestRate, res.Burstiness, res.MaxConcurrency = len(recs), full.RequestRate, full.Burstiness, full.MaxConcurrency
		res.Date = full.Date
	}
	p := FromResult(res, b.Axis, load, min(b.Warmup, len(out.Records)))
	b.mu.Lock()
	if b.results == nil {
		b.results = map[float64]*metrics.Result{}
	}
	b.results[load] = res
	b.mu.Unlock()
	if b.OnPoint != nil {
		b.OnPoint(p)
	}
	return p, nil
}

// Result returns the measured window's metrics at load (nil if none).
func (b *Bench) Result(load float64) *metrics.Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.results[load]
}

// WriteCurve writes the search's points as a table, by load: offered and
// achieved rate, dispatch lag, the SLO's figures and the verdict.
func WriteCurve(w io.Writer, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := []string{"load", "offered req/s", "achieved req/s", "lag p99 ms", "completed", "success"}
	keys := []string{}
	seen := map[string]bool{}
	for _, b := range r.SLO.Bounds {
		k := latencyKey(b.Metric, b.P)
		if !seen[k] {
			keys, seen[k] = append(keys, k), true
		}
	}
	for _, k := range []string{"ttft_p99", "tpot_p99"} {
		if !seen[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		cols = append(cols, k+" ms")
	}
	cols = append(cols, "tok/s", "verdict")
	fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	for _, p := range r.Points {
		row := []string{fmt.Sprintf("%.6g", p.Load), rate(p.OfferedRate), rate(p.AchievedRate), fmt.Sprintf("%.2f", p.DispatchLagP99Ms),
			fmt.Sprint(p.Completed), fmt.Sprintf("%.1f%%", 100*p.SuccessRate)}
		for _, k := range keys {
			if v, ok := p.Latencies[k]; ok {
				row = append(row, fmt.Sprintf("%.1f", v))
			} else {
				row = append(row, "-")
			}
		}
		verdict := "meets"
		switch {
		case !p.Scored():
			verdict = "FLAGGED (not scored): " + p.Flag
		case !p.Meets:
			verdict = "breaks: " + p.Why
		}
		if p.Load == r.Sustainable && r.Found {
			verdict += " <- sustainable"
		}
		row = append(row, fmt.Sprintf("%.0f", p.TotalThroughput), verdict)
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}

func rate(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.4g", x)
}

// Summary is one line saying what the search found.
func (r *Result) Summary() string {
	if !r.Found {
		s := fmt.Sprintf("no load meets %s", r.SLO)
		if r.Limit != "" {
			s += " (" + r.Limit + ")"
		}
		return s
	}
	s := fmt.Sprintf("sustainable load: %.4g %s within %s (%d points, tolerance %.0f%%, %d measured requests a point needed)",
		r.Sustainable, r.Axis.Unit(), r.SLO, len(r.Points), 100*r.Tolerance, r.MinRequests)
	if r.Limit != "" {
		s += "; " + r.Limit
	}
	return s
}
