package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFidelityKernelModel scores the kernel-table step model's calibration
// (coefficients_kernels.json, SIM_STEP_MODEL=kernels go test -run
// TestFitReference -fit) on the reference blocks, as TestFidelity scores the
// embedded one. SIM_FIDELITY_PRINT=1 or -v prints the table
// docs/sim-fidelity.md quotes.
func TestFidelityKernelModel(t *testing.T) {
	c := DefaultCoefficients()
	if c.StepModel != StepKernels {
		var err error
		if c, err = LoadCoefficients(kernelCoefficientsFile); err != nil {
			t.Fatal(err)
		}
	}
	if c.StepModel != StepKernels {
		t.Fatalf("%s: step model %q, want %q", kernelCoefficientsFile, c.StepModel, StepKernels)
	}
	ShareGPTLengthsPath = filepath.Join(sharedDir(t), "data", "sharegpt", "sharegpt_v3_sample_1000.json")
	ref, err := ReferenceCases()
	if err != nil {
		t.Fatal(err)
	}
	f := Evaluate(ref, c)
	var b strings.Builder
	f.WriteText(&b)
	if testing.Verbose() || os.Getenv("SIM_FIDELITY_PRINT") != "" {
		t.Log("\n" + b.String())
	}
	rep, req := f.RequiredOrderings()
	if req-rep > kernelBoundOrders {
		t.Errorf("kernel model: %d of %d required orderings reversed, bound %d", req-rep, req, kernelBoundOrders)
	}
	t.Logf("kernel model: TPS %.1f%% TTFT %.1f%% TPOT %.1f%%, orderings %d of %d", 100*f.TPSMAPE, 100*f.TTFTMAPE, 100*f.TPOTMAPE, rep, req)
	for _, r := range f.Results {
		if r.Err != nil && r.Case.Exclude == "" {
			t.Errorf("%s: %v", r.Case.ID, r.Err)
		}
	}
	if f.N != 48 {
		t.Errorf("scored %d blocks, want 48", f.N)
	}
	// Regression bounds a little above what the committed calibration
	// reaches (docs/sim-fidelity.md, "The step model on kernel tables").
	for _, b := range []struct {
		name       string
		got, bound float64
	}{{"TPS", f.TPSMAPE, kernelBoundTPS}, {"TTFT", f.TTFTMAPE, kernelBoundTTFT}, {"TPOT", f.TPOTMAPE, kernelBoundTPOT}} {
		if b.got > b.bound {
			t.Errorf("kernel model: %s MAPE %.1f%% > bound %.1f%%", b.name, 100*b.got, 100*b.bound)
		}
	}
}

// The kernel model's achieved in-sample figures (2026-12-02, with the
// engine's GPU time over the table's fitted as kernel_scale: 7.2%, 13.4%,
// 12.3%, 21 of 22 orderings; 19.6%, 21.2%, 20.4% and 20 of 22 when the
// host's overheads stood in for it) with a little room: worse than the
// roofline's 4.2 / 9.9 / 7.8%, which is why it is not the default.
const (
	kernelBoundTPS    = 0.075
	kernelBoundTTFT   = 0.14
	kernelBoundTPOT   = 0.13
	kernelBoundOrders = 1
)
