package sim

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Coverage of the embedded range on the reference blocks, asserted as
// regression bounds a little under what it reaches (2026-11-25, second
// round, see docs/sim-fidelity.md): the span (main calibration and the three
// leave-one-model-out ones, widened by their mean held-out error) holds 48 of
// 48 measured throughputs, 48 of 48 TTFTs and 46 of 46 TPOTs; a block's own
// held-out fold alone, widened the same way, holds 26 of 48 throughputs (the
// held-out errors are systematic per model, not scattered).
const (
	boundSpanTPS  = 0.95
	boundSpanTTFT = 0.95
	boundSpanTPOT = 0.95
	boundHeldTPS  = 0.50
)

// TestSpanCoversMeasured predicts every scored reference block over the
// embedded folds: each span holds its main prediction, and the measured
// figures fall inside the spans at least as often as the bounds say.
func TestSpanCoversMeasured(t *testing.T) {
	ShareGPTLengthsPath = filepath.Join(sharedDir(t), "data", "sharegpt", "sharegpt_v3_sample_1000.json")
	folds := DefaultFolds()
	if folds == nil || len(folds.Folds) != 3 {
		t.Fatalf("embedded coefficients_lomo.json holds no three folds; run go test ./internal/sim -run TestLeaveOneModelOut -lomo -update")
	}
	ref, err := ReferenceCases()
	if err != nil {
		t.Fatal(err)
	}
	var n, inTPS, inTTFT, inTPOT, nTPOT int
	var b strings.Builder
	for _, c := range ref.Cases {
		if c.Exclude != "" {
			continue
		}
		s, err := CaseSpan(c, nil, folds)
		if err != nil {
			t.Errorf("%s: %v", c.ID, err)
			continue
		}
		p := PredictCase(c, nil)
		if in, _, _ := s.Contains(Figures{TotalTPS: p.TotalTPS}); !in || s.Fits < 2 {
			t.Errorf("%s: span %.0f..%.0f over %d fits misses its own prediction %.0f", c.ID, s.Lo.TotalTPS, s.Hi.TotalTPS, s.Fits, p.TotalTPS)
		}
		m := Figures{c.Measured.TotalTPS, c.Measured.MeanTTFTMs, 0}
		if c.NoTPOT == "" {
			m.MeanTPOTMs = c.Measured.MeanTPOTMs
			nTPOT++
		}
		a, d, e := s.Contains(m)
		n++
		inTPS += b2i(a)
		inTTFT += b2i(d)
		if c.NoTPOT == "" {
			inTPOT += b2i(e)
		}
		b.WriteString(c.ID + ": TPS " + fmtSpan(c.Measured.TotalTPS, s.Lo.TotalTPS, s.Hi.TotalTPS) + "\n")
	}
	t.Logf("measured inside the span: TPS %d/%d, TTFT %d/%d, TPOT %d/%d\n%s", inTPS, n, inTTFT, n, inTPOT, nTPOT, b.String())
	// The stricter reading: each block against its own held-out fold
	// alone (the calibration that never saw its model), widened by the
	// spread, with neither the main calibration nor the other folds.
	var hTPS, hTTFT, hTPOT int
	for _, c := range ref.Cases {
		if c.Exclude != "" {
			continue
		}
		fold, ok := folds.Folds[modelOf(c)]
		if !ok {
			t.Errorf("%s: no fold holds out %s", c.ID, modelOf(c))
			continue
		}
		r := PredictCase(c, fold)
		if r.Err != nil {
			continue
		}
		var s Span
		s.add(Figures{r.TotalTPS, r.MeanTTFTMs, r.MeanTPOTMs})
		s.widen(folds)
		a, d, e := s.Contains(Figures{c.Measured.TotalTPS, c.Measured.MeanTTFTMs, c.Measured.MeanTPOTMs})
		hTPS += b2i(a)
		hTTFT += b2i(d)
		if c.NoTPOT == "" {
			hTPOT += b2i(e)
		}
	}
	t.Logf("measured inside its held-out fold's widened prediction: TPS %d/%d, TTFT %d/%d, TPOT %d/%d", hTPS, n, hTTFT, n, hTPOT, nTPOT)
	if float64(hTPS) < boundHeldTPS*float64(n) {
		t.Errorf("held-out folds: %d of %d measured throughputs inside, bound %.0f%%", hTPS, n, boundHeldTPS*100)
	}
	for _, c := range []struct {
		name   string
		in, of int
		bound  float64
	}{{"TPS", inTPS, n, boundSpanTPS}, {"TTFT", inTTFT, n, boundSpanTTFT}, {"TPOT", inTPOT, nTPOT, boundSpanTPOT}} {
		if float64(c.in) < c.bound*float64(c.of) {
			t.Errorf("%s: %d of %d measured inside the span, bound %.0f%%", c.name, c.in, c.of, c.bound*100)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func fmtSpan(m, lo, hi float64) string {
	mark := "in"
	if m < lo || m > hi {
		mark = "OUT"
	}
	return strings.Join([]string{ftoa(m), "in", ftoa(lo) + ".." + ftoa(hi), mark}, " ")
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

// FuzzParseFolds: any fold file either fails with an error or gives folds
// whose every calibration passes ParseCoefficients' checks.
func FuzzParseFolds(f *testing.F) {
	f.Add(embeddedFolds)
	f.Add([]byte(`{"folds":{"Qwen3-14B":{"entries":{"*":{"gemm_eff":0.5,"fp8_eff":0.4,"mem_eff":0.7,"attn_eff":0.4,"step_ms":2,"seq_us":20,"frontend_ms":1,"eager_ms":8}}}}}`))
	f.Add([]byte(`{"folds":{"x":{"entries":{"*":{"gemm_eff":7}}}}}`))
	f.Add([]byte(`{"folds":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fs, err := ParseFolds(b)
		if err != nil {
			return
		}
		for m, c := range fs.Folds {
			if c == nil {
				t.Fatalf("fold %q is nil", m)
			}
			for k, e := range c.Entries {
				if err := e.check(); err != nil {
					t.Fatalf("fold %q entry %q passed parsing but fails its check: %v", m, k, err)
				}
			}
		}
	})
}
