package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Outcome is what a run measured. On error it holds whatever finished.
type Outcome struct {
	// Records has one entry per dispatched request that ran to an outcome
	// (success or failure), in request order.
	Records []metrics.Record
	// Incomplete holds requests a stop condition or cancellation cut off
	// while in flight; they are kept out of Result, as guidellm keeps its
	// "incomplete" requests out of its figures.
	Incomplete []metrics.Record
	// Duration is vLLM's benchmark duration: from the start of the run to
	// the end of the last request (the drain tail included), in seconds.
	Duration float64
	// Result is metrics.Compute over Records.
	Result *metrics.Result
	// Schedule holds the intended send offsets of all requests.
	Schedule []float64
	// Model is the model id used (fetched from the server when not given).
	Model string
	// Stopped names the stop condition that ended the run, if any.
	Stopped string
	// Start is the wall-clock time of t=0.
	Start time.Time
}

// DispatchLag returns each dispatched request's lag between its scheduled
// time and the moment it was handed to a sender (before any wait for a
// concurrency slot), in seconds.
func (o *Outcome) DispatchLag() []float64 {
	out := make([]float64, 0, len(o.Records))
	for _, r := range o.Records {
		out = append(out, max(0, r.Sent-r.QueueTime-r.Scheduled))
	}
	return out
}

// Run executes the benchmark described by cfg against a live server:
// optional ready check and warm-up, then every request sent at its
// scheduled absolute time (under MaxConcurrency), each response streamed
// and timed, and the records turned into vLLM's metrics. On cancellation,
// a stop condition or a dead server, it returns the partial Outcome and an
// error.
func Run(ctx context.Context, cfg Config) (*Outcome, error) {
	apiURL, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	n := len(cfg.Requests)
	sched := cfg.Schedule
	if sched == nil {
		if sched, err = ScheduleWith(cfg.scheduleOptions()); err != nil {
			return nil, err
		}
	}
	inflight := n + cfg.NumWarmups
	if cfg.MaxConcurrency > 0 {
		inflight = cfg.MaxConcurrency
	}
	cl := newClient(&cfg, apiURL)
	hc := cfg.Client
	if cfg.Transport == TransportEpoll {
		snd, err := newEpollSender(cl, inflight)
		if err != nil {
			return nil, err
		}
		defer snd.close()
		cl.snd = snd
	} else {
		if hc == nil {
			tr := newTransport(inflight)
			defer tr.CloseIdleConnections()
			hc = &http.Client{Transport: tr}
		}
		cl.http = hc
		cl.snd = httpSender{cl}
	}
	logf := func(format string, a ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", a...)
		}
	}
	if cfg.Model == "" {
		// The epoll transport streams completions only; the model list
		// comes over net/http (hc is nil then, and FirstModel makes one).
		if cfg.Model, err = FirstModel(ctx, hc, cfg.BaseURL, cfg.APIKey); err != nil {
			return nil, err
		}
	}
	if err := cl.prepare(ctx, logf); err != nil {
		return nil, err
	}

	out := &Outcome{Schedule: sched, Model: cfg.Model}
	recs := make([]metrics.Record, n)
	ends := make([][]int32, n)
	state := make([]uint8, n) // 0 not sent, 1 finished, 2 cut off
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)

	var bar *mpb.Bar
	var prog *mpb.Progress
	if cfg.Progress != nil {
		prog = mpb.New(mpb.WithOutput(cfg.Progress), mpb.WithWidth(50))
		bar = prog.AddBar(int64(n),
			mpb.PrependDecorators(decor.CountersNoUnit("%d/%d")),
			mpb.AppendDecorators(decor.Percentage(), decor.Name(" "), decor.Elapsed(decor.ET_STYLE_GO)))
	}

	var sem chan struct{}
	if cfg.MaxConcurrency > 0 {
		sem = make(chan struct{}, cfg.MaxConcurrency)
	}
	doneCh := make(chan int, 256)
	var wg sync.WaitGroup
	mon := monitor{cfg: &cfg, recs: recs, cancel: cancelRun, bar: bar}
	monDone := make(chan struct{})
	go func() { mon.loop(doneCh, state); close(monDone) }()

	logf("Starting main benchmark run...")
	if cfg.RampUpStrategy != "" {
		logf("Traffic ramp-up strategy: %s.", cfg.RampUpStrategy)
		logf("Will increase RPS from %d to %d RPS over the duration of the benchmark.", int(cfg.RampUpStartRPS), int(cfg.RampUpEndRPS))
	} else {
		logf("Traffic request rate: %s", PyFloat(cfg.RequestRate))
	}
	dist := "Gamma distribution"
	if cfg.Burstiness == 1 {
		dist = "Poisson process"
	}
	logf("Burstiness factor: %s (%s)", PyFloat(cfg.Burstiness), dist)
	if cfg.MaxConcurrency > 0 {
		logf("Maximum request concurrency: %d", cfg.MaxConcurrency)
	} else {
		logf("Maximum request concurrency: None")
	}
	cl.setStart(time.Now())
	out.Start = cl.start
	if cfg.MaxSeconds > 0 {
		t := time.AfterFunc(time.Duration(cfg.MaxSeconds*float64(time.Second)), func() {
			cancelRun(fmt.Errorf("%w: --max-seconds %v reached", ErrStopped, cfg.MaxSeconds))
		})
		defer t.Stop()
	}

	slotBlockedUntil := math.Inf(-1)
	sent := 0
