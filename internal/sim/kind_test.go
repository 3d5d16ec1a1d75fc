package sim

import (
	"errors"
	"maps"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/engine"
)

// TestKindsCoverEngines: every engine perflab registers has a simulator
// Kind with each behaviour the model calls unconditionally.
func TestKindsCoverEngines(t *testing.T) {
	for _, name := range engine.KindNames() {
		k, ok := KindOf(name)
		if !ok {
			t.Errorf("engine %s has no sim.Kind", name)
			continue
		}
		if k.defaults == nil || k.memory == nil || k.noCache == nil || k.schedule == nil {
			t.Errorf("%s: Kind lacks defaults, memory, noCache or schedule", name)
		}
	}
	if _, ok := KindOf("toyengine"); ok {
		t.Error("KindOf found an engine nobody registered")
	}
}

// TestKindIsTheOnlyBranch registers a copy of each engine's Kind under a
// name no code spells and predicts the same runs with both: identical
// records, duration and result (and the same start-up refusals) show that
// the model reads the engine's behaviour from its Kind alone, never from
// its name.
func TestKindIsTheOnlyBranch(t *testing.T) {
	const toy = "toyengine"
	savedKinds, savedVersions := kinds, defaultVersions
	t.Cleanup(func() { kinds, defaultVersions = savedKinds, savedVersions })
	long := fixedReqs(40, 9000, 16)
	copy(long, fixedReqs(20, 512, 64))
	for _, tc := range []struct {
		name string
		p    Params
		reqs []dataset.Request
		argv string
		// want is the refusal the engine starts with, if any.
		want error
	}{
		{name: "vllm", p: Params{Engine: engine.VLLM, Model: "Qwen3-14B"}},
		{name: "vllm hybrid before #44700", p: Params{Engine: engine.VLLM, Version: "0.20.0", Model: "Qwen3.5-9B"}},
		{name: "vllm dp", p: Params{Engine: engine.VLLM, Model: "Qwen3-8B", DP: 2}},
		{name: "vllm eager spec", p: Params{Engine: engine.VLLM, Model: "Qwen3-14B", SpecMethod: "eagle3", SpecTokens: 3, MaxNumSeqs: 64}},
		{name: "sglang", p: Params{Engine: engine.SGLang, Model: "Qwen3-14B"}},
		{name: "sglang mixed chunk hybrid", p: Params{Engine: engine.SGLang, Model: "Qwen3.5-9B", MixedChunk: true}},
		{name: "sglang dp shortest queue", p: Params{Engine: engine.SGLang, Model: "Qwen3-8B", DP: 2}, argv: "--load-balance-method shortest_queue"},
		{name: "trtllm", p: Params{Engine: engine.TRTLLM, Model: "Qwen3-14B"}},
		{name: "trtllm long prompts unchunked", p: Params{Engine: engine.TRTLLM, Model: "Qwen3-14B"}, reqs: long},
		{name: "vllm no KV block", p: Params{Engine: engine.VLLM, Model: "Qwen3-32B", MemFraction: 0.7}, want: ErrOOM},
		{name: "vllm max len does not fit", p: Params{Engine: engine.VLLM, Model: "Qwen3-32B", MemFraction: 0.8}, want: ErrOOM},
		{name: "sglang no KV block", p: Params{Engine: engine.SGLang, Model: "Qwen3-32B", MemFraction: 0.7}, want: ErrOOM},
		{name: "trtllm no KV block", p: Params{Engine: engine.TRTLLM, Model: "Qwen3-32B", MaxNumBatchedTokens: 131072}, want: ErrOOM},
		{name: "sglang performance mode", p: Params{Engine: engine.SGLang, Model: "Qwen3-14B", PerformanceMode: "throughput"}, want: ErrBadParams},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig, ok := KindOf(tc.p.Engine)
			if !ok {
				t.Fatalf("no Kind for %s", tc.p.Engine)
			}
			twin := *orig
			twin.Name = toy
			kinds = append(append([]*Kind(nil), savedKinds...), &twin)
			defaultVersions = maps.Clone(savedVersions)
			defaultVersions[toy] = savedVersions[tc.p.Engine]
			if tc.p.GPU == "" {
				tc.p.GPU = "H100"
			}
			reqs := fixedReqs(300, 700, 96)
			if tc.reqs != nil {
				reqs = tc.reqs
			}
			predict := func(name string) (*Prediction, error) {
				p := tc.p
				p.Engine = name
				p.Route = RouteFor(name, strings.Fields(tc.argv))
				rp, err := p.WithDefaults()
				if err != nil {
					return nil, err
				}
				coef, _ := DefaultCoefficients().Lookup(rp.GPU, tc.p.Engine, rp.Version)
				c := &Coefficients{Entries: map[string]Coef{Key(rp.GPU, name, rp.Version): coef}}
				return PredictWith(p, c, reqs, Load{RequestRate: 30, Seed: 1})
			}
			want, werr := predict(tc.p.Engine)
			got, gerr := predict(toy)
			if (werr == nil) != (gerr == nil) || werr != nil && strings.ReplaceAll(gerr.Error(), toy, tc.p.Engine) != werr.Error() {
				t.Fatalf("%s: err %v; its twin: %v", tc.p.Engine, werr, gerr)
			}
			if !errors.Is(werr, tc.want) || tc.want == nil && werr != nil {
				t.Fatalf("%s: err %v, want %v", tc.p.Engine, werr, tc.want)
			}
			if werr != nil {
				t.Logf("both refused: %v", werr)
				return
			}
			if want.Result.Completed == 0 {
				t.Fatalf("%s completed nothing", tc.p.Engine)
			}
			if !reflect.DeepEqual(got.Records, want.Records) || got.Duration != want.Duration ||
				!reflect.DeepEqual(got.Result, want.Result) || got.KVCapacityTokens != want.KVCapacityTokens {
				t.Errorf("the twin of %s predicts differently: %.3f s, %d tokens of KV, %+v; want %.3f s, %d, %+v",
					tc.p.Engine, got.Duration, got.KVCapacityTokens, got.Result, want.Duration, want.KVCapacityTokens, want.Result)
			}
		})
	}
}

