package sim

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

var (
	lomo     = flag.Bool("lomo", false, "run leave-one-model-out (one full fit per model, about a minute on one core)")
	lomoFold = flag.String("lomo.fold", "", "with -lomo, fit only the fold that holds this model out (the check of the embedded folds is then of that fold)")
)

// TestLeaveOneModelOut fits without each model, prints its errors and
// checks that the folds are the embedded ones, sim predict's ranges. Run
// with -lomo; with -update too it rewrites coefficients_lomo.json instead.
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
	var only func(string) bool
	want := 3
	if *lomoFold != "" {
		if *update {
			t.Fatal("-update writes every fold; run it without -lomo.fold")
		}
		only, want = func(m string) bool { return m == *lomoFold }, 1
	}
	res, folds := leaveModelsOut(ref, fitStart(model), FitOptions{Rounds: fitRounds(), Orderings: ref.Orderings, Log: t.Logf, PoolPrior: envFloat("SIM_POOL_PRIOR")}, only)
	t.Logf("leave-one-model-out took %v", time.Since(t0))
	if len(res) != want || len(folds.Folds) != want {
		t.Fatalf("held out %d models (%d folds), want %d", len(res), len(folds.Folds), want)
	}
	if *update && model != StepRoofline {
		t.Fatal("-update writes the embedded folds, which are the roofline's; run the kernel model's without it")
	}
	if *update {
		// The folds PredictSpan spreads predictions over.
		if err := os.WriteFile("coefficients_lomo.json", folds.JSON(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if model != StepRoofline {
		return
	}
	// The embedded folds are what this command fits: every range sim
	// predict prints comes from them, so a change to the fit or the step
	// model that moves them must come with -update. The fits run their
	// groups in parallel and sum in another order from run to run, which
	// moves a coefficient by about 1e-9 of itself.
	for _, d := range diffFolds(folds, DefaultFolds(), 1e-6, *lomoFold == "") {
		t.Error(d)
	}
}

// TestDiffFolds: the check of the embedded folds passes them against
// themselves and against a run's summing noise, and names a coefficient, a
// backend speed, a spread and a model record that moved.
func TestDiffFolds(t *testing.T) {
	load := func() *FoldSet {
		f := DefaultFolds()
		if f == nil {
			t.Fatal("no embedded folds")
		}
		return f
	}
	if d := diffFolds(load(), load(), 1e-6, true); len(d) != 0 {
		t.Errorf("the embedded folds differ from themselves: %v", d)
	}
	scale := func(f *FoldSet, k float64) {
		for _, c := range f.Folds {
			for key, e := range c.Entries {
				e.GEMMEff *= k
				c.Entries[key] = e
			}
		}
	}
	noisy := load()
	scale(noisy, 1+1e-9)
	if d := diffFolds(noisy, load(), 1e-6, true); len(d) != 0 {
		t.Errorf("summing noise flagged: %v", d)
	}
	moved := load()
	scale(moved, 1.001)
	if d := diffFolds(moved, load(), 1e-6, true); len(d) == 0 || !strings.Contains(strings.Join(d, "\n"), "gemm_eff") {
		t.Errorf("a 0.1%% move of gemm_eff: %v", d)
	}
	backend := load()
	for _, c := range backend.Folds {
		if e, ok := c.Entries["H100/sglang/0.5.5.post1"]; ok && e.BackendDecode != nil {
			e.BackendDecode = maps.Clone(e.BackendDecode)
			e.BackendDecode["triton"] *= 1.01
			c.Entries["H100/sglang/0.5.5.post1"] = e
		}
	}
	if d := diffFolds(backend, load(), 1e-6, true); !strings.Contains(strings.Join(d, "\n"), "backend_decode.triton") {
		t.Errorf("a backend's decode speed moved: %v", d)
	}
	spread := load()
	spread.Spread.TotalTPS *= 1.01
	if d := diffFolds(spread, load(), 1e-6, true); len(d) != 1 {
		t.Errorf("the spread moved: %v", d)
	}
	models := load()
	for _, c := range models.Folds {
		c.Models = nil
	}
	if d := diffFolds(models, load(), 1e-6, true); len(d) != len(models.Folds) {
		t.Errorf("no model records: %v", d)
	}
	// One fold, as CI refits it: only that fold is compared, and a fold
	// the embedded set does not hold is named.
	one := load()
	for m := range one.Folds {
		if m != "Qwen3-14B" {
			delete(one.Folds, m)
		}
	}
	one.Spread.TotalTPS *= 2
	if d := diffFolds(one, load(), 1e-6, false); len(d) != 0 {
		t.Errorf("one fold against the embedded set: %v", d)
	}
	scale(one, 1.001)
	if d := diffFolds(one, load(), 1e-6, false); len(d) == 0 {
		t.Error("one fold moved, yet no difference")
	}
	one.Folds["Llama-3.1-8B"] = one.Folds["Qwen3-14B"]
	if d := diffFolds(one, load(), 1e-6, false); !strings.Contains(strings.Join(d, "\n"), "Llama-3.1-8B is not embedded") {
		t.Errorf("a fold the embedded set lacks: %v", d)
	}
}

// diffFolds lists where two fold sets differ by more than tol (relative):
// folds, their entries, coefficients, held and model records, and (when
// all: got holds every fold) the spreads. Without all, only got's folds
// are compared.
func diffFolds(got, want *FoldSet, tol float64, all bool) []string {
	if want == nil {
		return []string{"no embedded folds"}
	}
	var out []string
	if !all {
		for _, m := range slices.Sorted(maps.Keys(got.Folds)) {
			if _, ok := want.Folds[m]; !ok {
				out = append(out, "fold "+m+" is not embedded")
			}
		}
		part := &FoldSet{Folds: map[string]*Coefficients{}}
		for m := range got.Folds {
			if w, ok := want.Folds[m]; ok {
				part.Folds[m] = w
			}
		}
		return append(out, diffEntries(got, part, tol)...)
	}
	near := func(a, b float64) bool { return a == b || math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b)) }
	figs := func(where string, a, b Figures) {
		if !near(a.TotalTPS, b.TotalTPS) || !near(a.MeanTTFTMs, b.MeanTTFTMs) || !near(a.MeanTPOTMs, b.MeanTPOTMs) {
			out = append(out, fmt.Sprintf("%s: fitted %+v, embedded %+v", where, a, b))
		}
	}
	figs("spread", got.Spread, want.Spread)
	for _, e := range slices.Sorted(maps.Keys(want.SpreadByEngine)) {
		figs("spread of "+e, got.SpreadByEngine[e], want.SpreadByEngine[e])
	}
	if len(got.Folds) != len(want.Folds) || len(got.SpreadByEngine) != len(want.SpreadByEngine) {
		out = append(out, fmt.Sprintf("%d folds and %d engine spreads fitted, %d and %d embedded", len(got.Folds), len(got.SpreadByEngine), len(want.Folds), len(want.SpreadByEngine)))
	}
	return append(out, diffEntries(got, want, tol)...)
}

