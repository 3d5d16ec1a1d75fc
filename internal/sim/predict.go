package sim

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/perflab/perflab/internal/bench"
	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/metrics"
)

// Load is the client side of a predicted run, as `vllm bench serve` sets it.
type Load struct {
	// RequestRate is requests per second; 0 or +Inf sends all at t=0.
	RequestRate float64
	// Burstiness is the gamma shape of the arrival gaps (0 = 1, Poisson).
	Burstiness float64
	// MaxConcurrency caps requests in flight (0 = none).
	MaxConcurrency int
	// Seed seeds the arrival schedule.
	Seed int64
	// Offline drives the engine core as the offline benchmarks do
	// (`vllm bench throughput`, `trtllm-bench throughput`,
	// `sglang.bench_offline_throughput`): pre-tokenized requests handed to
	// the engine in-process, results collected at the end, so the API
	// server's admission (Coef.FrontendMs) and streaming (Coef.OutputUs)
	// costs are not paid. The scheduler still takes each request off its
	// queue (Coef.CoreAddMs), as it does for any caller.
	Offline bool
	// noGaps keeps no inter-token gaps or chunk sizes: for a caller that
	// reads only throughput, TTFT and TPOT, which do not depend on them
	// (an offline range's served bound).
	noGaps bool
}

// Prediction is what a predicted run produced: the same records and result
// a live benchmark against the real engine would give.
type Prediction struct {
	Records  []metrics.Record
	Duration float64
	Result   *metrics.Result
	// Params are the resolved engine parameters.
	Params Params
	// Stats is the engine state at the end (preemptions, token counts).
	Stats Stats
	// KVCapacityTokens is the KV cache size the memory model found.
	KVCapacityTokens int
	// MaxRunning is the most requests the engine runs at once, over all
	// data-parallel replicas: its max_num_seqs, or what it derived (SGLang
	// from its KV pool and, for a hybrid model, its state pool).
	MaxRunning int
}

// ErrAllRejected is wrapped by Prediction.Err when the engine rejected
// every request: the run has no figures to report, only a cause.
var ErrAllRejected = errors.New("sim: the engine rejected every request")

// Err reports a run in which not one request completed, with the first
// request's error as the cause (a prompt past the context, say); nil when
// any request completed or none was sent.
func (p *Prediction) Err() error {
	if p.Result == nil || p.Result.Completed > 0 || len(p.Records) == 0 {
		return nil
	}
	for _, r := range p.Records {
		if r.Error != "" {
			return fmt.Errorf("%w (all %d): the first: %s", ErrAllRejected, len(p.Records), r.Error)
		}
	}
	return fmt.Errorf("%w (all %d)", ErrAllRejected, len(p.Records))
}

// Predict runs reqs through a simulated engine with the embedded
// calibration and returns per-request records and vLLM's metrics.
// Deterministic for a given Load.Seed.
func Predict(p Params, reqs []dataset.Request, load Load) (*Prediction, error) {
	return PredictWith(p, nil, reqs, load)
}

// PredictWith is Predict with explicit coefficients (nil = embedded). A
// deployment of p.DP > 1 data-parallel replicas runs as p.DP engines
// behind one front end that routes each request as the engine's does
// (p.Route, the Router sim serve uses too), all on one clock.
func PredictWith(p Params, c *Coefficients, reqs []dataset.Request, load Load) (*Prediction, error) {
	e, err := New(p, c)
	if err != nil {
		return nil, err
	}
	if load.Offline {
		e.withoutAPIServer()
	}
	if e.p.DP <= 1 {
		return e.run(reqs, load, false)
	}
	engines := []*Engine{e}
	for k := 1; k < e.p.DP; k++ {
		r, err := New(p, c)
		if err != nil {
			return nil, fmt.Errorf("sim: data-parallel replica %d: %w", k, err)
		}
		if load.Offline {
			r.withoutAPIServer()
		}
		engines = append(engines, r)
	}
	cl := &cluster{engines: engines, router: NewRouter(e.p.Route, len(engines))}
	return runModel(cl, reqs, load, false)
}

// predictModel is what the prediction loop drives: one engine, or a
// data-parallel cluster of them.
type predictModel interface {
	setEmit(func(s *seq, t float64, tokens int, fin bool, err error))
	submit(r Req, user int)
	NextEventTime() (float64, bool)
	advance(to float64)
	// clock is where the client stands after an advance: the engine's
	// own time (past the step it ran); for a cluster, the earliest of its
	// engines' (an idle replica takes a request at once).
	clock() float64
	queues() (waiting, running int)
	summary() (Params, Stats, int, int)
}