// TestVLLMIntGEMM: vLLM's kernel for a weight-only checkpoint, as its
// quantization methods pick it: Marlin unless the plain method is named
// (AWQ's dequantize-then-GEMM path; GPTQ's ExLlamaV2, priced as Marlin),
// and Machete for a GPTQ-format checkpoint on Hopper.
func TestVLLMIntGEMM(t *testing.T) {
	tests := []struct {
		model, quant, gpu, kernel string
		share                     float64
	}{
		{"Qwen3-8B-AWQ", "", "A100", "Marlin", marlinLargeBatch},
		{"Qwen3-8B-AWQ", "", "H100", "Marlin", marlinLargeBatch},
		{"Qwen3-8B-AWQ", "awq_marlin", "A100", "Marlin", marlinLargeBatch},
		{"Qwen3-8B-AWQ", "awq", "A100", "AWQ (dequantized to 16 bits, then the 16-bit GEMM)", 1},
		{"Qwen3-8B-GPTQ-Int4", "", "A100", "Marlin", marlinLargeBatch},
		{"Qwen3-8B-GPTQ-Int4", "", "H100", "Machete", 1},
		{"Qwen3-8B-GPTQ-Int8", "gptq_marlin", "H200", "Machete", 1},
		{"Qwen3-8B-GPTQ-Int4", "gptq", "A100", "GPTQ ExLlamaV2 (priced as Marlin)", marlinLargeBatch},
		{"Qwen3-14B-FP8", "", "A100", "FP8 Marlin (the GPU has no FP8 tensor cores)", marlinLargeBatch},
	}
	for _, tt := range tests {
		t.Run(tt.model+"/"+tt.quant+"/"+tt.gpu, func(t *testing.T) {
			p, err := Params{Engine: EngineVLLM, Model: tt.model, GPU: tt.gpu, Quantization: tt.quant}.WithDefaults()
			if err != nil {
				t.Fatal(err)
			}
			hw, _ := LookupGPU(tt.gpu)
			share, kernel := vllmIntGEMM(p, hw)
			if kernel != tt.kernel || share != tt.share {
				t.Errorf("kernel %q at %g, want %q at %g", kernel, share, tt.kernel, tt.share)
			}
			// Defaults are idempotent: a second pass keeps the method.
			again, err := p.WithDefaults()
			if err != nil || again.QuantMethod != p.QuantMethod {
				t.Errorf("second WithDefaults: method %q, err %v; want %q", again.QuantMethod, err, p.QuantMethod)
			}
		})
	}
	if p, _ := (Params{Engine: EngineVLLM, Model: "Qwen3-8B", GPU: "A100"}).WithDefaults(); p.QuantMethod != "" {
		t.Errorf("a 16-bit checkpoint got method %q", p.QuantMethod)
	}
}

