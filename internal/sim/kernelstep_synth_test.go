package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/perflab/perflab/internal/sim/kernels"
)

// Synthetic kernel times: known formulas the test table is built from and
// the expected step times are computed from, independently of the code
// under test.
func synGEMM(m, n, k int) float64 { return 3 + 2*float64(m)*float64(n)*float64(k)/4e8 } // µs
func synDecode(kv, dim, batch, ctx int) float64 {
	return 5 + float64(batch)*float64(ctx)*float64(kv*dim)/2e5
}
func synPrefill(heads, seq int) float64 { return 4 + float64(heads)*float64(seq)*float64(seq)/5e6 }

// synTable is a kernel table with every shape Qwen3-14B needs at TP 1 and
// 2, timed by the formulas above at the collector's M, batch, context and
// sequence points.
func synTable(t *testing.T) *kernels.Table {
	t.Helper()
	tab := kernels.Table{Format: kernels.Format, Provenance: kernels.Provenance{GPU: "synthetic"},
		Memory: kernels.Memory{ReadGBps: 3000, CopyGBps: 2500, BF16TFLOPS: 700}}
	ms := []int{1, 4, 16, 64, 256, 1024, 2048, 4096, 8192}
	const h, d, inter, vocab = 5120, 128, 17408, 151936
	for _, tp := range []int{1, 2} {
		hq, hkv := 40/tp, 8/tp
		for _, nk := range [][2]int{{(hq + 2*hkv) * d, h}, {h, hq * d}, {2 * inter / tp, h}, {h, inter / tp}, {vocab / tp, h}} {
			for _, m := range ms {
				tab.GEMMs = append(tab.GEMMs, kernels.GEMMRow{DType: kernels.BF16, Kind: "syn", M: m, N: nk[0], K: nk[1], US: synGEMM(m, nk[0], nk[1])})
			}
		}
		for _, b := range []int{1, 4, 16, 64, 256} {
			for _, c := range []int{256, 1024, 4096, 16384} {
				tab.Decodes = append(tab.Decodes, kernels.DecodeRow{Heads: hq, KVHeads: hkv, HeadDim: d, Batch: b, Context: c, US: synDecode(hkv, d, b, c)})
			}
		}
		for _, s := range []int{128, 512, 2048, 8192} {
			tab.Prefills = append(tab.Prefills, kernels.PrefillRow{Heads: hq, KVHeads: hkv, HeadDim: d, Seq: s, US: synPrefill(hq, s)})
		}
	}
	b, err := json.Marshal(tab)
	if err != nil {
		t.Fatal(err)
	}
	out, err := kernels.Load(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// synEngine is Qwen3-14B on vLLM with every overhead zero, switched to the
// kernel step model on the synthetic table: a step's time is then its GPU
// time alone.
func synEngine(t *testing.T, tp int) *Engine {
	t.Helper()
	c := &Coefficients{Entries: map[string]Coef{"*": {GEMMEff: 0.5, FP8Eff: 0.5, MemEff: 0.5, AttnEff: 0.5}}}
	e, err := New(Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen3-14B", GPU: "H100", TP: tp}, c)
	if err != nil {
		t.Fatal(err)
	}
	e.useKernelTable(synTable(t), "")
	e.setupRoofline()
	return e
}

// TestKernelStepOnSyntheticTable: a table built from known formulas gives
// the formulas' step times at measured shapes: 40 layers of QKV, O,
// gate-up and down GEMMs, the LM head for the sampled tokens, decode
// attention at the batch's context, causal prefill attention, and at TP 2
// the two ring all-reduces per layer.
func TestKernelStepOnSyntheticTable(t *testing.T) {
	const layers, h, d, inter, vocab = 40, 5120, 128, 17408, 151936
	dense := func(tp, m, logits int) float64 {
		hq, hkv := 40/tp, 8/tp
		us := layers * (synGEMM(m, (hq+2*hkv)*d, h) + synGEMM(m, h, hq*d) + synGEMM(m, 2*inter/tp, h) + synGEMM(m, h, inter/tp))
		if logits > 0 {
			us += synGEMM(logits, vocab/tp, h)
		}
		return us / 1e6
	}
	ar := func(tp, tokens int) float64 {
		if tp == 1 {
			return 0
		}
		// 2 calls a layer; each 8 µs plus 2(tp-1)/tp of the BF16 hidden
		// states over 80% of one direction of 900 GB/s NVLink.
		per := 8e-6 + 2*float64(tp-1)/float64(tp)*float64(tokens)*h*2/(0.8*450e9)
		return 2 * layers * per
	}
	for _, tp := range []int{1, 2} {
		hq, hkv := 40/tp, 8/tp
		e := synEngine(t, tp)
		// 64 decodes, each one token after 4,095 in the cache.
		var dec []work
		for i := 0; i < 64; i++ {
			dec = append(dec, work{s: &seq{computed: 4095, prompt: 4000, target: 4000, prefillDone: true}, n: 1, decode: true})
		}
		want := dense(tp, 64, 64) + layers*synDecode(hkv, d, 64, 4096)/1e6 + ar(tp, 64)
		if got := e.stepTime(dec); math.Abs(got/want-1) > 1e-9 {
			t.Errorf("tp%d: 64 decodes at 4,096 tokens: step %.6g s, want %.6g s", tp, got, want)
		}
		// One whole 2,048-token prompt: its GEMMs, one logit, its causal
		// attention.
		pre := []work{{s: &seq{prompt: 2048, target: 2048}, n: 2048}}
		want = dense(tp, 2048, 1) + layers*synPrefill(hq, 2048)/1e6 + ar(tp, 2048)
		if got := e.stepTime(pre); math.Abs(got/want-1) > 1e-9 {
			t.Errorf("tp%d: a 2,048-token prefill: step %.6g s, want %.6g s", tp, got, want)
		}
	}
}

// TestKernelStepOverheadsOnTop: the fitted overheads add to the table's
// GPU time, each once: per step, per sequence and per prompt token.
func TestKernelStepOverheadsOnTop(t *testing.T) {
	e := synEngine(t, 1)
	pre := []work{{s: &seq{prompt: 2048, target: 2048}, n: 2048}}
	gpu := e.stepTime(pre)
	f := false
	e.p.AsyncScheduling = &f
	e.c.StepMs, e.c.SeqUs, e.c.PrefillUs, e.c.EagerMs = 2, 30, 0.5, 0
	want := gpu + 2e-3 + 30e-6 + 0.5e-6*2048
	if got := e.stepTime(pre); math.Abs(got/want-1) > 1e-9 {
		t.Errorf("step with overheads %.6g s, want %.6g s", got, want)
	}
}

// TestKernelScaleScalesTheTable: kernel_scale multiplies what the table
// prices of a step, and only that: the host's overheads stay as fitted, so
// a small batch pays the scale on its small kernel time, not on a large
// batch's fixed cost.
func TestKernelScaleScalesTheTable(t *testing.T) {
	e := synEngine(t, 1)
	f := false
	e.p.AsyncScheduling = &f
	var dec []work
	for i := 0; i < 4; i++ {
		dec = append(dec, work{s: &seq{computed: 1023, prompt: 1000, target: 1000, prefillDone: true}, n: 1, decode: true})
	}
	gpu := e.stepTime(dec)
	e.c.StepMs, e.c.EagerMs = 2, 0
	for _, scale := range []float64{0, 1, 1.9, 0.8} {
		e.c.KernelScale = scale
		want := scale*gpu + 2e-3
		if scale == 0 {
			want = gpu + 2e-3 // unset: the table as measured
		}
		if got := e.stepTime(dec); math.Abs(got/want-1) > 1e-9 {
			t.Errorf("kernel_scale %g: step %.6g s, want %.6g s", scale, got, want)
		}
	}
}

// TestKernelStepModelSwitch: the step model is the calibration's; an
// unknown one is refused, the kernel one times steps from the GPU's
// table, and a GPU with no table borrows the nearest measured one through
// kernels.Transfer.
func TestKernelStepModelSwitch(t *testing.T) {
	if _, err := ParseCoefficients([]byte(`{"step_model": "tables", "entries": {}}`)); !errors.Is(err, ErrStepModel) {
		t.Errorf("step_model tables: err = %v, want ErrStepModel", err)
	}
	c := DefaultCoefficients()
	if c.StepModel != StepRoofline {
		t.Skip("the embedded calibration is on the kernel model")
	}
	k := &Coefficients{StepModel: StepKernels, Entries: c.Entries}
	p := Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen3-14B", GPU: "H100"}
	e, err := New(p, k)
	if err != nil {
		t.Fatal(err)
	}
	if e.ks == nil || !e.ks.timed || e.ks.from != "" {
		t.Fatalf("H100 on the kernel model: %+v", e.ks)
	}
	if r, _ := New(p, c); r.ks != nil {
		t.Error("the roofline calibration switched to the kernel model")
	}
	p.GPU = "A100"
	a, err := New(p, k)
	if err != nil {
		t.Fatal(err)
	}
	if a.ks == nil || a.ks.from != "H100" {
		t.Fatalf("A100: kernel table from %q, want a transfer from H100", a.ks.from)
	}
	// The A100 streams weights at 2.0 TB/s against the H100's 3.35: a
	// one-token step takes longer by about that ratio.
	one := []work{{s: &seq{computed: 100, prompt: 100, target: 100, prefillDone: true}, n: 1, decode: true}}
	if r := a.ks.gpuTime(a, one, 1, 1, 1, 101, 1) / e.ks.gpuTime(e, one, 1, 1, 1, 101, 1); r < 1.4 || r > 1.8 {
		t.Errorf("A100 / H100 one-token step %.2f, want about 3350/2039 = 1.64", r)
	}
	// Weight-only INT4 is not in the tables: the roofline on the table's
	// own ceilings prices it.
	p.GPU, p.Model = "H100", "Qwen3-14B-AWQ"
	w, err := New(p, k)
	if err != nil {
		t.Fatal(err)
	}
	if w.ks.timed || math.Abs(w.c.MemEff-3006.4/3350) > 0.01 {
		t.Errorf("AWQ: timed %v, mem_eff %.3f; want the roofline at the measured 3,006 GB/s", w.ks.timed, w.c.MemEff)
	}
}

// TestKernelFitParams: under the kernel model the fit leaves the kernel
// efficiencies to the table and fits the overheads, a per-prompt-token
// cost and the engine's GPU time over the table's among them; the
// roofline's fit is unchanged.
func TestKernelFitParams(t *testing.T) {
	cs := []Case{{ID: "a", Params: Params{Engine: EngineVLLM, Version: "0.17.1", Model: "Qwen3.5-9B", GPU: "H100"}}}
	names := func(m StepModel) map[string]bool {
		out := map[string]bool{}
		for _, p := range groupParamsFor(cs, m) {
			out[p.name] = true
		}
		return out
	}
	k, r := names(StepKernels), names(StepRoofline)
	for _, n := range []string{"gemm_eff", "mem_eff", "attn_eff"} {
		if k[n] || !r[n] {
			t.Errorf("%s: fitted under kernels %v, roofline %v; want only the roofline", n, k[n], r[n])
		}
	}
	if !k["prefill_us"] || r["prefill_us"] || !k["kernel_scale"] || r["kernel_scale"] || !k["scan_eff"] || !k["step_ms"] {
		t.Errorf("kernel fit params %v", k)
	}
}
