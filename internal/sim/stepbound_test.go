package sim

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/sim/kernels"
)

// TestStepShareFromMeasuredSteps: the whole-step share is read from the
// embedded runs (tools/kernels/collect.py's decode_step rows): it lies
// within the shares of the rows it is the median of, below what the
// table's weight-streaming GEMM alone reaches (a step adds attention and
// glue), and the H200, with more bandwidth, moves more bytes a second. A
// GPU with no whole steps measured carries the nearest measured GPU's.
func TestStepShareFromMeasuredSteps(t *testing.T) {
	for _, gpu := range []string{"H100", "H200"} {
		hw, err := LookupGPU(gpu)
		if err != nil {
			t.Fatal(err)
		}
		run, err := kernels.Run(gpu)
		if err != nil {
			t.Fatalf("%s: %v", gpu, err)
		}
		tab, _, err := tableFor(hw)
		if err != nil {
			t.Fatal(err)
		}
		ks, ok := sharesOf(tab, hw)
		if !ok {
			t.Fatalf("%s: no kernel shares", gpu)
		}
		for _, fp8 := range []bool{false, true} {
			share, from, ok := stepShare(hw, fp8)
			if !ok || from != "" {
				t.Fatalf("%s fp8=%v: share %v from %q ok %v; want measured on the GPU itself", gpu, fp8, share, from, ok)
			}
			lo, hi, n := math.Inf(1), 0.0, 0
			for _, r := range run.Steps {
				a, err := LookupModel(r.Model)
				if err != nil || a.Hybrid() || (r.DType == kernels.FP8) != fp8 || r.Batch > smallBatchRows || r.Context > smallContextRows {
					continue
				}
				a.FP8Weights = fp8
				s := a.streamBytes() / (r.StepUS * 1e-6) / (hw.HBMGBps * 1e9)
				lo, hi, n = math.Min(lo, s), math.Max(hi, s), n+1
			}
			if n < 5 || share < lo || share > hi {
				t.Errorf("%s fp8=%v: share %.3f outside its %d rows' %.3f..%.3f", gpu, fp8, share, n, lo, hi)
			}
			if !fp8 && share >= ks.mem {
				t.Errorf("%s: whole-step share %.3f not below the weight GEMM's %.3f", gpu, share, ks.mem)
			}
		}
	}
	h100, _ := LookupGPU("H100")
	h200, _ := LookupGPU("H200")
	s1, _, _ := stepShare(h100, false)
	s2, _, _ := stepShare(h200, false)
	if s2*h200.HBMGBps <= s1*h100.HBMGBps {
		t.Errorf("H200 streams %.0f GB/s in a whole step, the H100 %.0f", s2*h200.HBMGBps, s1*h100.HBMGBps)
	}
	a100, _ := LookupGPU("A100")
	s, from, ok := stepShare(a100, false)
	if !ok || from == "" || !(s > 0.3 && s < 1) {
		t.Errorf("A100: share %.3f from %q ok %v; want one carried from a measured GPU", s, from, ok)
	}
}

