package lab

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/sim"
)

// rangedGuide gives a guide a fixed range, standing in for a calibration
// whose held-out errors were measured.
type rangedGuide struct {
	inner Guide
	up    float64
}

func (g rangedGuide) Guess(ctx context.Context, cfg engine.Config, w labspec.Workload, prompts int) (Measurement, error) {
	return g.inner.Guess(ctx, cfg, w, prompts)
}

func (g rangedGuide) Upside(engine.Config) (float64, bool) { return g.up, true }

// TestJointUsesGuideRange (issue 16: the guide's range enters its
// optimism): the joint search credits an unmeasured knob value with the
// top of the guide's range. A guide that has been exact on unseen models
// tries fewer configs than the fixed +50% credit gives; one that has been
// off by 2× goes on until every knob value of the space has been measured
// under its engine. The stop reason says which credit was used.
func TestJointUsesGuideRange(t *testing.T) {
	s := mustSpec(t, smallSpec)
	joint := func(g func(Guide) Guide) *JointSummary {
		t.Helper()
		l := analyticLab(s, newMemStore())
		l.Guide = g(l.Guide)
		sum, err := l.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if sum.Joint == nil {
			t.Fatal("no joint search")
		}
		return sum.Joint
	}
	fixed := joint(func(g Guide) Guide { return g })
	exact := joint(func(g Guide) Guide { return rangedGuide{g, 0} })
	wide := joint(func(g Guide) Guide { return rangedGuide{g, 1} })
	t.Logf("joint trials: fixed +50%% %d, range 0%% %d, range +100%% %d", len(fixed.Tried), len(exact.Tried), len(wide.Tried))
	if len(exact.Tried) >= len(fixed.Tried) {
		t.Errorf("a guide exact on unseen models tried %d configs, the fixed credit %d: want fewer", len(exact.Tried), len(fixed.Tried))
	}
	if !strings.Contains(fixed.StopReason, "+50%") {
		t.Errorf("without a range the stop reason should give the fixed credit: %s", fixed.StopReason)
	}
	if !strings.Contains(exact.StopReason, "top of the guide's range") || strings.Contains(exact.StopReason, "+50%") {
		t.Errorf("with a range the stop reason should say it was used: %s", exact.StopReason)
	}
	if !strings.Contains(wide.StopReason, "every knob value of the untested configs is measured") {
		t.Errorf("a guide off by 2× should explore every knob value before it stops: %s", wide.StopReason)
	}
}

// TestSimPredictorUpside: the simulator's range is the embedded folds'
// throughput spread for the config's engine, and only for the embedded
// calibration; coefficients fitted elsewhere have no measured range.
func TestSimPredictorUpside(t *testing.T) {
	folds := sim.DefaultFolds()
	if folds == nil {
		t.Fatal("no embedded folds")
	}
	cfg := func(e string) engine.Config {
		return engine.Config{Engine: e, Version: engine.DefaultVersions[e], Model: "Qwen/Qwen3-14B"}
	}
	seen := map[float64]bool{}
	for _, e := range []string{"vllm", "sglang", "trtllm"} {
		u, ok := SimPredictor{}.Upside(cfg(e))
		want := folds.SpreadFor(e).TotalTPS
		if !ok || u != want || !(u > 0) {
			t.Errorf("%s: upside %v, %v; want the folds' %v", e, u, ok, want)
		}
		seen[u] = true
		if u2, ok := (SimPredictor{Coefficients: sim.DefaultCoefficients()}).Upside(cfg(e)); !ok || u2 != u {
			t.Errorf("%s: the embedded calibration passed explicitly gives %v, %v; want %v", e, u2, ok, u)
		}
	}
	if len(seen) < 2 {
		t.Errorf("every engine has the same range %v: the spread is not per engine", seen)
	}
	other, err := sim.ParseCoefficients([]byte(`{"entries":{"*":{"gemm_eff":0.6,"fp8_eff":0.45,"mem_eff":0.75,"attn_eff":0.4,"step_ms":4,"seq_us":20,"frontend_ms":1,"eager_ms":8}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := (SimPredictor{Coefficients: other}).Upside(cfg("vllm")); ok {
		t.Errorf("a calibration without folds has a range: %v", u)
	}
	if _, ok := upside(AnalyticPredictor{}, cfg("vllm")); ok {
		t.Error("the analytic stand-in has a range")
	}
}

// engineGuide predicts a fixed throughput per engine.
type engineGuide map[string]float64

func (g engineGuide) Guess(_ context.Context, cfg engine.Config, _ labspec.Workload, _ int) (Measurement, error) {
	v, ok := g[cfg.Engine]
	if !ok {
		return Measurement{}, errors.New("no prediction")
	}
	return Measurement{Result: &metrics.Result{Completed: 1, NumPrompts: 1, TotalTokenThroughput: v}}, nil
}

// TestLikelyWinnerLast (the 14B example's plan started SGLang twice: the
// engine stage measured SGLang, then TensorRT-LLM on the one GPU, and
// SGLang's repeats found its server gone): on a runtime with servers a
// batch runs its candidates in the guide's predicted order, lowest first,
// so the likely winner is the one still up for its repeats. A config the
// guide cannot predict runs first; a generalization batch keeps its order.
func TestLikelyWinnerLast(t *testing.T) {
	s := mustSpec(t, smallSpec+"runtime: process\n")
	l := &Lab{Spec: s, guide: engineGuide{"vllm": 100, "sglang": 300, "trtllm": 200}}
	var specs []TrialSpec
	for _, e := range []string{"sglang", "vllm", "tgi-unknown", "trtllm"} {
		p := labspec.Point{labspec.KnobEngine: e}
		cfg, ok := s.Config(p)
		if !ok {
			cfg = engine.Config{Engine: e, Model: s.Model}
		}
		specs = append(specs, l.trialSpec("engine", p, cfg, *s.Tuning, 0))
	}
	got := l.likelyWinnerLast(context.Background(), specs, []int{0, 1, 2, 3})
	var names []string
	for _, i := range got {
		names = append(names, specs[i].Config.Engine)
	}
	if want := "tgi-unknown,vllm,trtllm,sglang"; strings.Join(names, ",") != want {
		t.Errorf("run order %s, want %s", strings.Join(names, ","), want)
	}
	gen := specs[:2]
	for i := range gen {
		gen[i].Workload = s.Generalization[0]
	}
	if got := l.likelyWinnerLast(context.Background(), gen, []int{0, 1}); got[0] != 0 || got[1] != 1 {
		t.Errorf("a generalization batch was reordered: %v", got)
	}
}

// TestGuessAllWhileTrialsRun (issue 27): the joint search's guide sizes
// its workers by the lab's concurrency while trials of the same lab take
// and give back their slots; it read the slot count without the lock,
// which go test -race reports.
func TestGuessAllWhileTrialsRun(t *testing.T) {
	s := mustSpec(t, smallSpec)
	l := analyticLab(s, newMemStore())
	l.sem, l.guide = newGPUSem(2, 2), l.Guide
	pts := s.Enumerate(labspec.Point{labspec.KnobEngine: s.BaselineEngine()}, s.Axes(s.SearchKnobs()), 8)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		for ctx.Err() == nil {
			if l.sem.acquire(ctx, 1) == nil {
				l.sem.release(1)
			}
		}
	}()
	for range 20 {
		guess, err := l.guessAll(ctx, pts)
		if err != nil {
			t.Fatal(err)
		}
		if len(guess) == 0 {
			t.Fatalf("no prediction for %d configs", len(pts))
		}
	}
	cancel()
	<-busy
}