func (e *Engine) setEmit(f func(s *seq, t float64, tokens int, fin bool, err error)) { e.emit = f }
func (e *Engine) clock() float64                                                     { return e.now }
func (e *Engine) queues() (int, int)                                                 { return len(e.waiting), len(e.running) }
func (e *Engine) summary() (Params, Stats, int, int) {
	return e.p, e.Stats(), e.KVCapacityTokens(), e.maxSeqs * e.p.DP
}

// cluster is p.DP engines behind one front end.
type cluster struct {
	engines []*Engine
	router  *Router
}

func (c *cluster) setEmit(f func(s *seq, t float64, tokens int, fin bool, err error)) {
	for _, e := range c.engines {
		e.emit = f
	}
}

func (c *cluster) submit(r Req, user int) {
	k := c.router.Pick(r.Arrival, func(k int) Stats { return c.engines[k].Stats() })
	c.engines[k].submit(r, user)
}

func (c *cluster) NextEventTime() (float64, bool) {
	t, found := math.Inf(1), false
	for _, e := range c.engines {
		if et, ok := e.NextEventTime(); ok {
			t, found = math.Min(t, et), true
		}
	}
	return t, found
}

func (c *cluster) advance(to float64) {
	for _, e := range c.engines {
		e.advance(to)
	}
}

func (c *cluster) clock() float64 {
	t := math.Inf(1)
	for _, e := range c.engines {
		t = math.Min(t, e.now)
	}
	return t
}

func (c *cluster) queues() (w, r int) {
	for _, e := range c.engines {
		w, r = w+len(e.waiting), r+len(e.running)
	}
	return w, r
}

// summary is the deployment's parameters, its summed counts and its
// whole KV capacity (each engine's already counts every replica).
func (c *cluster) summary() (Params, Stats, int, int) {
	var s Stats
	for _, e := range c.engines {
		st := e.Stats()
		s.Running += st.Running
		s.Waiting += st.Waiting
		s.KVUsage += st.KVUsage / float64(len(c.engines))
		s.Preemptions += st.Preemptions
		s.PromptTokens += st.PromptTokens
		s.GenerationTokens += st.GenerationTokens
	}
	// Capacity and the running limit already count every replica.
	p, _, kv, running := c.engines[0].summary()
	return p, s, kv, running
}

type tracker struct {
	rec      *metrics.Record
	first    bool
	last     float64
	finished bool
}

// run drives the engine with the client's schedule. lite skips what only
// the full result needs (inter-token gaps, chunk sizes, metrics.Compute):
// the calibration fit predicts each reference case thousands of times and
// reads only TTFT, latency and token counts.
func (e *Engine) run(reqs []dataset.Request, load Load, lite bool) (*Prediction, error) {
	return runModel(e, reqs, load, lite)
}

