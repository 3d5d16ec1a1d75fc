package engine

// A runner's servers: started on demand, kept between measurements of
// their config, stopped when their GPUs are wanted. One call (Serve) gives
// a measurement a ready server, fresh or reused, so that a lab goes to the
// engine once for its server and never back and forth.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Fleet starts, keeps and stops the servers of one runner. Set its fields
// before the first call; its methods are safe for concurrent use.
type Fleet struct {
	Runtime Runtime
	// GPUs hands each server its device indices; nil launches without an
	// assignment (and keeps at most one idle server).
	GPUs *Allocator
	// FreshStart starts a server for every measurement.
	FreshStart bool
	// ReadyTimeout caps a server's start (0 = 20 min).
	ReadyTimeout time.Duration
	// GPUBusyWait is the settle time of a capacity wait (see
	// CapacityWait.Settle; 0 = 15 s).
	GPUBusyWait time.Duration
	// LogLines is how many log lines a failed start reports (0 = 60).
	LogLines int
	// Started, when set, is called with each server's process id once it
	// is up, and Stopped once it is down.
	Started, Stopped func(pid int)
	// KeepWorkDir keeps each server's working directory; WorkDir, when
	// set, names it for a server of the config hash key ("" = a temporary
	// one).
	KeepWorkDir bool
	WorkDir     func(key string) string

	mu   sync.Mutex
	idle []*Server
	// parked is closed and replaced each time a server is parked, for
	// whoever waits for a running measurement to give its GPUs up.
	parked chan struct{}
}

// Want is the server a measurement wants.
type Want struct {
	Config Config
	// Command is the rendered command (Render, WithMetrics).
	Command Command
	// Key is the config's hash: a server serves only its own config.
	Key string
	// GPUs is how many GPUs the server takes (from the fleet's
	// allocator, when it has one).
	GPUs int
	// Labels tag a new server (LabelTrial: the measurement's trial).
	Labels map[string]string
}

// Served is how a measurement got its server.
type Served struct {
	// Server is ready for the measurement; nil when Failure is set.
	Server *Server
	// Reused: it served an earlier measurement of its config.
	Reused bool
	// Cache says how it came to the measurement without an earlier
	// measurement's prefix cache (a Reuse* value; "" when it failed).
	Cache string
	// Notes are what happened on the way, for the record, joined by "; "
	// (a reset that failed, a start tried again).
	Notes string
	// EngineStart: a server was started for the measurement;
	// StartupSeconds is its last start's start and wait.
	EngineStart    bool
	StartupSeconds float64
	// Failure is why no server could be had; LogTail is the failed
	// server's log (nil when none was started).
	Failure *Failure
	LogTail []string
}

func (s *Served) note(n string) {
	switch {
	case n == "":
	case s.Notes == "":
		s.Notes = n
	default:
		s.Notes += "; " + n
	}
}

// Serve gives a measurement a ready server: an idle one of its config,
// its prefix cache reset (a reset that fails or is not proven costs a
// fresh server), else a new one. A server that fails to start is the
// returned Failure (it is stopped and its GPUs given back, after the
// capacity waits its class allows); err is only for a canceled ctx.
func (f *Fleet) Serve(ctx context.Context, w Want) (Served, error) {
	var out Served
	if s := f.takeServer(w.Key); s != nil {
		way, err := s.Reset(ctx)
		if err == nil {
			out.Server, out.Reused, out.Cache = s, true, way
			return out, nil
		}
		// A server that cannot be reset, or whose reset is not proven,
		// is not a repeat's server: measured on a fresh one.
		f.retire(s)
		out.note(err.Error() + "; on a fresh server instead")
	}
	s, err := f.start(ctx, w, &out)
	if err != nil || out.Failure != nil {
		return out, err
	}
	out.Server, out.Cache = s, s.Open(ctx)
	return out, nil
}

// Release ends a measurement on s: after a clean one (ok) it is kept for
// its config's next measurement when it may be (Keepable, not
// FreshStart), else stopped and its GPUs given back.
func (f *Fleet) Release(s *Server, ok bool) {
	if ok {
		s.used++
		if !f.FreshStart && s.Keepable() {
			f.park(s)
			return
		}
	}
	f.retire(s)
}

