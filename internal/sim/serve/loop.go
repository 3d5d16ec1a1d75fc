package serve

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perflab/perflab/internal/sim"
)

// Model is what the server drives: sim.Engine, or a fake in tests. Only the
// event loop goroutine calls it, so it needs no locking.
type Model interface {
	Submit(sim.Req)
	NextEventTime() (float64, bool)
	Advance(to float64) []sim.Event
	Stats() sim.Stats
}

var _ Model = (*sim.Engine)(nil)

// Canceler is implemented by models that can drop a request mid-flight
// (freeing its batch slot and KV blocks) when the client goes away.
type Canceler interface {
	Cancel(id string) bool
}

var _ Canceler = (*sim.Engine)(nil)

// tokenEvent is one model event as a stream handler sees it.
type tokenEvent struct {
	tokens   int
	done     bool
	err      error
	deadline time.Time // the wall time the model says these tokens exist
}

// stream is one request's mailbox between the event loop and its handler.
// The loop never blocks on it: events are appended under a mutex and a
// one-slot channel wakes the handler.
type stream struct {
	id     string
	mu     sync.Mutex
	queue  []tokenEvent
	notify chan struct{}
}

func (st *stream) push(ev tokenEvent) {
	st.mu.Lock()
	st.queue = append(st.queue, ev)
	st.mu.Unlock()
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

// take returns the queued events, reusing buf.
func (st *stream) take(buf []tokenEvent) []tokenEvent {
	st.mu.Lock()
	buf = append(buf[:0], st.queue...)
	st.queue = st.queue[:0]
	st.mu.Unlock()
	return buf
}

type msgKind int

const (
	msgSubmit msgKind = iota
	msgCancel
)

type msg struct {
	kind msgKind
	req  sim.Req
	st   *stream
}

// clock maps model time (seconds since the loop started, ×scale) to wall
// time with absolute deadlines, so delays never accumulate drift.
type clock struct {
	t0    time.Time
	scale float64
}

func (c clock) simNow(now time.Time) float64 { return now.Sub(c.t0).Seconds() * c.scale }
func (c clock) wall(t float64) time.Time {
	return c.t0.Add(time.Duration(t / c.scale * float64(time.Second)))
}

// loop owns the model. It advances the model to the wall clock, hands each
// event to its stream, and sleeps until the model's next event time or
// the next submission, whichever is first.
type loop struct {
	model   Model
	clk     clock
	inbox   chan msg
	quit    chan struct{}
	done    chan struct{}
	streams map[string]*stream // loop goroutine only

	statsMu sync.Mutex
	stats   sim.Stats
	late    *latency // token written to the client's socket
	handoff *latency // token handed to its stream by the loop
}

func newLoop(m Model, scale float64) *loop {
	return &loop{
		model: m, clk: clock{t0: time.Now(), scale: scale},
		inbox: make(chan msg, 4096), quit: make(chan struct{}), done: make(chan struct{}),
		streams: map[string]*stream{}, late: newLatency(), handoff: newLatency(),
	}
}

func (l *loop) run() {
	defer close(l.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	spins := 0
	for {
		now := time.Now()
		t := l.clk.simNow(now)
		l.drain(t)
		l.dispatch(l.model.Advance(t))
		l.publish()

		wait := time.Duration(math.MaxInt64)
		if next, ok := l.model.NextEventTime(); ok {
			wait = l.clk.wall(next).Sub(time.Now())
			if wait <= 0 {
				// Due already: go round again, but never spin hot on a model
				// that reports a due event without making progress.
				if spins++; spins < 3 {
					continue
				}
				wait = 100 * time.Microsecond
			}
		}
		spins = 0
		if wait > time.Hour {
			wait = time.Hour
		}
		timer.Reset(wait)
		select {
		case m := <-l.inbox:
			if !timer.Stop() {
				<-timer.C
			}
			l.handle(m, l.clk.simNow(time.Now()))
		case <-timer.C:
		case <-l.quit:
			return
		}
	}
}

// drain handles every queued message without blocking.
func (l *loop) drain(t float64) {
	for {
		select {
		case m := <-l.inbox:
			l.handle(m, t)
		default:
			return
		}
	}
}

func (l *loop) handle(m msg, t float64) {
	switch m.kind {
	case msgSubmit:
		// Bring the model to now first so the request arrives after
		// everything that already happened.
		l.dispatch(l.model.Advance(t))
		l.streams[m.req.ID] = m.st
		m.req.Arrival = t
		l.model.Submit(m.req)
	case msgCancel:
		if _, ok := l.streams[m.req.ID]; ok {
			delete(l.streams, m.req.ID)
			if c, ok := l.model.(Canceler); ok {
				c.Cancel(m.req.ID)
			}
		}
	}
}

func (l *loop) dispatch(evs []sim.Event) {
	now := time.Now()
	for _, ev := range evs {
		st, ok := l.streams[ev.ReqID]
		if !ok {
			continue // canceled
		}
		if ev.Done {
			delete(l.streams, ev.ReqID)
		}
		deadline := l.clk.wall(ev.Time)
		if ev.Tokens > 0 {
			l.handoff.add(now.Sub(deadline), ev.Tokens)
		}
		st.push(tokenEvent{tokens: ev.Tokens, done: ev.Done, err: ev.Err, deadline: deadline})
	}
}

func (l *loop) publish() {
	s := l.model.Stats()
	l.statsMu.Lock()
	l.stats = s
	l.statsMu.Unlock()
}

func (l *loop) snapshot() sim.Stats {
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	return l.stats
}

func (l *loop) stop() {
	select {
	case <-l.quit:
	default:
		close(l.quit)
	}
	<-l.done
}

// latency is a lock-free histogram of token lateness: 10 µs buckets up to
// 10 ms, then 1 ms buckets up to 10 s.
type latency struct {
	buckets [fineBuckets + coarseBuckets]atomic.Int64
	count   atomic.Int64
	maxNs   atomic.Int64
}

const (
	fineBuckets   = 1000  // 10 µs each: 0..10 ms
	coarseBuckets = 10000 // 1 ms each: 10 ms..10 s
)

func newLatency() *latency { return &latency{} }

func bucketOf(d time.Duration) int {
	if d < 10*time.Millisecond {
		return int(d / (10 * time.Microsecond))
	}
	return min(fineBuckets+int((d-10*time.Millisecond)/time.Millisecond), fineBuckets+coarseBuckets-1)
}

// bucketTop is the upper edge of bucket i.
func bucketTop(i int) time.Duration {
	if i < fineBuckets {
		return time.Duration(i+1) * 10 * time.Microsecond
	}
	return 10*time.Millisecond + time.Duration(i-fineBuckets+1)*time.Millisecond
}

func (h *latency) add(d time.Duration, n int) {
	if d < 0 {
		d = 0
	}
	h.buckets[bucketOf(d)].Add(int64(n))
	h.count.Add(int64(n))
	for {
		m := h.maxNs.Load()
		if int64(d) <= m || h.maxNs.CompareAndSwap(m, int64(d)) {
			break
		}
	}
}

// Lateness summarizes how late tokens were, relative to the model's time
// for them (bucket upper edges, so a p99 of 10 µs means "within 10 µs").
type Lateness struct {
	Tokens        int64
	P50, P99, Max time.Duration
}

func (h *latency) summary() Lateness {
	out := Lateness{Tokens: h.count.Load(), Max: time.Duration(h.maxNs.Load())}
	if out.Tokens == 0 {
		return out
	}
	var acc int64
	for i := range h.buckets {
		acc += h.buckets[i].Load()
		if out.P50 == 0 && float64(acc) >= 0.5*float64(out.Tokens) {
			out.P50 = bucketTop(i)
		}
		if float64(acc) >= 0.99*float64(out.Tokens) {
			out.P99 = bucketTop(i)
			break
		}
	}
	return out
}
