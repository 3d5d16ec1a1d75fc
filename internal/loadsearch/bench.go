package loadsearch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/perflab/perflab/internal/bench"
	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/metrics"
)

// Bench measures points against a live endpoint with internal/bench: each
// point is a run of Config's requests at the load (the request rate, no
// cap added; or the concurrency, all due at once), its first Warmup
// requests left out of the figures. A point is sized by its evidence, not
// by the prompts given: a run whose window is too short for a verdict
// (SLO.Judge asks for more) is run again with twice the requests (More
// supplies them, or Config's are repeated), until the verdict is in or the
// point's limits (MaxPointSeconds, MaxPointRequests) are reached; and a run
// whose SLO is already certainly broken (more of its window's requests
// over a bound than the percentile allows, whatever the rest do) is ended
// there.
type Bench struct {
	// Config is the run every point starts from; its RequestRate and, on
	// the concurrency axis, MaxConcurrency are set per point.
	Config bench.Config
	Axis   Axis
	// SLO judges whether a run was long enough (none: every point is one
	// run of Config's requests).
	SLO *SLO
	// Warmup is how many leading requests of each point are not counted.
	Warmup int
	// MaxPointSeconds bounds a point's wall-clock time, all its runs
	// together (0: no bound); MaxPointRequests the requests of its longest
	// run (0: 16 times Config's).
	MaxPointSeconds  float64
	MaxPointRequests int
	// More, when set, returns n requests for a longer run (the dataset
	// sampled again); without it Config's requests are repeated.
	More func(n int) ([]dataset.Request, error)
	// OnPoint, when set, is called after each point is measured.
	OnPoint func(Point)

	mu      sync.Mutex
	results map[float64]*metrics.Result
}

// errCertain ends a run whose verdict cannot change.
var errCertain = errors.New("the SLO is broken whatever the rest of the run does")

