package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
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
	TimeScale Scale
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
		way, err := prepareReuse(ctx, srv)
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
		srv.salted = probeSalt(ctx, srv, t.Config.ServedName())
		rec.Cache = CacheFresh
	} else {
		rec.Reason = joinReason(rec.Reason, fmt.Sprintf("on the server already up for this config (measurement %d)", srv.used+1))
	}
	if srv.gpus != nil {
		rec.Reason = joinReason("GPUs "+joinInts(srv.gpus), rec.Reason)
	}
	if w := engine.WhereOf(srv.h); w != "" {
		rec.Reason = joinReason(w, rec.Reason)
	}
	h := srv.h
	keep := false
	defer func() {
		if keep {
			r.park(srv)
			return
		}
		r.retire(srv)
	}()
	_, load := t.Workload.resolve()
	// A server k times faster than simulated time is offered the load k
	// times faster, so that in simulated time it gets the spec's rate (the
	// records are stretched back below).
	sendRate := r.TimeScale.Send(load.rate)
	engine.MarkBenchmarking(h)
	benchStart := time.Now()
	out, err := bench.Run(ctx, bench.Config{
		BaseURL: h.BaseURL(), Backend: "openai-chat", Endpoint: "/v1/chat/completions",
		// The name the server lists, as its engine names it (trtllm-serve:
		// a local model directory's last component).
		Model: t.Config.Model, ServedModelName: t.Config.ServedName(), Requests: reqs,
		RequestRate: sendRate, MaxConcurrency: load.maxConc, Seed: load.seed,
		ExtraBody: cacheSalt(t, srv),
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
	rec.EngineMetrics = scrapeMetrics(ctx, h.BaseURL(), engine.ProtocolFor(t.Config.Engine).MetricsPath())
	var b []byte
	if out != nil && len(out.Records) > 0 {
		// Kept even when the server failed: what was measured before the
		// crash stays in the store next to the failure.
		opt := metrics.DefaultOptions()
		opt.RequestRate, opt.MaxConcurrency = load.rate, load.maxConc
		if g := r.SLO.goodput(); len(g) > 0 {
			opt.Goodput = g
		}
		recs, dur, stretched := r.TimeScale.Stretch(out.Records, out.Duration)
		if stretched {
			rec.Reason = joinReason(rec.Reason, fmt.Sprintf("sim runtime at time scale %g; figures scaled back to simulated time", float64(r.TimeScale)))
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
	keep = r.keepable(srv) && h.Failure() == nil
	return rec, nil
}

// start acquires the trial's GPUs, starts its server and waits until it is
// ready. A server that fails is returned as the failed trial record (and
// stopped, its GPUs given back); err is only for a canceled lab. A server
// the cluster cannot place is started again once this runner has made
// room (makeRoom): only one that fits nowhere even then is unschedulable.
func (r *LiveRunner) start(ctx context.Context, t TrialSpec, cmd engine.Command, rec *store.Trial) (*server, *store.Trial, error) {
	busy := 0
	for try := 0; ; try++ {
		srv, failed, err := r.startOnce(ctx, t, cmd, rec)
		if failed != nil && failed.FailureClass == string(engine.ClassGPUBusy) && busy < gpuBusyRetries {
			// The GPU was not yet free (a server just stopped may still
			// be releasing its memory): wait, free what this runner
			// holds idle, and start again rather than give the config up.
			busy++
			r.makeRoom(ctx)
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(time.Duration(busy) * r.gpuBusyWait()):
			}
			rec.Reason = joinReason(rec.Reason, fmt.Sprintf("GPU not yet free at start (%s); started again", failed.Reason))
			continue
		}
		if failed == nil || failed.FailureClass != string(engine.ClassUnschedulable) || try >= 50 || !r.makeRoom(ctx) {
			return srv, failed, err
		}
		rec.Reason = joinReason(rec.Reason, "not placed while this lab's own servers held the GPUs; started again")
	}
}

// gpuBusyRetries is how many times a server refused for a GPU not yet
// free is started again, after a wait that grows by GPUBusyWait each time.
const gpuBusyRetries = 3

func (r *LiveRunner) gpuBusyWait() time.Duration {
	if r.GPUBusyWait > 0 {
		return r.GPUBusyWait
	}
	return 15 * time.Second
}

// makeRoom frees what this runner holds that a server the cluster could
// not place may be waiting for: its idle servers (stopped), else one of
// its running trials (waited for). It says whether it freed anything; the
// spec's hardware.count can be more than the cluster has free, and then
// the lab's own pods are what the scheduler is short of.
func (r *LiveRunner) makeRoom(ctx context.Context) bool {
	if s := r.pool.oldest(); s != nil {
		for ; s != nil; s = r.pool.oldest() {
			r.retire(s)
		}
		return true
	}
	if r.GPUs == nil || r.GPUs.Free() == r.GPUs.Size() {
		return false // nothing of ours holds a GPU: it fits nowhere
	}
	free := r.GPUs.Free()
	for ctx.Err() == nil && r.GPUs.Free() <= free && r.GPUs.Free() < r.GPUs.Size() {
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
		if r.pool.size() > 0 {
			return r.makeRoom(ctx) // a trial ended and parked its server
		}
	}
	return ctx.Err() == nil
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
	srv := &server{key: ConfigHash(t.Config), cfg: t.Config}
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
	srv.h, srv.pid = h, engine.PidOf(h)
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

// scrapeMetrics reads the server's Prometheus text at path (the engine's
// Protocol.MetricsPath) into name → value (each series under its labelled
// name, each metric also under its bare name; see parsePrometheus); nil
// when there is none, or when what answers is not Prometheus text
// (trtllm-serve's /metrics is JSON).
func scrapeMetrics(ctx context.Context, base, path string) map[string]float64 {
	if path == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+path, nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return nil
	}
	return parsePrometheus(bufio.NewScanner(resp.Body))
}

// parsePrometheus reads the text exposition format's samples. Each sample is
// kept under its full series name (labels included, as exposed), and every
// metric is also stored under its bare name, aggregated over its series:
// vLLM (data-parallel engines, engine="0","1",…) and `perflab sim serve`
// label every sample, while the report looks metrics up by bare name.
// Counters and gauges are summed over the series (requests running, waiting,
// preemptions are fleet totals); usage fractions (names ending in "_perc",
// such as vllm:kv_cache_usage_perc) are averaged instead, because a sum of
// fractions can exceed 1 and, with equal-sized engines, the mean is the
// fleet's pooled KV-cache usage. Histogram buckets and summary quantiles
// (series with an "le" or "quantile" label) get no bare name: summing over
// their bounds means nothing. An unlabelled sample, when one is exposed,
// is its own bare value and is not overwritten.
func parsePrometheus(sc *bufio.Scanner) map[string]float64 {
	out := map[string]float64{}
	type agg struct {
		sum float64
		n   int
	}
	bare := map[string]*agg{}
	var order []string
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// name{labels} value [timestamp]; label values may hold spaces.
		end := strings.LastIndexByte(line, '}')
		var series, rest string
		if end >= 0 {
			series, rest = line[:end+1], strings.TrimSpace(line[end+1:])
		} else {
			i := strings.IndexAny(line, " \t")
			if i < 0 {
				continue
			}
			series, rest = line[:i], strings.TrimSpace(line[i:])
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out[series] = v
		name, labels, labelled := strings.Cut(series, "{")
		if !labelled || name == "" {
			continue
		}
		if keys := labelKeys(labels); keys["le"] || keys["quantile"] {
			continue
		}
		a, ok := bare[name]
		if !ok {
			a = &agg{}
			bare[name] = a
			order = append(order, name)
		}
		a.sum += v
		a.n++
	}
	for _, name := range order {
		if _, ok := out[name]; ok {
			continue // exposed unlabelled: that value stands
		}
		a := bare[name]
		if strings.HasSuffix(name, "_perc") {
			out[name] = a.sum / float64(a.n)
		} else {
			out[name] = a.sum
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// labelKeys returns the label names of a `k="v",k2="v2"}` label set; the
// values are skipped with their escapes, so a value holding `le=` is not
// mistaken for a label.
func labelKeys(s string) map[string]bool {
	keys := map[string]bool{}
	for {
		s = strings.TrimLeft(s, " ,")
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return keys
		}
		keys[strings.TrimSpace(s[:eq])] = true
		s = strings.TrimLeft(s[eq+1:], " ")
		if s == "" || s[0] != '"' {
			return keys
		}
		i := 1
		for i < len(s) && s[i] != '"' {
			if s[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(s) {
			return keys
		}
		s = s[i+1:]
	}
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
