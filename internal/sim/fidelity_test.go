package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Achieved fidelity of the embedded calibration, asserted as regression
// bounds a little above what it reaches (4.9%, 22.6%, 17.6%; the issue's
// targets are 10% TPS MAPE and 25% TTFT/TPOT MAPE; see docs/sim-fidelity.md).
const (
	boundTPSMAPE  = 0.055 // target 0.10
	boundTTFTMAPE = 0.235 // target 0.25
	boundTPOTMAPE = 0.185 // target 0.25
	// Required orderings that may stay unreproduced: the 32B TensorRT-LLM
	// chunked prefill (+7.0% measured, +0.0% predicted: in TensorRT-LLM's
	// source chunking changes only how prompts are packed into a step).
	boundOrders = 1
)

func TestFidelity(t *testing.T) {
	ShareGPTLengthsPath = filepath.Join(sharedDir(t), "data", "sharegpt", "sharegpt_v3_sample_1000.json")
	ref, err := ReferenceCases()
	if err != nil {
		t.Fatal(err)
	}
	f := Evaluate(ref, DefaultCoefficients())
	var b strings.Builder
	f.WriteText(&b)
	if testing.Verbose() || os.Getenv("SIM_FIDELITY_PRINT") != "" {
		t.Log("\n" + b.String())
	}
	for _, r := range f.Results {
		if r.Err != nil && r.Case.Exclude == "" {
			t.Errorf("%s: %v", r.Case.ID, r.Err)
		}
	}
	if f.N != 48 {
		t.Errorf("scored %d blocks, want 48 (52 minus 4 excluded)", f.N)
	}
	if f.TPSMAPE > boundTPSMAPE {
		t.Errorf("Total TPS MAPE %.1f%% > bound %.1f%%", f.TPSMAPE*100, boundTPSMAPE*100)
	}
	if f.TTFTMAPE > boundTTFTMAPE {
		t.Errorf("mean TTFT MAPE %.1f%% > bound %.1f%%", f.TTFTMAPE*100, boundTTFTMAPE*100)
	}
	if f.TPOTMAPE > boundTPOTMAPE {
		t.Errorf("mean TPOT MAPE %.1f%% > bound %.1f%%", f.TPOTMAPE*100, boundTPOTMAPE*100)
	}
	rep, req := f.RequiredOrderings()
	if req-rep > boundOrders {
		t.Errorf("%d of %d required orderings reversed, bound %d", req-rep, req, boundOrders)
	}
}
