package sim

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/dataset"
)

func TestCarryShare(t *testing.T) {
	for _, tc := range []struct {
		name                               string
		eff, pSrc, kSrc, pDst, kDst, scale float64
		want                               float64
	}{
		// On the GPU it was fitted on, a share comes back unchanged,
		// below the kernels' share and above it.
		{"same GPU, below the kernels", 0.36, 989, 0.68, 989, 0.68, 1, 0.36},
		{"same GPU, above the kernels", 0.99, 989, 0.68, 989, 0.68, 1, 0.99},
		// Kernels at the fitted share: nothing lost, the target's
		// kernels' share is the answer.
		{"no loss", 0.68, 989, 0.68, 312, 0.88, 1.64, 0.88},
		// 1/(989·0.36) − 1/(989·0.68) of loss per unit, ×1.64, on top of
		// 1/(312·0.88).
		{"loss carried as time", 0.36, 989, 0.68, 312, 0.88, 1.64,
			1 / (312 * (1/(312*0.88) + 1.64*(1/(989*0.36)-1/(989*0.68))))},
		{"above the kernels, as a ratio, capped at 1", 0.99, 989, 0.68, 312, 0.88, 1.64, 1},
		{"nothing to split with", 0.36, 989, 0, 312, 0.88, 1.64, 0.36},
	} {
		if got := carryShare(tc.eff, tc.pSrc, tc.kSrc, tc.pDst, tc.kDst, tc.scale); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: carryShare = %.6f, want %.6f", tc.name, got, tc.want)
		}
	}
}

func TestCarryCoef(t *testing.T) {
	c, from := DefaultCoefficients().Lookup("A100", "vllm", "0.11.0")
	if from != "H100/vllm/0.11.0" {
		t.Fatalf("A100 vLLM 0.11.0 borrows %q, want the H100's fit (the test assumes one)", from)
	}
	dense, err := (Params{Model: "Qwen3-14B"}).arch()
	if err != nil {
		t.Fatal(err)
	}
	h100, _ := LookupGPU("H100")
	if got, bw := carryCoef(c, from, h100, dense); bw != 0 || got.GEMMEff != c.GEMMEff || got.MemEff != c.MemEff {
		t.Errorf("carried to the GPU it was fitted on: bandwidth ratio %v, %+v", bw, got)
	}
	a100, _ := LookupGPU("A100")
	got, bw := carryCoef(c, from, a100, dense)
	if want := h100.HBMGBps / a100.HBMGBps; bw != want {
		t.Fatalf("carried to the A100 with bandwidth ratio %v, want %v", bw, want)
	}
	// The A100's tensor cores reach a larger share of a smaller peak, and
	// the loss does not grow with the peak: every share rises, but no
	// carried rate beats the H100's.
	for _, p := range []struct {
		name          string
		before, after float64
		peakH, peakA  float64
	}{
		{"gemm_eff", c.GEMMEff, got.GEMMEff, h100.BF16TFLOPS, a100.BF16TFLOPS},
		{"mem_eff", c.MemEff, got.MemEff, h100.HBMGBps, a100.HBMGBps},
		{"attn_eff", c.AttnEff, got.AttnEff, h100.BF16TFLOPS, a100.BF16TFLOPS},
	} {
		if !(p.after > p.before) || p.after > 1 {
			t.Errorf("%s: %.3f on the H100, %.3f carried to the A100: want it higher and at most 1", p.name, p.before, p.after)
		}
		if p.after*p.peakA >= p.before*p.peakH {
			t.Errorf("%s: the A100 carried (%.0f) outruns the H100 fitted (%.0f)", p.name, p.after*p.peakA, p.before*p.peakH)
		}
	}
	if got.FP8Eff != c.FP8Eff {
		t.Errorf("fp8_eff carried to a GPU without FP8 tensor cores: %.3f -> %.3f", c.FP8Eff, got.FP8Eff)
	}
	h200, _ := LookupGPU("H200")
	if g, _ := carryCoef(c, from, h200, dense); g.FP8Eff == c.FP8Eff {
		t.Error("fp8_eff not carried to the H200, which has FP8 tensor cores")
	}
	if got.StepMs != c.StepMs || got.SeqUs != c.SeqUs || got.FrontendMs != c.FrontendMs {
		t.Errorf("software costs changed in the carry: %+v -> %+v", c, got)
	}
	if _, bw := carryCoef(c, "*", a100, dense); bw != 0 {
		t.Error("the generic prior names no GPU, and was carried")
	}
}

