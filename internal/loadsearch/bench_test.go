package loadsearch

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/bench"
	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/sim"
	"github.com/perflab/perflab/internal/sim/serve"
)

// simURL serves a simulated vLLM (Qwen3-14B on one H100) in process,
// timeScale times faster than real time.
func simURL(t *testing.T, timeScale float64) string {
	t.Helper()
	eng, err := sim.New(sim.Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen/Qwen3-14B", GPU: "H100"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := serve.New(serve.Config{Model: eng, Root: "Qwen/Qwen3-14B", MaxModelLen: eng.Params().MaxModelLen, TimeScale: timeScale})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); s.Close() })
	return hs.URL
}

// prompts are n requests of about 256 prompt tokens (the simulator counts
// 4 bytes a token without a tokenizer) and out output tokens.
func prompts(n, out int) []dataset.Request {
	reqs := make([]dataset.Request, n)
	for i := range reqs {
		reqs[i] = dataset.Request{Prompt: strings.Repeat("word ", 204) + string(rune('a'+i%26)), PromptLen: 256, OutputLen: out, IgnoreEOS: true}
	}
	return reqs
}

// TestBenchSizesPointsByEvidence: a point whose 20 prompts end before the
// server has filled is run again on more until its verdict is in; one whose
// SLO is broken early stops there; one that cannot reach a verdict within
// its time limit says so and is not scored.
func TestBenchSizesPointsByEvidence(t *testing.T) {
	url := simURL(t, 20)
	cfg := bench.Config{BaseURL: url, Endpoint: "/v1/completions", Backend: bench.BackendOpenAI, Model: "Qwen/Qwen3-14B", Transport: bench.TransportNetHTTP}
	loose, _ := ParseSLO("ttft_p50<=10s")
	t.Run("extended", func(t *testing.T) {
		// Half the time scale and half the rate of the other cases: the
		// same short window (20 prompts end before three median
		// latencies), at a pace a client under -race on a loaded 2-core
		// machine still keeps (at 40 req/s it fell behind, flagged and
		// unextended).
		c := cfg
		c.BaseURL = simURL(t, 10)
		c.Requests = prompts(20, 256)
		b := &Bench{Config: c, SLO: &loose, Warmup: 2}
		p, err := b.Measure(context.Background(), 20)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d requests, %.1f s, flag %q, keep-up %+v", p.Requests, p.Seconds, p.Flag, p.KeepUp)
		if p.Requests <= 20 || p.NeedsMore || p.Short != "" {
			t.Errorf("point not extended to a verdict: %d requests, short %q", p.Requests, p.Short)
		}
		if b.Result(20) == nil {
			t.Error("no result kept for the point")
		}
	})
	t.Run("certain early", func(t *testing.T) {
		never, _ := ParseSLO("e2el_p50<=1ms")
		c := cfg
		c.Requests = prompts(200, 64)
		b := &Bench{Config: c, SLO: &never, Warmup: 10}
		p, err := b.Measure(context.Background(), 50)
		if err != nil {
			t.Fatal(err)
		}
		p, _ = never.Judge(p, never.MinRequests())
		t.Logf("%d requests, %.1f s, why %q", p.Requests, p.Seconds, p.Why)
		// Scored or not (a loaded host may flag the client), the run
		// must have stopped once the verdict was certain.
		if p.Meets || p.Requests >= 200 {
			t.Errorf("a certainly broken point ran %d of 200 requests (meets %v, flag %q)", p.Requests, p.Meets, p.Flag)
		}
	})
	t.Run("time limit", func(t *testing.T) {
		c := cfg
		c.Requests = prompts(20, 2048)
		b := &Bench{Config: c, SLO: &loose, Warmup: 2, MaxPointSeconds: 0.5}
		p, err := b.Measure(context.Background(), 40)
		if err != nil {
			t.Fatal(err)
		}
		if p.Scored() || !strings.Contains(p.Flag, "undecided at the point's limit") {
			t.Errorf("a point cut at its limit: flag %q", p.Flag)
		}
	})
}
