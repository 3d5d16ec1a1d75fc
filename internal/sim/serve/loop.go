package serve

import (
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perflab/perflab/internal/sim"
)

// Model is what the server drives: sim.Engine, a set of data-parallel
// replicas, or a fake in tests. Only the event loop goroutine calls it, so it
// needs no locking.
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

// PrefixResetter is implemented by models that can forget their prefix
// cache (the engines' reset endpoints); false while requests run.
type PrefixResetter interface {
	ResetPrefixCache() bool
}

var (
	_ PrefixResetter = (*sim.Engine)(nil)
	_ PrefixResetter = (*Replicas)(nil)
)

// tokenEvent is one model event as a stream sees it.
type tokenEvent struct {
	tokens   int
	done     bool
	err      error
	deadline time.Time // the wall time the model says these tokens exist
}

// stream is one request between the event loop and its client. A streamed
// response on a hijacked connection is written by the loop itself (out and
// raw set), so a token costs one socket write and no goroutine wakeup; any
// other response is a mailbox the loop fills at the tokens' deadlines and
// the handler goroutine drains: events are appended under a mutex and a
// one-slot channel wakes the handler.
type stream struct {
	id     string
	mu     sync.Mutex
	queue  []tokenEvent
	notify chan struct{}

	out *output  // set with raw
	raw *rawConn // the hijacked connection, written by the loop

	// loop goroutine only
	due    []tokenEvent // events waiting for their deadlines, in order
	last   int64        // deadline of the newest event queued (ns after t0)
	batch  []tokenEvent // events due in the current delivery pass
	inPass bool
	gone   bool // canceled or finished: drop what is still queued
	whole  bool // non-streamed: only the end matters to the handler
	held   int  // whole: tokens not yet handed over
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
	msgReset
)

type msg struct {
	kind  msgKind
	req   sim.Req
	st    *stream
	reply chan bool // msgReset: whether the cache was reset
}

// clock maps model time (seconds since the loop started, ×scale) to wall
// time with absolute deadlines, so delays never accumulate drift.
type clock struct {
	t0    time.Time
	scale float64
}

func (c clock) simNow(now time.Time) float64 { return now.Sub(c.t0).Seconds() * c.scale }
func (c clock) wall(t float64) time.Time     { return c.t0.Add(time.Duration(c.nanos(t))) }

// nanos is model time t as wall nanoseconds after t0.
func (c clock) nanos(t float64) int64 { return int64(t / c.scale * float64(time.Second)) }

// spinWindow is how close to a deadline the loop stops sleeping on a timer
// and polls the clock instead. The Go runtime sleeps in epoll_wait with
// millisecond resolution, so a timer under 1 ms fires up to 1 ms late;
// sleeping to 1.1 ms short of the deadline and yielding from there keeps the
// loop's own lateness in microseconds, for at most ~1 ms of CPU per wakeup.
const spinWindow = 1100 * time.Microsecond

// loop owns the model. It advances the model to the wall clock, queues
// each event until its wall deadline (the engine reports the API server's
// output times, which can lie ahead of the step that produced them), hands
// or writes it to its stream then, and sleeps until the next deadline, the
// model's next event or the next submission, whichever is first.
type loop struct {
	model   Model
	clk     clock
	inbox   chan msg
	quit    chan struct{}
	done    chan struct{}
	streams map[string]*stream // loop goroutine only
	wakeups wakeupHeap         // loop goroutine only
	seq     uint64
	touched []*stream
	frame   []byte // scratch for one SSE frame

	statsMu  sync.Mutex
	stats    sim.Stats
	replicas []ReplicaStat
	late     *latency // token written to the client's socket
	handoff  *latency // token handed to its stream by the loop
	aborted  atomic.Int64
	slow     atomic.Int64 // streams whose socket filled (handed to a writer goroutine)

	// onCrash, when set, hears once of the simulated engine crashing (an
	// event error wrapping sim.ErrCrashed) with the wall time it happens.
	onCrash   func(err error, at time.Time)
	crashSeen bool // loop goroutine only
}

func newLoop(m Model, scale float64) *loop {
	l := &loop{
		model: m, clk: clock{t0: time.Now(), scale: scale},
		inbox: make(chan msg, 4096), quit: make(chan struct{}), done: make(chan struct{}),
		streams: map[string]*stream{}, late: newLatency(), handoff: newLatency(),
		frame: make([]byte, chunkHead, 4096),
	}
	l.late.trace = newLateTrace(l.clk.t0)
	return l
}