// diffEntries is diffFolds' comparison of each of want's folds.
func diffEntries(got, want *FoldSet, tol float64) []string {
	var out []string
	near := func(a, b float64) bool { return a == b || math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b)) }
	for _, m := range slices.Sorted(maps.Keys(want.Folds)) {
		g, w := got.Folds[m], want.Folds[m]
		if g == nil {
			out = append(out, "fold "+m+" not fitted")
			continue
		}
		if !reflect.DeepEqual(g.Held, w.Held) || !reflect.DeepEqual(g.Models, w.Models) {
			out = append(out, fmt.Sprintf("fold %s: held %v and models %v fitted, %v and %v embedded", m, g.Held, g.Models, w.Held, w.Models))
		}
		if len(g.Entries) != len(w.Entries) {
			out = append(out, fmt.Sprintf("fold %s: %d entries fitted, %d embedded", m, len(g.Entries), len(w.Entries)))
		}
		for _, k := range slices.Sorted(maps.Keys(w.Entries)) {
			ge, ok := g.Entries[k]
			if !ok {
				out = append(out, fmt.Sprintf("fold %s: %s not fitted", m, k))
				continue
			}
			a, b := flatCoef(ge), flatCoef(w.Entries[k])
			for _, name := range slices.Sorted(maps.Keys(b)) {
				if v, ok := a[name]; !ok || !near(v, b[name]) {
					out = append(out, fmt.Sprintf("fold %s, %s: %s fitted %g, embedded %g", m, k, name, v, b[name]))
				}
			}
			if len(a) != len(b) {
				out = append(out, fmt.Sprintf("fold %s, %s: %d figures fitted, %d embedded", m, k, len(a), len(b)))
			}
		}
	}
	return out
}

// flatCoef is every figure of c by its JSON name ("backend.triton" for a
// backend's speed).
func flatCoef(c Coef) map[string]float64 {
	b, _ := json.Marshal(c)
	var raw map[string]any
	_ = json.Unmarshal(b, &raw)
	out := map[string]float64{}
	for k, v := range raw {
		switch v := v.(type) {
		case float64:
			out[k] = v
		case map[string]any:
			for kk, vv := range v {
				if f, ok := vv.(float64); ok {
					out[k+"."+kk] = f
				}
			}
		}
	}
	return out
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
