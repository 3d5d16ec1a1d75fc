package sim

import (
	"math"
	"strconv"
	"testing"
)

// TestFrontendQueue checks the API-server model: outputs are served one at
// a time, so costly outputs delay a burst's first tokens, a
// lagging stream is coalesced into multi-token chunks, and a client's
// concurrency slot frees only when the client sees the end.
func TestFrontendQueue(t *testing.T) {
	p := Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen3-8B", GPU: "H100"}
	coef := func(outUs float64) *Coefficients {
		c := defaultCoef
		c.FrontendMs, c.OutputUs = 2, outUs
		return &Coefficients{Entries: map[string]Coef{"*": c}}
	}
	reqs := fixedReqs(300, 200, 60)
	fast, err := PredictWith(p, coef(1), reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := PredictWith(p, coef(2000), reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	if !(slow.Result.MeanTTFTMs > fast.Result.MeanTTFTMs) {
		t.Errorf("2 ms per output: mean TTFT %.1f ms, not above %.1f ms at 1 us", slow.Result.MeanTTFTMs, fast.Result.MeanTTFTMs)
	}
	merged := 0
	for _, r := range slow.Records {
		if len(r.ITL) != len(r.ChunkTokens)-1 {
			t.Fatalf("%s: %d gaps for %d chunks", r.ID, len(r.ITL), len(r.ChunkTokens))
		}
		sum := 0
		for _, n := range r.ChunkTokens {
			sum += n
			if n > 1 {
				merged++
			}
		}
		if sum != r.OutputLen {
			t.Fatalf("%s: chunks sum to %d, output %d", r.ID, sum, r.OutputLen)
		}
	}
	if merged == 0 {
		t.Error("a lagging API server merged no outputs into multi-token chunks")
	}
	// Output costs sized so the server lags: with max concurrency 16, no
	// more than 16 requests may overlap as the client sees them.
	lim, err := PredictWith(p, coef(3000), fixedReqs(100, 200, 30), Load{MaxConcurrency: 16})
	if err != nil {
		t.Fatal(err)
	}
	if lim.Result.MaxConcurrentRequests > 16 {
		t.Errorf("max concurrency 16 but %v in flight", lim.Result.MaxConcurrentRequests)
	}
}

// TestOutputsApartFromAdmissions: a burst of 200 requests at 10 ms of
// admission each. vLLM streams a request's first token while it is still
// admitting the rest; an engine whose API server keeps one queue (SGLang, as
// fitted) sends the first token only after the whole burst is in.
func TestOutputsApartFromAdmissions(t *testing.T) {
	c := defaultCoef
	c.FrontendMs, c.OutputUs = 10, 50
	coef := &Coefficients{Entries: map[string]Coef{"*": c}}
	reqs := fixedReqs(200, 200, 20)
	first := map[string]float64{}
	for _, engine := range []string{EngineVLLM, EngineSGLang} {
		p := Params{Engine: engine, Model: "Qwen3-8B", GPU: "H100"}
		pr, err := PredictWith(p, coef, reqs, Load{})
		if err != nil {
			t.Fatal(err)
		}
		first[engine] = math.Inf(1)
		for _, r := range pr.Records {
			first[engine] = math.Min(first[engine], r.TTFT)
		}
	}
	// 200 admissions take 2 s.
	if first[EngineVLLM] > 0.5 {
		t.Errorf("vLLM: first token after %.2f s; want it before the burst's 2 s of admissions end", first[EngineVLLM])
	}
	if first[EngineSGLang] < 1.9 {
		t.Errorf("SGLang: first token after %.2f s; want it behind the burst's 2 s of admissions", first[EngineSGLang])
	}
}

// TestPreemptedBlocksReused checks that a preempted request finds its own
// blocks in the prefix cache: on a cache that holds barely one 32k prompt,
// vLLM does not thrash.
func TestPreemptedBlocksReused(t *testing.T) {
	reqs := fixedReqs(6, 32000, 50)
	p := Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen3-32B", GPU: "H100"}
	on, err := Predict(p, reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	off := p
	off.PrefixCaching = new(bool)
	noCache, err := Predict(off, reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	if !(on.Stats.PromptTokens < noCache.Stats.PromptTokens) {
		t.Errorf("prefill tokens with the cache %d, without %d: preempted work not reused", on.Stats.PromptTokens, noCache.Stats.PromptTokens)
	}
	t.Logf("prefill tokens: cache %d, no cache %d, preemptions %d", on.Stats.PromptTokens, noCache.Stats.PromptTokens, on.Stats.Preemptions)
	if ideal := int64(6 * 32003); on.Stats.PromptTokens > ideal*13/10 {
		t.Errorf("prefilled %d tokens for %d of prompts: thrashing", on.Stats.PromptTokens, ideal)
	}
}

// TestSchedulerIntake checks the scheduler thread's intake cost: it takes
// every queued request before it schedules a step, so a burst faster than
// the intake cost reaches the GPU only once it is all in (no first token
// before 200 intakes), while requests spaced wider than the cost are taken
// as they come and are not held back.
func TestSchedulerIntake(t *testing.T) {
	p := Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen3-8B", GPU: "H100"}
	coef := func(addMs float64) *Coefficients {
		c := defaultCoef
		c.FrontendMs, c.CoreAddMs = 0.01, addMs
		return &Coefficients{Entries: map[string]Coef{"*": c}}
	}
	const n, addMs = 200, 10.0
	burst := func(addMs float64) float64 {
		e, err := New(p, coef(addMs))
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			e.Submit(Req{ID: strconv.Itoa(i), PromptLen: 128, OutputLen: 4})
		}
		first := math.Inf(1)
		for {
			te, ok := e.NextEventTime()
			if !ok {
				break
			}
			for _, ev := range e.Advance(te) {
				if ev.Err != nil {
					t.Fatalf("request %s: %v", ev.ReqID, ev.Err)
				}
				if ev.Tokens > 0 {
					first = math.Min(first, ev.Time)
				}
			}
		}
		return first
	}
	if first, all := burst(addMs), n*addMs/1000; first < all {
		t.Errorf("burst of %d at %g ms an intake: first token at %.3f s, before the last intake at %.3f s", n, addMs, first, all)
	}
	if first := burst(0); first > 0.5 {
		t.Errorf("burst of %d without an intake cost: first token at %.3f s", n, first)
	}

	// One request every 50 ms: each is taken at once, so no request's
	// first token waits for the ones behind it.
	e, err := New(p, coef(addMs))
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string]float64{}
	worst := 0.0
	for i := range n {
		at := float64(i) * 0.05
		for _, ev := range e.Advance(at) {
			if ev.Tokens > 0 && sent[ev.ReqID] >= 0 {
				worst = math.Max(worst, ev.Time-sent[ev.ReqID])
				sent[ev.ReqID] = -1
			}
		}
		id := strconv.Itoa(i)
		sent[id] = at
		e.Submit(Req{ID: id, Arrival: at, PromptLen: 128, OutputLen: 4})
	}
	if worst > 0.2 {
		t.Errorf("requests 50 ms apart at %g ms an intake: a first token %.3f s after its arrival", addMs, worst)
	}
}
