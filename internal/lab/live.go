package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/perflab/perflab/internal/bench"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/store"
)

// LiveRunner runs trials against started servers: the sim runtime (the
// simulator as a real process over HTTP, time-scaled) or the process
// runtime (the real engines). Each trial renders the command, starts the
// server, waits for it, benchmarks it with bench.Run, scrapes /metrics and
// always stops it.
type LiveRunner struct {
	Runtime  engine.Runtime
	Requests Requests
	// TimeScale is the sim runtime's speed-up; measured figures are scaled
	// back to simulated time (throughputs ÷K, latencies ×K). 0 or 1 for
	// real engines.
	TimeScale float64
	// ReadyTimeout caps a server's start (0 = 20 min).
	ReadyTimeout time.Duration
	// SLO feeds goodput.
	SLO SLO
	// LogLines is how many log lines a trial keeps (0 = 60).
	LogLines int
	// Started, when set, is called with each server's process id once it
	// is up, and Stopped once it is down (the CLI keeps a pid file so a
	// killed lab's engines can be found).
	Started func(pid int)
	Stopped func(pid int)
	// GPUs hands each trial its device indices (Launch.GPUs, so
	// CUDA_VISIBLE_DEVICES for the engine and --gpus for the simulator);
	// a trial holds them from before its server starts until after it has
	// stopped. The runtime's Kind provides it (internal/runtimes: the
	// host's real GPUs come from one allocator per process); nil launches
	// without an assignment.
	GPUs *engine.Allocator
	// FreshStart starts a server for every measurement, as the reference
	// reports' authors did, so that the noise floor includes start-to-start
	// variance. Without it a config's server serves all its measurements.
	FreshStart bool
	// KeepWorkDir keeps each server's working directory (its log, its
	// rendered files) after it stops; by default it is removed.
	KeepWorkDir bool
	// WorkRoot, with KeepWorkDir, is where the kept directories go, one
	// per server start named after its config, so a user finds them by
	// the path the CLI printed; empty leaves them in the runtime's
	// temporary directories.
	WorkRoot string
	// GPUBusyWait is the first wait before a server that found its GPU
	// not yet free (engine.ClassGPUBusy) is started again (0 = 15 s).
	GPUBusyWait time.Duration
	starts      atomic.Int64

	pool pool
}

var _ Runner = (*LiveRunner)(nil)

