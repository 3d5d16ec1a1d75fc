package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/bench/benchtest"
	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
)

// countingRuntime is a fake engine.Runtime whose servers are one shared
// in-process OpenAI-compatible stand-in (benchtest, with the engines'
// cache-reset endpoints): it replaces the engine processes and counts
// starts, stops and resets, so the test sees only the runner's reuse.
type countingRuntime struct {
	url             string
	starts, stops   atomic.Int64
	resets          atomic.Int64
	mu              sync.Mutex
	envs            []map[string]string
	salts           []any // each request's cache_salt, in arrival order
	failResetStatus int
	probesRefused   atomic.Int64
	refuseSalt      bool // answer a salted request 400, as an engine without cache_salt would
	// blindReset answers a reset 200 without forgetting anything, as vLLM
	// does while blocks are held; the prefix-cache counters (served at
	// /metrics, counting the reset probe's prompt) tell.
	blindReset                bool
	probeCached               bool
	prefixQueries, prefixHits int64
}

func newCountingRuntime(t *testing.T) *countingRuntime {
	rt := &countingRuntime{}
	srv := benchtest.New(func(_ int, body map[string]any) benchtest.Plan {
		if body["cache_salt"] == "perflab-probe" {
			return benchtest.Plan{TTFT: time.Millisecond, Chunks: 1}
		}
		rt.mu.Lock()
		rt.salts = append(rt.salts, body["cache_salt"])
		rt.mu.Unlock()
		return benchtest.Plan{TTFT: time.Millisecond, Chunks: 2, Gap: time.Millisecond}
	})
	mux := http.NewServeMux()
	reset := func(w http.ResponseWriter, _ *http.Request) {
		rt.resets.Add(1)
		if rt.failResetStatus != 0 {
			w.WriteHeader(rt.failResetStatus)
			return
		}
		if !rt.blindReset {
			rt.mu.Lock()
			rt.probeCached = false
			rt.mu.Unlock()
		}
		w.WriteHeader(http.StatusOK)
	}
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		fmt.Fprintf(w, "vllm:prefix_cache_queries_total{engine=\"0\"} %d\nvllm:prefix_cache_hits_total{engine=\"0\"} %d\n", rt.prefixQueries, rt.prefixHits)
	})
	mux.HandleFunc("POST /reset_prefix_cache", reset)
	mux.HandleFunc("POST /flush_cache", reset)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if bytes.Contains(b, []byte("perflab prefix-cache probe")) {
			// The reset's probe: counted as the engine's prefix cache
			// would, answered without reaching the benchmark's stand-in.
			rt.mu.Lock()
			rt.prefixQueries += 100
			if rt.probeCached {
				rt.prefixHits += 96
			}
			rt.probeCached = true
			rt.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"p","object":"text_completion","choices":[{"index":0,"text":"a","finish_reason":"length"}]}`)
			return
		}
		if rt.refuseSalt {
			b, _ := io.ReadAll(r.Body)
			if bytes.Contains(b, []byte(`"cache_salt"`)) {
				rt.probesRefused.Add(1)
				http.Error(w, `{"error": "extra fields not permitted: cache_salt"}`, http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		srv.ServeHTTP(w, r)
	}))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	rt.url = hs.URL
	return rt
}

func (c *countingRuntime) Start(_ context.Context, l engine.Launch) (engine.Handle, error) {
	c.starts.Add(1)
	c.mu.Lock()
	c.envs = append(c.envs, l.Command.Env)
	c.mu.Unlock()
	return &countingHandle{rt: c, done: make(chan struct{})}, nil
}

type countingHandle struct {
	rt   *countingRuntime
	once sync.Once
	done chan struct{}
}

func (h *countingHandle) BaseURL() string             { return h.rt.url }
func (h *countingHandle) Ready(context.Context) error { return nil }
func (h *countingHandle) Done() <-chan struct{}       { return h.done }
func (h *countingHandle) LogTail(int) []string        { return nil }
func (h *countingHandle) Failure() *engine.Failure    { return nil }
func (h *countingHandle) MarkBenchmarking()           {}
func (h *countingHandle) Pid() int                    { return 0 }
func (h *countingHandle) Stop(context.Context) error {
	h.once.Do(func() { h.rt.stops.Add(1); close(h.done) })
	return nil
}

var _ engine.Runtime = (*countingRuntime)(nil)

func poolTrial(engineName, model string, rep int) TrialSpec {
	return poolTrialAt(engineName, map[string]string{"vllm": "0.11.0", "trtllm": "1.2.0rc1"}[engineName], model, rep)
}

func poolTrialAt(engineName, version, model string, rep int) TrialSpec {
	cfg := engine.Config{Engine: engineName, Version: version, Model: model}
	w := labspec.Workload{Name: "w"}
	return TrialSpec{Key: TrialKey("s", cfg, w, rep), Name: model, Config: cfg, Workload: w, Repeat: rep}
}

func twoRequests(labspec.Workload) ([]dataset.Request, error) {
	return []dataset.Request{{Prompt: "a", PromptLen: 1, OutputLen: 2}, {Prompt: "b", PromptLen: 1, OutputLen: 2}}, nil
}

// TestServerReuse (issue 12: one start per config): on one GPU, a config's
// repeats run on one server with its prefix cache reset before each, the
// dev-mode variable vLLM needs for that is set at start, another config
// takes the GPU by stopping the idle server, and a trial's cost says
// whether it started a server. fresh_start_per_repeat restores a start per
// measurement; an engine that salts its cache instead (TensorRT-LLM from
// 1.2.0rc0) is reused with each measurement's requests salted their own
// way; an engine with neither is never reused; a reset that fails costs a
// fresh start, not a warm measurement.
func TestServerReuse(t *testing.T) {
	seq := []TrialSpec{
		poolTrial("vllm", "a", 0), poolTrial("vllm", "a", 1), poolTrial("vllm", "a", 2),
		poolTrial("vllm", "b", 0), poolTrial("vllm", "a", 3),
	}
	cases := []struct {
		name        string
		fresh       bool
		refuseSalt  bool
		failReset   int
		blindReset  bool
		seq         []TrialSpec
		starts      int64
		resets      int64
		startedWith []bool
		cache       []string // each trial's record of how its cache was cleared
	}{
		{"reuse", false, false, 0, false, seq, 3, 2, []bool{true, false, false, true, true},
			[]string{CacheFresh, CacheResetVerified, CacheResetVerified, CacheFresh, CacheFresh}},
		{"fresh start per repeat", true, false, 0, false, seq, 5, 0, []bool{true, true, true, true, true},
			[]string{CacheFresh, CacheFresh, CacheFresh, CacheFresh, CacheFresh}},
		{"reset refused", false, false, http.StatusBadRequest, false, seq[:3], 3, 2, []bool{true, true, true},
			[]string{CacheFresh, CacheFresh, CacheFresh}},
		// vLLM answers 200 and resets nothing while blocks are held: the
		// probe still hits, so the measurement gets a fresh server.
		{"reset answered but not done", false, false, 0, true, seq[:3], 3, 2, []bool{true, true, true},
			[]string{CacheFresh, CacheFresh, CacheFresh}},
		{"salted, no reset endpoint", false, false, 0, false, []TrialSpec{poolTrial("trtllm", "c", 0), poolTrial("trtllm", "c", 1), poolTrial("trtllm", "c", 2)}, 1, 0, []bool{true, false, false},
			[]string{CacheFresh, CacheSalted, CacheSalted}},
		{"salt refused at start: no salt, a start each", false, true, 0, false, []TrialSpec{poolTrial("trtllm", "c", 0), poolTrial("trtllm", "c", 1)}, 2, 0, []bool{true, true},
			[]string{CacheFresh, CacheFresh}},
		{"neither reset nor salt", false, false, 0, false, []TrialSpec{poolTrialAt("trtllm", "1.0.0", "c", 0), poolTrialAt("trtllm", "1.0.0", "c", 1)}, 2, 0, []bool{true, true},
			[]string{CacheFresh, CacheFresh}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := newCountingRuntime(t)
			rt.failResetStatus = tc.failReset
			rt.refuseSalt = tc.refuseSalt
			rt.blindReset = tc.blindReset
			r := &LiveRunner{Runtime: rt, Requests: twoRequests, GPUs: engine.NewAllocator([]int{0}), FreshStart: tc.fresh}
			for i, tr := range tc.seq {
				rec, err := runTrial(context.Background(), r, tr)
				if err != nil || rec.Status != "ok" {
					t.Fatalf("trial %d: %v %+v", i, err, rec)
				}
				if rec.Cost.EngineStart != tc.startedWith[i] || rec.Cost.GPUs != 1 || rec.Cost.BenchSeconds <= 0 {
					t.Errorf("trial %d (%s r%d): cost %+v, want engine start %v", i, tr.Name, tr.Repeat, rec.Cost, tc.startedWith[i])
				}
				if rec.Cache != tc.cache[i] {
					t.Errorf("trial %d (%s r%d): cache %q, want %q (reason %q)", i, tr.Name, tr.Repeat, rec.Cache, tc.cache[i], rec.Reason)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if got := rt.starts.Load(); got != tc.starts {
				t.Errorf("%d servers started, want %d", got, tc.starts)
			}
			if got := rt.resets.Load(); got != tc.resets {
				t.Errorf("%d cache resets, want %d", got, tc.resets)
			}
			if rt.stops.Load() != rt.starts.Load() {
				t.Errorf("%d started, %d stopped: a server outlived Close", rt.starts.Load(), rt.stops.Load())
			}
			if r.GPUs.Free() != 1 {
				t.Errorf("%d GPUs free after Close, want 1", r.GPUs.Free())
			}
			// Salts: two requests per measurement, one salt for both, another
			// for each measurement; none where the engine does not salt.
			salted := engine.ResetFor(tc.seq[0].Config).Salt && !tc.refuseSalt
			if tc.refuseSalt && rt.probesRefused.Load() != tc.starts {
				t.Errorf("%d salt probes refused, want one per start (%d)", rt.probesRefused.Load(), tc.starts)
			}
			seen := map[any]bool{}
			for i := 0; i+1 < len(rt.salts); i += 2 {
				a, b := rt.salts[i], rt.salts[i+1]
				switch {
				case !salted && (a != nil || b != nil):
					t.Errorf("measurement %d salted (%v, %v) on an engine that does not salt", i/2, a, b)
				case salted && (a == nil || a != b):
					t.Errorf("measurement %d: salts %v and %v, want one salt for its requests", i/2, a, b)
				case salted && seen[a]:
					t.Errorf("measurement %d reuses salt %v of an earlier one", i/2, a)
				}
				seen[a] = true
			}
			if len(rt.salts) != 2*len(tc.seq) {
				t.Errorf("%d requests, want %d", len(rt.salts), 2*len(tc.seq))
			}
			if !tc.fresh && tc.seq[0].Config.Engine == "vllm" && rt.envs[0]["VLLM_SERVER_DEV_MODE"] != "1" {
				t.Errorf("a reusable vLLM server started without VLLM_SERVER_DEV_MODE=1: %v", rt.envs[0])
			}
		})
	}
}

// TestLikelyBeaten: a joint search's new incumbent is measured on the
// generalization workloads at once only when no untested config outside
// the batch just measured is predicted, without the exploration bonus, to
// beat it; a config that beats it only on the bonus does not count.
func TestLikelyBeaten(t *testing.T) {
	a, b, c := labspec.Point{"engine": "vllm"}, labspec.Point{"engine": "sglang"}, labspec.Point{"engine": "trtllm"}
	cands := []rankedPoint{
		{p: a, pred: 120, opt: 120},
		{p: b, pred: 90, opt: 130}, // ahead on the bonus only
		{p: c, pred: 80, opt: 80},
	}
	tests := []struct {
		name  string
		batch []labspec.Point
		bar   float64
		want  bool
	}{
		{"a predicted above the bar", []labspec.Point{c}, 110, true},
		{"a was the batch just measured", []labspec.Point{a}, 110, false},
		{"b predicted above a lower bar", []labspec.Point{a}, 85, true},
		{"b ahead only on the bonus", nil, 125, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := likelyBeaten(cands, tt.batch, tt.bar); got != tt.want {
				t.Errorf("likelyBeaten = %v, want %v", got, tt.want)
			}
		})
	}
	if likelyBeaten(nil, nil, 0) {
		t.Error("no untested config left, yet likely beaten")
	}
}

// busyRuntime is countingRuntime whose first busy starts fail the way
// vLLM's start-up memory guard fails (engine.ClassGPUBusy).
type busyRuntime struct {
	*countingRuntime
	busy int64
}

type busyHandle struct{ *countingHandle }

func (busyHandle) Ready(context.Context) error {
	return &engine.Failure{Class: engine.ClassGPUBusy, Reason: "GPU not yet free at start: ValueError: Free memory on device ..."}
}

func (b *busyRuntime) Start(ctx context.Context, l engine.Launch) (engine.Handle, error) {
	h, err := b.countingRuntime.Start(ctx, l)
	if err == nil && b.starts.Load() <= b.busy {
		return busyHandle{h.(*countingHandle)}, nil
	}
	return h, err
}

// TestGPUBusyStartsAgain: a server refused because its GPU was not yet
// free (vLLM's memory guard, e.g. while the previous server releases its
// memory) is started again after a wait, a few times, instead of failing
// the config; past that, the trial fails as gpu_busy, which a resumed lab
// retries (transient).
func TestGPUBusyStartsAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		busy   int64
		status string
		starts int64
	}{
		{"busy once", 1, "ok", 2},
		{"busy throughout", 100, "failed", 1 + int64(engine.ClassGPUBusy.Capacity().Retries)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &busyRuntime{countingRuntime: newCountingRuntime(t), busy: tc.busy}
			r := &LiveRunner{Runtime: rt, Requests: twoRequests, GPUs: engine.NewAllocator([]int{0}), GPUBusyWait: time.Millisecond}
			defer r.Close()
			rec, err := runTrial(context.Background(), r, poolTrial("vllm", "a", 0))
			if err != nil {
				t.Fatal(err)
			}
			if rec.Status != tc.status || rt.starts.Load() != tc.starts {
				t.Errorf("status %q after %d starts, want %q after %d (reason %q)", rec.Status, rt.starts.Load(), tc.status, tc.starts, rec.Reason)
			}
			if tc.status == "failed" && (rec.FailureClass != FailGPUBusy || !engine.FailureClass(rec.FailureClass).Transient()) {
				t.Errorf("failure class %q, want a transient %q", rec.FailureClass, FailGPUBusy)
			}
		})
	}
}
