package sim

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/safeyaml"
)

// FoldSet is the calibrations of a leave-one-model-out run: for each
// reference model, the coefficients fitted without its blocks. Their spread
// is how much the calibration depends on which models were measured, which
// is the uncertainty a prediction for an unmeasured model carries.
type FoldSet struct {
	// Source says how the folds were made.
	Source string `json:"source,omitempty"`
	// Folds maps a held-out model to the calibration fitted without it.
	Folds map[string]*Coefficients `json:"folds"`
	// Spread is each figure's mean absolute error on the held-out models
	// (the mean over the folds of their MAPE, as a fraction): how far a
	// prediction for an unmeasured model has been off, beyond what the
	// folds' disagreement shows.
	Spread Figures `json:"spread"`
	// SpreadByEngine is, per engine, the 90th percentile of its held-out
	// blocks' errors over every fold: a prediction is as uncertain as its
	// engine has been off on models it had not seen (TensorRT-LLM and
	// SGLang less than vLLM, whose 0.17.1 was measured on one model). It
	// takes the place of Spread for that engine.
	SpreadByEngine map[string]Figures `json:"spread_by_engine,omitempty"`
}

//go:embed coefficients_lomo.json
var embeddedFolds []byte

// DefaultFolds returns the embedded leave-one-model-out calibrations
// (written by go test ./internal/sim -run TestLeaveOneModelOut -lomo
// -update); nil when the embedded file is empty or broken, which the tests
// catch.
func DefaultFolds() *FoldSet {
	f, err := ParseFolds(embeddedFolds)
	if err != nil {
		return nil
	}
	return f
}

