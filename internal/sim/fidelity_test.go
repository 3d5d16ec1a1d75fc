package sim

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Achieved fidelity of the embedded calibration, asserted as regression
// bounds a little above what it reaches: 4.2%, 9.9%, 7.8% since the 9B
// report's guidellm blocks are scored on their mean latency's per-token
// time, with the runner's ShareGPT lengths and vLLM's outputs streamed apart
// from its admissions (2026-12-02); 3.7%, 19.9%, 16.5% before, over 46 TPOT
// blocks. The targets are 10% TPS MAPE and 25% TTFT/TPOT MAPE and
// in sample no worse than 4.7 / 19.8 / 17.4%; see docs/sim-fidelity.md.
const (
	boundTPSMAPE  = 0.045 // target 0.10
	boundTTFTMAPE = 0.105 // target 0.25
	boundTPOTMAPE = 0.085 // target 0.25
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

// TestGuidellmTPOT: a guidellm block is scored on the per-token time its
// mean latency gives, a vllm bench block on the TPOT it prints.
func TestGuidellmTPOT(t *testing.T) {
	m := Measured{Completed: 1000, MeanTTFTMs: 1604.23, MeanTPOTMs: 15.12, MeanLatencyS: 24.11, TotalOutput: 281412}
	g := Case{Workload: Workload{Client: "guidellm"}, Measured: m}
	if got, want := g.TPOTMs(), (24110-1604.23)/(281.412-1); math.Abs(got-want) > 1e-9 {
		t.Errorf("guidellm TPOT %.4f ms, want %.4f", got, want)
	}
	v := Case{Workload: Workload{Client: "vllm"}, Measured: m}
	if got := v.TPOTMs(); got != 15.12 {
		t.Errorf("vllm bench TPOT %.4f ms, want the printed 15.12", got)
	}
	g.Measured.MeanLatencyS = 0
	if got := g.TPOTMs(); got != 15.12 {
		t.Errorf("guidellm block without a latency: TPOT %.4f ms, want the printed 15.12", got)
	}
}

// TestGuidellmTPOTIsTTFTPlusSpan checks the reading of the 9B report's
// figures that TPOTMs rests on. guidellm's TPOT is sum(last counted chunk -
// start) / sum(output tokens) and its ITL sum(last - first) / sum(output -
// 1) (schemas/request_stats.py, weighted in benchmark/schemas/generative/
// metrics.py), so every complete block's printed TPOT is its mean TTFT over
// the mean output plus its ITL's share: a span of chunks, not a token time.
func TestGuidellmTPOTIsTTFTPlusSpan(t *testing.T) {
	ref, err := ReferenceCases()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range ref.Cases {
		m := c.Measured
		if c.Workload.Client != "guidellm" || c.Exclude != "" {
			continue
		}
		n++
		out := float64(m.TotalOutput) / float64(m.Completed)
		want := m.MeanTTFTMs/out + m.MeanITLMs*(out-1)/out
		// The report prints two decimals.
		if math.Abs(m.MeanTPOTMs-want) > math.Max(0.01*want, 0.02) {
			t.Errorf("%s: printed TPOT %.2f ms, TTFT/out + ITL share %.2f ms", c.ID, m.MeanTPOTMs, want)
		}
		if perToken := c.TPOTMs(); !(perToken > m.MeanITLMs) {
			t.Errorf("%s: %.2f ms a token from the mean latency, not above the %.2f ms ITL of the counted chunks", c.ID, perToken, m.MeanITLMs)
		}
	}
	if n != 20 {
		t.Errorf("%d complete guidellm blocks, want 20", n)
	}
}

// TestGuidellmShareGPTShape: the runner keeps every conversation that opens
// with a human prompt and a gpt answer, both non-empty, with no length
// filter; vllm bench's filter drops a prompt over 1,024 tokens.
func TestGuidellmShareGPTShape(t *testing.T) {
	type turn struct {
		From  string `json:"from"`
		Value string `json:"value"`
	}
	type conv struct {
		Conversations []turn `json:"conversations"`
	}
	long := strings.Repeat("x", 8000)
	convs := []conv{
		{[]turn{{"human", strings.Repeat("a", 40)}, {"gpt", strings.Repeat("b", 400)}}},
		{[]turn{{"gpt", "hello there"}, {"human", "and back"}}},
		{[]turn{{"human", ""}, {"gpt", strings.Repeat("c", 80)}}},
		{[]turn{{"human", long}, {"gpt", strings.Repeat("d", 16)}}},
	}
	b, err := json.Marshal(convs)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sharegpt.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	saved := ShareGPTLengthsPath
	defer func() { ShareGPTLengthsPath = saved }()
	ShareGPTLengthsPath = path
	in, out := guidellmShareGPTShape(4)
	if want := []float64{10, 2000, 10, 2000}; !slices.Equal(in, want) {
		t.Errorf("guidellm prompts %v, want %v", in, want)
	}
	if want := []float64{100, 4, 100, 4}; !slices.Equal(out, want) {
		t.Errorf("guidellm outputs %v, want %v", out, want)
	}
	if vin, _ := sharegptShape(2); slices.Contains(vin, 2000) {
		t.Errorf("vllm bench's filter kept the 2,000-token prompt: %v", vin)
	}
}
