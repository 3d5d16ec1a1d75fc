package sim

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var refit = flag.Bool("fit", false, "refit testdata coefficients from the reference cases and rewrite coefficients.json (minutes)")

// TestFitReference refits the embedded calibration. Run with -fit.
func TestFitReference(t *testing.T) {
	if !*refit {
		t.Skip("run with -fit to refit coefficients.json")
	}
	ShareGPTLengthsPath = filepath.Join(sharedDir(t), "data", "sharegpt", "sharegpt_v3_sample_1000.json")
	ref, err := ReferenceCases()
	if err != nil {
		t.Fatal(err)
	}
	// SIM_FIT_EXTRA names external sources (testdata/external, comma
	// separated) fitted on beside the reference: what a source pins that
	// the reference does not (small-batch decode) is fitted, and the
	// source is no longer held out.
	for _, name := range strings.Split(os.Getenv("SIM_FIT_EXTRA"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			src := loadExternalSource(t, name)
			ref.Cases = append(ref.Cases, src.Cases...)
			ref.Orderings = append(ref.Orderings, src.Orderings...)
		}
	}
	t0 := time.Now()
	// From fitStart (for the roofline the generic prior, not the embedded
	// file), so the file is reproducible by this command.
	model := envStepModel(t)
	prior := fitStart(model)
	c, err := Fit(ref.Cases, prior, FitOptions{Rounds: fitRounds(), Orderings: ref.Orderings, Log: t.Logf, PoolPrior: envFloat("SIM_POOL_PRIOR")})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fit took %v", time.Since(t0))
	c.Source = "fitted to every result block of ../shared/reference (go test ./internal/sim -run TestFitReference -fit)"
	out := "coefficients.json"
	if model == StepKernels {
		c.Source = "fitted under the kernel-table step model to every result block of ../shared/reference (SIM_STEP_MODEL=kernels go test ./internal/sim -run TestFitReference -fit)"
		out = kernelCoefficientsFile
	}
	if err := os.WriteFile(out, c.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fitStart is where a fit under model starts: the generic prior for the
// roofline; for the kernel model the roofline's fitted overheads
// (coefficients.json, itself reproducible from the prior), because from the
// generic prior the fit put TensorRT-LLM's served cost into a 58 ms step
// instead of its API server.
func fitStart(model StepModel) *Coefficients {
	if model != StepKernels {
		return &Coefficients{StepModel: model, Entries: map[string]Coef{"*": defaultCoef}}
	}
	prior := &Coefficients{StepModel: model, Entries: map[string]Coef{}}
	for k, v := range DefaultCoefficients().Entries {
		v.PrefillUs = 1
		prior.Entries[k] = cloneCoef(v)
	}
	return prior
}

// kernelCoefficientsFile is the calibration fitted under the kernel-table
// step model while it is not the default (docs/sim-fidelity.md, issue 26).
const kernelCoefficientsFile = "coefficients_kernels.json"

// envStepModel reads SIM_STEP_MODEL: the step model a fit or a fidelity
// run uses (empty: the roofline).
func envStepModel(t *testing.T) StepModel {
	m := StepModel(os.Getenv("SIM_STEP_MODEL"))
	if err := m.check(); err != nil {
		t.Fatal(err)
	}
	return m
}

// envFloat reads a float from the environment (0 when unset): knobs for
// trying a fit's options from the command line.
func envFloat(name string) float64 {
	v, _ := strconv.ParseFloat(os.Getenv(name), 64)
	return v
}

// fitRounds reads SIM_FIT_ROUNDS (0 = Fit's default).
func fitRounds() int {
	if n, err := strconv.Atoi(os.Getenv("SIM_FIT_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 0
}

var lomo = flag.Bool("lomo", false, "run leave-one-model-out (one full fit per model, about a minute on one core)")

// TestLeaveOneModelOut fits without each model and prints its errors. Run
// with -lomo; with -update too it rewrites coefficients_lomo.json, the folds
// sim predict's range comes from.
func TestLeaveOneModelOut(t *testing.T) {
	if !*lomo {
		t.Skip("run with -lomo")
	}
	ShareGPTLengthsPath = filepath.Join(sharedDir(t), "data", "sharegpt", "sharegpt_v3_sample_1000.json")
	ref, err := ReferenceCases()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	model := envStepModel(t)
	res, folds := LeaveOneModelOutFits(ref, fitStart(model), FitOptions{Rounds: fitRounds(), Orderings: ref.Orderings, Log: t.Logf, PoolPrior: envFloat("SIM_POOL_PRIOR")})
	t.Logf("leave-one-model-out took %v", time.Since(t0))
	if len(res) != 3 || len(folds.Folds) != 3 {
		t.Fatalf("held out %d models (%d folds), want 3", len(res), len(folds.Folds))
	}
	if *update && model != StepRoofline {
		t.Fatal("-update writes the embedded folds, which are the roofline's; run the kernel model's without it")
	}
	if *update {
		// The folds PredictSpan spreads predictions over.
		if err := os.WriteFile("coefficients_lomo.json", folds.JSON(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPoolByGPU: the pool is, per GPU, the geometric mean of what each
// well-measured group fitted, one vote per engine version; a coefficient no
// group could inform (FP8 without an FP8 model) keeps the generic prior,
// and a backend's speed never enters it.
func TestPoolByGPU(t *testing.T) {
	bf16 := Case{ID: "a", Params: Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen3-14B", GPU: "H100"}}
	groups := map[string][]Case{
		"H100/vllm/0.11.0":  {bf16, bf16, bf16, bf16},
		"H100/sglang/0.5.9": {{ID: "b", Params: Params{Engine: EngineSGLang, Version: "0.5.9", Model: "Qwen3-14B", GPU: "H100"}}},
		"H200/vllm/0.11.0":  {{ID: "c", Params: Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen3-14B", GPU: "H200"}}},
	}
	fitted := map[string]Coef{
		"H100/vllm/0.11.0":  {GEMMEff: 0.2, FP8Eff: 0.9, FrontendMs: 1, Backend: map[string]float64{"x": 3}},
		"H100/sglang/0.5.9": {GEMMEff: 0.8, FP8Eff: 0.9, FrontendMs: 4},
		"H200/vllm/0.11.0":  {GEMMEff: 0.5, FrontendMs: 2},
	}
	start := &Coefficients{Entries: map[string]Coef{"*": defaultCoef}}
	pools := poolByGPU(groups, []string{"H100/vllm/0.11.0", "H100/sglang/0.5.9", "H200/vllm/0.11.0"}, fitted, start)
	h := pools["H100"]
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(h.GEMMEff, 0.4) || !near(h.FrontendMs, 2) {
		t.Errorf("H100 pool gemm %g frontend %g, want 0.4 and 2 (geometric means, one vote per version)", h.GEMMEff, h.FrontendMs)
	}
	if h.FP8Eff != defaultCoef.FP8Eff {
		t.Errorf("H100 pool fp8 %g: no group ran an FP8 model, want the prior %g", h.FP8Eff, defaultCoef.FP8Eff)
	}
	if h.Backend != nil {
		t.Errorf("H100 pool carries backend speeds %v", h.Backend)
	}
	if g := pools["H200"].GEMMEff; !near(g, 0.5) {
		t.Errorf("H200 pool gemm %g, want 0.5 (its own GPU's groups only)", g)
	}
}

// TestFillFromPool: a group gets its GPU's pooled value for a kernel
// efficiency its own cases could not inform (FP8 on an engine measured only
// in BF16, or one the fit held at the prior), keeps what it fitted, and keeps its software costs whatever
// they are.
func TestFillFromPool(t *testing.T) {
	bf16 := Case{ID: "a", Params: Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen3-14B", GPU: "H100"}}
	fp8 := Case{ID: "b", Params: Params{Engine: EngineSGLang, Version: "0.5.5.post1", Model: "Qwen3-14B-FP8", GPU: "H100"}}
	groups := map[string][]Case{"H100/vllm/0.11.0": {bf16}, "H100/sglang/0.5.5.post1": {fp8}}
	entries := map[string]Coef{
		"H100/vllm/0.11.0":        {GEMMEff: 0.3, FP8Eff: 0.45, FrontendMs: 1, CoreAddMs: 9},
		"H100/sglang/0.5.5.post1": {GEMMEff: 0.4, FP8Eff: 0.25, FrontendMs: 2},
	}
	pools := map[string]Coef{"H100": {GEMMEff: 0.5, FP8Eff: 0.2, FrontendMs: 7, CoreAddMs: 1, ScanEff: 0.09}}
	fillFromPool(groups, entries, map[string][]string{"H100/vllm/0.11.0": {"gemm_eff"}}, pools)
	v, s := entries["H100/vllm/0.11.0"], entries["H100/sglang/0.5.5.post1"]
	if v.FP8Eff != 0.2 || v.ScanEff != 0.09 {
		t.Errorf("vLLM (no FP8, no hybrid model): fp8 %g scan %g, want the pool's 0.2 and 0.09", v.FP8Eff, v.ScanEff)
	}
	if v.GEMMEff != 0.5 {
		t.Errorf("vLLM held gemm_eff at the prior (its blocks did not pin it): %g, want the pool's 0.5", v.GEMMEff)
	}
	if v.FrontendMs != 1 || v.CoreAddMs != 9 {
		t.Errorf("vLLM's own fit changed: %+v", v)
	}
	if s.FP8Eff != 0.25 {
		t.Errorf("SGLang ran FP8: fp8 %g, want its own 0.25", s.FP8Eff)
	}
}
