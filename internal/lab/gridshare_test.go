package lab

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
)

// gridPredictors holds one memoPredictor per example, so TestGridExamples
// and TestGridWrongGuide measure each example's exhaustive grid once
// between them: both measure on the same noise-free calibrated simulator,
// and only the guide differs. The grids are CPU-bound minutes each on 2
// cores (the 14B grid alone is 1,320 predictions).
var gridPredictors = struct {
	sync.Mutex
	m map[string]*memoPredictor
}{m: map[string]*memoPredictor{}}

// gridPredictor returns the example's shared memo over p, making it on
// first use; p must be the same predictor each time for an example.
func gridPredictor(example string, p Predictor) Predictor {
	gridPredictors.Lock()
	defer gridPredictors.Unlock()
	mp := gridPredictors.m[example]
	if mp == nil {
		mp = &memoPredictor{p: p, m: map[string]Prediction{}}
		gridPredictors.m[example] = mp
	}
	return mp
}

// memoPredictor remembers a deterministic predictor's answers by
// everything they depend on (config, hardware, workload, how many
// requests). A prediction is a pure function of those on the noise-free
// simulator; errors (a cancelled context) are not remembered.
type memoPredictor struct {
	p    Predictor
	mu   sync.Mutex
	m    map[string]Prediction
	hits int
}

var (
	_ Predictor = (*memoPredictor)(nil)
	_ Ranged    = (*memoPredictor)(nil)
)

// Upside passes on the wrapped predictor's range (the embedded
// calibration's LOMO spread): without it the joint search would credit
// unmeasured knob values with its default, and decide otherwise.
func (mp *memoPredictor) Upside(cfg engine.Config) (float64, bool) { return upside(mp.p, cfg) }

func (mp *memoPredictor) Predict(ctx context.Context, cfg engine.Config, hw labspec.Hardware, reqs []dataset.Request, w labspec.Workload) (Prediction, error) {
	k, err := json.Marshal(struct {
		Cfg      engine.Config
		HW       labspec.Hardware
		W        labspec.Workload
		Requests int
	}{cfg, hw, w, len(reqs)})
	if err != nil {
		return mp.p.Predict(ctx, cfg, hw, reqs, w)
	}
	mp.mu.Lock()
	p, ok := mp.m[string(k)]
	if ok {
		mp.hits++
	}
	mp.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err = mp.p.Predict(ctx, cfg, hw, reqs, w)
	if err != nil {
		return p, err
	}
	mp.mu.Lock()
	mp.m[string(k)] = p
	mp.mu.Unlock()
	return p, nil
}

// countPredictor counts the predictions it makes; each answer carries the
// count, so a remembered answer is told from a new one.
type countPredictor struct{ n int }

func (c *countPredictor) Predict(ctx context.Context, cfg engine.Config, hw labspec.Hardware, reqs []dataset.Request, w labspec.Workload) (Prediction, error) {
	if err := ctx.Err(); err != nil {
		return Prediction{}, err
	}
	c.n++
	return Prediction{Seconds: float64(c.n)}, nil
}

// The memo answers a repeated question from memory and asks again
// whenever anything a prediction depends on differs, and never remembers
// an error.
func TestMemoPredictor(t *testing.T) {
	inner := &countPredictor{}
	mp := &memoPredictor{p: inner, m: map[string]Prediction{}}
	cfg := engine.Config{Engine: "vllm", Version: "0.11.0", Model: "Qwen/Qwen3-14B"}
	hw := labspec.Hardware{GPU: "H100", Count: 1}
	w := labspec.Workload{Name: "ShareGPT", Dataset: "random", NumPrompts: 8}
	reqs := make([]dataset.Request, 8)
	ask := func(cfg engine.Config, hw labspec.Hardware, reqs []dataset.Request, w labspec.Workload) float64 {
		t.Helper()
		p, err := mp.Predict(t.Context(), cfg, hw, reqs, w)
		if err != nil {
			t.Fatal(err)
		}
		return p.Seconds
	}
	if got := ask(cfg, hw, reqs, w); got != 1 {
		t.Fatalf("first prediction %v, want 1", got)
	}
	if got := ask(cfg, hw, reqs, w); got != 1 || inner.n != 1 {
		t.Fatalf("repeat: %v after %d predictions, want the remembered 1 after 1", got, inner.n)
	}
	other := cfg
	other.Quantization = "fp8"
	w2 := w
	w2.Point = &labspec.LoadPoint{}
	for i, c := range []struct {
		cfg  engine.Config
		hw   labspec.Hardware
		reqs []dataset.Request
		w    labspec.Workload
	}{
		{other, hw, reqs, w},
		{cfg, labspec.Hardware{GPU: "H200", Count: 1}, reqs, w},
		{cfg, hw, reqs[:4], w},
		{cfg, hw, reqs, w2},
	} {
		if got := ask(c.cfg, c.hw, c.reqs, c.w); got != float64(i+2) {
			t.Errorf("case %d: %v, want a new prediction %d", i, got, i+2)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	w3 := w
	w3.Name = "cancelled"
	if _, err := mp.Predict(ctx, cfg, hw, reqs, w3); err == nil {
		t.Fatal("cancelled: no error")
	}
	if got := ask(cfg, hw, reqs, w3); got != 6 {
		t.Fatalf("after an error: %v, want a new prediction 6", got)
	}
}

// The memo keeps the simulator's range: the joint search asks the
// measuring runner's predictor for it (PredictRunner.Upside), and a memo
// without it made the 9B grid test credit +50% instead of the guide's
// range and run 4 more trials.
func TestMemoPredictorKeepsRange(t *testing.T) {
	sp := SimPredictor{}
	cfg := engine.Config{Engine: "sglang", Version: "0.5.5.post1", Model: "Qwen/Qwen3-14B"}
	want, wok := upside(sp, cfg)
	if !wok {
		t.Skip("the embedded calibration gives this config no range")
	}
	got, ok := upside(gridMemo(sp), cfg)
	if !ok || got != want {
		t.Fatalf("upside through the memo = %v, %v; want %v, true", got, ok, want)
	}
}

func gridMemo(p Predictor) *memoPredictor { return &memoPredictor{p: p, m: map[string]Prediction{}} }
