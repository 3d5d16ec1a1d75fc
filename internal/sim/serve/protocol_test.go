package serve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/sim"
)

// The simulator imitates each engine's real HTTP protocol, quirks
// included; one test per row of docs/protocols.md, each in that engine's
// mode.

// realServer is a server on the real simulated engine of kind eng.
func realServer(t *testing.T, eng string, cfg Config) string {
	t.Helper()
	version := map[string]string{sim.EngineVLLM: "0.11.0", sim.EngineSGLang: "0.5.5.post1", sim.EngineTRTLLM: "1.2.0rc1"}[eng]
	m, err := sim.New(sim.Params{Engine: eng, Version: version, Model: "Qwen/Qwen3-14B", GPU: "H100"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine, cfg.Model, cfg.MaxModelLen = eng, m, m.Params().MaxModelLen
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 20
	}
	_, ts := newTestServer(t, cfg)
	return ts.URL
}

func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// TestProtocolMetricsWhereServed: vLLM serves Prometheus /metrics always;
// SGLang only with --enable-metrics; trtllm-serve's /metrics is JSON
// iteration stats, and its Prometheus text is at /prometheus/metrics only
// with return_perf_metrics. Each with the engine's own metric names.
func TestProtocolMetricsWhereServed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		eng     string
		metrics bool
		path    string
		code    int
		json    bool
		has     string
	}{
		{"vllm always", sim.EngineVLLM, false, "/metrics", 200, false, "vllm:kv_cache_usage_perc"},
		{"sglang off", sim.EngineSGLang, false, "/metrics", 404, false, ""},
		{"sglang --enable-metrics", sim.EngineSGLang, true, "/metrics", 200, false, "sglang:token_usage"},
		{"trtllm /metrics is JSON", sim.EngineTRTLLM, true, "/metrics", 200, true, "numActiveRequests"},
		{"trtllm prometheus off", sim.EngineTRTLLM, false, "/prometheus/metrics", 404, false, ""},
		{"trtllm return_perf_metrics", sim.EngineTRTLLM, true, "/prometheus/metrics", 200, false, "trtllm_kv_cache_utilization"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := realServer(t, tc.eng, Config{Metrics: tc.metrics})
			code, ct, body := get(t, base+tc.path)
			if code != tc.code {
				t.Fatalf("GET %s: %d, want %d", tc.path, code, tc.code)
			}
			if code != 200 {
				return
			}
			if got := strings.HasPrefix(ct, "application/json"); got != tc.json {
				t.Errorf("content type %q", ct)
			}
			if !strings.Contains(body, tc.has) {
				t.Errorf("GET %s lacks %q:\n%s", tc.path, tc.has, body)
			}
			if tc.eng != sim.EngineVLLM && strings.Contains(body, "vllm:") {
				t.Errorf("%s serves vLLM's names:\n%s", tc.eng, body)
			}
		})
	}
}

