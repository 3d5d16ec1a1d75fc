package sim

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Achieved fidelity of the embedded calibration, asserted as regression
// bounds a little above what it reaches (3.7%, 19.8%, 16.5% since a step
// streams only the weights it reads, 2026-11-27; 4.1%, 18.5%, 16.4% after
// SGLang's state pool; 4.7%, 19.8%, 17.4% before that; the issue's
// targets are 10% TPS MAPE and 25% TTFT/TPOT MAPE; see
// docs/sim-fidelity.md).
const (
	boundTPSMAPE  = 0.040 // target 0.10
	boundTTFTMAPE = 0.200 // target 0.25
	boundTPOTMAPE = 0.170 // target 0.25
	// Required orderings that may stay unreproduced: the 32B TensorRT-LLM
	// chunked prefill (+7.0% measured, +0.0% predicted: in TensorRT-LLM's
	// source chunking changes only how prompts are packed into a step).
	boundOrders = 1
)

func TestFidelity(t *testing.T) {
	ShareGPTLengthsPath = filepath.Join(sharedDir(t), "data", "sharegpt", "sharegpt_v3_sample_1000.json")
	ref, err := ReferenceCases()
	if err != nil {
		t.Fatal(err)
	}
	f := Evaluate(ref, DefaultCoefficients())
	var b strings.Builder
	f.WriteText(&b)
	if testing.Verbose() || os.Getenv("SIM_FIDELITY_PRINT") != "" {
		t.Log("\n" + b.String())
	}
	for _, r := range f.Results {
		if r.Err != nil && r.Case.Exclude == "" {
			t.Errorf("%s: %v", r.Case.ID, r.Err)
		}
	}
	if f.N != 48 {
		t.Errorf("scored %d blocks, want 48 (52 minus 4 excluded)", f.N)
	}
	if f.TPSMAPE > boundTPSMAPE {
		t.Errorf("Total TPS MAPE %.1f%% > bound %.1f%%", f.TPSMAPE*100, boundTPSMAPE*100)
	}
	if f.TTFTMAPE > boundTTFTMAPE {
		t.Errorf("mean TTFT MAPE %.1f%% > bound %.1f%%", f.TTFTMAPE*100, boundTTFTMAPE*100)
	}
	if f.TPOTMAPE > boundTPOTMAPE {
		t.Errorf("mean TPOT MAPE %.1f%% > bound %.1f%%", f.TPOTMAPE*100, boundTPOTMAPE*100)
	}
	rep, req := f.RequiredOrderings()
	if req-rep > boundOrders {
		t.Errorf("%d of %d required orderings reversed, bound %d", req-rep, req, boundOrders)
	}
}

// TestMedianITL: the median gap PredictCase reports is a decode step (one
// request alone: every gap is one step, so the median is its TPOT), and a
// measured median the weights could not stream in at peak bandwidth does
// not pin a step.
func TestMedianITL(t *testing.T) {
	c := Case{ID: "one", Params: Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen3-32B", GPU: "H100"},
		Workload: Workload{Kind: "random", NumPrompts: 1, InputLen: 1000, OutputLen: 100, TotalInput: 1000, TotalOutput: 100, Client: "vllm"},
		Measured: Measured{TotalTPS: 1, MeanTTFTMs: 1, MeanTPOTMs: 1, MedianITLMs: 50}}
	r := PredictCase(c, DefaultCoefficients())
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.MedianITLMs <= 0 || math.Abs(r.MedianITLMs/r.MeanTPOTMs-1) > 0.02 {
		t.Errorf("one request: median ITL %.2f ms, TPOT %.2f ms; want the same step", r.MedianITLMs, r.MeanTPOTMs)
	}
	// 61 GiB of BF16 weights take 19.6 ms at 3.35 TB/s.
	if r.stepFloorMs < 19 || r.stepFloorMs > 20 || r.MedianITLMs < r.stepFloorMs {
		t.Errorf("step floor %.2f ms, median ITL %.2f ms; want 19-20 ms below the step", r.stepFloorMs, r.MedianITLMs)
	}
	if e, ok := r.StepError(); !ok || math.Abs(e-(r.MedianITLMs/50-1)) > 1e-12 {
		t.Errorf("StepError %v %v, want %v true", e, ok, r.MedianITLMs/50-1)
	}
	r.Case.Measured.MedianITLMs = 0.12 // a stream delivered in bursts
	if _, ok := r.StepError(); ok {
		t.Error("a 0.12 ms median gap pins a 32B decode step")
	}
	c.Workload.Client, c.Measured.MedianITLMs = "guidellm", 0
	if r := PredictCase(c, DefaultCoefficients()); r.MedianITLMs != 0 {
		t.Errorf("guidellm case: median ITL %.2f, want none", r.MedianITLMs)
	}
}

// TestConstantArrivals: a case whose client sends at even intervals
// (guidellm's constant profile) is predicted so: at the same rate its
// requests queue less than under Poisson arrivals, whose bursts wait.
func TestConstantArrivals(t *testing.T) {
	c := Case{ID: "paced", Params: Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen3-14B", GPU: "H100"},
		Workload: Workload{Kind: "random", NumPrompts: 200, InputLen: 2000, OutputLen: 200, TotalInput: 400000, TotalOutput: 40000,
			RequestRate: 6, Client: "vllm"},
		Measured: Measured{TotalTPS: 1, MeanTTFTMs: 1, MeanTPOTMs: 1}}
	poisson := PredictCase(c, nil)
	c.Workload.Arrivals = "constant"
	even := PredictCase(c, nil)
	if poisson.Err != nil || even.Err != nil {
		t.Fatal(poisson.Err, even.Err)
	}
	if !(even.MeanTTFTMs < poisson.MeanTTFTMs) {
		t.Errorf("mean TTFT %.1f ms with even gaps, %.1f ms with Poisson ones; want less queueing with even gaps", even.MeanTTFTMs, poisson.MeanTTFTMs)
	}
	t.Logf("mean TTFT: even %.1f ms, Poisson %.1f ms", even.MeanTTFTMs, poisson.MeanTTFTMs)
}
