package lab

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/sim"
	"github.com/perflab/perflab/internal/tokenizer"
)

// checkGrid asserts the must-show: the lab's winner within 1% of the grid's
// best, using at most 30% of the grid's trials.
func checkGrid(t *testing.T, name string, sum *Summary) {
	t.Helper()
	g := sum.Grid
	if g == nil || g.Best == nil {
		t.Fatalf("%s: no grid in summary", name)
	}
	if sum.Joint != nil {
		t.Logf("%s: joint search stopped: %s", name, sum.Joint.StopReason)
	}
	t.Logf("%s: grid %d configs, best %s %.1f; winner %s gap %.2f%%, greedy stages gap %.2f%%; lab %d trials (%.1f%%)",
		name, g.Size, g.Best.Name, g.Best.Score, sum.Winner.Name, 100*g.WinnerGap, 100*g.StagedGap, g.LabTrials, 100*g.LabShare)
	if g.WinnerGap > 0.01 {
		t.Errorf("%s: winner %.2f%% below the grid's best, want within 1%%", name, 100*g.WinnerGap)
	}
	if g.LabShare > 0.30 {
		t.Errorf("%s: lab used %.0f%% of the grid's trials, want at most 30%%", name, 100*g.LabShare)
	}
	if g.WinnerGap > g.StagedGap+1e-9 {
		t.Errorf("%s: joint search ended below the greedy pass (%.2f%% vs %.2f%%)", name, 100*g.WinnerGap, 100*g.StagedGap)
	}
}

func TestGridAnalytic(t *testing.T) {
	s := mustSpec(t, smallSpec)
	s.Generalization = nil
	l := analyticLab(s, newMemStore())
	l.Grid = true
	sum, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checkGrid(t, "small (analytic)", sum)
}

// gridExample runs one example with --grid on the noise-free simulator,
// measuring on the embedded calibration and guided by guide (nil: the same).
// Search quality is judged without noise: with noise, the grid's best of
// hundreds of configs is lifted by its luckiest draw, and the gap would
// measure that, not the search. The noise-floor rule has its own tests.
func gridExample(t *testing.T, ex string, guide *sim.Coefficients) *Summary {
	t.Helper()
	s, err := labspec.LoadSpec(filepath.Join("examples", ex+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s.Generalization, s.NoGeneralization = nil, true
	s.Noise = labspec.Noise{}
	tok, err := tokenizer.Load(s.Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	reqs := CachedRequests(DatasetRequests(tok))
	// Measured through the example's shared memo: the grid is the same in
	// every test that measures this example (gridshare_test.go).
	runner := &PredictRunner{Predictor: gridPredictor(ex, SimPredictor{SLO: s.Objective.SLO}), Hardware: s.Hardware, Requests: reqs}
	g := runner
	if guide != nil {
		g = &PredictRunner{Predictor: SimPredictor{SLO: s.Objective.SLO, Coefficients: guide}, Hardware: s.Hardware, Requests: reqs}
	}
	l := &Lab{Spec: s, Store: newMemStore(), Runner: runner, Guide: g, Grid: true}
	sum, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if mp, ok := runner.Predictor.(*memoPredictor); ok {
		t.Logf("%s: %d predictions so far, %d answered from the shared grid memo", ex, len(mp.m), mp.hits)
	}
	return sum
}

// TestGridExamples runs each example on the simulator with --grid. It takes
// minutes on a 2-core machine, so it runs only with PERFLAB_LAB_GRID=1:
//
//	PERFLAB_LAB_GRID=1 go test ./internal/lab -run GridExamples -v -timeout 30m
func TestGridExamples(t *testing.T) {
	if os.Getenv("PERFLAB_LAB_GRID") != "1" {
		t.Skip("set PERFLAB_LAB_GRID=1 to compare the examples with their exhaustive grids")
	}
	chdirRoot(t)
	for _, ex := range []string{"qwen3-14b-h100", "qwen3-32b-h100", "qwen3.5-9b-h100"} {
		t.Run(ex, func(t *testing.T) { checkGrid(t, ex, gridExample(t, ex, nil)) })
	}
}

// TestGridWrongGuide is TestGridExamples with a guide that is wrong: the
// simulator's uncalibrated generic prior guides the search, while trials are
// measured on the calibrated simulator (standing in for the real engines).
// The joint search must recalibrate on what it measures and still reach the
// grid's best. PERFLAB_LAB_GRID=1 as above.
func TestGridWrongGuide(t *testing.T) {
	if os.Getenv("PERFLAB_LAB_GRID") != "1" {
		t.Skip("set PERFLAB_LAB_GRID=1 to compare the examples with their exhaustive grids")
	}
	chdirRoot(t)
	prior, err := sim.ParseCoefficients([]byte(`{"entries":{"*":{"gemm_eff":0.6,"fp8_eff":0.45,"mem_eff":0.75,"attn_eff":0.4,"step_ms":4,"seq_us":20,"frontend_ms":1,"eager_ms":8}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range []string{"qwen3-14b-h100", "qwen3-32b-h100"} {
		t.Run(ex, func(t *testing.T) { checkGrid(t, ex+" (uncalibrated guide)", gridExample(t, ex, prior)) })
	}
}