// Run implements Runner. A trial runs on an idle server of its config
// when one is up (its prefix cache reset first), else on a new one; after
// a clean measurement the server is kept for the next measurement of the
// same config, unless FreshStart is set or the engine cannot reset its
// cache.
func (r *LiveRunner) Run(ctx context.Context, t TrialSpec) (store.Trial, error) {
	rec := newRecord(t)
	var srv *server
	fail := func(class, reason string, h engine.Handle) (store.Trial, error) {
		rec.Status, rec.FailureClass, rec.Reason, rec.Ended = "failed", class, joinReason(rec.Reason, reason), time.Now()
		if h != nil {
			rec.LogTail = logTail(h, r.logLines())
		}
		return rec, nil
	}
	cmd, err := engine.Render(t.Config)
	if err != nil {
		return fail(FailInvalidConfig, err.Error(), nil)
	}
	// Launched with the engine's metrics endpoint on, and recorded so.
	cmd = engine.WithMetrics(t.Config, cmd)
	rec.Command = cmd.String()
	reqs, err := r.Requests(t.Workload)
	if err != nil {
		return rec, err // it names the workload
	}
	rec.Cost.GPUs = GPUs(t.Config)
	key := ConfigHash(t.Config)
	if srv = r.takeServer(key); srv != nil {
		way, err := srv.Reset(ctx)
		if err != nil {
			// A server that cannot be reset, or whose reset is not
			// proven, is not a repeat's server: measured on a fresh one.
			r.retire(srv)
			srv = nil
			rec.Reason = joinReason(rec.Reason, err.Error()+"; on a fresh server instead")
		}
		rec.Cache = way
	}
	if srv == nil {
		var failed *store.Trial
		if srv, failed, err = r.start(ctx, t, cmd, &rec); err != nil || failed != nil {
			if failed != nil {
				return *failed, nil
			}
			return rec, err
		}
		rec.Cache = srv.Open(ctx)
	} else {
		rec.Reason = joinReason(rec.Reason, fmt.Sprintf("on the server already up for this config (measurement %d)", srv.used+1))
	}
	if srv.gpus != nil {
		rec.Reason = joinReason("GPUs "+joinInts(srv.gpus), rec.Reason)
	}
	if w := engine.WhereOf(srv.Handle); w != "" {
		rec.Reason = joinReason(w, rec.Reason)
	}
	h := srv.Handle
	keep := false
	defer func() {
		if keep {
			r.park(srv)
			return
		}
		r.retire(srv)
	}()
	_, load := t.Workload.resolve()
	sendRate := load.rate
	if k := r.TimeScale; k > 0 && !math.IsInf(sendRate, 1) {
		// A server k times faster than simulated time is offered the
		// load k times faster, so that in simulated time it gets the
		// spec's rate (the records are stretched back below).
		sendRate *= k
	}
	engine.MarkBenchmarking(h)
	benchStart := time.Now()
	out, err := bench.Run(ctx, bench.Config{
		BaseURL: h.BaseURL(), Backend: "openai-chat", Endpoint: "/v1/chat/completions",
		// The name the server lists, as its engine names it (trtllm-serve:
		// a local model directory's last component).
		Model: t.Config.Model, ServedModelName: t.Config.ServedName(), Requests: reqs,
		RequestRate: sendRate, MaxConcurrency: load.maxConc, Seed: load.seed,
		ExtraBody: srv.Salt(measurementKey(t.Key)),
	})
	rec.Cost.BenchSeconds = time.Since(benchStart).Seconds()
	if ctx.Err() != nil {
		return rec, ctx.Err()
	}
	if err != nil || lostConnections(out) {
		// A server that dropped its clients may be dying: give its exit
		// a moment to be seen, so the trial is classed as the crash it
		// is rather than as a run with a low success rate.
		select {
		case <-h.Done():
		case <-time.After(3 * time.Second):
		}
	}
	rec.EngineMetrics = srv.Metrics(ctx)
	var b []byte
	if out != nil && len(out.Records) > 0 {
		// Kept even when the server failed: what was measured before the
		// crash stays in the store next to the failure.
		opt := metrics.DefaultOptions()
		opt.RequestRate, opt.MaxConcurrency = load.rate, load.maxConc
		if g := r.SLO.goodput(); len(g) > 0 {
			opt.Goodput = g
		}
		recs, dur := out.Records, out.Duration
		if k := r.TimeScale; k > 0 && k != 1 {
			// The server ran K times faster than simulated time: the
			// records are stretched back once, before the one Compute, so
			// every figure (quantiles and CDFs too) is in simulated time.
			recs = make([]metrics.Record, len(out.Records))
			for i, rc := range out.Records {
				recs[i] = rc.Stretched(k)
			}
			dur *= k
			rec.Reason = joinReason(rec.Reason, fmt.Sprintf("sim runtime at time scale %g; figures scaled back to simulated time", k))
		}
		recs, dur = t.Workload.Point.window(recs, dur, &opt)
		res := metrics.Compute(recs, dur, opt)
		if b, err = res.MarshalJSON(); err != nil {
			return rec, fmt.Errorf("lab: encode result: %w", err)
		}
	}
	if f := h.Failure(); f != nil {
		rec.Result = b
		return fail(string(f.Class), f.Reason, h)
	}
	if err != nil && b == nil {
		return fail(FailCrashDuringBench, err.Error(), h)
	}
	rec.Result = b
	rec.Status = "ok"
	rec.LogTail = logTail(h, r.logLines())
	rec.Ended = time.Now()
	srv.used++
	keep = r.keepable(srv)
	return rec, nil
}

// start acquires the trial's GPUs, starts its server and waits until it is
// ready. A server that fails is returned as the failed trial record (and
// stopped, its GPUs given back); err is only for a canceled lab. A failure
// a wait may cure (its class's engine.CapacityWait: a GPU not yet free, a
// server the cluster cannot place) is started again once this runner has
// made room (makeRoom), as the class says.
func (r *LiveRunner) start(ctx context.Context, t TrialSpec, cmd engine.Command, rec *store.Trial) (*server, *store.Trial, error) {
	tries := map[engine.FailureClass]int{}
	for {
		srv, failed, err := r.startOnce(ctx, t, cmd, rec)
		if failed == nil {
			return srv, nil, err
		}
		class := engine.FailureClass(failed.FailureClass)
		w := class.Capacity()
		if tries[class] >= w.Retries {
			return srv, failed, err
		}
		tries[class]++
		if freed := r.makeRoom(ctx); w.NeedsRoom && !freed {
			// Nothing of ours held what it lacks: it fits nowhere.
			return srv, failed, err
		}
		if w.Settle {
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(time.Duration(tries[class]) * r.gpuBusyWait()):
			}
		}
		rec.Reason = joinReason(rec.Reason, w.Again(failed.Reason))
	}
}