// TestEngineCarriesDenseOnly: New carries a borrowed calibration's shares
// to the GPU it runs on for a dense model, and not for a MoE model, whose
// grouped expert GEMMs the dense shares do not describe.
func TestEngineCarriesDenseOnly(t *testing.T) {
	for _, tc := range []struct {
		model string
		tp    int
		carry bool
	}{
		{"Qwen3-14B", 1, true},
		{"Qwen3-235B-A22B", 8, false},
	} {
		p := Params{Engine: "vllm", Version: "0.11.0", Model: tc.model, GPU: "A100", TP: tc.tp}
		e, err := New(p, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.model, err)
		}
		c, _ := DefaultCoefficients().Lookup("A100", "vllm", "0.11.0")
		if carried := e.c.GEMMEff != c.GEMMEff; carried != tc.carry {
			t.Errorf("%s on the A100: gemm_eff %.3f (borrowed %.3f): carried %v, want %v", tc.model, e.c.GEMMEff, c.GEMMEff, carried, tc.carry)
		}
	}
}

// TestKeepLoss: an offline engine core keeps offlineLossShare of the loss
// between each fitted share and the GPU's kernel table's share, as time;
// 1 keeps the served shares and 0 leaves the table's.
func TestKeepLoss(t *testing.T) {
	p := Params{Engine: "trtllm", Version: "1.2.0rc1", Model: "Qwen3-14B", GPU: "H100"}
	served, err := New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	tab, _, err := tableFor(served.hw)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := sharesOf(tab, served.hw)
	for _, f := range []float64{1, 0.25, 0} {
		e, _ := New(p, nil)
		e.keepLoss(f)
		for _, c := range []struct {
			name              string
			fitted, got, kern float64
		}{
			{"gemm_eff", served.c.GEMMEff, e.c.GEMMEff, k.gemm},
			{"mem_eff", served.c.MemEff, e.c.MemEff, k.mem},
			{"attn_eff", served.c.AttnEff, e.c.AttnEff, k.attn},
		} {
			want := 1 / (1/c.kern + f*(1/c.fitted-1/c.kern))
			if c.fitted >= c.kern {
				want = c.fitted
			}
			if math.Abs(c.got-want) > 1e-12 {
				t.Errorf("keep %.2f of the loss: %s %.4f, want %.4f (fitted %.4f, table %.4f)", f, c.name, c.got, want, c.fitted, c.kern)
			}
		}
		if f == 0 && e.gemmEff != e.c.GEMMEff {
			t.Errorf("the roofline's GEMM share %.4f was not reset to %.4f", e.gemmEff, e.c.GEMMEff)
		}
	}
}