// TestPredictSpanSmallBatchBound: a few sequences decoding on one H100 are
// priced by the fitted roofline at about twice the measured whole step;
// the range's fast side reaches the run with weights at the measured rate
// and says so. A MoE model has no whole step measured and gets the bound
// only through the dense share (it streams its active experts like any
// weight); a kernel-table calibration gets none.
func TestPredictSpanSmallBatchBound(t *testing.T) {
	reqs := make([]dataset.Request, 8)
	for i := range reqs {
		reqs[i] = dataset.Request{PromptLen: 200, OutputLen: 200}
	}
	p := Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen3-8B", GPU: "H100", MaxNumSeqs: 4}
	main := DefaultCoefficients()
	fitted, err := PredictWith(p, main, reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	c, note := main.smallBatchBound(fitted.Params)
	if c == nil || !strings.Contains(note, "H100") {
		t.Fatalf("no bound for Qwen3-8B on the H100: %q", note)
	}
	fast, err := PredictWith(p, c, reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	// A decode step of four short sequences is the weight stream and fixed
	// costs: the bound takes off the weights' time at the fitted share
	// less their time at the measured one, worked here from the model's
	// bytes.
	hw, _ := LookupGPU("H100")
	a, _ := LookupModel("Qwen3-8B")
	e := main.Entries["H100/vllm/0.11.0"]
	share := c.Entries["H100/vllm/0.11.0"].WeightStreamEff
	want := a.streamBytes() / (hw.HBMGBps * 1e9) * (1/e.MemEff - 1/share) * 1000
	got := fitted.Result.MeanTPOTMs - fast.Result.MeanTPOTMs
	if math.Abs(got-want) > 0.15*want {
		t.Errorf("weights at %.2f of HBM instead of %.2f: TPOT %.2f ms from %.2f, %.2f ms less; want about %.2f ms less",
			share, e.MemEff, fast.Result.MeanTPOTMs, fitted.Result.MeanTPOTMs, got, want)
	}
	s, err := PredictSpan(p, main, nil, reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Lo.MeanTPOTMs > fast.Result.MeanTPOTMs || s.Hi.TotalTPS < fast.Result.TotalTokenThroughput {
		t.Errorf("range TPOT %.2f.., TPS ..%.0f does not hold the bound's %.2f ms, %.0f tok/s", s.Lo.MeanTPOTMs, s.Hi.TotalTPS, fast.Result.MeanTPOTMs, fast.Result.TotalTokenThroughput)
	}
	if len(s.Unseen) != 1 || s.Unseen[0] != note {
		t.Errorf("notes %q, want the bound's alone", s.Unseen)
	}
	kern := &Coefficients{StepModel: StepKernels, Entries: main.Entries}
	if c, _ := kern.smallBatchBound(fitted.Params); c != nil {
		t.Error("a kernel-table calibration got the roofline's bound")
	}
	awq := p
	awq.Model = "Qwen3-8B-AWQ"
	if pr, err := PredictWith(awq, main, reqs, Load{}); err == nil {
		if c, _ := main.smallBatchBound(pr.Params); c != nil {
			t.Error("a weight-only INT4 model got a bound no whole step measured")
		}
	}
}

// TestWeightStreamEffBelowMemEffIgnored: a weight stream share at or below
// the calibration's MemEff leaves the roofline as fitted (the bound only
// ever speeds the stream up).
func TestWeightStreamEffBelowMemEffIgnored(t *testing.T) {
	reqs := []dataset.Request{{PromptLen: 100, OutputLen: 100}}
	p := Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen3-8B", GPU: "H100"}
	main := DefaultCoefficients()
	base, err := PredictWith(p, main, reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	slow := *main
	slow.Entries = map[string]Coef{}
	for k, e := range main.Entries {
		e.WeightStreamEff = e.MemEff / 2
		slow.Entries[k] = e
	}
	got, err := PredictWith(p, &slow, reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Result.MeanTPOTMs != base.Result.MeanTPOTMs {
		t.Errorf("TPOT %.4f ms with a slower weight stream share, %.4f fitted", got.Result.MeanTPOTMs, base.Result.MeanTPOTMs)
	}
}

// TestKernelTableSumsToWholeSteps: the kernel-table step model adds up
// kernels the collector timed one shape at a time (kernelDense, and
// DecodeAttention per layer). The collector's whole decode steps chain the
// same kernels in one graph, on another day: the sum must come within a
// few percent of the chain (median 3%, nine in ten within 5%), or the step
// model's composition, not its fitted overheads, is what is off. The first
// step timed after a model's weights are allocated runs up to 14% slow
// (the first row of each model in both runs), hence the looser maximum.
func TestKernelTableSumsToWholeSteps(t *testing.T) {
	for _, gpu := range []string{"H100", "H200"} {
		hw, _ := LookupGPU(gpu)
		tab, _, err := tableFor(hw)
		if err != nil {
			t.Fatal(err)
		}
		run, err := kernels.Run(gpu)
		if err != nil {
			t.Fatal(err)
		}
		var errs []float64
		for _, r := range run.Steps {
			a, err := LookupModel(r.Model)
			if err != nil || a.Hybrid() {
				continue
			}
			a.FP8Weights = r.DType == kernels.FP8
			dense, _, err := kernelDense(tab, a, 1, r.Batch, r.Batch)
			if err != nil {
				t.Fatalf("%s %+v: %v", gpu, r, err)
			}
			attn, _ := tab.DecodeAttention(a.NumHeads, a.NumKVHeads, a.HeadDim, r.Batch, r.Context)
			sum := dense + float64(a.NumLayers)*attn
			errs = append(errs, math.Abs(sum*1e6/r.KernelsUS-1))
		}
		if len(errs) < 50 {
			t.Fatalf("%s: %d whole steps of catalog models", gpu, len(errs))
		}
		slices.Sort(errs)
		med, p90, worst := errs[len(errs)/2], errs[len(errs)*9/10], errs[len(errs)-1]
		t.Logf("%s: %d steps; table sum against the chained step: median %.1f%%, p90 %.1f%%, worst %.1f%%", gpu, len(errs), 100*med, 100*p90, 100*worst)
		if med > 0.03 || p90 > 0.05 || worst > 0.15 {
			t.Errorf("%s: the table's kernels sum to the measured steps within %.1f%% (median), %.1f%% (p90), %.1f%% (worst)", gpu, 100*med, 100*p90, 100*worst)
		}
	}
}

// TestSmallBatchBoundOnlyAtSmallBatch: the bound is for the regime the
// measured rows cover. Four requests at a time decode about four at once
// (Little's law over the records) and get it; 400 at once, the regime the
// calibration was fitted on, do not.
func TestSmallBatchBoundOnlyAtSmallBatch(t *testing.T) {
	mk := func(n int) []dataset.Request {
		reqs := make([]dataset.Request, n)
		for i := range reqs {
			reqs[i] = dataset.Request{PromptLen: 300, OutputLen: 300}
		}
		return reqs
	}
	p := Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen3-8B", GPU: "H100"}
	for _, c := range []struct {
		n, conc   int
		lo, hi    float64
		withBound bool
	}{{40, 4, 3, 4.001, true}, {400, 0, 100, 400, false}} {
		reqs := mk(c.n)
		load := Load{MaxConcurrency: c.conc}
		pr, err := PredictWith(p, nil, reqs, load)
		if err != nil {
			t.Fatal(err)
		}
		if m := meanDecoding(pr); m < c.lo || m > c.hi {
			t.Errorf("%d requests at concurrency %d: %.2f decoding at once, want %.0f..%.0f", c.n, c.conc, m, c.lo, c.hi)
		}
		s, err := PredictSpan(p, nil, nil, reqs, load)
		if err != nil {
			t.Fatal(err)
		}
		got := len(s.Unseen) == 1 && strings.HasPrefix(s.Unseen[0], "small-batch steps:")
		if got != c.withBound {
			t.Errorf("%d requests at concurrency %d: notes %q, want the bound: %v", c.n, c.conc, s.Unseen, c.withBound)
		}
	}
}
