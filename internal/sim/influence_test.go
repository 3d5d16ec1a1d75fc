package sim

import (
	"math"
	"testing"
)

// TestInfluence: a coefficient the residuals depend on strongly is decided
// by the data (near 1); one they ignore is the prior's (0); one whose data
// curvature equals the prior's weight is shared half and half.
func TestInfluence(t *testing.T) {
	const prior = 0.02
	p := math.Sqrt(prior)
	// Rows: data (x0 strongly, x2 at the prior's own curvature), then the
	// three prior rows, then one more data row, as fitGroupFrom lays them.
	resid := func(x []float64) []float64 {
		return []float64{10 * (x[0] - 1), p * x[2], p * x[0], p * x[1], p * x[2], 0}
	}
	x := []float64{1, 0.3, 0.5}
	inf := influence(x, resid(x), resid, 2, prior)
	if inf[0] < 0.99 {
		t.Errorf("strongly informed coefficient: influence %.3f, want ~1", inf[0])
	}
	if inf[1] != 0 {
		t.Errorf("coefficient no data row moves: influence %.3f, want 0", inf[1])
	}
	if math.Abs(inf[2]-0.5) > 0.01 {
		t.Errorf("data curvature equal to the prior's: influence %.3f, want 0.5", inf[2])
	}
}

// TestFitHoldsUninformed: blocks served entirely under CUDA graphs say
// nothing about an eager step's cost, so the fit holds eager_ms at the
// prior rather than count it as fitted, and still fits the GEMM speed the
// blocks do pin. The measured figures are the simulator's own at known
// coefficients, so the truth is known.
func TestFitHoldsUninformed(t *testing.T) {
	if testing.Short() {
		t.Skip("fits a group: several seconds")
	}
	truth := defaultCoef
	truth.GEMMEff, truth.EagerMs = 0.4, 20
	var cases []Case
	for i, w := range []Workload{
		{Kind: "random", NumPrompts: 40, InputLen: 2000, OutputLen: 20, TotalInput: 80000, TotalOutput: 800, Client: "vllm"},
		{Kind: "random", NumPrompts: 40, InputLen: 128, OutputLen: 64, TotalInput: 5120, TotalOutput: 2560, Client: "vllm"},
		{Kind: "random", NumPrompts: 40, InputLen: 1000, OutputLen: 64, TotalInput: 40000, TotalOutput: 2560, Client: "vllm", RequestRate: 20},
	} {
		c := Case{ID: string(rune('a' + i)), Params: Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen3-14B", GPU: "H100"}, Workload: w}
		r := PredictCase(c, &Coefficients{Entries: map[string]Coef{"*": truth}})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		c.Measured = Measured{Completed: w.NumPrompts, TotalTPS: r.TotalTPS, MeanTTFTMs: r.MeanTTFTMs, MeanTPOTMs: r.MeanTPOTMs, TotalInput: w.TotalInput, TotalOutput: w.TotalOutput}
		cases = append(cases, c)
	}
	f := fitGroup(cases, defaultCoef, FitOptions{Rounds: 4, Prior: 0.02})
	if !f.held["eager_ms"] {
		t.Errorf("eager_ms fitted (influence %.3f); no block ran eager", f.influence["eager_ms"])
	}
	if f.c.EagerMs != defaultCoef.EagerMs {
		t.Errorf("held eager_ms is %g, want the prior's %g", f.c.EagerMs, defaultCoef.EagerMs)
	}
	if f.held["gemm_eff"] || f.influence["gemm_eff"] < 0.5 {
		t.Errorf("gemm_eff influence %.3f held=%v: a 2,000-token prefill block pins it", f.influence["gemm_eff"], f.held["gemm_eff"])
	}
	if math.Abs(f.c.GEMMEff/truth.GEMMEff-1) > 0.1 {
		t.Errorf("gemm_eff fitted %.3f, truth %.3f", f.c.GEMMEff, truth.GEMMEff)
	}
}