func (l *loop) run() {
	defer close(l.done)
	defer l.closeAll()
	if tr := l.late.trace; tr != nil {
		defer tr.flush()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	spins := 0
	for {
		now := time.Now()
		t := l.clk.simNow(now)
		l.drain(t)
		l.dispatch(l.model.Advance(t))
		l.publish()
		l.deliver(time.Now())

		now = time.Now()
		next := now.Add(time.Hour)
		if te, ok := l.model.NextEventTime(); ok {
			next = l.clk.wall(te)
		}
		modelDue := !next.After(now)
		if len(l.wakeups) > 0 {
			if at := l.clk.t0.Add(time.Duration(l.wakeups[0].at)); at.Before(next) {
				next = at
			}
		}
		wait := next.Sub(now)
		if wait <= 0 {
			// Due already: go round again, but never spin hot on a model
			// that reports a due event without making progress.
			if !modelDue {
				continue
			}
			if spins++; spins < 3 {
				continue
			}
			wait = 100 * time.Microsecond
			next = time.Now().Add(wait)
		}
		spins = 0
		if wait > spinWindow {
			timer.Reset(wait - spinWindow)
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
			continue
		}
		// Close to the deadline: yield to other goroutines (handlers, the
		// network) while watching the clock and the inbox.
		for time.Now().Before(next) {
			select {
			case m := <-l.inbox:
				l.handle(m, l.clk.simNow(time.Now()))
			case <-l.quit:
				return
			default:
				runtime.Gosched()
				continue
			}
			break
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
		if st, ok := l.streams[m.req.ID]; ok {
			l.drop(st)
		}
	case msgReset:
		l.dispatch(l.model.Advance(t))
		r, ok := l.model.(PrefixResetter)
		m.reply <- ok && len(l.streams) == 0 && r.ResetPrefixCache()
	}
}

// resetPrefixCache asks the loop to reset the model's prefix cache; false
// while requests run, when the model cannot, or when the loop has stopped.
func (l *loop) resetPrefixCache() bool {
	reply := make(chan bool, 1)
	select {
	case l.inbox <- msg{kind: msgReset, reply: reply}:
	case <-l.done:
		return false
	}
	select {
	case ok := <-reply:
		return ok
	case <-l.done:
		return false
	}
}

// drop forgets a stream whose client went away and tells the model.
func (l *loop) drop(st *stream) {
	delete(l.streams, st.id)
	st.gone = true
	if c, ok := l.model.(Canceler); ok {
		c.Cancel(st.id)
	}
	if st.raw != nil {
		st.raw.close()
	}
	l.aborted.Add(1)
}

// dispatch queues model events until their wall deadlines: on the
// stream, in order, with one wakeup in the delivery heap per distinct
// deadline (the engine reports a lagging stream's merged outputs as many
// events at one time, up to tens per stream at start-up).
func (l *loop) dispatch(evs []sim.Event) {
	for _, ev := range evs {
		if ev.Err != nil && !l.crashSeen && errors.Is(ev.Err, sim.ErrCrashed) {
			l.crashSeen = true
			if l.onCrash != nil {
				l.onCrash(ev.Err, l.clk.t0.Add(time.Duration(l.clk.nanos(ev.Time))))
			}
		}
		st, ok := l.streams[ev.ReqID]
		if !ok {
			continue // canceled
		}
		if ev.Done {
			delete(l.streams, ev.ReqID)
		}
		at := l.clk.nanos(ev.Time)
		if at < st.last {
			at = st.last // a stream's events stay in order
		}
		if len(st.due) == 0 || at != st.last {
			l.seq++
			l.wakeups.push(wakeup{at: at, seq: l.seq, st: st})
		}
		st.last = at
		st.due = append(st.due, tokenEvent{tokens: ev.Tokens, done: ev.Done, err: ev.Err, deadline: l.clk.t0.Add(time.Duration(at))})
	}
}

// deliver hands over every event due by now. Events of one stream that are
// due together go out as one write.
func (l *loop) deliver(now time.Time) {
	cut := now.Sub(l.clk.t0).Nanoseconds()
	for len(l.wakeups) > 0 && l.wakeups[0].at <= cut {
		st := l.wakeups.pop().st
		if st.gone || st.inPass {
			continue
		}
		st.inPass = true
		l.touched = append(l.touched, st)
	}
	for i, st := range l.touched {
		l.touched[i] = nil
		st.inPass = false
		if st.gone {
			continue
		}
		k := 0
		for k < len(st.due) && !st.due[k].deadline.After(now) {
			if ev := st.due[k]; ev.tokens > 0 {
				l.handoff.add(now.Sub(ev.deadline), ev.tokens)
			}
			k++
		}
		st.batch = append(st.batch[:0], st.due[:k]...)
		st.due = st.due[:copy(st.due, st.due[k:])]
		if st.raw == nil {
			for _, ev := range st.batch {
				if st.whole && !ev.done && ev.err == nil {
					// A non-streamed handler needs waking only at the end.
					st.held += ev.tokens
					continue
				}
				ev.tokens += st.held
				st.held = 0
				st.push(ev)
			}
		} else {
			l.writeRaw(st)
		}
	}
	l.touched = l.touched[:0]
}

// chunkHead is the room kept in front of a frame for its HTTP chunk-size
// line (up to 8 hex digits and CRLF), so a chunk is built in one buffer.
const chunkHead = 10

// writeRaw formats a stream's due events as one HTTP chunk and writes it.
func (l *loop) writeRaw(st *stream) {
	buf, finished := st.out.appendEvents(l.frame[:chunkHead], st.batch)
	if len(buf) == chunkHead {
		l.frame = buf
		return
	}
	size := len(buf) - chunkHead
	buf = append(buf, '\r', '\n')
	if finished {
		buf = append(buf, "0\r\n\r\n"...)
	}
	var hb [chunkHead]byte
	h := append(strconv.AppendInt(hb[:0], int64(size), 16), '\r', '\n')
	start := chunkHead - len(h)
	copy(buf[start:], h)
	l.frame = buf
	if err := st.raw.send(buf[start:], st.batch, finished, l.late, &l.slow); err != nil {
		l.drop(st)
		return
	}
	if finished {
		st.gone = true
		st.out.s.ok.Add(1)
	}
}

// closeAll ends the streams the loop writes when it stops: their clients
// see a complete chunked body without [DONE], as when a handler returns.
func (l *loop) closeAll() {
	for {
		select {
		case m := <-l.inbox:
			if m.kind == msgSubmit && m.st.raw != nil {
				m.st.raw.finish()
			}
			continue
		default:
		}
		break
	}
	for id, st := range l.streams {
		if st.raw != nil {
			st.raw.finish()
		}
		delete(l.streams, id)
	}
}

func (l *loop) publish() {
	s := l.model.Stats()
	rs, ok := l.model.(replicaStater)
	l.statsMu.Lock()
	l.stats = s
	if ok {
		l.replicas = rs.ReplicaStats(l.replicas[:0])
	}
	l.statsMu.Unlock()
}

// snapshot is the model's state at the last advance; replicas is nil for a
// single engine.
func (l *loop) snapshot() (sim.Stats, []ReplicaStat) {
	l.statsMu.Lock()
	defer l.statsMu.Unlock()
	return l.stats, append([]ReplicaStat(nil), l.replicas...)
}

func (l *loop) stop() {
	select {
	case <-l.quit:
	default:
		close(l.quit)
	}
	<-l.done
}

// wakeup is a stream with events due at a deadline (ns after t0).
type wakeup struct {
	at  int64
	seq uint64 // ties keep the model's order
	st  *stream
}

func (a *wakeup) before(b *wakeup) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// wakeupHeap is a binary min-heap by deadline (container/heap would box
// every element).
type wakeupHeap []wakeup

func (h *wakeupHeap) push(w wakeup) {
	*h = append(*h, w)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].before(&s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *wakeupHeap) pop() wakeup {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s[n] = wakeup{}
	s = s[:n]
	i := 0
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && s[c+1].before(&s[c]) {
			c++
		}
		if !s[c].before(&s[i]) {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	*h = s
	return top
}

// latency is a lock-free histogram of token lateness: 10 µs buckets up to
// 10 ms, then 1 ms buckets up to 10 s.
type latency struct {
	buckets [fineBuckets + coarseBuckets]atomic.Int64
	count   atomic.Int64
	maxNs   atomic.Int64
	trace   *lateTrace // nil unless diagnosing
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
	if h.trace != nil {
		h.trace.add(d, n)
	}
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
