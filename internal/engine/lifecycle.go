package engine

// One server's life, the same for every runtime: its state, the rules by
// which a failure is recorded, its log, and the wait for readiness. A
// runtime keeps only its transport (how a server starts, where its log
// comes from, how it ends and stops) and reports to a Lifecycle.
//
// The failure rules, decided once here:
//   - The first failure is the cause; later symptoms (a hung server then
//     killed) never overwrite it.
//   - A failure seen once Stop has begun is dropped: a server perflab
//     stops has not failed, whatever its exit looks like. (The kubernetes
//     runtime kept this rule itself; the process and docker runtimes left
//     it to each caller, and a readiness timeout after a Stop was kept.)
//   - A failure without a log tail gets the log's last 50 lines.
//   - An exit is classed by the state it ended: during a benchmark it is
//     crash_during_bench; else the engine's own words for a GPU not yet
//     free (gpu_busy) or out of memory (oom); else unhealthy after ready,
//     startup_crash before. A runtime that saw the kernel kill the server
//     for memory says so, and that is oom before anything else.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// State is where a server is in its life.
type State int

// A server's states, in the only order it moves through them (Stopping
// may come from any earlier state).
const (
	StateStarting State = iota
	StateReady
	StateBenchmarking
	StateStopping
	StateExited
)

var stateNames = [...]string{"starting", "ready", "benchmarking", "stopping", "exited"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Lifecycle is one server's state, failure and log, shared by the
// runtime's transport (which reports to it) and the wait for readiness.
// Its methods are safe for concurrent use.
type Lifecycle struct {
	ring     *LogRing
	progress atomic.Int64 // UnixNano of the last sign of progress

	logMu sync.Mutex
	logw  io.WriteCloser // nil: the log lives only in the ring

	mu       sync.Mutex
	state    State
	stopping bool
	failure  *Failure
	failed   chan struct{}
	failOnce sync.Once
}

// NewLifecycle starts a server's life in StateStarting, keeping the last
// ringSize log lines (0 = 2000) and writing its log to w (nil: none).
func NewLifecycle(ringSize int, w io.WriteCloser) *Lifecycle {
	if ringSize <= 0 {
		ringSize = 2000
	}
	l := &Lifecycle{ring: NewLogRing(ringSize), logw: w, failed: make(chan struct{})}
	l.Touch()
	return l
}

// State is the server's state now.
func (l *Lifecycle) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// advance moves to s if that is forward.
func (l *Lifecycle) advance(s State) {
	l.mu.Lock()
	if l.state < s {
		l.state = s
	}
	l.mu.Unlock()
}

// MarkReady records that the server answered ready.
func (l *Lifecycle) MarkReady() { l.advance(StateReady) }

// MarkBenchmarking records that a benchmark runs against the server: a
// death from now on is a crash_during_bench.
func (l *Lifecycle) MarkBenchmarking() { l.advance(StateBenchmarking) }

// BeginStop records that Stop has begun: no failure is recorded from now
// on.
func (l *Lifecycle) BeginStop() {
	l.mu.Lock()
	l.stopping = true
	if l.state < StateStopping {
		l.state = StateStopping
	}
	l.mu.Unlock()
}

// Stopping says whether Stop has begun.
func (l *Lifecycle) Stopping() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopping
}

// Failure is the recorded failure, or nil.
func (l *Lifecycle) Failure() *Failure {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failure
}

// Failed is closed once a failure is recorded.
func (l *Lifecycle) Failed() <-chan struct{} { return l.failed }

// Fail records f by the rules above and returns the failure kept (nil when
// Stop had begun first and none was recorded before).
func (l *Lifecycle) Fail(f *Failure) *Failure {
	l.mu.Lock()
	if l.failure == nil && !l.stopping && f != nil {
		if f.LogTail == nil {
			f.LogTail = l.ring.Tail(50)
		}
		l.failure = f
	}
	got := l.failure
	l.mu.Unlock()
	if got != nil {
		l.failOnce.Do(func() { close(l.failed) })
	}
	return got
}

// Exit is how a server ended, as its runtime saw it.
type Exit struct {
	// Code is the exit status, -1 when unknown.
	Code int
	// What says how it ended, for the reason: "exited (status 1)",
	// "container exited (status 137)", "pod failed (Evicted: …)".
	What string
	// Killed, when set, says the runtime saw the server killed for memory
	// (a container's OOMKilled) and how, e.g. "killed for memory (limit
	// 512 MiB)".
	Killed string
}

