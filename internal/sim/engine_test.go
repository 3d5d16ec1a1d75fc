package sim

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/perflab/perflab/internal/dataset"
)

func fixedReqs(n, in, out int) []dataset.Request {
	r := make([]dataset.Request, n)
	for i := range r {
		r[i] = dataset.Request{PromptLen: in + i%7, OutputLen: out + i%5}
	}
	return r
}

func TestNewOOM(t *testing.T) {
	for _, p := range []Params{
		{Engine: "vllm", Model: "Llama-3.1-70B", GPU: "H100"},
		{Engine: "sglang", Model: "Qwen3-235B-A22B", GPU: "H200"},
		{Engine: "trtllm", Model: "Qwen3-32B", GPU: "L40S"},
		{Engine: "vllm", Model: "Qwen3-32B", GPU: "H100", MemFraction: 0.8},
	} {
		if _, err := New(p, nil); !errors.Is(err, ErrOOM) {
			t.Errorf("%s: err = %v, want ErrOOM", p, err)
		}
	}
	for _, p := range []Params{
		{Engine: "vllm", Model: "Llama-3.1-70B", GPU: "H100", TP: 4},
		{Engine: "vllm", Model: "Qwen3-14B", GPU: "H100"},
		{Engine: "sglang", Model: "Qwen3-30B-A3B", GPU: "H100", TP: 2, EP: true},
	} {
		if _, err := New(p, nil); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestKVReplicationAndFP8(t *testing.T) {
	// TP 16 > 8 KV heads: KV per GPU stops shrinking at one head.
	e8, err := New(Params{Engine: "vllm", Model: "Llama-3.1-70B", GPU: "H200", TP: 8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e16, err := New(Params{Engine: "vllm", Model: "Llama-3.1-70B", GPU: "H200", TP: 16, GPUs: 16}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e8.kvBytesTok != e16.kvBytesTok {
		t.Errorf("KV bytes/token tp8 %g, tp16 %g: heads must be replicated", e8.kvBytesTok, e16.kvBytesTok)
	}
	bf, _ := New(Params{Engine: "vllm", Model: "Qwen3-14B", GPU: "H100"}, nil)
	fp, _ := New(Params{Engine: "vllm", Model: "Qwen3-14B", GPU: "H100", KVCacheDtype: "fp8"}, nil)
	if fp.kvBytesTok*2 != bf.kvBytesTok || fp.KVCapacityTokens() < 2*bf.KVCapacityTokens()-64 {
		t.Errorf("fp8 KV: %g vs %g bytes/token, capacity %d vs %d", fp.kvBytesTok, bf.kvBytesTok, fp.KVCapacityTokens(), bf.KVCapacityTokens())
	}
}

func TestEventAPI(t *testing.T) {
	e, err := New(Params{Engine: "vllm", Model: "Qwen3-8B", GPU: "H100", MaxModelLen: 4096}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Submit(Req{ID: "a", Arrival: 0, PromptLen: 100, OutputLen: 5})
	e.Submit(Req{ID: "too-long", Arrival: 0, PromptLen: 4000, OutputLen: 500})
	tokens := map[string]int{}
	var errs, dones int
	last := 0.0
	for i := 0; i < 1000; i++ {
		t0, ok := e.NextEventTime()
		if !ok {
			break
		}
		if t0 < last {
			t.Fatalf("time went back: %g < %g", t0, last)
		}
		last = t0
		for _, ev := range e.Advance(t0) {
			if ev.Err != nil {
				if ev.ReqID != "too-long" || !errors.Is(ev.Err, ErrContext) {
					t.Errorf("unexpected error event %+v", ev)
				}
				errs++
				continue
			}
			tokens[ev.ReqID] += ev.Tokens
			if ev.Done {
				dones++
			}
		}
	}
	if tokens["a"] != 5 || dones != 1 || errs != 1 {
		t.Errorf("tokens %v dones %d errs %d", tokens, dones, errs)
	}
	st := e.Stats()
	if st.Running != 0 || st.Waiting != 0 || st.GenerationTokens != 5 || st.PromptTokens != 100 {
		t.Errorf("stats %+v", st)
	}
}

func TestPredictDeterministicAndConsistent(t *testing.T) {
	reqs := fixedReqs(300, 500, 100)
	for _, eng := range []string{"vllm", "sglang", "trtllm"} {
		t.Run(eng, func(t *testing.T) {
			p := Params{Engine: eng, Model: "Qwen3-14B", GPU: "H100"}
			a, err := Predict(p, reqs, Load{RequestRate: 20, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := Predict(p, reqs, Load{RequestRate: 20, Seed: 1})
			if !reflect.DeepEqual(a.Records, b.Records) {
				t.Fatal("two predictions with one seed differ")
			}
			out := 0
			for i, r := range a.Records {
				if !r.Success || r.OutputLen != reqs[i].OutputLen || len(r.ITL) != len(r.ChunkTokens)-1 {
					t.Fatalf("record %d: %+v", i, r)
				}
				if r.TTFT <= 0 || r.Latency < r.TTFT || r.Sent < r.Scheduled {
					t.Fatalf("record %d timings: %+v", i, r)
				}
				out += r.OutputLen
			}
			if a.Result.Completed != 300 || a.Result.TotalOutputTokens != out {
				t.Errorf("result %+v", a.Result)
			}
		})
	}
}

func TestSchedulerMechanisms(t *testing.T) {
	// A tiny KV cache forces vLLM to preempt and recompute.
	reqs := fixedReqs(400, 1500, 400)
	p := Params{Engine: "vllm", Model: "Qwen3-32B", GPU: "H100", MaxModelLen: 4096}
	pr, err := Predict(p, reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Stats.Preemptions == 0 {
		t.Error("no preemption with a 40k-token cache and 760k tokens of demand")
	}
	// TensorRT-LLM reserves whole sequences: never preempts.
	pt, err := Predict(Params{Engine: "trtllm", Model: "Qwen3-32B", GPU: "H100", MaxModelLen: 4096}, reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	if pt.Stats.Preemptions != 0 {
		t.Errorf("trtllm preempted %d times", pt.Stats.Preemptions)
	}
	// Prefix caching: shared prefixes cut prompt compute.
	shared := fixedReqs(200, 2000, 20)
	for i := range shared {
		shared[i].PrefixGroup, shared[i].PrefixLen = 1+i%4, 1800
	}
	on, _ := Predict(Params{Engine: "vllm", Model: "Qwen3-8B", GPU: "H100"}, shared, Load{})
	off, _ := Predict(Params{Engine: "vllm", Model: "Qwen3-8B", GPU: "H100", PrefixCaching: new(bool)}, shared, Load{})
	if !(on.Duration < off.Duration*0.6) || on.Stats.PromptTokens >= off.Stats.PromptTokens {
		t.Errorf("prefix caching: %g s (%d prompt tokens) vs %g s (%d)", on.Duration, on.Stats.PromptTokens, off.Duration, off.Stats.PromptTokens)
	}
	// Speculative decoding emits several tokens per step at low load.
	one := fixedReqs(4, 200, 400)
	sp, _ := Predict(Params{Engine: "vllm", Model: "Qwen3-8B", GPU: "H100", SpecMethod: "eagle3", SpecTokens: 3}, one, Load{})
	ns, _ := Predict(Params{Engine: "vllm", Model: "Qwen3-8B", GPU: "H100"}, one, Load{})
	if !(sp.Duration < ns.Duration*0.7) {
		t.Errorf("speculative decoding: %g s vs %g s without", sp.Duration, ns.Duration)
	}
	// Max concurrency bounds in-flight requests.
	mc, _ := Predict(Params{Engine: "sglang", Model: "Qwen3-8B", GPU: "H100"}, fixedReqs(100, 100, 50), Load{MaxConcurrency: 8})
	if mc.Result.MaxConcurrentRequests > 8 {
		t.Errorf("max concurrency 8 but %v in flight", mc.Result.MaxConcurrentRequests)
	}
	if math.IsNaN(mc.Duration) {
		t.Error("NaN duration")
	}
}

// A canceled request frees its slot and its KV blocks and never reports
// again; the others finish as before.
func TestCancel(t *testing.T) {
	e, err := New(Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen/Qwen3-14B", GPU: "H100", MaxNumSeqs: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Submit(Req{ID: "a", PromptLen: 100, OutputLen: 1000})
	e.Submit(Req{ID: "b", PromptLen: 100, OutputLen: 10})
	e.Advance(0.5) // "a" is running, "b" waits behind max-num-seqs 1
	if st := e.Stats(); st.Running != 1 || st.Waiting != 1 || st.KVUsage == 0 {
		t.Fatalf("before cancel: %+v", st)
	}
	if !e.Cancel("a") || e.Cancel("a") || e.Cancel("nope") {
		t.Fatal("Cancel reported the wrong requests as found")
	}
	done := map[string]bool{}
	for {
		next, ok := e.NextEventTime()
		if !ok {
			break
		}
		for _, ev := range e.Advance(next + 1) {
			if ev.ReqID == "a" && ev.Time > 0.5 {
				t.Fatalf("canceled request reported again: %+v", ev)
			}
			if ev.Done {
				done[ev.ReqID] = true
			}
		}
	}
	if !done["b"] || done["a"] {
		t.Fatalf("done = %v, want only b", done)
	}
	if st := e.Stats(); st.KVUsage != 0 || st.Running != 0 {
		t.Fatalf("after: %+v", st)
	}
}

// TestVLLMGraphCap: vLLM's largest CUDA-graph capture size is
// min(2 × max_num_seqs × (1 + draft tokens), 512, token budget), whatever
// the performance mode.
func TestVLLMGraphCap(t *testing.T) {
	for _, tt := range []struct {
		name string
		p    Params
		want int
	}{
		{"default", Params{MaxNumSeqs: 1024}, 512},
		{"small max-num-seqs", Params{MaxNumSeqs: 128}, 256},
		{"throughput mode", Params{MaxNumSeqs: 128, PerformanceMode: "throughput"}, 256},
		{"speculative", Params{MaxNumSeqs: 40, SpecMethod: "ngram", SpecTokens: 4}, 400},
		{"small budget", Params{MaxNumSeqs: 1024, MaxNumBatchedTokens: 300}, 300},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			p.Engine, p.Version, p.Model, p.GPU = "vllm", "0.17.1", "Qwen3-14B", "H100"
			if p.MaxNumBatchedTokens > 0 {
				p.MaxModelLen = 4096
			}
			e, err := New(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			if e.graphMax != tt.want {
				t.Errorf("graph cap %d, want %d", e.graphMax, tt.want)
			}
		})
	}
}

// TestTRTLLMGraphSizes: trtllm-serve captures every decode batch up to 31,
// then only 32, 64 and 128, and pads none, so 33 running requests run
// eagerly where 32 replay a graph. Offline runs keep every batch up to 128
// padded into a graph (trtllmBenchGraphs says why).
func TestTRTLLMGraphSizes(t *testing.T) {
	upTo31 := func(tail ...int) []int {
		var s []int
		for n := 1; n < 32; n++ {
			s = append(s, n)
		}
		return append(s, tail...)
	}
	padded := func(tail ...int) []int {
		s := []int{1, 2, 4}
		for n := 8; n <= 128; n += 8 {
			s = append(s, n)
		}
		return append(s, tail...)
	}
	for _, tt := range []struct {
		max     int
		padding bool
		want    []int
	}{
		{128, false, upTo31(32, 64, 128)},
		{0, false, upTo31(32, 64, 128)},
		{64, false, upTo31(32, 64)},
		{100, false, upTo31(32, 64, 100)},
		{256, false, upTo31(32, 64, 128, 256)},
		{300, false, upTo31(32, 64, 128, 256, 300)},
		{1024, false, upTo31(32, 64, 128, 256, 512, 1024)},
		{128, true, padded()},
		{12, true, []int{1, 2, 4, 8, 12}},
		{512, true, padded(256, 512)},
	} {
		if got := TRTLLMGraphSizes(tt.max, tt.padding); !slices.Equal(got, tt.want) {
			t.Errorf("max %d, padding %v: sizes %v, want %v", tt.max, tt.padding, got, tt.want)
		}
	}

	p := Params{Engine: "trtllm", Model: "Qwen3-8B", GPU: "H100"}
	served, err := New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	offline, _ := New(p, nil)
	offline.withoutAPIServer()
	for _, tt := range []struct {
		n               int
		served, offline bool
	}{
		{1, true, true}, {31, true, true}, {32, true, true}, {33, false, true},
		{63, false, true}, {64, true, true}, {65, false, true}, {128, true, true},
		{129, false, false},
	} {
		if got := served.graphed(tt.n); got != tt.served {
			t.Errorf("trtllm-serve, batch %d: graphed %v, want %v", tt.n, got, tt.served)
		}
		if got := offline.graphed(tt.n); got != tt.offline {
			t.Errorf("offline, batch %d: graphed %v, want %v", tt.n, got, tt.offline)
		}
	}

	pp := p
	pp.GraphPadding = true
	paddedEngine, err := New(pp, nil)
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]bool{3: true, 33: true, 127: true, 128: true, 129: false} {
		if got := paddedEngine.graphed(n); got != want {
			t.Errorf("enable_padding, batch %d: graphed %v, want %v", n, got, want)
		}
	}

	// What a client sees: one more request in flight past 32 costs more
	// per token than one more below it, by the eager step.
	tpot := func(p Params, c int) float64 {
		pr, err := Predict(p, fixedReqs(4*c, 200, 300), Load{MaxConcurrency: c})
		if err != nil {
			t.Fatal(err)
		}
		return pr.Result.MeanTPOTMs
	}
	below, at, past := tpot(p, 31), tpot(p, 32), tpot(p, 33)
	t.Logf("mean TPOT at 31, 32, 33 in flight: %.2f, %.2f, %.2f ms", below, at, past)
	if !(past-at > 3*(at-below)) || past-at < 1 {
		t.Errorf("mean TPOT at 31, 32, 33 in flight: %.2f, %.2f, %.2f ms; want the step past 32 to jump", below, at, past)
	}
	// enable_padding rounds 33 up to the graph of 40.
	if at, past := tpot(pp, 32), tpot(pp, 33); past-at > 0.5 {
		t.Errorf("enable_padding: mean TPOT at 32, 33 in flight: %.2f, %.2f ms; want no eager step", at, past)
	}
}

// TestLinearAttentionScan: on the Gated-DeltaNet hybrid, vLLM before #44700
// runs every decode of a step that holds a prefill through the chunked scan
// as a padded 64-token chunk, so a bigger token budget (fewer such steps)
// serves a prefill-heavy burst faster; from the fix on, decodes take the
// recurrent kernel and the budget is worth little. A dense model has no
// scan at all.
func TestLinearAttentionScan(t *testing.T) {
	step := func(version, model string, decodes, prefill int) float64 {
		t.Helper()
		e, err := New(Params{Engine: "vllm", Version: version, Model: model, GPU: "H100", MaxModelLen: 32768}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var items []work
		for range decodes {
			items = append(items, work{s: &seq{computed: 1000, target: 1200}, n: 1, decode: true})
		}
		if prefill > 0 {
			items = append(items, work{s: &seq{target: prefill}, n: prefill})
		}
		return e.stepTime(items)
	}
	for _, v := range []string{"0.17.1", "0.23.0"} {
		mixed := step(v, "Qwen3.5-9B", 512, 4096)
		sum := step(v, "Qwen3.5-9B", 512, 0) + step(v, "Qwen3.5-9B", 0, 4096)
		t.Logf("vLLM %s: mixed step %.1f ms, decode-only + prefill-only %.1f ms", v, mixed*1e3, sum*1e3)
		if v == "0.17.1" && mixed < 1.3*sum {
			t.Errorf("vLLM %s: a mixed step (%.1f ms) should pay the 512 decodes' padded chunks on top of the two halves (%.1f ms)", v, mixed*1e3, sum*1e3)
		}
		if v == "0.23.0" && mixed > sum {
			t.Errorf("vLLM %s: a mixed step (%.1f ms) costs more than its halves (%.1f ms), but decodes take the recurrent kernel", v, mixed*1e3, sum*1e3)
		}
	}
	if d, m := step("0.17.1", "Qwen3-8B", 512, 4096), step("0.17.1", "Qwen3-8B", 512, 0)+step("0.17.1", "Qwen3-8B", 0, 4096); d > m {
		t.Errorf("dense model: mixed step %.1f ms > halves %.1f ms", d*1e3, m*1e3)
	}

	// The 9B report's throughput profile: throughput mode doubles the
	// budget (8,192 -> 16,384) and was measured 15.6% faster on 0.17.1.
	reqs := fixedReqs(1000, 1024, 128)
	tps := func(version, budget string) float64 {
		t.Helper()
		p := Params{Engine: "vllm", Version: version, Model: "Qwen3.5-9B", GPU: "H100", MaxModelLen: 32768, MaxNumSeqs: 512}
		if budget == "throughput" {
			p.PerformanceMode = "throughput"
		}
		pr, err := Predict(p, reqs, Load{MaxConcurrency: 512})
		if err != nil {
			t.Fatal(err)
		}
		return pr.Result.TotalTokenThroughput
	}
	for _, tc := range []struct {
		version  string
		min, max float64
	}{{"0.17.1", 0.05, 0.30}, {"0.23.0", -0.03, 0.03}} {
		gain := tps(tc.version, "throughput")/tps(tc.version, "") - 1
		t.Logf("vLLM %s: throughput mode %+.1f%% on random 1024/128 at concurrency 512", tc.version, 100*gain)
		if gain < tc.min || gain > tc.max {
			t.Errorf("vLLM %s: throughput mode %+.1f%%, want %+.0f%% .. %+.0f%%", tc.version, 100*gain, 100*tc.min, 100*tc.max)
		}
	}
}

// TestSGLangMixedChunk: --enable-mixed-chunk lets running requests decode
// in the prefill batches that would otherwise stall them, so under a
// stream of long prompts their TPOT drops; it needs chunked prefill, and on
// the Gated-DeltaNet hybrid the decodes of a mixed batch take the chunked
// scan (sglang#36065).
func TestSGLangMixedChunk(t *testing.T) {
	reqs := fixedReqs(300, 3000, 200)
	load := Load{RequestRate: 8, Seed: 1}
	// The generic prior, not the embedded calibration: this checks the
	// mechanism, which a refit of SGLang 0.5.9 (fitted on one 9B block)
	// must not be able to hide by making another cost the bottleneck.
	prior := &Coefficients{Entries: map[string]Coef{"*": defaultCoef}}
	run := func(p Params) (tpot, ttft float64) {
		t.Helper()
		pr, err := PredictWith(p, prior, reqs, load)
		if err != nil {
			t.Fatal(err)
		}
		return pr.Result.MeanTPOTMs, pr.Result.MeanTTFTMs
	}
	base := Params{Engine: "sglang", Version: "0.5.9", Model: "Qwen3-8B", GPU: "H100"}
	mixed := base
	mixed.MixedChunk = true
	tp0, tt0 := run(base)
	tp1, tt1 := run(mixed)
	t.Logf("Qwen3-8B: TPOT %.1f -> %.1f ms, TTFT %.1f -> %.1f ms with mixed chunk", tp0, tp1, tt0, tt1)
	if tp1 > 0.9*tp0 {
		t.Errorf("mixed chunk: mean TPOT %.1f ms, want well below %.1f ms", tp1, tp0)
	}
	noChunk := mixed
	noChunk.ChunkedPrefill = boolPtr(false)
	off := base
	off.ChunkedPrefill = boolPtr(false)
	if a, _ := run(noChunk); a != func() float64 { b, _ := run(off); return b }() {
		t.Error("mixed chunk changed a run without chunked prefill")
	}

	step := func(model string, mixed bool) float64 {
		e, err := New(Params{Engine: "sglang", Version: "0.5.9", Model: model, GPU: "H100", MixedChunk: mixed}, prior)
		if err != nil {
			t.Fatal(err)
		}
		items := []work{{s: &seq{target: 4096}, n: 4096}}
		for range 256 {
			items = append(items, work{s: &seq{computed: 1000, target: 1200}, n: 1, decode: true})
		}
		return e.stepTime(items)
	}
	if plain, mix := step("Qwen3.5-9B", false), step("Qwen3.5-9B", true); mix < plain*1.2 {
		t.Errorf("Qwen3.5-9B mixed batch %.1f ms vs %.1f ms: its 256 decodes should pay the chunked scan", mix*1e3, plain*1e3)
	}
}

// TestResetPrefixCache: a reset forgets cached prefixes, so the same
// shared-prefix request computes its prefix again (a longer first token),
// and it is refused while requests hold blocks.
func TestResetPrefixCache(t *testing.T) {
	e, err := New(Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen/Qwen3-14B", GPU: "H100"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ttft := func(id string, at float64) float64 {
		e.Submit(Req{ID: id, Arrival: at, PromptLen: 4000, OutputLen: 2, PrefixGroup: 7, PrefixLen: 3900})
		first := -1.0
		for {
			next, ok := e.NextEventTime()
			if !ok {
				break
			}
			for _, ev := range e.Advance(next) {
				if ev.ReqID == id && ev.Tokens > 0 && first < 0 {
					first = ev.Time - at
				}
			}
		}
		return first
	}
	cold := ttft("a", 0)
	warm := ttft("b", 10)
	if !(warm < cold) {
		t.Fatalf("a cached prefix did not shorten the first token: cold %.4f, warm %.4f", cold, warm)
	}
	e.Submit(Req{ID: "busy", Arrival: 20, PromptLen: 100, OutputLen: 50})
	if e.ResetPrefixCache() {
		t.Error("reset while a request waits")
	}
	for {
		next, ok := e.NextEventTime()
		if !ok {
			break
		}
		e.Advance(next)
	}
	if !e.ResetPrefixCache() {
		t.Fatal("reset refused on an idle engine")
	}
	if again := ttft("c", 40); again < cold*0.99 {
		t.Errorf("after the reset the prefix was still cached: %.4f vs cold %.4f", again, cold)
	}
}

// TestSGLangRetractInBatch: SGLang's decode batch retracts the request with
// the fewest decoded tokens, which may sit earlier in the batch than the one
// that found the pool full. Its decode must leave the batch with it: left
// in, a request on its last token finished from the waiting queue, came
// back done and was re-prefilled every step without end (the 14B FP8
// random 2k block with SGLang's 0.834 memory fraction).
func TestSGLangRetractInBatch(t *testing.T) {
	e, err := New(Params{Engine: EngineSGLang, Version: "0.5.5.post1", Model: "Qwen3-32B", GPU: "H100"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Two requests on their last token; the pool has room for one more.
	mk := func(id string, gen int) *seq {
		s := &seq{id: id, prompt: 100, output: 10, generated: gen, prefillDone: true}
		s.target, s.computed = s.prompt, s.prompt+gen
		e.grow(s, s.computed)
		e.running = append(e.running, s)
		return s
	}
	a, b := mk("a", 8), mk("b", 9)
	e.freeBlocks = 1
	st := e.schedule(0)
	if st == nil {
		t.Fatal("no step")
	}
	// a decodes (it takes the free slot), then b finds the pool full and
	// retracts a, the fewest decoded, already in the batch.
	if len(e.waiting) != 1 || e.waiting[0] != a || len(e.running) != 1 || e.running[0] != b {
		t.Fatalf("running %d, waiting %d: want b running and a retracted", len(e.running), len(e.waiting))
	}
	for _, w := range st.items {
		if w.s == a {
			t.Fatal("the retracted request still decodes in the batch")
		}
	}
	e.finish(st)
	if a.done || !b.done {
		t.Errorf("after the step: a done %v (retracted, must not be), b done %v", a.done, b.done)
	}
}

// TestSGLangStatePool: SGLang keeps a hybrid model's linear-attention
// states in a pool of their own, sized by mamba_full_memory_ratio, and
// caps max_running_requests at a third of its slots with the radix cache
// on (all of them with it off); vLLM keeps them in KV-cache blocks. The
// expected figures are SGLang's arithmetic, worked here from the model's
// shapes, not read back from the engine.
func TestSGLangStatePool(t *testing.T) {
	arch, err := Params{Model: "Qwen3.5-9B"}.arch()
	if err != nil {
		t.Fatal(err)
	}
	// Per request, in each of the 24 Gated DeltaNet layers: the fp32
	// recurrent state (32 value heads x 128 x 128) and the BF16 conv
	// state ((2 x 16 x 128 + 32 x 128) channels x 3 positions).
	perReq := 24 * (32*128*128*4.0 + (2*16*128+32*128)*3*2.0)
	if got := arch.linearStateBytes(); got != perReq {
		t.Fatalf("state per request %.0f bytes, want %.0f", got, perReq)
	}
	base := Params{Engine: "sglang", Version: "0.5.9", Model: "Qwen3.5-9B", GPU: "H100", MaxModelLen: 32768}
	e, err := New(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	hw, _ := LookupGPU("H100")
	rest := hw.MemGiB*gib*e.p.MemFraction - e.weightBytesPerGPU()
	slots := int(rest * 0.9 / 1.9 / perReq)
	if e.maxSeqs != slots/3 {
		t.Errorf("max running requests %d, want %d (%d state slots / 3)", e.maxSeqs, slots/3, slots)
	}
	if e.maxSeqs < 100 || e.maxSeqs > 250 {
		t.Errorf("max running requests %d: the 9B on one H100 should run about 160", e.maxSeqs)
	}
	kvTokens := int((rest - float64(slots)*perReq) / e.kvBytesTok)
	if got := e.totalBlocks * e.blockSize; got != kvTokens {
		t.Errorf("KV cache %d tokens, want %d (what the state pool leaves)", got, kvTokens)
	}

	noRadix := base
	noRadix.PrefixCaching = boolPtr(false)
	if e2, err := New(noRadix, nil); err != nil || e2.maxSeqs != slots {
		t.Errorf("radix cache off: max running requests %d (%v), want every slot, %d", e2.maxSeqs, err, slots)
	}
	capped := base
	capped.MaxNumSeqs = 1024
	if e3, err := New(capped, nil); err != nil || e3.maxSeqs != slots/3 {
		t.Errorf("--max-running-requests 1024: %d (%v), want it reduced to %d as SGLang does", e3.maxSeqs, err, slots/3)
	}

	// Speculative decoding (MTP, 3 steps, SGLang's default for Qwen3.5):
	// the radix cache is off, max_running_requests 48, one slot each,
	// and four intermediate states per request set aside first.
	mtp := base
	mtp.SpecMethod, mtp.SpecTokens = "mtp", 3
	e4, err := New(mtp, nil)
	if err != nil {
		t.Fatal(err)
	}
	// (A draft model's memory fraction is 2 GiB lower: sglangMemFraction.)
	restMTP := hw.MemGiB*gib*e4.p.MemFraction - e4.weightBytesPerGPU()
	wantKV := int((restMTP - 48*4*perReq - 48*perReq) / e4.kvBytesTok)
	if *e4.p.PrefixCaching || e4.maxSeqs != 48 || e4.totalBlocks*e4.blockSize != wantKV {
		t.Errorf("MTP: radix %v, max running %d, KV %d tokens; want off, 48, %d", *e4.p.PrefixCaching, e4.maxSeqs, e4.totalBlocks*e4.blockSize, wantKV)
	}

	// vLLM: the state takes KV blocks, so no separate pool and far more
	// running sequences.
	v, err := New(Params{Engine: "vllm", Version: "0.17.1", Model: "Qwen3.5-9B", GPU: "H100", MaxModelLen: 32768, MaxNumSeqs: 512}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.stateBlocks == 0 || v.maxSeqs != 512 {
		t.Errorf("vLLM: state blocks %d, max seqs %d; want the state in KV blocks and all 512", v.stateBlocks, v.maxSeqs)
	}
}