dispatch:
	for i := range n {
		target := sched[i]
		var arrival float64
		if now := cl.now(); now < target {
			if !sleepUntil(runCtx, cl, target) {
				break dispatch
			}
			arrival = cl.now()
		} else if slotBlockedUntil > target {
			// The dispatcher was held up waiting for a slot: this request
			// arrived on time and has been queueing since.
			arrival = target
		} else {
			arrival = now
		}
		if runCtx.Err() != nil {
			break
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
			default:
				select {
				case sem <- struct{}{}:
				case <-runCtx.Done():
					break dispatch
				}
				slotBlockedUntil = cl.now()
			}
		}
		rec := &recs[i]
		rec.ID = cfg.RequestIDPrefix + strconv.Itoa(i)
		rec.PromptLen = cfg.Requests[i].PromptLen
		rec.Scheduled = target
		sent++
		wg.Add(1)
		cl.snd.start(runCtx, &cfg.Requests[i], rec, func(e []int32) {
			ends[i] = e
			recs[i].QueueTime = max(0, recs[i].Sent-arrival)
			if sem != nil {
				<-sem
			}
			doneCh <- i
			wg.Done()
		})
	}
	wg.Wait()
	out.Duration = cl.now()
	close(doneCh)
	<-monDone
	if prog != nil {
		if sent < n {
			bar.Abort(false)
		}
		prog.Wait()
	}

	cause := context.Cause(runCtx)
	if ctx.Err() != nil {
		cause = ctx.Err()
	}
	var keptEnds [][]int32
	for i := range n {
		if state[i] == 0 {
			continue
		}
		r := recs[i]
		if r.ErrorClass == ClassCanceled && cause != nil {
			out.Incomplete = append(out.Incomplete, r)
			continue
		}
		out.Records = append(out.Records, r)
		keptEnds = append(keptEnds, ends[i])
	}
	settleOutput(ctx, out.Records, keptEnds, cfg.Tokenizer, cfg.KeepText)
	out.Result = cl.result(out, n)
	if cause == nil && ctx.Err() != nil {
		// Interrupted after the last request, while counting output
		// tokens: the figures are partly the server's counts, and a
		// script must not take them for a finished run.
		return out, fmt.Errorf("bench: interrupted while counting output tokens: %w", ctx.Err())
	}
	if cause != nil {
		if errors.Is(cause, ErrStopped) {
			out.Stopped = cause.Error()
		}
		return out, fmt.Errorf("bench: run ended after %d of %d requests: %w", len(out.Records), n, cause)
	}
	if mon.downErr != nil {
		return out, fmt.Errorf("bench: %w", mon.downErr)
	}
	return out, nil
}

// result computes the metrics and fills vLLM's setup keys.
func (cl *client) result(out *Outcome, n int) *metrics.Result {
	cfg := cl.cfg
	opt := cfg.Metrics
	opt.MaxConcurrency = cfg.MaxConcurrency
	opt.RequestRate = cfg.RequestRate
	opt.Burstiness = cfg.Burstiness
	res := metrics.Compute(out.Records, out.Duration, opt)
	if res == nil {
		return nil
	}
	res.Backend = cfg.Backend
	res.EndpointType = cfg.Backend
	res.ModelID = cfg.Model
	res.NumPrompts = n
	res.RequestRate = cfg.RequestRate
	res.Burstiness = cfg.Burstiness
	res.MaxConcurrency = cfg.MaxConcurrency
	if cfg.RampUpStrategy != "" {
		res.RampUpStrategy = cfg.RampUpStrategy
		res.RampUpStartRPS = int(cfg.RampUpStartRPS)
		res.RampUpEndRPS = int(cfg.RampUpEndRPS)
		if res.Extra == nil {
			res.Extra = map[string]any{}
		}
		res.Extra["rps_change_events"] = rpsChangeEvents(*cfg, out, n)
	}
	if res.Date == "" {
		res.Date = out.Start.Format("20060102-150405")
	}
	return res
}