// Exited records the server's end: classed by ClassifyExit unless Stop
// had begun. It returns the failure kept.
func (l *Lifecycle) Exited(e Exit) *Failure {
	var got *Failure
	if !l.Stopping() {
		got = l.Fail(l.ClassifyExit(e))
	}
	l.advance(StateExited)
	return got
}

// ClassifyExit names the failure of a server that ended without a Stop,
// by the state it was in and its log (the rules above).
func (l *Lifecycle) ClassifyExit(e Exit) *Failure {
	l.mu.Lock()
	st := l.state
	l.mu.Unlock()
	tail := l.ring.Tail(50)
	reason := e.What
	if s := LastLine(tail); s != "" {
		reason += ": " + s
	}
	last := l.ring.Tail(200)
	busyLine, oomLine := GPUBusyLine(last), OOMLine(last)
	var f *Failure
	switch {
	case e.Killed != "":
		f = &Failure{Class: ClassOOM, Reason: e.Killed + ", " + reason}
	case st == StateBenchmarking:
		f = &Failure{Class: ClassCrashDuringBench, Reason: "server died during the benchmark, " + reason}
	case busyLine != "":
		f = &Failure{Class: ClassGPUBusy, Reason: "GPU not yet free at start: " + busyLine}
	case oomLine != "":
		f = &Failure{Class: ClassOOM, Reason: "out of memory at load: " + oomLine}
	case st == StateReady:
		f = &Failure{Class: ClassUnhealthy, Reason: "server died after it was ready, " + reason}
	default:
		f = &Failure{Class: ClassStartupCrash, Reason: "server " + reason + " before it was ready"}
	}
	f.LogTail, f.ExitCode = tail, e.Code
	return f
}

// Touch records progress now (a pull's byte counts, a pod's new state).
func (l *Lifecycle) Touch() { l.progress.Store(time.Now().UnixNano()) }

// Progress is when the server last showed progress.
func (l *Lifecycle) Progress() time.Time { return time.Unix(0, l.progress.Load()) }

// Tail returns up to the last n log lines (all when n <= 0).
func (l *Lifecycle) Tail(n int) []string { return l.ring.Tail(n) }

// Ring is the ring of recent log lines.
func (l *Lifecycle) Ring() *LogRing { return l.ring }

// Line writes one line of perflab's own (a pull's progress, a container
// or pod event) to the log, as progress.
func (l *Lifecycle) Line(s string) {
	l.Note(s)
	l.Touch()
}

// Note writes one line of perflab's own to the log without counting as
// progress.
func (l *Lifecycle) Note(s string) {
	l.write(s + "\n")
	l.ring.Add(s)
}

// Output takes one raw line of the server's own output (its newline, if
// any, included): written to the log as is, kept in the ring as the latest
// frame of a progress bar (which redraws with \r), and progress unless it
// is the echo of our own readiness probe.
func (l *Lifecycle) Output(raw string) {
	l.write(raw)
	s := strings.TrimRight(raw, "\r\n")
	if i := strings.LastIndexByte(s, '\r'); i >= 0 {
		s = s[i+1:]
	}
	l.ring.Add(s)
	if !IsProbeLine(s) {
		l.Touch()
	}
}

func (l *Lifecycle) write(s string) {
	l.logMu.Lock()
	if l.logw != nil {
		_, _ = io.WriteString(l.logw, s)
	}
	l.logMu.Unlock()
}

// CloseLog closes the log file; later lines go to the ring only.
func (l *Lifecycle) CloseLog() {
	l.logMu.Lock()
	defer l.logMu.Unlock()
	if l.logw != nil {
		_ = l.logw.Close()
		l.logw = nil
	}
}

// ReadinessSource is what a runtime's handle gives WaitReady: its
// Lifecycle (log lines, progress, failure), its exit (Done), when it can
// be reached (Up) and where (BaseURL), and how long to wait.
type ReadinessSource interface {
	Lifecycle() *Lifecycle
	// BaseURL is the HTTP probe's target; it may be "" until Up.
	BaseURL() string
	// Up is closed once the server can be reached; the ready timeout
	// counts from then. Nil: reachable from ReadyPlan.Begun on.
	Up() <-chan struct{}
	// Done is closed when the server has exited.
	Done() <-chan struct{}
	// ReadyPlan says how long to wait, and in which words.
	ReadyPlan() ReadyPlan
}

