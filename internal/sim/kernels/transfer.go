package kernels

import (
	"fmt"
	"math"
)

// Spec is what the transfer model needs of a GPU: its datasheet peaks and
// its number of streaming multiprocessors.
type Spec struct {
	Name       string
	BF16TFLOPS float64
	FP8TFLOPS  float64
	HBMGBps    float64
	SMs        int
}

// tile is the output tile a Hopper-class GEMM kernel gives one SM; with
// fewer tiles than SMs, or a last partial wave, part of the chip idles.
const tile = 128

// waveEff is the share of the SMs a GEMM's tiles keep busy over its waves.
func waveEff(m, n, sms int) float64 {
	if sms <= 0 {
		return 1
	}
	tiles := ((m + tile - 1) / tile) * ((n + tile - 1) / tile)
	waves := (tiles + sms - 1) / sms
	return float64(tiles) / float64(waves*sms)
}

// roof is a shape's roofline time on a GPU's datasheet peaks, the compute
// part stretched by the idle SMs of its last wave.
func (s Spec) roof(flops, bytes float64, fp8 bool, wave float64) float64 {
	peak := s.BF16TFLOPS
	if fp8 && s.FP8TFLOPS > 0 {
		peak = s.FP8TFLOPS
	}
	return math.Max(flops/(peak*1e6)/wave, bytes/(s.HBMGBps*1e3))
}

// Transfer carries a table measured on src (whose datasheet is srcSpec) to
// dst. Each kernel's time splits into its roofline time on src's datasheet
// (wave quantization included), which scales to dst's roofline for the same
// shape, and the rest (launch floor, pipeline bubbles, a kernel that never
// nears the roof), which stays as measured. Measured on the H100 and H200,
// this split carried each table to the other better than scaling the whole
// time by the roofline ratio (docs/sim-fidelity.md). The result says in its
// provenance that it was not measured.
func Transfer(src *Table, srcSpec, dst Spec) (*Table, error) {
	if srcSpec.HBMGBps <= 0 || srcSpec.BF16TFLOPS <= 0 || dst.HBMGBps <= 0 || dst.BF16TFLOPS <= 0 {
		return nil, fmt.Errorf("kernels: transfer %s to %s: a datasheet peak is missing", srcSpec.Name, dst.Name)
	}
	out := &Table{Format: Format, Provenance: src.Provenance, Truncated: src.Truncated}
	out.Provenance.GPU = dst.Name
	out.Provenance.SMCount = dst.SMs
	out.Provenance.Collector = fmt.Sprintf("transferred from %s (%s) by kernels.Transfer", src.Provenance.GPU, src.Provenance.Date)
	out.Memory = Memory{
		CopyGBps:   src.Memory.CopyGBps * dst.HBMGBps / srcSpec.HBMGBps,
		ReadGBps:   src.Memory.ReadGBps * dst.HBMGBps / srcSpec.HBMGBps,
		BF16TFLOPS: src.Memory.BF16TFLOPS * dst.BF16TFLOPS / srcSpec.BF16TFLOPS,
	}
	scale := func(us, flops, bytes float64, fp8 bool, wsrc, wdst float64) float64 {
		r := srcSpec.roof(flops, bytes, fp8, wsrc)
		part := math.Min(r, us)
		return (us - part) + part*dst.roof(flops, bytes, fp8, wdst)/r
	}
	for _, r := range src.GEMMs {
		elt := 2.0
		if r.DType == FP8 {
			elt = 1
		}
		m, n, k := float64(r.M), float64(r.N), float64(r.K)
		flops := 2 * m * n * k
		bytes := n*k*elt + m*k*elt + m*n*2
		r.US = scale(r.US, flops, bytes, r.DType == FP8,
			waveEff(r.M, r.N, srcSpec.SMs), waveEff(r.M, r.N, dst.SMs))
		out.GEMMs = append(out.GEMMs, r)
	}
	for _, r := range src.Decodes {
		r.US = scale(r.US, 0, kvBytes(r.KVHeads, r.HeadDim, r.Batch, r.Context), false, 1, 1)
		out.Decodes = append(out.Decodes, r)
	}
	for _, r := range src.Prefills {
		r.US = scale(r.US, prefillFlops(r.Heads, r.HeadDim, r.Seq, 0), 0, false, 1, 1)
		out.Prefills = append(out.Prefills, r)
	}
	for _, r := range src.MoEs {
		rows := float64(r.Rows)
		flops := 2 * rows * float64(r.N) * float64(r.K)
		bytes := float64(r.Active)*float64(r.N*r.K)*2 + rows*float64(r.N+r.K)*2
		r.US = scale(r.US, flops, bytes, false, 1, 1)
		out.MoEs = append(out.MoEs, r)
	}
	if err := out.index(); err != nil {
		return nil, fmt.Errorf("kernels: transfer %s to %s: %w", srcSpec.Name, dst.Name, err)
	}
	return out, nil
}
