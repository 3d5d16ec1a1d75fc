package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/perflab/perflab/internal/hfhub"
	"github.com/perflab/perflab/internal/sim"
	"github.com/perflab/perflab/internal/sim/serve/settings"
	"github.com/perflab/perflab/internal/sim/simargs"
)

// Options configures Run: the process face of `perflab sim serve`.
type Options struct {
	// Engine and Version select the engine being imitated.
	Engine, Version string
	// Argv is the engine's own command line, program included.
	Argv []string
	// Env is the engine's environment (VLLM_ATTENTION_BACKEND, ...).
	Env map[string]string
	// GPU and GPUs describe the simulated hardware.
	GPU  string
	GPUs int
	// ModelConfig is an HF config.json for a model outside the catalog.
	ModelConfig string
	// TimeScale runs K× faster than real time (default 1).
	TimeScale float64
	// StartupDelay is the simulated load time in model time (divided by
	// TimeScale on the wall clock); negative means the default, 5 s.
	StartupDelay time.Duration
	// Counter counts prompt tokens (nil = estimate).
	Counter Counter
	// NoFaults turns off the known engine bugs the simulator reproduces.
	NoFaults bool
	// Coefficients is the calibration (nil = embedded).
	Coefficients *sim.Coefficients
	// Stderr receives the engine-like log (default os.Stderr).
	Stderr io.Writer
	// Ready, when set, is called with the listening address once serving.
	Ready func(addr string)
	// OccupiedGiB is GPU memory other processes hold on each simulated
	// GPU at start (a previous server still releasing it): an engine with
	// a start-up memory guard (vLLM) refuses to start when what is left
	// is below what it asks for.
	OccupiedGiB float64
	// Download is the model time of a cold-cache download of the weights
	// before loading, with huggingface_hub's progress bars; 0 reads
	// DownloadEnv from Env (unset: the cache is warm).
	Download time.Duration
}

// ExitError is a failure the way the engine fails: its log lines were
// already written, and the process should exit with Code.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// DefaultStartupDelay is the simulated model-load time.
const DefaultStartupDelay = settings.DefaultStartupDelay

