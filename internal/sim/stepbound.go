package sim

import (
	"fmt"
	"slices"
	"sync"

	"github.com/perflab/perflab/internal/sim/kernels"
)

// The roofline streams weights at MemEff, one share fitted per engine on
// the reference reports' full-cache steps (0.39 to 0.69 of the H100's HBM
// bandwidth). A decode step of a few sequences is almost all weight
// stream, and the collector's whole decode steps (kernels.Run) show the
// GPU doing it much faster: the bare step of Qwen3-8B at batch 4 takes
// 6.6 ms on an H100 where the fitted roofline prices nearly twice that. The rate-inf
// blocks cannot say how much of the fitted gap an engine keeps at small
// batch, so the point prediction stays as fitted, and the range holds the
// same run with the weights streamed at the measured whole-step rate.

// smallBatchRows is the largest batch and context of a measured whole
// step that counts towards the weight-stream rate: beyond them the KV
// reads and the compute take a visible share of the step.
const (
	smallBatchRows   = 16
	smallContextRows = 4096
)

type stepShareKey struct {
	gpu string
	fp8 bool
}

type stepShareVal struct {
	share float64
	from  string
	ok    bool
}

var stepShares sync.Map // stepShareKey -> stepShareVal

// measuredStepShare is the median, over hw's measured whole decode steps
// of at most smallBatchRows sequences and smallContextRows tokens (dense
// models of the catalog, in the given precision), of the weight bytes the
// roofline streams for that model over the step's time, as a share of
// hw's HBM bandwidth. The glue kernels and the attention count against it,
// so it is what a whole step reaches, not the weight stream alone.
func measuredStepShare(hw GPU, fp8 bool) (float64, bool) {
	tab, err := kernels.Run(hw.Name)
	if err != nil || !(hw.HBMGBps > 0) {
		return 0, false
	}
	var shares []float64
	for _, r := range tab.Steps {
		if (r.DType == kernels.FP8) != fp8 || r.Batch > smallBatchRows || r.Context > smallContextRows {
			continue
		}
		a, err := LookupModel(r.Model)
		// A hybrid model's rows (collected before the collector skipped
		// them) time a full-attention stand-in of its shapes.
		if err != nil || a.Hybrid() || a.NumExperts > 0 || a.NumLayers != r.Layers {
			continue
		}
		a.FP8Weights = fp8
		shares = append(shares, a.streamBytes()/(r.StepUS*1e-6)/(hw.HBMGBps*1e9))
	}
	if len(shares) == 0 {
		return 0, false
	}
	slices.Sort(shares)
	n := len(shares)
	return (shares[(n-1)/2] + shares[n/2]) / 2, true
}

// stepShare is measuredStepShare on hw, or, for a GPU with no whole steps
// measured, the nearest measured GPU's carried over in proportion to what
// the two GPUs' kernel tables reach on a weight-streaming GEMM (from names
// that GPU).
func stepShare(hw GPU, fp8 bool) (share float64, from string, ok bool) {
	key := stepShareKey{hw.Name, fp8}
	if v, hit := stepShares.Load(key); hit {
		v := v.(stepShareVal)
		return v.share, v.from, v.ok
	}
	var v stepShareVal
	if s, ok := measuredStepShare(hw, fp8); ok {
		v = stepShareVal{share: s, ok: true}
	} else if dst, src, err := tableFor(hw); err == nil && src != "" {
		if sg, err := LookupGPU(src); err == nil {
			s, ok := measuredStepShare(sg, fp8)
			st, _, err := tableFor(sg)
			if ok && err == nil {
				ks, ok1 := sharesOf(st, sg)
				kd, ok2 := sharesOf(dst, hw)
				if ok1 && ok2 {
					v = stepShareVal{share: s * kd.mem / ks.mem, from: src, ok: true}
				}
			}
		}
	}
	stepShares.Store(key, v)
	return v.share, v.from, v.ok
}

// smallBatchBound is main with every entry's weight stream set to what
// measured whole decode steps reach on p's GPU, and the note that says so;
// nil where the GPU has no such measurement (nor one to carry over) or the
// calibration is not the roofline's.
func (c *Coefficients) smallBatchBound(p Params) (*Coefficients, string) {
	if c.StepModel != StepRoofline {
		return nil, ""
	}
	hw, err := LookupGPU(p.GPU)
	if err != nil {
		return nil, ""
	}
	a, err := p.arch()
	if err != nil || a.weightOnly(hw) {
		return nil, "" // the whole steps time no weight-only kernel
	}
	share, from, ok := stepShare(hw, a.FP8Weights)
	if !ok {
		return nil, ""
	}
	out := *c
	out.Entries = make(map[string]Coef, len(c.Entries))
	for k, e := range c.Entries {
		e.WeightStreamEff = share
		out.Entries[k] = e
	}
	where := hw.Name
	if from != "" {
		where = fmt.Sprintf("%s (carried from %s's)", hw.Name, from)
	}
	note := fmt.Sprintf("small-batch steps: the calibration was fitted on full-cache steps; the range holds weights streamed at %.0f%% of the HBM bandwidth, what measured whole decode steps reach on %s", 100*share, where)
	return &out, note
}

// meanDecoding is how many requests were decoding at once on average over
// the run, by Little's law: each successful request's time from its first
// token to its last, summed, over the run's duration.
func meanDecoding(pr *Prediction) float64 {
	if pr == nil || !(pr.Duration > 0) {
		return 0
	}
	var sum float64
	for _, r := range pr.Records {
		if r.Success && r.Latency > r.TTFT {
			sum += r.Latency - r.TTFT
		}
	}
	return sum / pr.Duration
}
