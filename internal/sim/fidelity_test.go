package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Achieved fidelity of the embedded calibration, asserted as regression
// bounds (the targets are 10% TPS MAPE and 25% TTFT/TPOT MAPE; see
// docs/sim-fidelity.md for where we stand and why).
const (
	boundTPSMAPE  = 0.16 // target 0.10: missed, see docs
	boundTTFTMAPE = 0.43 // target 0.25: missed
	boundTPOTMAPE = 0.72 // target 0.25: missed
	boundOrders   = 2    // required orderings that may stay reversed
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
