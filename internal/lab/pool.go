package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/perflab/perflab/internal/engine"
)

// server is one started engine server and the GPUs it holds.
type server struct {
	h    engine.Handle
	key  string // the config's hash: a server serves only its own config
	cfg  engine.Config
	gpus []int
	pid  int
	// used counts the measurements it served; from the second on, its
	// prefix cache is reset first.
	used int
	idle time.Time
	// salted says the server took a cache_salt when asked at start (see
	// probeSalt): only then are its measurements salted and it reused.
	salted bool
}

// pool keeps the servers of a LiveRunner that are up but not measuring,
// so that the next measurement of the same config (a repeat, another
// workload) runs on it instead of paying another start. An idle server
// keeps its GPUs; a trial that needs them stops the least recently used
// idle servers first.
type pool struct {
	mu   sync.Mutex
	idle []*server
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
		case <-c.h.Done():
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
	return s.h.Stop(ctx)
}

// acquireGPUs takes n GPUs for a new server, stopping idle servers when
// that frees them, and else waiting for a busy trial to end.
func (r *LiveRunner) acquireGPUs(ctx context.Context, n int) ([]int, error) {
	if n > r.GPUs.Size() {
		return nil, fmt.Errorf("engine: want %d GPUs, the lab has %d", n, r.GPUs.Size())
	}
	for {
		if ids, ok := r.GPUs.TryAcquire(n); ok {
			return ids, nil
		}
		if s := r.pool.oldest(); s != nil {
			r.retire(s)
			continue
		}
		// Every GPU is in a running trial: wait a little for one to end
		// (it may park its server rather than release, hence the loop).
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		ids, err := r.GPUs.Acquire(wctx, n)
		cancel()
		if err == nil {
			return ids, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
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
// measurement: reusable, and, where its engine salts rather than resets,
// it took the salt at start (probeSalt) or caches no prefixes at all.
func (r *LiveRunner) keepable(s *server) bool {
	if !r.reusable(s.cfg) {
		return false
	}
	c := engine.ResetFor(s.cfg)
	return !c.Salt || s.salted || (s.cfg.PrefixCaching != nil && !*s.cfg.PrefixCaching)
}

// startEnv adds what a reused server must be started with (the engine's
// cache-reset endpoint) to the command's environment.
func (r *LiveRunner) startEnv(cmd engine.Command, cfg engine.Config) engine.Command {
	if !r.reusable(cfg) {
		return cmd
	}
	env := engine.ResetFor(cfg).Env
	if len(env) == 0 {
		return cmd
	}
	merged := make(map[string]string, len(cmd.Env)+len(env))
	for k, v := range cmd.Env {
		merged[k] = v
	}
	for k, v := range env {
		merged[k] = v
	}
	cmd.Env = merged
	return cmd
}

// probeSalt asks a new server of an engine that salts its prefix cache
// (engine.CacheReset.Salt) whether it takes a cache_salt: one request of
// one token, salted apart from every measurement. The version gate says
// it should; a server that refuses the field (a 4xx) is measured without
// salts and started again for each measurement, rather than failing every
// request of every trial.
func probeSalt(ctx context.Context, s *server, model string) bool {
	if !engine.ResetFor(s.cfg).Salt {
		return false
	}
	body, _ := json.Marshal(map[string]any{
		"model": model, "max_tokens": 1, "cache_salt": "perflab-probe",
		"messages": []map[string]string{{"role": "user", "content": "Hi"}},
	})
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(s.h.BaseURL(), "/")+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode/100 == 2
}

// cacheSalt is the request field that keeps a measurement's cached
// prefixes its own on an engine that salts rather than resets (see
// engine.CacheReset): one salt per measurement, on every request of it, so
// its requests share prefixes among themselves as on a fresh server and
// never with an earlier measurement's. Every measurement of such an engine
// is salted, the first too, so that repeats send the same requests. The
// salt is a hash (engines refuse salts with '/' or over 128 characters).
func cacheSalt(t TrialSpec, s *server) map[string]any {
	if !s.salted {
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte(measurementKey(t.Key)))
	return map[string]any{"cache_salt": fmt.Sprintf("perflab-%016x", h.Sum64())}
}

// errResetFailed marks a reused server whose cache could not be reset.
var errResetFailed = errors.New("lab: reset the prefix cache of a reused server")

// How a trial's server came to it without an earlier measurement's
// prefix cache (store.Trial.Cache).
const (
	// CacheFresh: a server started for the trial.
	CacheFresh = "fresh"
	// CacheResetVerified: a reused server, reset, and the engine's
	// counters showed the probe prompt missed after the reset.
	CacheResetVerified = "reset_verified"
	// CacheReset: a reused server, reset by an endpoint that refuses
	// when it cannot reset (SGLang's /flush_cache).
	CacheReset = "reset"
	// CacheSalted: a reused server; the trial's requests carry their own
	// cache_salt.
	CacheSalted = "salted"
	// CacheOff: a reused server of a config that caches no prefixes.
	CacheOff = "off"
)

// prepareReuse clears a reused server's prefix cache before a measurement
// the way its engine allows, and says which way it was (a Cache* value).
// A reset that cannot be proven (engine.ErrResetUnproven) is an error: the
// caller starts a fresh server rather than measure on a warm one.
func prepareReuse(ctx context.Context, s *server) (string, error) {
	off := s.cfg.PrefixCaching != nil && !*s.cfg.PrefixCaching
	c := engine.ResetFor(s.cfg)
	if off {
		c.Check = nil // nothing cached, nothing to prove
	}
	verified, err := c.DoVerified(ctx, s.h.BaseURL(), s.cfg.ServedName())
	if err != nil {
		return "", fmt.Errorf("%w: %w", errResetFailed, err)
	}
	switch {
	case off:
		return CacheOff, nil
	case verified:
		return CacheResetVerified, nil
	case c.Path != "":
		return CacheReset, nil
	case s.salted:
		return CacheSalted, nil
	}
	return CacheOff, nil
}

// logTail is a server's last log lines.
func logTail(h engine.Handle, n int) string { return strings.Join(h.LogTail(n), "\n") }
