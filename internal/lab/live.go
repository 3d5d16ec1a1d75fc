package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perflab/perflab/internal/bench"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/metrics"
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
	TimeScale labspec.Scale
	// ReadyTimeout caps a server's start (0 = 20 min).
	ReadyTimeout time.Duration
	// SLO feeds goodput.
	SLO labspec.SLO
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

	fleetOnce sync.Once
	servers   *engine.Fleet
}

var _ Runner = (*LiveRunner)(nil)

// Run implements Runner. A trial runs on an idle server of its config
// when one is up (its prefix cache reset first), else on a new one; after
// a clean measurement the server is kept for the next measurement of the
// same config, unless FreshStart is set or the engine cannot reset its
// cache.
func (r *LiveRunner) Run(ctx context.Context, t TrialSpec) (Measurement, error) {
	var m Measurement
	tr := &m.Trace
	reqs, err := r.Requests(t.Workload)
	if err != nil {
		return m, err // it names the workload
	}
	_, load := t.Workload.Resolve()
	// One call into the engine: the command, a ready server, the
	// benchmark on it, the server's metrics, failure and log after it.
	got, err := r.fleet().Bench(ctx, engine.Want{Config: t.Config, Key: labspec.ConfigHash(t.Config),
		GPUs: labspec.GPUs(t.Config), Labels: map[string]string{engine.LabelTrial: t.Key}},
		bench.Config{
			Backend: "openai-chat", Endpoint: "/v1/chat/completions",
			// The name the server lists, as its engine names it (trtllm-serve:
			// a local model directory's last component).
			Model: t.Config.Model, ServedModelName: t.Config.ServedName(), Requests: reqs,
			// A server k times faster than simulated time is offered the
			// load k times faster, so that in simulated time it gets the
			// spec's rate (the records are stretched back below).
			RequestRate: r.TimeScale.Send(load.Rate), MaxConcurrency: load.MaxConcurrency, Seed: load.Seed,
		}, measurementKey(t.Key))
	tr.Command, tr.Notes, tr.Cache, tr.EngineMetrics, tr.LogTail = got.Command, got.Notes, got.Cache, got.Metrics, got.Tail
	if got.Command != "" {
		m.Cost.GPUs = labspec.GPUs(t.Config)
	}
	if got.EngineStart {
		m.Cost.EngineStart, m.Cost.StartupSeconds = true, got.StartupSeconds
	}
	m.Cost.BenchSeconds = got.BenchSeconds
	if err != nil {
		return m, err
	}
	if out := got.Outcome; out != nil && len(out.Records) > 0 {
		// Kept even when the server failed: what was measured before the
		// crash stays in the store next to the failure.
		opt := metrics.DefaultOptions()
		opt.RequestRate, opt.MaxConcurrency = load.Rate, load.MaxConcurrency
		if g := r.SLO.Goodput(); len(g) > 0 {
			opt.Goodput = g
		}
		recs, dur, stretched := r.TimeScale.Stretch(out.Records, out.Duration)
		if stretched {
			tr.Notes = engine.JoinNotes(tr.Notes, fmt.Sprintf("sim runtime at time scale %g; figures scaled back to simulated time", float64(r.TimeScale)))
		}
		recs, dur = pointWindow(t.Workload.Point, recs, dur, &opt)
		m.Result = metrics.Compute(recs, dur, opt)
	}
	m.Failure, tr.Ended = got.Failure, time.Now()
	return m, nil
}

// fleet is the runner's servers (engine.Fleet), set up from its fields
// at first use.
func (r *LiveRunner) fleet() *engine.Fleet {
	r.fleetOnce.Do(func() {
		r.servers = &engine.Fleet{Runtime: r.Runtime, GPUs: r.GPUs, FreshStart: r.FreshStart,
			ReadyTimeout: r.ReadyTimeout, GPUBusyWait: r.GPUBusyWait, LogLines: r.logLines(),
			Started: r.Started, Stopped: r.Stopped, KeepWorkDir: r.KeepWorkDir}
		if r.KeepWorkDir && r.WorkRoot != "" {
			r.servers.WorkDir = func(key string) string {
				return filepath.Join(r.WorkRoot, fmt.Sprintf("%03d-%s", r.starts.Add(1), key[:min(12, len(key))]))
			}
		}
	})
	return r.servers
}

func (r *LiveRunner) logLines() int {
	if r.LogLines > 0 {
		return r.LogLines
	}
	return 60
}