// TestProtocolVLLMResetDevModeOnly: /reset_prefix_cache exists only under
// VLLM_SERVER_DEV_MODE=1.
func TestProtocolVLLMResetDevModeOnly(t *testing.T) {
	for _, dev := range []bool{false, true} {
		base := realServer(t, sim.EngineVLLM, Config{DevMode: dev})
		resp, err := http.Post(base+"/reset_prefix_cache", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{false: 404, true: 200}[dev]; resp.StatusCode != want {
			t.Errorf("dev mode %v: %d, want %d", dev, resp.StatusCode, want)
		}
	}
}

// TestProtocolVLLMResetVerified: the reset answers 200 even when it reset
// nothing (blocks still held by a running request), as vLLM's does; the
// prefix-cache counters tell: engine.CacheReset.DoVerified proves a reset
// on an idle server and refuses one made while a request runs.
func TestProtocolVLLMResetVerified(t *testing.T) {
	base := realServer(t, sim.EngineVLLM, Config{DevMode: true, TimeScale: 1})
	reset := engine.ResetFor(engine.Config{Engine: engine.VLLM, Version: "0.11.0"})
	ctx := context.Background()
	ok, err := reset.DoVerified(ctx, base, "Qwen/Qwen3-14B")
	if err != nil || !ok {
		t.Fatalf("idle server: verified %v, %v", ok, err)
	}
	// A long request holds blocks: the reset is refused inside, answered 200.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, base+"/v1/completions",
		strings.NewReader(`{"model":"Qwen/Qwen3-14B","prompt":"hold","max_tokens":4000,"stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil { // the stream has started
		t.Fatal(err)
	}
	ok, err = reset.DoVerified(ctx, base, "Qwen/Qwen3-14B")
	if ok || !errors.Is(err, engine.ErrResetUnproven) {
		t.Fatalf("reset while a request runs: verified %v, err %v; want ErrResetUnproven", ok, err)
	}
}

// TestProtocolSGLangFlushRefusesWhileRunning: SGLang's /flush_cache
// answers 400 while requests run (its answer is its proof).
func TestProtocolSGLangFlushRefusesWhileRunning(t *testing.T) {
	base := realServer(t, sim.EngineSGLang, Config{TimeScale: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions",
		strings.NewReader(`{"model":"Qwen/Qwen3-14B","prompt":"hold","max_tokens":4000,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	r, err := http.Post(base+"/flush_cache", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusBadRequest {
		t.Errorf("flush while running: %d, want 400", r.StatusCode)
	}
}

// TestProtocolSGLangHealthGenerates: SGLang's /health runs a one-token
// generation through the engine unless
// SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is off.
func TestProtocolSGLangHealthGenerates(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  bool
		want float64 // generated tokens after one /health
	}{{"default: generates", false, 1}, {"env off: does not", true, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			base := realServer(t, sim.EngineSGLang, Config{Metrics: true, NoHealthGeneration: tc.off})
			if code, _, _ := get(t, base+"/health"); code != 200 {
				t.Fatalf("/health: %d", code)
			}
			var got float64
			for deadline := time.Now().Add(2 * time.Second); ; {
				_, _, body := get(t, base+"/metrics")
				got = sumSeries(body, "sglang:generation_tokens_total")
				if got >= tc.want || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if got != tc.want {
				t.Errorf("generated %v tokens after /health, want %v", got, tc.want)
			}
		})
	}
}

// TestProtocolTRTLLMRejectsUnknownFields: trtllm-serve's request models
// forbid extra fields (400); vLLM's accept them.
func TestProtocolTRTLLMRejectsUnknownFields(t *testing.T) {
	for _, tc := range []struct {
		eng  string
		body string
		want int
	}{
		{sim.EngineTRTLLM, `{"model":"Qwen/Qwen3-14B","prompt":"hi","max_tokens":2,"no_such_field":1}`, 400},
		{sim.EngineTRTLLM, `{"model":"Qwen/Qwen3-14B","prompt":"hi","max_tokens":2,"ignore_eos":true,"cache_salt":"s"}`, 200},
		{sim.EngineVLLM, `{"model":"Qwen/Qwen3-14B","prompt":"hi","max_tokens":2,"no_such_field":1}`, 200},
	} {
		base := realServer(t, tc.eng, Config{})
		resp := post(t, base+"/v1/completions", tc.body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s: %d, want %d: %s", tc.eng, tc.body, resp.StatusCode, tc.want, b)
		}
		if tc.want == 400 && !strings.Contains(string(b), "no_such_field") {
			t.Errorf("the error does not name the field: %s", b)
		}
	}
}

// TestProtocolVLLMMemoryGuard: with the GPU partly held by another
// process, the simulated vLLM dies with vLLM's own start-up guard line,
// which perflab classes gpu_busy; with room, or on another engine, it
// starts.
func TestProtocolVLLMMemoryGuard(t *testing.T) {
	p := sim.Params{Engine: sim.EngineVLLM, GPU: "H100", MemFraction: 0.9}
	line := memoryGuard(p, 20)
	if !strings.HasPrefix(line, "ValueError: Free memory on device (59.20/79.20 GiB) on startup is less than desired GPU memory utilization (0.9, 71.28 GiB)") {
		t.Errorf("guard line %q", line)
	}
	if engine.GPUBusyLine([]string{line}) == "" {
		t.Errorf("perflab does not class %q as gpu_busy", line)
	}
	if l := memoryGuard(p, 5); l != "" {
		t.Errorf("5 GiB held, 0.9 asked: %q", l)
	}
	p.Engine = sim.EngineSGLang
	if l := memoryGuard(p, 20); l != "" {
		t.Errorf("SGLang has no such guard: %q", l)
	}
}