// TestCarriedLossSplits: carried to another GPU, a served engine's loss
// beyond the kernels is the engine core's part (offlineLossShare), scaled
// by the GPUs' memory bandwidths, plus the rest as time; an offline engine
// core on that GPU keeps the first part alone. Both are checked against
// carryShare's arithmetic from the fitted shares, and the served A100
// against the carry with the whole loss scaled, which it must beat.
func TestCarriedLossSplits(t *testing.T) {
	p := Params{Engine: "trtllm", Version: "1.2.0rc1", Model: "Qwen3-14B", GPU: "A100"}
	fitted, from := DefaultCoefficients().Lookup("A100", "trtllm", "1.2.0rc1")
	src, err := LookupGPU(strings.SplitN(from, "/", 2)[0])
	if err != nil || src.Name != "H100" {
		t.Fatalf("A100 TensorRT-LLM borrows %q, want an H100 fit (the test assumes one)", from)
	}
	dst := mustGPU(t, "A100")
	st, _, err := tableFor(src)
	if err != nil {
		t.Fatal(err)
	}
	dt, _, err := tableFor(dst)
	if err != nil {
		t.Fatal(err)
	}
	ks, _ := sharesOf(st, src)
	kd, _ := sharesOf(dt, dst)
	bw := src.HBMGBps / dst.HBMGBps
	s := offlineLossShare
	served, err := New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	offline, _ := New(p, nil)
	offline.withoutAPIServer()
	for _, c := range []struct {
		name                  string
		fitted, pSrc, pDst    float64
		kSrc, kDst            float64
		gotServed, gotOffline float64
	}{
		{"mem_eff", fitted.MemEff, src.HBMGBps, dst.HBMGBps, ks.mem, kd.mem, served.c.MemEff, offline.c.MemEff},
		{"gemm_eff", fitted.GEMMEff, src.BF16TFLOPS, dst.BF16TFLOPS, ks.gemm, kd.gemm, served.c.GEMMEff, offline.c.GEMMEff},
		{"attn_eff", fitted.AttnEff, src.BF16TFLOPS, dst.BF16TFLOPS, ks.attn, kd.attn, served.c.AttnEff, offline.c.AttnEff},
	} {
		if c.fitted >= c.kSrc {
			t.Fatalf("%s fitted %.3f at or above the table's %.3f: the test needs a loss to split", c.name, c.fitted, c.kSrc)
		}
		want := carryShare(c.fitted, c.pSrc, c.kSrc, c.pDst, c.kDst, s*bw+1-s)
		if math.Abs(c.gotServed-want) > 1e-9 {
			t.Errorf("served %s on the A100 %.5f, want %.5f", c.name, c.gotServed, want)
		}
		if whole := carryShare(c.fitted, c.pSrc, c.kSrc, c.pDst, c.kDst, bw); !(c.gotServed > whole) {
			t.Errorf("served %s on the A100 %.5f, not above %.5f with the whole loss scaled by bandwidth", c.name, c.gotServed, whole)
		}
		want = carryShare(c.fitted, c.pSrc, c.kSrc, c.pDst, c.kDst, s*bw)
		if math.Abs(c.gotOffline-want) > 1e-9 {
			t.Errorf("offline %s on the A100 %.5f, want %.5f (the engine core's part of the loss, scaled by bandwidth)", c.name, c.gotOffline, want)
		}
	}
}

// TestH100PCIe: the PCIe card is its own GPU, found by the spellings
// users write, with no calibration of its own: a prediction on it carries
// the H100's shares through the kernel tables (its table transferred from
// the SXM's), says so, and decodes slower, its HBM2e streaming the same
// weights at 61% of the SXM's bandwidth.
func TestH100PCIe(t *testing.T) {
	for _, name := range []string{"H100-PCIe", "h100 pcie", "NVIDIA H100 PCIe", "h100-pcie-80gb"} {
		g, err := LookupGPU(name)
		if err != nil || g.Name != "H100-PCIe" {
			t.Errorf("LookupGPU(%q) = %s, %v; want H100-PCIe", name, g.Name, err)
		}
	}
	for _, name := range []string{"H100", "H100 SXM5", "NVIDIA H100 80GB HBM3"} {
		if g, _ := LookupGPU(name); g.Name != "H100" {
			t.Errorf("LookupGPU(%q) = %s, want H100 (the SXM)", name, g.Name)
		}
	}
	if _, from, err := tableFor(mustGPU(t, "H100-PCIe")); err != nil || from != "H100" {
		t.Fatalf("H100-PCIe kernel table from %q (%v), want transferred from the H100's", from, err)
	}
	reqs := make([]dataset.Request, 16)
	for i := range reqs {
		reqs[i] = dataset.Request{PromptLen: 1024, OutputLen: 256}
	}
	tpot := map[string]float64{}
	for _, gpu := range []string{"H100", "H100-PCIe"} {
		p := Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen3-8B", GPU: gpu, MaxNumSeqs: 4}
		pr, err := PredictWith(p, DefaultCoefficients(), reqs, Load{})
		if err != nil {
			t.Fatal(err)
		}
		tpot[gpu] = pr.Result.MeanTPOTMs
		s, err := PredictSpan(p, DefaultCoefficients(), nil, reqs, Load{})
		if err != nil {
			t.Fatal(err)
		}
		carried := slices.ContainsFunc(s.Unseen, func(u string) bool { return strings.Contains(u, "no calibration was fitted on H100-PCIe") })
		if carried != (gpu == "H100-PCIe") {
			t.Errorf("%s: notes %q; want the carry named on the PCIe card alone", gpu, s.Unseen)
		}
	}
	if r := tpot["H100-PCIe"] / tpot["H100"]; r < 1.2 || r > 1/0.61 {
		t.Errorf("TPOT %.2f ms on the PCIe card, %.2f on the SXM (×%.2f): want slower, by at most the bandwidths' ratio", tpot["H100-PCIe"], tpot["H100"], r)
	}
}