// runModel is run for an engine or a cluster.
func runModel(e predictModel, reqs []dataset.Request, load Load, lite bool) (*Prediction, error) {
	n := len(reqs)
	rate := load.RequestRate
	if rate <= 0 {
		rate = math.Inf(1)
	}
	burst := load.Burstiness
	if burst == 0 {
		burst = 1
	}
	var sched []float64
	if math.IsInf(rate, 1) {
		sched = make([]float64, n)
	} else {
		sched = bench.Schedule(n, rate, burst, load.Seed)
		if sched == nil && n > 0 {
			return nil, fmt.Errorf("sim: invalid load (rate %g, burstiness %g)", rate, burst)
		}
	}
	recs := make([]metrics.Record, n)
	tr := make([]tracker, n)
	// An offline benchmark streams nothing, so it has no inter-token gaps
	// to report; keeping them (a float per token) and sorting them for
	// percentiles nobody prints was most of an offline prediction's time.
	gaps := !lite && !load.Offline && !load.noGaps
	for i := range recs {
		recs[i] = metrics.Record{ID: "sim-" + strconv.Itoa(i), PromptLen: reqs[i].PromptLen, Scheduled: sched[i], OutputLenSource: "usage"}
		tr[i].rec = &recs[i]
		if gaps {
			recs[i].ITL = make([]float64, 0, max(reqs[i].OutputLen-1, 0))
		}
	}
	inflight := 0
	next := 0
	var waitq []int // due but waiting for a concurrency slot
	// The client frees a concurrency slot when it sees the request end,
	// which the API server may deliver after the engine finished it.
	var releases []float64 // sorted
	release := func(t float64) {
		i := sort.SearchFloat64s(releases, t)
		releases = append(releases, 0)
		copy(releases[i+1:], releases[i:])
		releases[i] = t
	}
	done := 0
	e.setEmit(func(s *seq, t float64, tokens int, fin bool, err error) {
		i := s.user
		r := tr[i].rec
		if err != nil {
			r.Success = false
			r.Error = err.Error()
			r.ErrorClass = "http_status"
			if errors.Is(err, ErrCrashed) {
				// The client sees its stream cut, or the connection
				// refused once the engine is gone.
				r.ErrorClass = "reset"
				if r.OutputLen == 0 && t == r.Sent {
					r.ErrorClass = "connect"
				}
			}
			r.Latency = t - r.Sent
			tr[i].finished = true
			done++
			release(t)
			return
		}
		if tokens > 0 {
			if !tr[i].first {
				tr[i].first = true
				r.TTFT = t - r.Sent
				if gaps {
					r.ChunkTokens = append(r.ChunkTokens, tokens)
				}
			} else if gaps {
				if t == tr[i].last {
					// Coalesced by the API server: one chunk.
					r.ChunkTokens[len(r.ChunkTokens)-1] += tokens
				} else {
					r.ITL = append(r.ITL, t-tr[i].last)
					r.ChunkTokens = append(r.ChunkTokens, tokens)
				}
			}
			r.OutputLen += tokens
			tr[i].last = t
		}
		if fin {
			r.Success = true
			r.Latency = t - r.Sent
			tr[i].finished = true
			done++
			release(t)
		}
	})
	send := func(i int, t float64) {
		r := &recs[i]
		r.Sent = t
		r.QueueTime = t - r.Scheduled
		inflight++
		q := reqs[i]
		e.submit(Req{ID: r.ID, Arrival: t, PromptLen: q.PromptLen, OutputLen: q.OutputLen,
			PrefixGroup: q.PrefixGroup, PrefixLen: q.PrefixLen}, i)
	}
	limit := load.MaxConcurrency
	if limit <= 0 {
		limit = math.MaxInt
	}
	now := 0.0
	for done < n {
		// Admit everything due by now that has a slot.
		for len(releases) > 0 && releases[0] <= now {
			releases = releases[1:]
			inflight--
		}
		for {
			if len(waitq) > 0 && inflight < limit {
				i := waitq[0]
				waitq = waitq[1:]
				send(i, now)
				continue
			}
			if next < n && sched[next] <= now {
				if inflight < limit {
					send(next, math.Max(sched[next], now))
				} else {
					waitq = append(waitq, next)
				}
				next++
				continue
			}
			break
		}
		te, ok := e.NextEventTime()
		ta := math.Inf(1)
		if next < n {
			ta = sched[next]
		}
		if len(releases) > 0 && (len(waitq) > 0 || (next < n && inflight >= limit)) {
			ta = math.Min(ta, math.Max(releases[0], now))
		}
		if !ok && math.IsInf(ta, 1) {
			if done < n {
				w, r := e.queues()
				return nil, fmt.Errorf("sim: engine stalled with %d of %d requests unfinished (waiting %d, running %d)", n-done, n, w, r)
			}
			break
		}
		if ok && te <= ta {
			e.advance(te)
			now = math.Max(now, te)
			if c := e.clock(); c > now {
				now = c
			}
			if !ok {
				continue
			}
		} else {
			e.advance(ta)
			now = ta
		}
	}
	dur := 0.0
	for i := range recs {
		if end := recs[i].Sent + recs[i].Latency; end > dur {
			dur = end
		}
	}
	if lite {
		p, st, kv, mr := e.summary()
		return &Prediction{Records: recs, Duration: dur, Params: p, Stats: st, KVCapacityTokens: kv, MaxRunning: mr}, nil
	}
	opt := metrics.DefaultOptions()
	opt.MaxConcurrency = load.MaxConcurrency
	opt.RequestRate = rate
	opt.Burstiness = burst
	res := metrics.Compute(recs, dur, opt)
	p, st, kv, mr := e.summary()
	return &Prediction{Records: recs, Duration: dur, Result: res, Params: p, Stats: st, KVCapacityTokens: kv, MaxRunning: mr}, nil
}