// sleepUntil waits until the run clock reads target. The wait is computed
// from the absolute target each time, so lateness never accumulates.
func sleepUntil(ctx context.Context, cl *client, target float64) bool {
	for {
		d := time.Duration((target - cl.now()) * float64(time.Second))
		if d <= 0 {
			return true
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// monitor watches finished requests for the stop conditions and a dead
// server, and drives the progress bar.
type monitor struct {
	cfg     *Config
	recs    []metrics.Record
	cancel  context.CancelCauseFunc
	bar     *mpb.Bar
	downErr error
}

func (m *monitor) loop(doneCh <-chan int, state []uint8) {
	finished, failed, connectRun := 0, 0, 0
	for i := range doneCh {
		r := &m.recs[i]
		state[i] = 1
		finished++
		if m.bar != nil {
			m.bar.Increment()
		}
		if m.cfg.OnRecord != nil {
			m.cfg.OnRecord(*r)
		}
		if r.Success {
			connectRun = 0
			continue
		}
		if r.ErrorClass == ClassCanceled {
			continue
		}
		failed++
		if r.ErrorClass == ClassConnect {
			connectRun++
			if connectRun >= deadServerAfter && m.downErr == nil {
				m.downErr = fmt.Errorf("%w: %d consecutive connection failures, last: %s", ErrServerDown, connectRun, r.Error)
				m.cancel(m.downErr)
			}
		}
		if m.cfg.MaxErrors > 0 && failed >= m.cfg.MaxErrors {
			m.cancel(fmt.Errorf("%w: %d errors reached --max-errors %d (last: %s)", ErrStopped, failed, m.cfg.MaxErrors, r.Error))
		}
		if m.cfg.MaxErrorRate > 0 && finished >= 10 && float64(failed)/float64(finished) > m.cfg.MaxErrorRate {
			m.cancel(fmt.Errorf("%w: error rate %.3f above --max-error-rate %v after %d requests", ErrStopped,
				float64(failed)/float64(finished), m.cfg.MaxErrorRate, finished))
		}
	}
}

// settleOutput fills OutputLen where usage was missing (tokenizer, else
// the chunk count), spreads the output tokens over chunks with the
// tokenizer when the server reported no per-chunk usage, and drops the
// generated text unless asked to keep it. It runs after the clock stopped.
func settleOutput(ctx context.Context, recs []metrics.Record, ends [][]int32, tok dataset.Tokenizer, keepText bool) {
	for k := range recs {
		if ctx.Err() != nil {
			// Interrupted: what is settled stays, the rest keeps the
			// server's counts; nothing waits for the tokenizer.
			return
		}
		r := &recs[k]
		// The text's tokens, when counted here: the split below reuses
		// them rather than tokenizing a long output a second time.
		var ids []int
		if r.Success && r.OutputLenSource == "" {
			switch {
			case tok != nil:
				ids = tok.Encode(r.GeneratedText)
				r.OutputLen = len(ids)
				r.OutputLenSource = "tokenizer"
			default:
				s := 0
				for _, c := range r.ChunkTokens {
					s += c
				}
				r.OutputLen = s
				r.OutputLenSource = "chunks"
			}
		}
		if e := ends[k]; r.Success && tok != nil && e != nil && len(e) == len(r.ChunkTokens) {
			sum := 0
			for _, c := range r.ChunkTokens {
				sum += c
			}
			if sum != r.OutputLen {
				if ids == nil {
					ids = tok.Encode(r.GeneratedText)
				}
				r.ChunkTokens = splitTokens(r.GeneratedText, e, tok, ids)
			}
		}
		if !keepText {
			r.GeneratedText = ""
		}
	}
}

// splitByTokenizer spreads the text's tokens over its chunks: the text is
// tokenized once, and each token counts for the chunk in which its last
// byte arrived, so the counts sum to the whole text's count. It is linear
// in the text: re-tokenizing every prefix, as it once did, took 18 s for
// one request of 16,000 chunks. ends[i] is the byte offset where chunk i
// ends.
func splitByTokenizer(text string, ends []int32, tok dataset.Tokenizer) []int {
	return splitTokens(text, ends, tok, tok.Encode(text))
}

// splitTokens is splitByTokenizer given the text's tokens, ids.
func splitTokens(text string, ends []int32, tok dataset.Tokenizer, ids []int) []int {
	if tb, ok := tok.(tokenByter); ok {
		if out, ok := splitByOffsets(ids, ends, tb, len(text)); ok {
			return out
		}
	}
	// A tokenizer that cannot say which bytes each token covers (or whose
	// normalizer changed the text): each chunk tokenized alone, then the
	// last adjusted so the counts still sum to the whole text's.
	out := make([]int, len(ends))
	sum, prev := 0, 0
	for i, e := range ends {
		end := min(max(int(e), prev), len(text))
		out[i] = len(tok.Encode(text[prev:end]))
		sum += out[i]
		prev = end
	}
	if n := len(out); n > 0 {
		out[n-1] = max(0, out[n-1]+len(ids)-sum)
	}
	return out
}

// tokenByter is a tokenizer that knows each token's bytes (byte-level BPE).
type tokenByter interface {
	TokenBytes(id int) []byte
}

// splitByOffsets assigns each token to the chunk holding its last byte;
// ok is false when the tokens do not spell the text byte for byte.
func splitByOffsets(ids []int, ends []int32, tb tokenByter, textLen int) ([]int, bool) {
	out := make([]int, len(ends))
	if len(ends) == 0 {
		return out, len(ids) == 0
	}
	off, j := 0, 0
	for _, id := range ids {
		b := tb.TokenBytes(id)
		if b == nil {
			return nil, false
		}
		off += len(b)
		for j < len(ends)-1 && off > int(ends[j]) {
			j++
		}
		out[j]++
	}
	return out, off == textLen
}

// prepare runs vLLM's optional ready check and the warm-up requests.
func (cl *client) prepare(ctx context.Context, logf func(string, ...any)) error {
	cfg := cl.cfg
	cl.setStart(time.Now())
	first := cfg.Requests[0]
	logf("Starting initial single prompt test run...")
	if cfg.ReadyCheckTimeout <= 0 {
		logf("Skipping endpoint ready check.")
	} else {
		logf("Waiting for endpoint to become up in %v", cfg.ReadyCheckTimeout)
		deadline := time.Now().Add(cfg.ReadyCheckTimeout)
		for {
			var rec metrics.Record
			cl.do(ctx, &first, &rec)
			if rec.Success {
				logf("Initial test run completed.")
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("bench: endpoint %s not ready after %v: %s", cl.url, cfg.ReadyCheckTimeout, rec.Error)
			}
			select {
			case <-time.After(5 * time.Second):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if cfg.NumWarmups > 0 {
		logf("Warming up with %d requests...", cfg.NumWarmups)
		lim := cfg.NumWarmups
		if cfg.MaxConcurrency > 0 {
			lim = cfg.MaxConcurrency
		}
		sem := make(chan struct{}, lim)
		var wg sync.WaitGroup
		for range cfg.NumWarmups {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var rec metrics.Record
				cl.do(ctx, &first, &rec)
				<-sem
			}()
		}
		wg.Wait()
		logf("Warmup run completed.")
	}
	return ctx.Err()
}

// PyFloat formats like Python's str(float): "inf", "10.0", "0.5", as vLLM
// prints a rate and names its result files.
func PyFloat(x float64) string {
	if math.IsInf(x, 1) {
		return "inf"
	}
	s := strconv.FormatFloat(x, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

// Percentile is numpy's linear percentile of xs (p in 0..100); 0 for none.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	idx := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(idx))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(idx-float64(lo))
}

// rpsChangeEvents is vLLM's ramp-up log: the start rate, then one event per
// integer RPS the ramp passes, stamped (local time, ISO 8601 with
// microseconds, as Python's datetime.isoformat) when the request that
// reached it was due.
func rpsChangeEvents(cfg Config, out *Outcome, n int) []map[string]any {
	so := ScheduleOptions{N: n, RampUpStrategy: cfg.RampUpStrategy, RampUpStartRPS: cfg.RampUpStartRPS, RampUpEndRPS: cfg.RampUpEndRPS}
	stamp := func(off float64) string {
		return out.Start.Add(time.Duration(off * float64(time.Second))).Format("2006-01-02T15:04:05.000000")
	}
	last := int(cfg.RampUpStartRPS)
	ev := []map[string]any{{"rps": last, "timestamp": stamp(0)}}
	for i := 0; i < n && i < len(out.Schedule); i++ {
		cur := int(so.RequestRate(i))
		for ; last < cur; last++ {
			ev = append(ev, map[string]any{"rps": last + 1, "timestamp": stamp(out.Schedule[i])})
		}
	}
	return ev
}
