package sim

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/perflab/perflab/internal/sim/kernels"
)

// StepModel names how the simulator prices a step's GPU work.
type StepModel string

const (
	// StepRoofline prices a step from the GPU's datasheet peaks times
	// efficiencies fitted per engine version (the model since issue 1).
	StepRoofline StepModel = ""
	// StepKernels reads each kernel of a step (dense GEMMs, attention,
	// MoE) from the GPU's measured kernel table and adds a ring all-reduce
	// for TP > 1; only the engine's overheads are fitted on top (issue 26).
	StepKernels StepModel = "kernels"
)

// ErrStepModel is wrapped by ParseCoefficients for an unknown step model.
var ErrStepModel = errors.New("sim: unknown step model")

func (m StepModel) check() error {
	switch m {
	case StepRoofline, StepKernels:
		return nil
	}
	return fmt.Errorf("%w %q (want %q or %q)", ErrStepModel, string(m), StepRoofline, StepKernels)
}

// errKernelArch is returned by kernelDense for layers the kernel tables do
// not time (weight-only INT4/INT8 GEMMs; MoE experts go through
// kernels.Table.MoE, not a dense GEMM).
var errKernelArch = errors.New("sim: the kernel tables hold no dense GEMMs for this architecture")

// kernelDense is the time of one forward step's dense GEMMs on a measured
// GPU: each decoder layer's attention projections (QKV and output for a
// full-attention layer, the Gated DeltaNet in/out projections for a linear
// one) and, for a dense model, its gate-up and down projections, for tokens
// tokens, and the LM head for logits of them, sharded by tp as the engines
// shard them (KV heads replicated once tp passes their count). A MoE
// model's experts are not in it (kernelStep.moe).
func kernelDense(tab *kernels.Table, a Arch, tp, tokens, logits int) (sec float64, exact bool, err error) {
	if a.WeightBits > 0 {
		return 0, false, fmt.Errorf("%w: %s", errKernelArch, a.Name)
	}
	if tp <= 0 || a.NumHeads%tp != 0 || a.IntermediateSize%tp != 0 {
		return 0, false, fmt.Errorf("sim: %s does not shard over tp=%d", a.Name, tp)
	}
	dt := kernels.BF16
	if a.FP8Weights {
		dt = kernels.FP8
	}
	hq := a.NumHeads / tp
	hkv := max(1, a.NumKVHeads/tp)
	h, d, inter := a.HiddenSize, a.HeadDim, a.IntermediateSize/tp
	exact = true
	add := func(m, n, k int, times float64) {
		if n <= 0 || k <= 0 || times == 0 {
			return
		}
		t, ex := tab.GEMM(dt, m, n, k)
		sec += t * times
		exact = exact && ex
	}
	q := hq * d
	if a.Hybrid() {
		q *= 2 // gated attention: the gate is projected with the query
	}
	full, lin := float64(a.fullAttnLayers()), float64(a.linearLayers())
	add(tokens, q+2*hkv*d, h, full)
	add(tokens, h, hq*d, full)
	if lin > 0 {
		k := a.LinearKeyHeads * a.LinearKeyHeadDim / tp
		v := a.LinearValueHeads * a.LinearValueHeadDim / tp
		add(tokens, 2*k+2*v+2*a.LinearValueHeads/tp, h, lin)
		add(tokens, h, v, lin)
	}
	if a.NumExperts == 0 {
		add(tokens, 2*inter, h, float64(a.NumLayers))
		add(tokens, h, inter, float64(a.NumLayers))
	} else {
		// The router: one [h × experts] product per layer.
		add(tokens, a.NumExperts, h, float64(a.NumLayers))
	}
	if logits > 0 && a.VocabSize%tp == 0 {
		// The LM head runs in BF16 in every engine, FP8 checkpoints too.
		t, ex := tab.GEMM(kernels.BF16, logits, a.VocabSize/tp, h)
		sec += t
		exact = exact && ex
	}
	return sec, exact, nil
}

// All-reduce priors for tensor parallelism. The kernel tables time one GPU,
// so nothing here was measured; they are the datasheet's figures:
//   - the engines all-reduce a step's hidden states twice per layer (after
//     the attention output and the MLP down projections), in BF16;
//   - below 8 MB they use a one-shot or two-shot custom all-reduce over
//     NVLink peer memory (vllm-project/vllm 00d618aa,
//     vllm/distributed/device_communicators/custom_all_reduce.py,
//     CustomAllreduce max_size 8192 * 1024), above it NCCL's ring; both
//     move 2(TP−1)/TP of the data per GPU;
//   - the bandwidth is one direction of the GPU's NVLink (half the
//     datasheet's bidirectional figure: 450 GB/s on H100 and H200) at
//     allReduceBusEff, the share NCCL's ring reaches in practice, and a
//     GPU without NVLink uses PCIe (pcieAllReduce);
//   - each call pays allReduceLatency, a kernel launch and two barrier
//     round trips over NVLink (the roofline model's 8 µs).
const (
	allReduceLatency = 8e-6
	allReduceBusEff  = 0.8
)

