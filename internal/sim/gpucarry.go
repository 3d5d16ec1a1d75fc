package sim

import (
	"math"
	"strings"

	"github.com/perflab/perflab/internal/sim/kernels"
)

// The roofline's efficiencies are fitted as shares of one GPU's datasheet
// peaks, and a share does not carry to another GPU: an H100's tensor cores
// reach a smaller share of their peak than an A100's, and what an engine
// loses beyond its kernels (elementwise work, gaps between kernels) does
// not speed up with the tensor cores. So for a GPU the calibration was not
// fitted on, each fitted share is split, on the GPU it was fitted on, into
// the rate that GPU's kernels reach (its kernel table) and the engine's
// loss on top, as time per unit of work. On the target GPU the kernels run
// at the rate its own table (measured, or transferred) gives, and the loss
// is carried in two parts (lossScale): the part an engine core pays even
// offline (offlineLossShare) is work on the GPU and scales with the two
// GPUs' memory bandwidths; the rest, which only a served run pays (the
// GPU waiting on the scheduler and the API server between kernels and
// steps), is time on the host and carries unscaled. On the GPU the
// calibration was fitted on the split gives back the fitted share exactly.

// kernelShares are the shares of a GPU's datasheet peaks its kernel table
// reaches: a large BF16 and FP8 GEMM, a weight stream (a 16-token GEMM
// over an 8192×8192 weight), and an 8,192-token causal prefill attention.
type kernelShares struct{ gemm, fp8, mem, attn float64 }

func sharesOf(tab *kernels.Table, hw GPU) (kernelShares, bool) {
	const m, n, k = 8192, 8192, 8192
	var s kernelShares
	if t, _ := tab.GEMM(kernels.BF16, m, n, k); t > 0 {
		s.gemm = 2 * m * n * k / t / (hw.BF16TFLOPS * 1e12)
	}
	if t, _ := tab.GEMM(kernels.FP8, m, n, k); t > 0 {
		s.fp8 = 2 * m * n * k / t / (hw.FP8TFLOPS * 1e12)
	}
	if t, _ := tab.GEMM(kernels.BF16, 16, n, k); t > 0 {
		s.mem = float64(n*k*2) / t / (hw.HBMGBps * 1e9)
	}
	if t, _ := tab.PrefillAttention(32, 8, 128, 8192, 0); t > 0 {
		s.attn = 4 * 32 * 128 * 8192 * 4096 / t / (hw.BF16TFLOPS * 1e12)
	}
	ok := s.gemm > 0 && s.fp8 > 0 && s.mem > 0 && s.attn > 0
	return s, ok
}

// carryShare is a fitted share eff of peak pSrc (kernels there reaching
// kSrc of it) carried to a GPU with peak pDst whose kernels reach kDst:
// the kernels' time per unit of work at the target's rate plus the loss,
// scaled by scale (lossScale).
func carryShare(eff, pSrc, kSrc, pDst, kDst, scale float64) float64 {
	if !(eff > 0) || !(kSrc > 0) || !(kDst > 0) {
		return eff
	}
	if eff >= kSrc {
		// Fitted at or above what the collector's kernels reach (the
		// engine's own kernels beat them): no loss to carry, and the
		// margin over the table carries as a ratio.
		return math.Min(1, eff*kDst/kSrc)
	}
	loss := math.Max(0, 1/(pSrc*eff)-1/(pSrc*kSrc))
	t := 1/(pDst*kDst) + loss*scale
	return math.Min(1, 1/(pDst*t))
}

// carriesShares reports whether a's fitted shares are carried to a GPU
// they were not fitted on. A MoE model's are not: the dense shares do not
// describe grouped expert GEMMs, which the kernel tables show bound by the
// kernel at the same rate on the H100 and the H200.
func carriesShares(a Arch) bool { return a.NumExperts == 0 }

// lossScale is what a served calibration's loss per unit of work becomes
// on a GPU whose memory bandwidth is the source's over bw: the share an
// engine core pays offline (offlineLossShare) scales with the bandwidth,
// the rest is host time and does not. Scoring the held-out served A100
// blocks moved this choice (docs/sim-fidelity.md, tenth round): with the
// whole loss scaled they came out 20% slow.
func lossScale(bw float64) float64 {
	return offlineLossShare*bw + 1 - offlineLossShare
}

// coreLossKept is the share of an engine's loss, as New carried it with
// bandwidth ratio bw (0: not carried), that its engine core keeps
// offline: the bandwidth-scaled part of lossScale alone.
func coreLossKept(bw float64) float64 {
	if bw <= 0 {
		return offlineLossShare
	}
	return offlineLossShare * bw / lossScale(bw)
}

// keyGPU is the GPU a coefficient key ("GPU/engine/version", or a GPU's
// pool) was fitted on; an error for a key that names none ("*", "prior").
func keyGPU(key string) (GPU, error) {
	return LookupGPU(strings.SplitN(key, "/", 2)[0])
}