// Close stops every server the fleet keeps up. It is safe to call more
// than once.
func (f *Fleet) Close() {
	for s := f.oldest(); s != nil; s = f.oldest() {
		f.retire(s)
	}
}

// Sweep removes the servers an earlier lab of this run left when it was
// killed, where the runtime can find them (Sweeper).
func (f *Fleet) Sweep(ctx context.Context) ([]string, error) {
	if sw, ok := f.Runtime.(Sweeper); ok {
		return sw.Sweep(ctx)
	}
	return nil, nil
}

// take removes an idle server of key; dead is one found exited while
// idle (removed, its GPUs still to give back).
func (f *Fleet) take(key string) (s, dead *Server) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range f.idle {
		if c.key != key {
			continue
		}
		f.idle = slices.Delete(f.idle, i, i+1)
		select {
		case <-c.Handle.Done():
			return nil, c
		default:
		}
		return c, nil
	}
	return nil, nil
}

// takeServer returns an idle, live server of key, or nil.
func (f *Fleet) takeServer(key string) *Server {
	for {
		s, dead := f.take(key)
		if dead == nil {
			return s
		}
		f.retire(dead)
	}
}

// put parks a server for later use.
func (f *Fleet) put(s *Server) {
	s.idleAt = time.Now()
	f.mu.Lock()
	f.idle = append(f.idle, s)
	if f.parked != nil {
		close(f.parked)
		f.parked = nil
	}
	f.mu.Unlock()
}

// parkedSignal is closed at the next put.
func (f *Fleet) parkedSignal() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.parked == nil {
		f.parked = make(chan struct{})
	}
	return f.parked
}

// oldest removes and returns the least recently used idle server, or nil.
func (f *Fleet) oldest() *Server {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.idle) == 0 {
		return nil
	}
	i := 0
	for j, s := range f.idle {
		if s.idleAt.Before(f.idle[i].idleAt) {
			i = j
		}
	}
	s := f.idle[i]
	f.idle = slices.Delete(f.idle, i, i+1)
	return s
}

// park keeps a server for the next measurement of its config. Without an
// allocator to bound them, at most one server is kept.
func (f *Fleet) park(s *Server) {
	if f.GPUs == nil {
		f.Close()
	}
	f.put(s)
}

// retire stops a server and gives its GPUs back.
func (f *Fleet) retire(s *Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	_ = s.Handle.Stop(ctx)
	cancel()
	if f.Stopped != nil && s.pid > 0 {
		f.Stopped(s.pid)
	}
	if f.GPUs != nil && s.gpus != nil {
		f.GPUs.Release(s.gpus)
	}
}

// acquireGPUs takes n GPUs for a new server, stopping idle servers when
// that frees them, and else waiting for a running measurement to end: it
// releases its GPUs or parks its server, and either ends the wait.
func (f *Fleet) acquireGPUs(ctx context.Context, n int) ([]int, error) {
	if n > f.GPUs.Size() {
		return nil, fmt.Errorf("engine: want %d GPUs, the lab has %d", n, f.GPUs.Size())
	}
	for {
		// Taken before the checks, so that no release or park is missed.
		released, parked := f.GPUs.Changed(), f.parkedSignal()
		if ids, ok := f.GPUs.TryAcquire(n); ok {
			return ids, nil
		}
		if s := f.oldest(); s != nil {
			f.retire(s)
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-released:
		case <-parked:
		}
	}
}