// pcieAllReduce is what one all-reduce over PCIe costs, a GPU without
// NVLink (or with bridges that join pairs only): the engines fall back to
// NCCL there (vLLM's custom all-reduce refuses more than two PCIe-only
// GPUs, custom_all_reduce.py), and NCCL's ring over PCIe is bound by the
// host's root complexes and memory, not the links. Both figures are
// published nccl-tests runs on 8-GPU PCIe boxes, not fits:
//   - busEff, the bus bandwidth as a share of one direction of the GPU's
//     PCIe link: 28 GB/s at 8 GPUs and 35 at 4 over PCIe 5.0's 64
//     (NVIDIA/nccl#1639, 8 × RTX 5090, dual Xeon 8480+; the maintainer:
//     "on PCI systems, the performance you get is usually determined by
//     the bandwidth your CPU and memory can deliver"), 0.44 and 0.55;
//   - latency, a small message's time: 42 µs for 8 bytes over 8 GPUs
//     (NVIDIA/nccl#1530, 8 × RTX 4090 on PCIe 4.0), 3 µs for each of the
//     ring's 2(TP−1) hops, and never below NVLink's 8 µs.
func pcieAllReduce(tp int) (busEff, latency float64) {
	busEff = 0.55
	if tp > 4 {
		busEff = 0.44
	}
	return busEff, max(allReduceLatency, 2*float64(tp-1)*3e-6)
}

// allReduce is the time of one layer's two all-reduces of tokens hidden
// states over tp GPUs, and the per-token part of it.
func allReduceTerms(hw GPU, a Arch, tp int) (fixed, perTok float64) {
	if tp <= 1 {
		return 0, 0
	}
	bw, eff, lat := hw.NVLinkGBps/2, allReduceBusEff, allReduceLatency
	if bw == 0 {
		bw = hw.PCIeGBps
		eff, lat = pcieAllReduce(tp)
	}
	calls := 2 * float64(a.NumLayers)
	bytesTok := float64(a.HiddenSize) * 2
	ring := 2 * float64(tp-1) / float64(tp)
	return calls * lat, calls * ring * bytesTok / (bw * 1e9 * eff)
}

func kernelSpec(g GPU) kernels.Spec {
	return kernels.Spec{Name: g.Name, BF16TFLOPS: g.BF16TFLOPS, FP8TFLOPS: g.FP8TFLOPS, HBMGBps: g.HBMGBps, SMs: g.SMs}
}

// gpuTable is a GPU's kernel table: measured on it, or transferred from
// the nearest measured GPU (From names it).
type gpuTable struct {
	once sync.Once
	tab  *kernels.Table
	from string
	err  error
}

var gpuTables sync.Map // GPU name -> *gpuTable

// tableFor returns gpu's kernel table. A GPU nobody measured gets the
// measured table whose datasheet is nearest (bandwidth and BF16 peak, in
// log ratio) carried over by kernels.Transfer, and from names that GPU.
func tableFor(hw GPU) (tab *kernels.Table, from string, err error) {
	v, _ := gpuTables.LoadOrStore(hw.Name, &gpuTable{})
	g := v.(*gpuTable)
	g.once.Do(func() {
		if t, err := kernels.Embedded(hw.Name); err == nil {
			g.tab = t
			return
		}
		best, bestD := GPU{}, math.Inf(1)
		for _, name := range kernels.GPUs() {
			src, err := LookupGPU(name)
			if err != nil {
				continue
			}
			d := math.Abs(math.Log(src.HBMGBps/hw.HBMGBps)) + math.Abs(math.Log(src.BF16TFLOPS/hw.BF16TFLOPS))
			if d < bestD || d == bestD && src.Name < best.Name {
				best, bestD = src, d
			}
		}
		if math.IsInf(bestD, 1) {
			g.err = fmt.Errorf("%w: %s, and none to transfer from", kernels.ErrNoTable, hw.Name)
			return
		}
		src, err := kernels.Embedded(best.Name)
		if err != nil {
			g.err = err
			return
		}
		g.tab, g.err = kernels.Transfer(src, kernelSpec(best), kernelSpec(hw))
		g.from = best.Name
	})
	return g.tab, g.from, g.err
}

// kernelStep prices a step's GPU work from a kernel table (StepKernels).
type kernelStep struct {
	tab *kernels.Table
	// from names the measured GPU a transferred table came from.
	from string
	// timed is false for layers the table cannot time (weight-only
	// INT4/INT8, expert parallelism): those steps take the roofline on the
	// table's own ceilings.
	timed bool
	arch  Arch
	tp    int
	// The attention heads one GPU runs, and the KV cache's bytes per
	// element over the table's BF16.
	hq, hkv, hd int
	kvScale     float64
	full        float64
	// MoE: the expert GEMMs one GPU runs per layer.
	experts, topk, moeN int
	arFixed, arTok      float64
	dense               map[[2]int]float64
}

