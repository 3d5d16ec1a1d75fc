package sim

import "testing"

// TestFrontendQueue checks the API-server model: admissions and outputs
// share one FIFO server, so costly outputs delay a burst's first tokens, a
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