// Run parses the engine argv, builds the simulated engine, writes an
// engine-like startup log, listens where the argv says, and serves until ctx
// is canceled, then shuts down gracefully.
func Run(ctx context.Context, o Options) error {
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.TimeScale == 0 {
		o.TimeScale = 1
	}
	if !(o.TimeScale > 0) {
		return fmt.Errorf("serve: --time-scale %g must be positive", o.TimeScale)
	}
	if o.StartupDelay < 0 {
		o.StartupDelay = DefaultStartupDelay
	}
	res, err := simargs.ParseAll(o.Engine, o.Version, o.Argv, o.Env)
	if err != nil {
		var ae *simargs.Error
		if errors.As(err, &ae) {
			io.WriteString(o.Stderr, ae.Stderr)
			return &ExitError{Code: ae.ExitCode, Err: err}
		}
		return err
	}
	p := res.Params
	p.GPU, p.GPUs, p.ModelConfig = o.GPU, o.GPUs, o.ModelConfig
	if p.ModelConfig == "" {
		src, err := sim.ResolveModel(ctx, p.Model, hfhub.Options{})
		if err != nil {
			fmt.Fprintln(o.Stderr, "perflab sim serve:", err)
			return &ExitError{Code: 1, Err: err}
		}
		p.ModelConfig = src.ConfigPath
		fmt.Fprintf(o.Stderr, "perflab sim serve: %s's architecture from %s\n", p.Model, src.From)
	}
	p.NoFaults = o.NoFaults
	dl, err := downloadFor(o)
	if err != nil {
		fmt.Fprintln(o.Stderr, "perflab sim serve:", err)
		return &ExitError{Code: 2, Err: err}
	}
	shm, err := shmFree(o.Env)
	if err != nil {
		fmt.Fprintln(o.Stderr, "perflab sim serve:", err)
		return &ExitError{Code: 2, Err: err}
	}
	lg := newStartupLog(o.Stderr, p, res)
	lg.dlWall, lg.dlModel = time.Duration(float64(dl)/o.TimeScale), dl
	for _, w := range res.Warnings {
		lg.warn(string(w))
	}
	lg.begin()

	host := res.Server.Host
	if host == "" {
		host = "127.0.0.1"
	}
	addr := net.JoinHostPort(host, strconv.Itoa(res.Server.Port))
	// Bind before loading, as the engines do, so a taken port fails fast;
	// connections made during loading wait in the backlog.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		lg.fatal(fmt.Sprintf("OSError: [Errno 98] error while attempting to bind on address %s: address already in use (%v)", addr, err))
		return &ExitError{Code: 1, Err: fmt.Errorf("serve: listen %s: %w", addr, err)}
	}
	defer ln.Close()

	if msg := memoryGuard(p, o.OccupiedGiB); msg != "" {
		lg.fatal(msg)
		lg.fatal("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
		return &ExitError{Code: 1, Err: errors.New("serve: " + msg)}
	}
	// The workers' process group comes up after the memory guard and
	// before the weights (vLLM's Worker.init_device, SGLang's
	// ModelRunner.init_torch_distributed).
	if last := lg.distributed(shm); last != "" {
		return &ExitError{Code: 1, Err: errors.New("serve: NCCL: " + last)}
	}
	eng, err := sim.New(p, o.Coefficients)
	wall := time.Duration(float64(o.StartupDelay) / o.TimeScale)
	if err != nil {
		if errors.Is(err, sim.ErrOOM) {
			lg.loading(ctx, wall/2)
			lg.oom(err)
			return &ExitError{Code: 1, Err: err}
		}
		lg.fatal("ValueError: " + err.Error())
		return &ExitError{Code: 1, Err: err}
	}
	rp := eng.Params()
	// Data parallelism: rp.DP independent engines behind this endpoint, as
	// the lab's sim-predict splits them. Each keeps the parsed parameters
	// (DP included), so per-replica memory and expert sharding stay the
	// simulator's; each has its own scheduler and KV cache.
	var model Model = eng
	if rp.DP > 1 {
		engines := []Model{eng}
		for k := 1; k < rp.DP; k++ {
			e, err := sim.New(p, o.Coefficients)
			if err != nil {
				lg.fatal("ValueError: " + err.Error())
				return &ExitError{Code: 1, Err: fmt.Errorf("serve: data-parallel replica %d: %w", k, err)}
			}
			engines = append(engines, e)
		}
		route := rp.Route // the engine's own, read from its argv
		if model, err = NewReplicas(engines, route); err != nil {
			return err
		}
		lg.line("INFO", "core_client.py:1", fmt.Sprintf("%d data-parallel replicas behind one endpoint, routed by %s", rp.DP, route))
	}
	if !lg.loading(ctx, wall) {
		return nil
	}
	// SGLang logs the max_running_requests it derived (from the KV pool,
	// and for a hybrid model its state pool), not the flag's zero.
	lp := rp
	lp.MaxNumSeqs = eng.MaxSeqs()
	lg.loaded(lp, eng.KVCapacityTokens())

	type crash struct {
		err error
		at  time.Time
	}
	crashc := make(chan crash, 1)
	srv, err := New(Config{Engine: rp.Engine, Model: model, Root: p.Model, ServedModelNames: res.Server.ServedModelNames,
		MaxModelLen: rp.MaxModelLen, TimeScale: o.TimeScale, Counter: o.Counter, APIKey: res.Server.APIKey,
		DevMode: o.Env["VLLM_SERVER_DEV_MODE"] == "1", Metrics: res.Server.Metrics,
		NoHealthGeneration: envFalse(o.Env["SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"]),
		OnCrash: func(err error, at time.Time) {
			select {
			case crashc <- crash{err, at}:
			default:
			}
		}})
	if err != nil {
		return err
	}
	defer srv.Close()
	// Headers that never end and idle keep-alive connections are closed;
	// bodies are bounded per request (Server.readBody).
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: nil}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	lg.serving(ln.Addr().String())
	if o.Ready != nil {
		o.Ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case c := <-crashc:
		// A reproduced engine bug: die as the engine does, at the
		// simulated moment, dropping every connection (clients see
		// resets), with the engine's last words in the log.
		select {
		case <-time.After(time.Until(c.at)):
		case <-ctx.Done():
		}
		lg.fatal(c.err.Error())
		srv.Close()
		hs.Close()
		return &ExitError{Code: 1, Err: c.err}
	case <-ctx.Done():
	}
	lg.shutdown()
	// Like the engines on SIGTERM: stop accepting, abort what is running,
	// give handlers a moment to write their last bytes.
	srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	lg.stopped()
	return nil
}

// startupLog writes log lines that look like the imitated engine's.
type startupLog struct {
	w   io.Writer
	p   sim.Params
	res *simargs.Result
	pid int
	// style is the engine's (its face's).
	style logStyle
	// dlWall and dlModel: a cold-cache download before loading (wall
	// and model time; 0: warm cache).
	dlWall, dlModel time.Duration
}