// setupKernels switches the engine to the kernel-table step model: the
// table's measured ceilings replace the fitted efficiencies (so the
// roofline that prices what the table cannot time, and the hybrid models'
// state traffic, run at what the GPU does), and each step's GEMMs,
// attention and MoE are read from the table.
func (e *Engine) setupKernels() error {
	tab, from, err := tableFor(e.hw)
	if err != nil {
		return fmt.Errorf("sim: kernel step model on %s: %w", e.hw.Name, err)
	}
	e.useKernelTable(tab, from)
	return nil
}

// useKernelTable is setupKernels on a given table (from: the GPU it was
// transferred from, if any).
func (e *Engine) useKernelTable(tab *kernels.Table, from string) {
	a, p := e.arch, e.p
	k := &kernelStep{tab: tab, from: from, arch: a, tp: p.TP, full: float64(a.fullAttnLayers()),
		dense: map[[2]int]float64{}}
	e.c.GEMMEff = tab.Memory.BF16TFLOPS / e.hw.BF16TFLOPS
	e.c.FP8Eff = math.Min(1, tab.Peak(kernels.FP8)/e.hw.FP8TFLOPS)
	e.c.MemEff = math.Min(1, tab.Memory.ReadGBps/e.hw.HBMGBps)
	// Prefill attention's rate: an 8,192-token causal pass of a common
	// head set, as a share of the BF16 peak.
	if t, _ := tab.PrefillAttention(32, 8, 128, 8192, 0); t > 0 {
		e.c.AttnEff = math.Min(1, 4*32*128*8192*4096/t/(e.hw.BF16TFLOPS*1e12))
	}
	k.hq = a.NumHeads / max(p.TP, 1)
	k.hkv = max(1, a.NumKVHeads/max(p.TP, 1))
	k.hd = a.HeadDim
	k.kvScale = 1
	if p.KVCacheDtype == "fp8" {
		k.kvScale = 0.5
	}
	k.timed = a.WeightBits == 0 && !(p.EP && a.NumExperts > 0) &&
		p.TP > 0 && a.NumHeads%p.TP == 0 && a.IntermediateSize%p.TP == 0
	if a.NumExperts > 0 {
		k.experts, k.topk = a.NumExperts, a.TopK
		k.moeN = a.MoEIntermediateSize / max(p.TP, 1)
		if k.moeN == 0 {
			k.timed = false
		}
	}
	k.arFixed, k.arTok = allReduceTerms(e.hw, a, p.TP)
	e.ks = k
}

// denseTime is kernelDense, remembered per (tokens, logits): a run steps
// through the same batch sizes thousands of times.
func (k *kernelStep) denseTime(tokens, logits int) float64 {
	key := [2]int{tokens, logits}
	if v, ok := k.dense[key]; ok {
		return v
	}
	v, _, err := kernelDense(k.tab, k.arch, k.tp, tokens, logits)
	if err != nil {
		v = math.NaN()
	}
	if k.experts > 0 && tokens > 0 {
		h := k.arch.HiddenSize
		gu, _ := k.tab.MoE(k.experts, k.topk, 2*k.moeN, h, tokens)
		dn, _ := k.tab.MoE(k.experts, k.topk, h, k.moeN, tokens)
		v += (gu + dn) * float64(k.arch.NumLayers)
	}
	if len(k.dense) < 1<<16 {
		k.dense[key] = v
	}
	return v
}

// gpuTime is a step's GPU time from the table: the dense GEMMs (and MoE
// experts) for gemmTok tokens and logits sampled, decode attention for the
// decoding sequences at their mean context, each prefill chunk's causal
// attention after its cached context, and the all-reduces. The attention
// backend's fitted speeds still scale attention (the table times one
// backend).
func (k *kernelStep) gpuTime(e *Engine, items []work, gemmTok, logits, decodeSeqs, ctxSum, tokens float64) float64 {
	t := k.denseTime(int(math.Round(gemmTok)), int(math.Round(logits)))
	if decodeSeqs > 0 {
		ctx := int(math.Round(ctxSum / decodeSeqs * k.kvScale))
		d, _ := k.tab.DecodeAttention(k.hq, k.hkv, k.hd, int(decodeSeqs), max(ctx, 1))
		t += d * k.full / e.beDecode
	}
	var pre float64
	for _, w := range items {
		if !w.decode {
			s, _ := k.tab.PrefillAttention(k.hq, k.hkv, k.hd, w.n, w.s.computed)
			pre += s
		}
	}
	t += pre * k.full / e.bePrefill
	if k.arTok > 0 {
		t += k.arFixed + k.arTok*tokens
	}
	return t
}