func (r *LiveRunner) gpuBusyWait() time.Duration {
	if r.GPUBusyWait > 0 {
		return r.GPUBusyWait
	}
	return 15 * time.Second
}

// makeRoom frees what this runner holds that a server the cluster could
// not place, or a GPU not yet free, may be waiting for: its idle servers
// (stopped), else one of its running trials (waited for: it ends when the
// trial releases its GPUs or parks its server, not on a poll). It says
// whether it freed anything; the spec's hardware.count can be more than
// the cluster has free, and then the lab's own pods are what the scheduler
// is short of.
func (r *LiveRunner) makeRoom(ctx context.Context) bool {
	for {
		// Taken before the checks, so that a release or a park between a
		// check and the wait still ends the wait.
		var released <-chan struct{}
		if r.GPUs != nil {
			released = r.GPUs.Changed()
		}
		parked := r.pool.parkedSignal()
		if s := r.pool.oldest(); s != nil {
			for ; s != nil; s = r.pool.oldest() {
				r.retire(s)
			}
			return true
		}
		if r.GPUs == nil || r.GPUs.Free() == r.GPUs.Size() {
			return false // nothing of ours holds a GPU: it fits nowhere
		}
		select {
		case <-ctx.Done():
			return false
		case <-released:
			return true
		case <-parked:
			// A trial ended and parked its server: stopped above.
		}
	}
}

// startOnce is one start of the trial's server (see start).
func (r *LiveRunner) startOnce(ctx context.Context, t TrialSpec, cmd engine.Command, rec *store.Trial) (*server, *store.Trial, error) {
	fail := func(class, reason string, h engine.Handle) (*server, *store.Trial, error) {
		f := *rec
		f.Status, f.FailureClass, f.Reason, f.Ended = "failed", class, joinReason(f.Reason, reason), time.Now()
		if h != nil {
			f.LogTail = logTail(h, r.logLines())
		}
		return nil, &f, nil
	}
	rt := r.ReadyTimeout
	if rt == 0 {
		rt = 20 * time.Minute
	}
	srv := &server{key: ConfigHash(t.Config)}
	if r.GPUs != nil {
		ids, err := r.acquireGPUs(ctx, GPUs(t.Config))
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			// Only a config wider than every GPU the lab has fails here.
			return fail(FailInvalidConfig, err.Error(), nil)
		}
		srv.gpus = ids
	}
	started := time.Now()
	rec.Cost.EngineStart = true
	workDir := ""
	if r.KeepWorkDir && r.WorkRoot != "" {
		workDir = filepath.Join(r.WorkRoot, fmt.Sprintf("%03d-%s", r.starts.Add(1), srv.key[:min(12, len(srv.key))]))
	}
	h, err := r.Runtime.Start(ctx, engine.Launch{Config: t.Config, Command: r.startEnv(cmd, t.Config), GPUs: srv.gpus,
		ReadyTimeout: rt, WorkDir: workDir, KeepWorkDir: r.KeepWorkDir, Labels: map[string]string{engine.LabelTrial: t.Key}})
	if err != nil {
		if srv.gpus != nil {
			r.GPUs.Release(srv.gpus)
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return fail(FailStartupCrash, err.Error(), nil)
	}
	srv.Server, srv.pid = engine.NewServer(h, t.Config), engine.PidOf(h)
	if r.Started != nil && srv.pid > 0 {
		r.Started(srv.pid)
	}
	err = h.Ready(ctx)
	rec.Cost.StartupSeconds = time.Since(started).Seconds()
	if err != nil {
		r.retire(srv)
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		var f *engine.Failure
		if errors.As(err, &f) {
			return fail(string(f.Class), f.Reason, h)
		}
		return fail(FailStartupCrash, err.Error(), h)
	}
	return srv, nil, nil
}

func (r *LiveRunner) logLines() int {
	if r.LogLines > 0 {
		return r.LogLines
	}
	return 60
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func joinReason(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// lostConnections tells whether any request failed the way requests fail
// when the engine dies: the connection reset or refused, or an error event
// mid-stream (vLLM tells its open streams EngineDeadError before the
// process goes).
func lostConnections(out *bench.Outcome) bool {
	if out == nil {
		return false
	}
	for _, r := range out.Records {
		if r.Success {
			continue
		}
		switch r.ErrorClass {
		case bench.ClassReset, bench.ClassConnect, bench.ClassServerError:
			return true
		}
	}
	return false
}
