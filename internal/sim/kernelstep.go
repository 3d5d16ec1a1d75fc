package sim

import (
	"errors"
	"fmt"

	"github.com/perflab/perflab/internal/sim/kernels"
)

// errKernelArch is returned by kernelDense for layers the kernel tables do
// not time (hybrid linear attention, weight-only INT4/INT8 GEMMs; MoE
// experts go through kernels.Table.MoE, not a dense GEMM).
var errKernelArch = errors.New("sim: the kernel tables hold no dense GEMMs for this architecture")

// kernelDense is the time of one forward step's dense GEMMs on a measured
// GPU: each decoder layer's QKV, output, gate-up and down projections for
// tokens tokens, and the LM head for logits of them, sharded by tp as the
// engines shard them (KV heads replicated once tp passes their count). It
// is the measured counterpart of the roofline's tGemm, and the ground a
// step model on kernel tables will stand on (issue 26).
func kernelDense(tab *kernels.Table, a Arch, tp, tokens, logits int) (sec float64, exact bool, err error) {
	if a.Hybrid() || a.NumExperts > 0 || a.WeightBits > 0 {
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
	add := func(m, n, k int) {
		t, ex := tab.GEMM(dt, m, n, k)
		sec += t
		exact = exact && ex
	}
	add(tokens, (hq+2*hkv)*d, h)
	add(tokens, h, hq*d)
	add(tokens, 2*inter, h)
	add(tokens, h, inter)
	sec *= float64(a.NumLayers)
	if logits > 0 && a.VocabSize%tp == 0 {
		// The LM head runs in BF16 in every engine, FP8 checkpoints too.
		t, ex := tab.GEMM(kernels.BF16, logits, a.VocabSize/tp, h)
		sec += t
		exact = exact && ex
	}
	return sec, exact, nil
}
