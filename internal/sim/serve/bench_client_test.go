package serve

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/perflab/perflab/internal/bench"
	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/sim"
)

// TestBenchClient runs perflab's own benchmark client (what `perflab bench`
// and the lab use) against the simulated server and checks it sees what the
// engine produced: every request completes with its output length, and the
// measured TTFT/E2E match the engine's own timings scaled to wall time.
func TestBenchClient(t *testing.T) {
	// A modest speed-up: at 20× a decode step is under half a millisecond of
	// wall time, and a loaded 2-core CI machine's scheduling jitter, not the
	// server, would decide the figure.
	const scale = 2.0
	p := sim.Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen/Qwen3-14B", GPU: "H100"}
	eng, err := sim.New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, Config{Model: eng, MaxModelLen: eng.Params().MaxModelLen, TimeScale: scale})
	var reqs []dataset.Request
	for i := 0; i < 40; i++ {
		reqs = append(reqs, dataset.Request{Prompt: "hello world", PromptLen: 3, OutputLen: 20 + i})
	}
	wantTPOT := offlineTPOT(t, p, reqs)
	for _, backend := range []struct{ name, endpoint string }{{"openai", "/v1/completions"}, {"openai-chat", "/v1/chat/completions"}} {
		t.Run(backend.name, func(t *testing.T) {
			out, err := bench.Run(context.Background(), bench.Config{BaseURL: ts.URL, Endpoint: backend.endpoint, Backend: backend.name,
				Model: "Qwen/Qwen3-14B", Requests: reqs, RequestRate: math.Inf(1)})
			if err != nil {
				t.Fatal(err)
			}
			res := out.Result
			want := 0
			for _, r := range reqs {
				want += r.OutputLen
			}
			if res.Completed != len(reqs) || res.TotalOutputTokens != want {
				t.Fatalf("completed %d/%d, output tokens %d want %d", res.Completed, len(reqs), res.TotalOutputTokens, want)
			}
			// The wall-clock TPOT, scaled back to model time, matches the
			// engine's own offline timing of the same burst.
			got := res.MeanTPOTMs * scale
			t.Logf("TPOT %.2f ms (model time) over HTTP vs %.2f ms offline; TTFT %.2f ms wall", got, wantTPOT, res.MeanTTFTMs)
			if math.Abs(got-wantTPOT)/wantTPOT > 0.25 {
				t.Errorf("mean TPOT %.2f ms of model time (%.3f ms wall), engine offline says %.2f ms", got, res.MeanTPOTMs, wantTPOT)
			}
		})
	}
}

// offlineTPOT runs the same requests through a fresh engine without HTTP and
// returns their mean TPOT in ms of model time.
func offlineTPOT(t *testing.T, p sim.Params, reqs []dataset.Request) float64 {
	eng, err := sim.New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range reqs {
		eng.Submit(sim.Req{ID: strconv.Itoa(i), PromptLen: r.PromptLen, OutputLen: r.OutputLen})
	}
	first, last := map[string]float64{}, map[string]float64{}
	for {
		next, ok := eng.NextEventTime()
		if !ok {
			break
		}
		for _, ev := range eng.Advance(next) {
			if ev.Tokens == 0 {
				continue
			}
			if _, ok := first[ev.ReqID]; !ok {
				first[ev.ReqID] = ev.Time
			}
			last[ev.ReqID] = ev.Time
		}
	}
	sum := 0.0
	for i, r := range reqs {
		id := strconv.Itoa(i)
		sum += (last[id] - first[id]) / float64(r.OutputLen-1)
	}
	return sum / float64(len(reqs)) * 1000
}