func mustGPU(t *testing.T, name string) GPU {
	t.Helper()
	g, err := LookupGPU(name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGPUVariants: the other cards of a family are GPUs of their own,
// found by the names users and torch write, with no calibration of their
// own: each carries the H100's shares through the kernel tables, says so,
// and decodes at its own memory bandwidth against its sibling's (within
// the bandwidths' ratio: part of the carried loss is host time).
func TestGPUVariants(t *testing.T) {
	for _, tc := range []struct {
		gpu, sibling string
		spellings    []string
		maxModelLen  int
	}{
		{"A100-40GB", "A100", []string{"A100-40GB", "a100 40gb", "NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb"}, 0},
		{"A100-PCIe", "A100", []string{"A100-PCIe", "a100 pcie", "NVIDIA A100 80GB PCIe", "a100-pcie-80gb"}, 0},
		{"H100-NVL", "H100", []string{"H100-NVL", "h100 nvl", "NVIDIA H100 NVL"}, 0},
		// 22.5 GiB leave an 8B model too little cache for its 40,960
		// tokens: vLLM refuses to start (TestGPUVariantMemory).
		{"L4", "L40S", []string{"L4", "nvidia l4"}, 8192},
	} {
		for _, name := range tc.spellings {
			if g, err := LookupGPU(name); err != nil || g.Name != tc.gpu {
				t.Errorf("LookupGPU(%q) = %s, %v; want %s", name, g.Name, err, tc.gpu)
			}
		}
		reqs := make([]dataset.Request, 16)
		for i := range reqs {
			reqs[i] = dataset.Request{PromptLen: 1024, OutputLen: 256}
		}
		tpot := map[string]float64{}
		for _, gpu := range []string{tc.sibling, tc.gpu} {
			p := Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen3-8B", GPU: gpu, MaxNumSeqs: 4, MaxModelLen: tc.maxModelLen}
			pr, err := PredictWith(p, DefaultCoefficients(), reqs, Load{})
			if err != nil {
				t.Fatalf("%s: %v", gpu, err)
			}
			tpot[gpu] = pr.Result.MeanTPOTMs
			s, err := PredictSpan(p, DefaultCoefficients(), nil, reqs, Load{})
			if err != nil {
				t.Fatal(err)
			}
			if gpu == tc.gpu && !slices.ContainsFunc(s.Unseen, func(u string) bool { return strings.Contains(u, "no calibration was fitted on "+tc.gpu) }) {
				t.Errorf("%s: notes %q; want the carry named", gpu, s.Unseen)
			}
		}
		a, b := mustGPU(t, tc.gpu), mustGPU(t, tc.sibling)
		r, bw := tpot[tc.gpu]/tpot[tc.sibling], b.HBMGBps/a.HBMGBps
		lo, hi := min(1, bw), max(1, bw)
		if !(r > lo && r < hi) && math.Abs(r-bw) > 1e-3 {
			t.Errorf("%s: TPOT %.2f ms, %.2f on the %s (×%.3f): want between 1 and the bandwidths' ratio %.3f", tc.gpu, tpot[tc.gpu], tpot[tc.sibling], tc.sibling, r, bw)
		}
		t.Logf("%s: TPOT ×%.3f against the %s (bandwidth ×%.3f)", tc.gpu, r, tc.sibling, bw)
	}
}

// TestGPUVariantMemory: a card's memory is its own. A 32B model in BF16
// (61 GiB of weights) fits one 80 GB A100 and not one 40 GB card, and
// the refusal is the engine's out-of-memory error.
func TestGPUVariantMemory(t *testing.T) {
	reqs := []dataset.Request{{PromptLen: 128, OutputLen: 16}}
	for _, tc := range []struct {
		gpu, model string
		oom        bool
	}{
		{"A100", "Qwen3-32B", false},
		{"A100-40GB", "Qwen3-32B", true},
		{"A100-40GB", "Qwen3-14B", false},
		{"L4", "Qwen3-8B", true},
	} {
		p := Params{Engine: EngineVLLM, Version: "0.11.0", Model: tc.model, GPU: tc.gpu}
		_, err := PredictWith(p, DefaultCoefficients(), reqs, Load{})
		if got := errors.Is(err, ErrOOM); got != tc.oom {
			t.Errorf("%s on one %s: err %v; want out of memory %v", tc.model, tc.gpu, err, tc.oom)
		}
	}
}

// TestKernelScaleCarriesItsLoss: under the kernel model the loss a fitted
// KernelScale adds over the table (s − 1 of its time) is carried as the
// roofline's loss is: offline the engine core keeps offlineLossShare of
// it, and on a GPU the calibration was not fitted on it is the source's
// time, so a slower GPU's longer kernels pay a smaller share of it. A
// scale at or below 1 carries as a ratio.
func TestKernelScaleCarriesItsLoss(t *testing.T) {
	for _, c := range []struct{ s, f, want float64 }{
		{2, 0.25, 1.25}, {1.5, 1, 1.5}, {3, 0, 1}, {0.86, 0.25, 0.86}, {1, 0.5, 1}, {0, 0.5, 0},
	} {
		if got := carryKernelScale(c.s, c.f); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("carryKernelScale(%g, %g) = %g, want %g", c.s, c.f, got, c.want)
		}
	}
	kern := &Coefficients{StepModel: StepKernels, Entries: map[string]Coef{
		"H100/trtllm/1.2.0rc1": {GEMMEff: 0.5, FP8Eff: 0.5, MemEff: 0.5, AttnEff: 0.5, StepMs: 4, SeqUs: 20, KernelScale: 2},
	}}
	p := Params{Engine: "trtllm", Version: "1.2.0rc1", Model: "Qwen3-14B", GPU: "H100"}
	served, err := New(p, kern)
	if err != nil {
		t.Fatal(err)
	}
	if served.c.KernelScale != 2 || served.carryBW != 0 {
		t.Fatalf("on its own GPU: scale %g, carried %g; want 2, not carried", served.c.KernelScale, served.carryBW)
	}
	served.withoutAPIServer()
	if want := 1 + offlineLossShare; math.Abs(served.c.KernelScale-want) > 1e-12 {
		t.Errorf("offline on the H100: scale %g, want %g", served.c.KernelScale, want)
	}
	p.GPU = "A100"
	a100, err := New(p, kern)
	if err != nil {
		t.Fatal(err)
	}
	h100, _ := LookupGPU("H100")
	st, _, _ := tableFor(h100)
	dt, _, _ := tableFor(a100.hw)
	ks, _ := sharesOf(st, h100)
	kd, _ := sharesOf(dt, a100.hw)
	bw := h100.HBMGBps / a100.hw.HBMGBps
	rate := kd.mem * a100.hw.HBMGBps / (ks.mem * h100.HBMGBps)
	want := 1 + rate*lossScale(bw)
	if math.Abs(a100.c.KernelScale-want) > 1e-12 || !(a100.c.KernelScale < 2) {
		t.Errorf("carried to the A100: scale %g, want %g (below the H100's 2)", a100.c.KernelScale, want)
	}
	a100.withoutAPIServer()
	if want := 1 + (want-1)*coreLossKept(bw); math.Abs(a100.c.KernelScale-want) > 1e-12 {
		t.Errorf("offline on the A100: scale %g, want %g", a100.c.KernelScale, want)
	}
}