// ParseFolds decodes a fold set, checking each calibration as
// ParseCoefficients does.
func ParseFolds(b []byte) (*FoldSet, error) {
	if err := safeyaml.CheckJSON(b, safeyaml.Defaults); err != nil {
		return nil, fmt.Errorf("sim: folds: %w", err)
	}
	var raw struct {
		Source         string                     `json:"source"`
		Folds          map[string]json.RawMessage `json:"folds"`
		Spread         Figures                    `json:"spread"`
		SpreadByEngine map[string]Figures         `json:"spread_by_engine"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("sim: folds: %w", err)
	}
	if len(raw.Folds) == 0 {
		return nil, fmt.Errorf("sim: folds: none")
	}
	spreads := map[string]Figures{"": raw.Spread}
	for e, q := range raw.SpreadByEngine {
		spreads[e] = q
	}
	for e, q := range spreads {
		for _, v := range []float64{q.TotalTPS, q.MeanTTFTMs, q.MeanTPOTMs} {
			if !(v >= 0 && v <= 100) {
				if e == "" {
					return nil, fmt.Errorf("sim: folds: spread %g outside [0, 100]", v)
				}
				return nil, fmt.Errorf("sim: folds: %s's spread %g outside [0, 100]", e, v)
			}
		}
	}
	f := &FoldSet{Source: raw.Source, Folds: map[string]*Coefficients{}, Spread: raw.Spread, SpreadByEngine: raw.SpreadByEngine}
	for m, r := range raw.Folds {
		c, err := ParseCoefficients(r)
		if err != nil {
			return nil, fmt.Errorf("sim: folds: held-out %s: %w", m, err)
		}
		f.Folds[m] = c
	}
	return f, nil
}

// SpreadFor is the engine's held-out error (a fraction per figure), or the
// mean over all engines for one no fold held out.
func (f *FoldSet) SpreadFor(engine string) Figures {
	if q, ok := f.SpreadByEngine[engine]; ok {
		return q
	}
	return f.Spread
}

// FoldsFor returns the embedded fold set when c is the embedded calibration
// (nil counts as it), and nil for any other: the folds' spread was measured
// for the calibration they were fitted beside, and says nothing of the error
// of coefficients fitted to other measurements or written by hand.
//
// The lab asks it once per config of a search space, so the embedded set
// is parsed and fingerprinted once; the set returned is shared, for reading.
func FoldsFor(c *Coefficients) *FoldSet {
	if c != nil && Fingerprint(c) != embeddedFingerprint() {
		return nil
	}
	return sharedFolds()
}

var (
	sharedFolds         = sync.OnceValue(DefaultFolds)
	embeddedFingerprint = sync.OnceValue(func() string { return Fingerprint(nil) })
)

// JSON encodes the fold set, indented, keys sorted.
func (f *FoldSet) JSON() []byte {
	b, _ := json.MarshalIndent(f, "", "  ")
	return append(b, '\n')
}

// calibrations lists the folds in a stable order.
func (f *FoldSet) calibrations() []*Coefficients {
	if f == nil {
		return nil
	}
	var names []string
	for m := range f.Folds {
		names = append(names, m)
	}
	sort.Strings(names)
	out := make([]*Coefficients, len(names))
	for i, m := range names {
		out[i] = f.Folds[m]
	}
	return out
}

// Figures are the headline figures of one predicted run.
type Figures struct {
	TotalTPS   float64 `json:"total_tps"`
	MeanTTFTMs float64 `json:"mean_ttft_ms"`
	MeanTPOTMs float64 `json:"mean_tpot_ms"`
}

// Span is the range of a prediction: the envelope of the figures the main
// calibration and every leave-one-model-out calibration give, widened on
// each side by the folds' spread for its engine (lo / (1+spread), hi ×
// (1+spread)): the
// envelope alone shows only how the calibrations disagree, and on the
// reference blocks it held 27 of 48 measured throughputs.
type Span struct {
	Lo, Hi Figures
	// Fits is how many calibrations ran (the main one included).
	Fits int
	// Borrowed names the calibration a deployment the calibration never
	// measured ran on ("H100/sglang/0.5.9" for SGLang 0.6.0), empty when
	// it has its own. The span of such a prediction also holds the same
	// run under each other fitted version of the engine.
	Borrowed string
	// PassedOver says the deployment's own engine version has a
	// calibration, fitted on models of the other attention kind only, that
	// was passed over for Borrowed.
	PassedOver bool
	// Unseen says what else the calibration has not seen of the
	// deployment (another GPU, a model family), each of which widened
	// the span.
	Unseen []string
}

// Contains reports whether measured figures fall inside the span; a zero
// measured figure is not checked.
func (s Span) Contains(m Figures) (tps, ttft, tpot bool) {
	in := func(v, lo, hi float64) bool { return v == 0 || v >= lo && v <= hi }
	return in(m.TotalTPS, s.Lo.TotalTPS, s.Hi.TotalTPS), in(m.MeanTTFTMs, s.Lo.MeanTTFTMs, s.Hi.MeanTTFTMs),
		in(m.MeanTPOTMs, s.Lo.MeanTPOTMs, s.Hi.MeanTPOTMs)
}

func (s *Span) add(f Figures) {
	if s.Fits == 0 {
		s.Lo, s.Hi = f, f
	} else {
		s.hold(f)
	}
	s.Fits++
}

// hold stretches a non-empty span to hold f without counting it as a
// calibration (the small-batch bound is a run, not a fit).
func (s *Span) hold(f Figures) {
	s.Lo = Figures{math.Min(s.Lo.TotalTPS, f.TotalTPS), math.Min(s.Lo.MeanTTFTMs, f.MeanTTFTMs), math.Min(s.Lo.MeanTPOTMs, f.MeanTPOTMs)}
	s.Hi = Figures{math.Max(s.Hi.TotalTPS, f.TotalTPS), math.Max(s.Hi.MeanTTFTMs, f.MeanTTFTMs), math.Max(s.Hi.MeanTPOTMs, f.MeanTPOTMs)}
}

// widen applies the folds' spread to an envelope.
func (s *Span) widen(f *FoldSet, engine string) {
	if f == nil || s.Fits == 0 {
		return
	}
	q := f.SpreadFor(engine)
	s.Lo = Figures{s.Lo.TotalTPS / (1 + q.TotalTPS), s.Lo.MeanTTFTMs / (1 + q.MeanTTFTMs), s.Lo.MeanTPOTMs / (1 + q.MeanTPOTMs)}
	s.Hi = Figures{s.Hi.TotalTPS * (1 + q.TotalTPS), s.Hi.MeanTTFTMs * (1 + q.MeanTTFTMs), s.Hi.MeanTPOTMs * (1 + q.MeanTPOTMs)}
}

// PredictSpan predicts the run with main (nil = embedded) and with every
// fold of folds (nil = embedded) and returns the envelope. A fold whose
// prediction fails (its memory model may refuse a deployment the main one
// starts) is skipped; the main one failing is an error. A run of at most
// smallBatchRows requests decoding at once is also predicted with the
// weights streamed at the rate measured whole decode steps reach on the
// GPU (smallBatchBound), since the rate-inf blocks the calibrations were
// fitted on do not pin that regime; the span says so where that moved it.
func PredictSpan(p Params, main *Coefficients, folds *FoldSet, reqs []dataset.Request, load Load) (Span, error) {
	if folds == nil {
		folds = DefaultFolds()
	}
	var s Span
	var pr0 *Prediction
	for i, c := range append([]*Coefficients{main}, folds.calibrations()...) {
		pr, err := PredictWith(p, c, reqs, load)
		if err != nil {
			if i == 0 {
				return s, err
			}
			continue
		}
		if i == 0 {
			pr0 = pr
		}
		r := pr.Result
		s.add(Figures{r.TotalTokenThroughput, r.MeanTTFTMs, r.MeanTPOTMs})
	}
	if main == nil {
		main = DefaultCoefficients()
	}
	if from, borrowed := main.Borrowed(pr0.Params); borrowed {
		s.Borrowed = from
		_, s.PassedOver = main.passedOver(pr0.Params)
		for _, c := range main.siblings(pr0.Params) {
			pr, err := PredictWith(p, c, reqs, load)
			if err != nil {
				continue
			}
			r := pr.Result
			s.add(Figures{r.TotalTokenThroughput, r.MeanTTFTMs, r.MeanTPOTMs})
		}
	}
	bound := ""
	if c, note := main.smallBatchBound(pr0.Params); c != nil && meanDecoding(pr0) <= smallBatchRows {
		if pr, err := PredictWith(p, c, reqs, load); err == nil && pr.Result != nil && pr.Result.Completed > 0 {
			r := pr.Result
			before := s
			s.hold(Figures{r.TotalTokenThroughput, r.MeanTTFTMs, r.MeanTPOTMs})
			if s.Hi.TotalTPS > 1.05*before.Hi.TotalTPS || s.Lo.MeanTPOTMs < before.Lo.MeanTPOTMs/1.05 {
				bound = note
			}
		}
	}
	spec := ""
	if q := pr0.Params; q.SpecMethod != "" && q.SpecTokens > 0 && p.SpecAcceptance == 0 {
		// The acceptance is a published figure for other text, never
		// measured on this workload: the span holds the run at each end of
		// what the published workloads span.
		pri := acceptanceOf(q.SpecMethod)
		for _, a := range []float64{pri.lo, pri.hi} {
			r := p
			r.SpecAcceptance = a
			if pr, err := PredictWith(r, main, reqs, load); err == nil && pr.Result != nil && pr.Result.Completed > 0 {
				res := pr.Result
				s.hold(Figures{res.TotalTokenThroughput, res.MeanTTFTMs, res.MeanTPOTMs})
			}
		}
		spec = fmt.Sprintf("%s; the range holds %.2f to %.2f", pri.claim(), pri.lo, pri.hi)
	}
	backend := ""
	if name, dflt, ok := unfittedBackend(p, main); ok {
		backend = fmt.Sprintf("attention backend %s has no fitted factor on this calibration: priced as the default, %s (range ±%.0f%%)", name, dflt, 100*unseenBackend)
	}
	s.widen(folds, p.Engine)
	notes, factor := unseenWidening(pr0.Params, main, folds)
	if bound != "" {
		notes = append(notes, bound)
	}
	if spec != "" {
		notes = append(notes, spec)
	}
	if backend != "" {
		notes = append(notes, backend)
		factor *= 1 + unseenBackend
	}
	s.Unseen = notes
	s.widenBy(factor)
	return s, nil
}

// CaseSpan is PredictSpan for a reference case (its own TPOT definition).
func CaseSpan(c Case, main *Coefficients, folds *FoldSet) (Span, error) {
	if folds == nil {
		folds = DefaultFolds()
	}
	var s Span
	for i, coef := range append([]*Coefficients{main}, folds.calibrations()...) {
		r := PredictCase(c, coef)
		if r.Err != nil {
			if i == 0 {
				return s, r.Err
			}
			continue
		}
		s.add(Figures{r.TotalTPS, r.MeanTTFTMs, r.MeanTPOTMs})
	}
	s.widen(folds, c.Params.Engine)
	return s, nil
}