func newStartupLog(w io.Writer, p sim.Params, res *simargs.Result) *startupLog {
	return &startupLog{w: w, p: p, res: res, pid: os.Getpid(), style: faceFor(p.Engine).log}
}

func (l *startupLog) line(level, src, msg string) {
	l.style.line(l, time.Now(), level, src, msg)
}

func (l *startupLog) warn(msg string) { l.line("WARNING", "arg_utils.py:1", msg) }

func (l *startupLog) begin() {
	v := l.p.Version
	if v == "" {
		v = simargs.DefaultVersion(l.p.Engine)
	}
	l.style.begin(l, v)
}

// loading prints checkpoint-loading progress spread over d (what stall-aware
// readiness checks watch). It returns false if ctx ended first.
func (l *startupLog) loading(ctx context.Context, d time.Duration) bool {
	const shards = 8
	l.style.loadBegin(l)
	// The loader fetches what the cache lacks first, before an OOM at
	// load can happen.
	if !l.download(ctx) {
		return false
	}
	start := time.Now()
	for i := 0; i <= shards; i++ {
		if i > 0 {
			t := time.NewTimer(time.Until(start.Add(d * time.Duration(i) / shards)))
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
		}
		fmt.Fprintf(l.w, "Loading safetensors checkpoint shards: %3d%% Completed | %d/%d [%s<?, ?it/s]\n", i*100/shards, i, shards, time.Since(start).Round(time.Second))
	}
	return true
}

func (l *startupLog) loaded(p sim.Params, kvTokens int) { l.style.loaded(l, p, kvTokens) }

func (l *startupLog) serving(addr string) { l.style.serving(l, addr) }

// uvicorn prints what uvicorn logs when the server listens.
func (l *startupLog) uvicorn(addr string) {
	fmt.Fprintf(l.w, "INFO:     Started server process [%d]\nINFO:     Waiting for application startup.\nINFO:     Application startup complete.\n", l.pid)
	fmt.Fprintf(l.w, "INFO:     Uvicorn running on http://%s (Press CTRL+C to quit)\n", addr)
}

func (l *startupLog) shutdown() {
	fmt.Fprintf(l.w, "INFO:     Shutting down\n")
}

func (l *startupLog) stopped() {
	fmt.Fprintf(l.w, "INFO:     Waiting for application shutdown.\nINFO:     Application shutdown complete.\nINFO:     Finished server process [%d]\n", l.pid)
}

func (l *startupLog) fatal(msg string) { fmt.Fprintln(l.w, msg) }

// oom prints the engine's out-of-memory failure.
func (l *startupLog) oom(err error) {
	detail := err.Error()
	if i := strings.LastIndex(detail, "CUDA out of memory. "); i >= 0 {
		detail = detail[i+len("CUDA out of memory. "):]
	} else if _, after, ok := strings.Cut(detail, sim.ErrOOM.Error()+": "); ok {
		detail = after
	}
	l.style.oom(l, detail)
}

func commas(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[0] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// memoryGuard is the line an engine with a start-up memory guard (vLLM,
// face.memoryGuard) dies with when occupied GiB of its GPU are taken by
// others, or "". vLLM's words and arithmetic, vllm/v1/worker/gpu_worker.py
// (Worker.init_device): requested = gpu_memory_utilization × total, and
// it must fit in the free memory.
func memoryGuard(p sim.Params, occupied float64) string {
	if occupied <= 0 || !faceFor(p.Engine).memoryGuard {
		return ""
	}
	hw, err := sim.LookupGPU(p.GPU)
	if err != nil {
		return ""
	}
	util := p.MemFraction
	if util == 0 {
		util = 0.9 // vLLM's default gpu_memory_utilization
	}
	free, want := max(hw.MemGiB-occupied, 0), util*hw.MemGiB
	if free >= want {
		return ""
	}
	return fmt.Sprintf("ValueError: Free memory on device (%.2f/%.2f GiB) on startup is less than desired GPU memory utilization (%g, %.2f GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
		free, hw.MemGiB, util, want)
}

// envFalse reads a Python-style boolean variable as SGLang's EnvBool does:
// "0", "false", "no", "off" (any case) are false.
func envFalse(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "0", "false", "no", "off":
		return true
	}
	return false
}

// Settings are the simulator's settings besides the engine's argv, as
// `perflab sim serve` flags and as the simulated image's environment (one
// type for the engine package, the image and this command; it lives in
// sim/serve/settings so that the engine package can use it without
// importing the simulator).
type Settings = settings.Settings