// TestFP8WithoutFP8Cores: an FP8 checkpoint on a GPU without FP8 tensor
// cores is weight-only. Under vLLM (FP8 Marlin) its GEMMs run at the
// 16-bit peak and share times Marlin's, its weights streaming at 8 bits;
// on the H100 it keeps the FP8 tensor cores and the FP8 share; SGLang,
// whose FP8 kernel choice was not read, keeps the FP8 share on both.
// WeightOnlyKernel names the kernel for sim predict's note.
func TestFP8WithoutFP8Cores(t *testing.T) {
	for _, tc := range []struct {
		engine, gpu string
		marlin      bool
	}{
		{EngineVLLM, "A100", true},
		{EngineVLLM, "H100", false},
		{EngineSGLang, "A100", false},
	} {
		p := Params{Engine: tc.engine, Model: "Qwen3-14B-FP8", GPU: tc.gpu}
		e, err := New(p, nil)
		if err != nil {
			t.Fatalf("%s on %s: %v", tc.engine, tc.gpu, err)
		}
		peak, eff := e.hw.FP8TFLOPS*1e12, e.c.FP8Eff
		if tc.marlin {
			peak, eff = e.hw.BF16TFLOPS*1e12, e.c.GEMMEff*marlinLargeBatch
		}
		if e.peak != peak || math.Abs(e.gemmEff-eff) > 1e-12 {
			t.Errorf("%s on %s: GEMMs at %.3g FLOP/s × %.4f, want %.3g × %.4f", tc.engine, tc.gpu, e.peak, e.gemmEff, peak, eff)
		}
		bf16, _ := New(Params{Engine: tc.engine, Model: "Qwen3-14B", GPU: tc.gpu}, nil)
		if r := e.weightBytes / bf16.weightBytes; r > 0.55 {
			t.Errorf("%s on %s: an FP8 step streams %.2f of the BF16 weights, want about half", tc.engine, tc.gpu, r)
		}
		kernel, _, ok := WeightOnlyKernel(p)
		if ok != tc.marlin || (ok && !strings.Contains(kernel, "FP8 Marlin")) {
			t.Errorf("%s on %s: WeightOnlyKernel = %q, %v; want FP8 Marlin named: %v", tc.engine, tc.gpu, kernel, ok, tc.marlin)
		}
	}
}

// TestMarlinBelowSixteenBitsOnceComputeBound: a 4-bit checkpoint streams a
// quarter of the 16-bit weights, so one request at a time decodes faster
// than BF16; at rate inf the GEMMs are compute-bound and Marlin's share of
// the 16-bit rate makes it slower (GPUStack's quantization study: AWQ and
// GPTQ Marlin 21-22% below BF16 on the A100). The AWQ kernel named by
// --quantization awq runs the 16-bit GEMM there and stays above Marlin.
// SGLang, whose kernel choice was not read, keeps the 16-bit rate.
func TestMarlinBelowSixteenBitsOnceComputeBound(t *testing.T) {
	tps := func(p Params, reqs []dataset.Request, load Load) float64 {
		t.Helper()
		pr, err := Predict(p, reqs, load)
		if err != nil {
			t.Fatal(err)
		}
		return pr.Result.TotalTokenThroughput
	}
	bf16 := Params{Engine: EngineVLLM, Model: "Qwen3-8B", GPU: "A100"}
	awq := Params{Engine: EngineVLLM, Model: "Qwen3-8B-AWQ", GPU: "A100"}
	named := awq
	named.Quantization = "awq"
	one, burst := fixedReqs(8, 200, 200), fixedReqs(600, 300, 200)
	lone, inf := Load{MaxConcurrency: 1}, Load{}
	if a, b := tps(awq, one, lone), tps(bf16, one, lone); a <= b {
		t.Errorf("one at a time: AWQ %.0f tok/s, BF16 %.0f; want AWQ faster (a quarter of the weight bytes)", a, b)
	}
	a, b, n := tps(awq, burst, inf), tps(bf16, burst, inf), tps(named, burst, inf)
	if a >= b {
		t.Errorf("rate inf: AWQ Marlin %.0f tok/s, BF16 %.0f; want Marlin slower", a, b)
	}
	if n <= a {
		t.Errorf("rate inf: AWQ kernel named %.0f tok/s, Marlin %.0f; want the 16-bit GEMM path faster", n, a)
	}
	sg, sgBF16 := awq, bf16
	sg.Engine, sgBF16.Engine = EngineSGLang, EngineSGLang
	if x, y := tps(sg, burst, inf), tps(sgBF16, burst, inf); x < y {
		t.Errorf("SGLang: AWQ %.0f tok/s below BF16 %.0f; no kernel figure was read for SGLang", x, y)
	}
}