// ReadyPlan is a runtime's terms for WaitReady.
type ReadyPlan struct {
	// Model is the name /v1/models must list ("" = any).
	Model string
	// ReadyTimeout caps the wait from Up (0 = no cap beyond the stall);
	// StallTimeout is how long the server may show no progress (0 = 5 min).
	ReadyTimeout, StallTimeout time.Duration
	// Begun is when a server with no Up signal was started (zero: when
	// WaitReady is called); its ready timeout counts from then.
	Begun time.Time
	// Poll is how often the server is probed (0 = 250 ms).
	Poll time.Duration
	// Pulling, when set, says since when an image pull that logs nothing
	// is under way (zero: none): meanwhile PullTimeout (0 = 30 min), not
	// the stall timeout, caps it.
	Pulling     func() time.Time
	PullTimeout time.Duration
	// Image names what is pulled, for the reason.
	Image string
	// Started names Up in the reasons ("the container started"); empty
	// for a server reachable as soon as it is started.
	Started string
	// BeforeUp names what shows progress before Up ("pull or start").
	BeforeUp string
}

// errStoppedBeforeReady is returned when a server ended, without a
// failure, before it was ready: it was stopped.
var errStoppedBeforeReady = errors.New("engine: server stopped before it was ready")

// WaitReady blocks until src's server answers ready (/health 200 and
// /v1/models lists the model), fails (its runtime recorded a failure, or
// it exited), stalls (hung) or runs past its ready timeout, the same way
// for every runtime. On failure it returns a *Failure.
func WaitReady(ctx context.Context, src ReadinessSource) error {
	l, plan := src.Lifecycle(), src.ReadyPlan()
	stall := plan.StallTimeout
	if stall <= 0 {
		stall = 5 * time.Minute
	}
	pullTimeout := plan.PullTimeout
	if pullTimeout <= 0 {
		pullTimeout = 30 * time.Minute
	}
	poll := plan.Poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	var hardDeadline <-chan time.Time
	up := src.Up()
	if up == nil && plan.ReadyTimeout > 0 {
		d := plan.ReadyTimeout
		if !plan.Begun.IsZero() {
			d -= time.Since(plan.Begun)
		}
		t := time.NewTimer(d)
		defer t.Stop()
		hardDeadline = t.C
	}
	client := &http.Client{Timeout: 5 * time.Second}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	answered := "" // last HTTP answer, to tell unhealthy from hung
	notReady := func(answered, why string) error {
		f := NotReady(answered, why, l.ring)
		if got := l.Fail(f); got != nil {
			return got
		}
		return f
	}
	for {
		if up == nil {
			ok, note := Probe(ctx, client, src.BaseURL(), plan.Model)
			if ok {
				l.MarkReady()
				return nil
			}
			if note != "" {
				answered = note
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("engine: wait for ready: %w", ctx.Err())
		case <-l.Failed():
			return l.Failure()
		case <-src.Done():
			if f := l.Failure(); f != nil {
				return f
			}
			return errStoppedBeforeReady
		case <-up:
			up = nil
			if d := plan.ReadyTimeout; d > 0 {
				t := time.NewTimer(d)
				defer t.Stop()
				hardDeadline = t.C
			}
		case <-hardDeadline:
			if plan.Started == "" {
				return notReady(answered, fmt.Sprintf("not ready after %v", plan.ReadyTimeout))
			}
			return notReady(answered, fmt.Sprintf("not ready %v after %s", plan.ReadyTimeout, plan.Started))
		case <-tick.C:
			if plan.Pulling != nil {
				if since := plan.Pulling(); !since.IsZero() {
					if d := time.Since(since); d > pullTimeout {
						return notReady("", fmt.Sprintf("the pull of %s still under way after %v", plan.Image, d.Round(time.Second)))
					}
					continue
				}
			}
			if since := time.Since(l.Progress()); since > stall {
				what := "no log progress"
				if up != nil && plan.BeforeUp != "" {
					what = "no " + plan.BeforeUp + " progress"
				}
				return notReady(answered, fmt.Sprintf("%s for %v", what, since.Round(time.Millisecond)))
			}
		}
	}
}
