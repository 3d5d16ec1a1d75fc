package sim

import (
	"fmt"
	"strings"
	"unicode"
)

// What a calibration has not seen widens a prediction's range by a factor
// the evidence for that kind of gap gave (docs/sim-fidelity.md, "Honest
// ranges"), on each side: lo / (1+f), hi × (1+f).
const (
	// unseenGPURoofline: the roofline's efficiencies were fitted on the
	// H100 alone; issue 26's external set, dividing each A100 result by
	// the same command's H100 result, left the simulator −15% to −49%.
	unseenGPURoofline = 0.5
	// unseenGPUTransfer: a GPU with no kernel table of its own, on a table
	// transferred from another: the leave-one-GPU-out error of the
	// transfer between the two measured tables, its worst kernel class
	// (the grouped MoE GEMM, 11.7%; GEMM 5.7%, decode 4.6%).
	unseenGPUTransfer = 0.12
	// unseenFamily: a model family none of the measured models belongs
	// to. The one cross-family fold of leave-one-model-out (Qwen3.5-9B
	// held out, fitted on Qwen3 alone) was 34.2% off on throughput; its
	// latencies were worse (338% / 274%), so for latency this is a floor.
	unseenFamily = 0.34
	// unseenBackend: an attention backend the calibration has no factor
	// for is priced as the engine's default. Measured backends of one
	// engine differ by up to 15% in throughput (the 8B H100 latency
	// report, SGLang FP8 at concurrency 4: fa3 1,351, triton 1,305,
	// flashinfer 1,143 tok/s).
	unseenBackend = 0.15
)

// Assumptions lists what a prediction of p on the calibration c (nil: the
// embedded one) takes as given instead of measured, each with its basis,
// for a result's reader: the lab attaches them to a simulated trial's
// result, and PredictSpan widens its range by each.
func Assumptions(p Params, c *Coefficients) []string {
	var out []string
	if p.SpecMethod != "" && p.SpecAcceptance == 0 {
		pri := acceptanceOf(p.SpecMethod)
		out = append(out, fmt.Sprintf("%s (published workloads span %.2f to %.2f)", pri.claim(), pri.lo, pri.hi))
	}
	if q, err := p.WithDefaults(); err == nil {
		if from, borrowed := c.Borrowed(q); borrowed {
			out = append(out, fmt.Sprintf("no calibration of %s %s on %s fits this deployment: it borrows %s's", q.Engine, q.Version, gpuName(q.GPU), from))
		}
	}
	if name, dflt, ok := unfittedBackend(p, c); ok {
		out = append(out, fmt.Sprintf("attention backend %s has no fitted factor on %s %s: priced as the default, %s", name, p.Engine, p.Version, dflt))
	}
	return out
}

// unfittedBackend says whether p names an attention backend other than
// its engine's default that the calibration has no factor for, with the
// backend and the default.
func unfittedBackend(p Params, c *Coefficients) (name, dflt string, ok bool) {
	if p.AttentionBackend == "" {
		return "", "", false
	}
	q, err := p.WithDefaults()
	if err != nil {
		return "", "", false
	}
	d := p
	d.AttentionBackend = ""
	dq, err := d.WithDefaults()
	if err != nil || strings.EqualFold(q.AttentionBackend, dq.AttentionBackend) {
		return "", "", false
	}
	if c == nil {
		c = DefaultCoefficients()
	}
	coef, from := c.For(q)
	_, pre := coef.Backend[q.AttentionBackend]
	_, dec := coef.BackendDecode[q.AttentionBackend]
	if pre || dec {
		return "", "", false
	}
	// The backend the calibration's own GPU runs by default is the one its
	// factors are relative to (factor 1): measured, not missing. SGLang's
	// fa3 on an A100 carries the H100's fa3 against its flashinfer.
	if src, err := keyGPU(from); err == nil && src.Name != gpuName(q.GPU) {
		r := d
		r.GPU = src.Name
		if rq, err := r.WithDefaults(); err == nil && strings.EqualFold(rq.AttentionBackend, q.AttentionBackend) {
			return "", "", false
		}
	}
	return q.AttentionBackend, dq.AttentionBackend, true
}

// modelFamily is a model name less its size and variant: "Llama-3.1" for
// Llama-3.1-70B-Instruct-FP8, "Qwen3" for Qwen3-235B-A22B, "Qwen3.5" for
// Qwen3.5-9B. The first dash-separated part that is a parameter count
// (digits, then B or M) ends it.
func modelFamily(name string) string {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	parts := strings.Split(name, "-")
	for i, p := range parts {
		if i > 0 && isSize(p) {
			return strings.Join(parts[:i], "-")
		}
	}
	return parts[0]
}

func isSize(p string) bool {
	if len(p) < 2 || !unicode.IsDigit(rune(p[0])) {
		return false
	}
	last := p[len(p)-1]
	return last == 'B' || last == 'b' || last == 'M' || last == 'm'
}

// unseenWidening lists what the calibration main (with its folds, whose
// held-out models are the models it measured) has not seen of the
// deployment p (defaults applied), with the factor each widens the range
// by. A borrowed engine version is not here: its range already holds the
// run under each other fitted version (PredictSpan).
func unseenWidening(p Params, main *Coefficients, folds *FoldSet) (notes []string, factor float64) {
	factor = 1
	hw, err := LookupGPU(p.GPU)
	if err != nil {
		return nil, 1
	}
	if main.StepModel == StepKernels {
		if _, from, err := tableFor(hw); err == nil && from != "" {
			notes = append(notes, fmt.Sprintf("%s has no kernel table: %s's, transferred (range ±%.0f%%)", hw.Name, from, 100*unseenGPUTransfer))
			factor *= 1 + unseenGPUTransfer
		}
	} else if !main.hasGPU(hw.Name) {
		how := ""
		if a, err := p.arch(); err == nil && carriesShares(a) {
			how = ": its shares carried through the kernel tables"
		}
		notes = append(notes, fmt.Sprintf("no calibration was fitted on %s%s (range ±%.0f%%)", hw.Name, how, 100*unseenGPURoofline))
		factor *= 1 + unseenGPURoofline
	}
	if folds != nil && len(folds.Folds) > 0 {
		fam := modelFamily(p.Model)
		seen := false
		for m := range folds.Folds {
			if strings.EqualFold(modelFamily(m), fam) {
				seen = true
			}
		}
		if !seen {
			notes = append(notes, fmt.Sprintf("no %s model was measured (range ±%.0f%%)", fam, 100*unseenFamily))
			factor *= 1 + unseenFamily
		}
	}
	return notes, factor
}

// hasGPU reports whether any entry was fitted on gpu.
func (c *Coefficients) hasGPU(gpu string) bool {
	for k := range c.Entries {
		if g, _, ok := strings.Cut(k, "/"); ok && g == gpu || k == gpu {
			return true
		}
	}
	return false
}

// widenBy stretches the span by factor on each side.
func (s *Span) widenBy(factor float64) {
	if factor <= 1 || s.Fits == 0 {
		return
	}
	s.Lo = Figures{s.Lo.TotalTPS / factor, s.Lo.MeanTTFTMs / factor, s.Lo.MeanTPOTMs / factor}
	s.Hi = Figures{s.Hi.TotalTPS * factor, s.Hi.MeanTTFTMs * factor, s.Hi.MeanTPOTMs * factor}
}
