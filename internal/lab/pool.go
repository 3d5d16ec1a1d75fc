package lab

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/perflab/perflab/internal/engine"
)

// server is one started engine server (which owns its reuse: reset,
// salt, metrics) and the GPUs it holds.
type server struct {
	*engine.Server
	key  string // the config's hash: a server serves only its own config
	gpus []int
	pid  int
	// used counts the measurements it served; from the second on, its
	// prefix cache is reset first.
	used int
	idle time.Time
}

// pool keeps the servers of a LiveRunner that are up but not measuring,
// so that the next measurement of the same config (a repeat, another
// workload) runs on it instead of paying another start. An idle server
// keeps its GPUs; a trial that needs them stops the least recently used
// idle servers first.
type pool struct {
	mu   sync.Mutex
	idle []*server
	// parked is closed and replaced each time a server is parked, for
	// whoever waits for a running trial to give its GPUs up.
	parked chan struct{}
}

// parkedSignal is closed at the next put.
func (p *pool) parkedSignal() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.parked == nil {
		p.parked = make(chan struct{})
	}
	return p.parked
}

// take returns an idle server of key, or nil; ok is false when the one it
// found had died while idle (removed, and its GPUs still to give back).
func (p *pool) take(key string) (s *server, dead *server) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.idle {
		if c.key != key {
			continue
		}
		p.idle = slices.Delete(p.idle, i, i+1)
		select {
		case <-c.Handle.Done():
			return nil, c
		default:
		}
		return c, nil
	}
	return nil, nil
}

// put parks a server for later use.
func (p *pool) put(s *server) {
	s.idle = time.Now()
	p.mu.Lock()
	p.idle = append(p.idle, s)
	if p.parked != nil {
		close(p.parked)
		p.parked = nil
	}
	p.mu.Unlock()
}

// size is how many servers are parked.
func (p *pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// oldest removes and returns the least recently used idle server, or nil.
func (p *pool) oldest() *server {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) == 0 {
		return nil
	}
	i := 0
	for j, s := range p.idle {
		if s.idle.Before(p.idle[i].idle) {
			i = j
		}
	}
	s := p.idle[i]
	p.idle = slices.Delete(p.idle, i, i+1)
	return s
}

// stopNow stops a server with a grace period and no caller context.
func (s *server) stopNow() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return s.Handle.Stop(ctx)
}

// acquireGPUs takes n GPUs for a new server, stopping idle servers when
// that frees them, and else waiting for a busy trial to end: it releases
// its GPUs or parks its server, and either ends the wait.
func (r *LiveRunner) acquireGPUs(ctx context.Context, n int) ([]int, error) {
	if n > r.GPUs.Size() {
		return nil, fmt.Errorf("engine: want %d GPUs, the lab has %d", n, r.GPUs.Size())
	}
	for {
		// Taken before the checks, so that no release or park is missed.
		released, parked := r.GPUs.Changed(), r.pool.parkedSignal()
		if ids, ok := r.GPUs.TryAcquire(n); ok {
			return ids, nil
		}
		if s := r.pool.oldest(); s != nil {
			r.retire(s)
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

// takeServer returns an idle, live server of key, or nil.
func (r *LiveRunner) takeServer(key string) *server {
	for {
		s, dead := r.pool.take(key)
		if dead == nil {
			return s
		}
		r.retire(dead)
	}
}

// park keeps a server for the next measurement of its config. Without an
// allocator to bound them, at most one server is kept.
func (r *LiveRunner) park(s *server) {
	if r.GPUs == nil {
		for o := r.pool.oldest(); o != nil; o = r.pool.oldest() {
			r.retire(o)
		}
	}
	r.pool.put(s)
}

// retire stops a server and gives its GPUs back.
func (r *LiveRunner) retire(s *server) {
	_ = s.stopNow()
	if r.Stopped != nil && s.pid > 0 {
		r.Stopped(s.pid)
	}
	if r.GPUs != nil && s.gpus != nil {
		r.GPUs.Release(s.gpus)
	}
}

// Close stops every server the runner keeps up; call it when the lab is
// done with the runner. It is safe to call more than once.
func (r *LiveRunner) Close() error {
	for s := r.pool.oldest(); s != nil; s = r.pool.oldest() {
		r.retire(s)
	}
	return nil
}

// Sweep removes the servers an earlier lab of this run left when it was
// killed (containers outlive perflab; local processes do not), where the
// runtime can find them. The lab calls it once it holds the run, so it
// never removes the servers of a lab still running it.
func (r *LiveRunner) Sweep(ctx context.Context) ([]string, error) {
	if sw, ok := r.Runtime.(engine.Sweeper); ok {
		return sw.Sweep(ctx)
	}
	return nil, nil
}

// reusable says whether a server of cfg may be kept for the next
// measurement of its config.
func (r *LiveRunner) reusable(cfg engine.Config) bool {
	return !r.FreshStart && engine.Reusable(cfg)
}

// keepable says whether this server may be kept for its config's next
// measurement (see engine.Server.Keepable).
func (r *LiveRunner) keepable(s *server) bool {
	return !r.FreshStart && s.Keepable()
}

// startEnv adds what a reused server must be started with (the engine's
// cache-reset endpoint) to the command's environment.
func (r *LiveRunner) startEnv(cmd engine.Command, cfg engine.Config) engine.Command {
	if !r.reusable(cfg) {
		return cmd
	}
	return engine.ReuseEnv(cfg, cmd)
}

// How a trial's server came to it without an earlier measurement's
// prefix cache (store.Trial.Cache); see engine.ReuseFresh and the rest.
const (
	CacheFresh         = engine.ReuseFresh
	CacheResetVerified = engine.ReuseResetVerified
	CacheReset         = engine.ReuseReset
	CacheSalted        = engine.ReuseSalted
	CacheOff           = engine.ReuseOff
)

// logTail is a server's last log lines.
func logTail(h engine.Handle, n int) string { return strings.Join(h.LogTail(n), "\n") }