// makeRoom frees what this fleet holds that a server the cluster could
// not place, or a GPU not yet free, may be waiting for: its idle servers
// (stopped), else one of its running measurements (waited for: it ends
// when the measurement releases its GPUs or parks its server, not on a
// poll). It says whether it freed anything; the spec's hardware.count can
// be more than the cluster has free, and then the lab's own pods are what
// the scheduler is short of.
func (f *Fleet) makeRoom(ctx context.Context) bool {
	for {
		// Taken before the checks, so that a release or a park between a
		// check and the wait still ends the wait.
		var released <-chan struct{}
		if f.GPUs != nil {
			released = f.GPUs.Changed()
		}
		parked := f.parkedSignal()
		if s := f.oldest(); s != nil {
			for ; s != nil; s = f.oldest() {
				f.retire(s)
			}
			return true
		}
		if f.GPUs == nil || f.GPUs.Free() == f.GPUs.Size() {
			return false // nothing of ours holds a GPU: it fits nowhere
		}
		select {
		case <-ctx.Done():
			return false
		case <-released:
			return true
		case <-parked:
			// A measurement ended and parked its server: stopped above.
		}
	}
}

func (f *Fleet) gpuBusyWait() time.Duration {
	if f.GPUBusyWait > 0 {
		return f.GPUBusyWait
	}
	return 15 * time.Second
}

// start starts w's server and waits until it is ready. A failure a wait
// may cure (its class's CapacityWait: a GPU not yet free, a server the
// cluster cannot place) is started again once the fleet has made room, as
// the class says.
func (f *Fleet) start(ctx context.Context, w Want, out *Served) (*Server, error) {
	tries := map[FailureClass]int{}
	for {
		s, failed, err := f.startOnce(ctx, w, out)
		if err != nil {
			return nil, err
		}
		if failed == nil {
			return s, nil
		}
		c := failed.Class.Capacity()
		if tries[failed.Class] >= c.Retries {
			out.Failure = failed
			return nil, nil
		}
		tries[failed.Class]++
		if freed := f.makeRoom(ctx); c.NeedsRoom && !freed {
			// Nothing of ours held what it lacks: it fits nowhere.
			out.Failure = failed
			return nil, nil
		}
		if c.Settle {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(tries[failed.Class]) * f.gpuBusyWait()):
			}
		}
		out.note(c.Again(failed.Reason))
		out.LogTail = nil
	}
}

// startOnce is one start of w's server (see start); the failure it
// returns is the server's (its log in out.LogTail).
func (f *Fleet) startOnce(ctx context.Context, w Want, out *Served) (*Server, *Failure, error) {
	rt := f.ReadyTimeout
	if rt == 0 {
		rt = 20 * time.Minute
	}
	s := &Server{Config: w.Config, key: w.Key}
	if f.GPUs != nil {
		ids, err := f.acquireGPUs(ctx, w.GPUs)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			// Only a config wider than every GPU the lab has fails here.
			return nil, &Failure{Class: ClassInvalidConfig, Reason: err.Error()}, nil
		}
		s.gpus = ids
	}
	started := time.Now()
	out.EngineStart = true
	cmd := w.Command
	if !f.FreshStart && Reusable(w.Config) {
		cmd = ReuseEnv(w.Config, cmd)
	}
	workDir := ""
	if f.KeepWorkDir && f.WorkDir != nil {
		workDir = f.WorkDir(w.Key)
	}
	h, err := f.Runtime.Start(ctx, Launch{Config: w.Config, Command: cmd, GPUs: s.gpus,
		ReadyTimeout: rt, WorkDir: workDir, KeepWorkDir: f.KeepWorkDir, Labels: w.Labels})
	if err != nil {
		if s.gpus != nil {
			f.GPUs.Release(s.gpus)
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, &Failure{Class: ClassStartupCrash, Reason: err.Error()}, nil
	}
	s.Handle, s.pid = h, PidOf(h)
	if f.Started != nil && s.pid > 0 {
		f.Started(s.pid)
	}
	err = h.Ready(ctx)
	out.StartupSeconds = time.Since(started).Seconds()
	if err != nil {
		f.retire(s)
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		out.LogTail = h.LogTail(f.logLines())
		var fl *Failure
		if errors.As(err, &fl) {
			return nil, fl, nil
		}
		return nil, &Failure{Class: ClassStartupCrash, Reason: err.Error()}, nil
	}
	return s, nil, nil
}

func (f *Fleet) logLines() int {
	if f.LogLines > 0 {
		return f.LogLines
	}
	return 60
}