// Measure runs one point; it is a Measure.
func (b *Bench) Measure(ctx context.Context, load float64) (Point, error) {
	n := len(b.Config.Requests)
	maxN := b.MaxPointRequests
	if maxN == 0 {
		maxN = 16 * n
	}
	start := time.Now()
	sent := 0
	for try := 0; ; try++ {
		reqs, err := b.requests(n)
		if err != nil {
			return Point{}, fmt.Errorf("loadsearch: %d requests for a longer point: %w", n, err)
		}
		left := 0.0
		if b.MaxPointSeconds > 0 {
			left = b.MaxPointSeconds - time.Since(start).Seconds()
		}
		p, res, stopped, err := b.run(ctx, load, reqs, left)
		if err != nil {
			return Point{}, err
		}
		sent += p.Requests
		p.Requests, p.Seconds = sent, time.Since(start).Seconds()
		more := false
		if b.SLO != nil {
			_, more = b.SLO.Judge(p, b.SLO.MinRequests())
		}
		next := max(2*n, b.settled(p, load))
		// The next run's length, at the offered rate: a run that cannot
		// end within the point's time left is not started.
		tooLong := b.MaxPointSeconds > 0 && b.Axis == AxisRate && time.Since(start).Seconds()+float64(next)/load > b.MaxPointSeconds
		if more && (stopped != "" || next > maxN || tooLong) {
			why := stopped
			if why == "" {
				why = fmt.Sprintf("a run of %d requests would pass the point's limit (%d requests, %gs)", next, maxN, b.MaxPointSeconds)
			}
			p.Flag, p.NeedsMore = fmt.Sprintf("undecided at the point's limit (%s): %s", why, p.Flag), false
			// Out of time, a lower rate (longer runs) will not decide
			// either; out of requests, it may (its window is longer).
			p.Limited = stopped != "" || tooLong
			more = false
		}
		if !more {
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
		n = next
	}
}

// settled is how many requests a run at load needs for its window to
// outlast the server's fill-up, by the last run's median latency, with a
// quarter to spare (0 when that run says nothing of it): a point at a rate
// far beyond the server's needs far more than twice its prompts, and
// learns at once that its limit forbids them.
func (b *Bench) settled(p Point, load float64) int {
	k := p.KeepUp
	if b.Axis != AxisRate || k == nil || !(k.MedianE2ES > 0) {
		return 0
	}
	need := 1.25*settleFills*k.MedianE2ES*load + minTrend + float64(b.Warmup)
	if need > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(math.Ceil(need))
}

// requests returns n requests: Config's, then More's or Config's again.
func (b *Bench) requests(n int) ([]dataset.Request, error) {
	base := b.Config.Requests
	if n <= len(base) {
		return base, nil
	}
	if b.More != nil {
		return b.More(n)
	}
	out := make([]dataset.Request, n)
	for i := range out {
		out[i] = base[i%len(base)]
	}
	return out, nil
}

// run measures one run of reqs at load within seconds (0: no bound);
// stopped says why a run ended early without a verdict ("" when it ran to
// its end or stopped because the verdict was certain).
func (b *Bench) run(ctx context.Context, load float64, reqs []dataset.Request, seconds float64) (Point, *metrics.Result, string, error) {
	cfg := b.Config
	cfg.Schedule, cfg.Requests = nil, reqs
	switch b.Axis {
	case AxisConcurrency:
		cfg.RequestRate, cfg.MaxConcurrency = math.Inf(1), int(load)
	default:
		cfg.RequestRate = load
	}
	if seconds > 0 && (cfg.MaxSeconds == 0 || seconds < cfg.MaxSeconds) {
		cfg.MaxSeconds = seconds
	}
	if cfg.RequestIDPrefix == "" {
		cfg.RequestIDPrefix = fmt.Sprintf("slo-%08x-", rand.Uint32())
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if b.SLO != nil {
		user := cfg.OnRecord
		cert := b.SLO.certainty(len(reqs)-b.Warmup, cfg.Metrics.IncludeQueueInTTFT)
		cfg.OnRecord = func(r metrics.Record) {
			if user != nil {
				user(r)
			}
			i, err := strconv.Atoi(strings.TrimPrefix(r.ID, cfg.RequestIDPrefix))
			if err == nil && i >= b.Warmup && cert.add(r) {
				cancel(errCertain)
			}
		}
	}
	out, err := bench.Run(runCtx, cfg)
	stopped := ""
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return Point{}, nil, "", err
	case errors.Is(context.Cause(runCtx), errCertain) && out != nil:
	case errors.Is(err, bench.ErrStopped) && out != nil:
		stopped = out.Stopped
	default:
		return Point{}, nil, "", err
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
	p.Requests = len(out.Records) + len(out.Incomplete)
	return p, res, stopped, nil
}

// Result returns the measured window's metrics at load (nil if none).
func (b *Bench) Result(load float64) *metrics.Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.results[load]
}

// WriteCurve writes the search's points as a table, by load: offered and
// achieved rate, dispatch lag, what the point cost (requests sent, warm-up
// and longer runs included, and seconds), the SLO's figures and the
// verdict.
func WriteCurve(w io.Writer, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := []string{"load", "offered req/s", "achieved req/s", "lag p99 ms", "sent", "seconds", "completed", "success"}
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
			fmt.Sprint(p.Requests), fmt.Sprintf("%.1f", p.Seconds), fmt.Sprint(p.Completed), fmt.Sprintf("%.1f%%", 100*p.SuccessRate)}
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
		tps := "-"
		if v := finite(p.TotalThroughput); v > 0 {
			tps = fmt.Sprintf("%.0f", v)
		}
		row = append(row, tps, verdict)
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
	sent, secs := 0, 0.0
	for _, p := range r.Points {
		sent, secs = sent+p.Requests, secs+p.Seconds
	}
	s := fmt.Sprintf("sustainable load: %.4g %s within %s (%d points, %d requests, %.0f s; tolerance %.0f%%, %d measured requests a point needed)",
		r.Sustainable, r.Axis.Unit(), r.SLO, len(r.Points), sent, secs, 100*r.Tolerance, r.MinRequests)
	if r.Limit != "" {
		s += "; " + r.Limit
	}
	return s
}