// carryCoef carries c, fitted on the GPU key names (a coefficient key:
// "GPU/engine/version" or a GPU pool), to hw for a model of architecture
// a, and returns the source GPU's memory bandwidth over hw's. It returns c
// unchanged and 0 when a's shares are not carried, the key names no
// catalog GPU or names hw itself, or either GPU has no kernel table to
// split the shares with.
func carryCoef(c Coef, key string, hw GPU, a Arch) (Coef, float64) {
	if !carriesShares(a) {
		return c, 0
	}
	src, err := keyGPU(key)
	if err != nil || src.Name == hw.Name {
		return c, 0
	}
	st, _, err := tableFor(src)
	if err != nil {
		return c, 0
	}
	dt, _, err := tableFor(hw)
	if err != nil {
		return c, 0
	}
	ks, ok1 := sharesOf(st, src)
	kd, ok2 := sharesOf(dt, hw)
	if !ok1 || !ok2 {
		return c, 0
	}
	bw := src.HBMGBps / hw.HBMGBps
	scale := lossScale(bw)
	c.GEMMEff = carryShare(c.GEMMEff, src.BF16TFLOPS, ks.gemm, hw.BF16TFLOPS, kd.gemm, scale)
	if hw.fp8Cores() {
		// Without FP8 tensor cores an FP8 checkpoint runs weight-only
		// (Arch.weightOnly), at the 16-bit share carried above times
		// what the engine's dequantizing kernel keeps of it (vLLM's FP8
		// Marlin); where that kernel was not read, at the FP8 share as
		// borrowed.
		c.FP8Eff = carryShare(c.FP8Eff, src.FP8TFLOPS, ks.fp8, hw.FP8TFLOPS, kd.fp8, scale)
	}
	c.MemEff = carryShare(c.MemEff, src.HBMGBps, ks.mem, hw.HBMGBps, kd.mem, scale)
	c.AttnEff = carryShare(c.AttnEff, src.BF16TFLOPS, ks.attn, hw.BF16TFLOPS, kd.attn, scale)
	// The kernel model's loss is (KernelScale − 1) of the source's table
	// time. Of the target's table time that is the source's time over the
	// target's, taken as the two tables' measured weight-stream rates
	// (target's over source's), carried as the roofline's loss is.
	c.KernelScale = carryKernelScale(c.KernelScale, kd.mem*hw.HBMGBps/(ks.mem*src.HBMGBps)*scale)
	return c, bw
}

// carryKernelScale is a fitted KernelScale s whose loss, s − 1 of the
// table's time, becomes f of it: carried to another GPU or kept offline.
// A scale at or below 1 (the engine beats the table) carries as a ratio,
// as a share fitted above the table's does (carryShare).
func carryKernelScale(s, f float64) float64 {
	if !(s > 1) {
		return s
	}
	return 1 + (s-1)*f
}

// offlineLossShare is the share of a served calibration's loss (the time
// its fitted shares take beyond what the GPU's kernel table reaches) that
// an offline benchmark's engine core pays. Fitted on one source only,
// TensorRT-LLM's 0.17 perf-overview table (88 rows, H100 and H200), over
// the grid 1, 0.5, 0.25, 0 (output tok/s MAPE 40.5, 21.7, 13.8, 24.7%;
// docs/sim-fidelity.md); the other offline tables are held out. A served
// run's fitted shares hold more than its kernels and its API server's own
// costs; an engine core fed in-process at a full batch pays a quarter of
// that. A var so that test can set it.
var offlineLossShare = 0.25

// keepLoss scales, on the engine's own GPU, the loss between each fitted
// share and its kernel table's share by f (under the kernel model, the
// loss KernelScale adds over the table).
func (e *Engine) keepLoss(f float64) {
	if f == 1 {
		return
	}
	if e.ks != nil {
		// The kernel model: the tables set the kernels' rates, and its
		// loss is the scale over them.
		e.c.KernelScale = carryKernelScale(e.c.KernelScale, f)
		return
	}
	tab, _, err := tableFor(e.hw)
	if err != nil {
		return
	}
	k, ok := sharesOf(tab, e.hw)
	if !ok {
		return
	}
	// The carry to the same GPU with the loss scaled by f.
	scale := func(eff, kern float64) float64 { return carryShare(eff, 1, kern, 1, kern, f) }
	e.c.GEMMEff = scale(e.c.GEMMEff, k.gemm)
	if e.hw.fp8Cores() {
		e.c.FP8Eff = scale(e.c.FP8Eff, k.fp8)
	}
	e.c.MemEff = scale(e.c.MemEff, k.mem)
	e.c.AttnEff = scale(e.c.AttnEff, k.attn)
	e.setupRoofline()
}
