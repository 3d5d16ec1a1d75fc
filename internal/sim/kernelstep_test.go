package sim

import (
	"errors"
	"math"
	"testing"

	"github.com/perflab/perflab/internal/sim/kernels"
)

// The dense GEMMs of a step, read off the measured H100 table, against the
// calibrated roofline's GEMM term for the same step. The log is the table
// docs/sim-fidelity.md quotes: how far each engine's fitted efficiencies
// sit from what the kernels do. The assertions are what must hold of any
// measured table: time grows with the batch, a one-token step streams the
// weights at no more than the measured read bandwidth, and every shape of
// the catalog's dense models at their TP sizes was measured.
func TestKernelDenseAgainstRoofline(t *testing.T) {
	tab, err := kernels.Embedded("H100")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		engine, version, model string
		tp                     int
	}{
		{"vllm", "0.11.0", "Qwen3-14B", 1}, {"vllm", "0.17.1", "Qwen3-14B", 1},
		{"sglang", "0.5.5.post1", "Qwen3-14B", 1}, {"sglang", "0.5.9", "Qwen3-14B", 1},
		{"trtllm", "1.2.0rc1", "Qwen3-14B", 1},
		{"vllm", "0.11.0", "Qwen3-32B", 1}, {"vllm", "0.11.0", "Qwen3-32B", 2},
		{"vllm", "0.11.0", "Qwen3-8B", 1}, {"vllm", "0.11.0", "Llama-3.1-70B", 4},
	} {
		e, err := New(Params{Engine: c.engine, Version: c.version, Model: c.model, GPU: "H100", TP: c.tp}, nil)
		if err != nil {
			t.Fatal(err)
		}
		prev := 0.0
		for _, n := range []int{1, 16, 64, 256, 1024, 4096, 8192} {
			sec, exact, err := kernelDense(tab, e.arch, c.tp, n, min(n, 256))
			if err != nil {
				t.Fatal(err)
			}
			if !exact {
				t.Errorf("%s tp%d: a shape of %d tokens was not measured", c.model, c.tp, n)
			}
			// Within the 3% two runs of one shape differ by.
			if sec < 0.97*prev {
				t.Errorf("%s tp%d: %d tokens take %.3g s, fewer than a smaller batch's %.3g s", c.model, c.tp, n, sec, prev)
			}
			prev = sec
			if n == 1 {
				floor := e.weightBytes / (tab.Memory.ReadGBps * 1e9)
				if sec < 0.97*floor {
					t.Errorf("%s tp%d: a one-token step %.3g s, faster than its weights stream (%.3g s)", c.model, c.tp, sec, floor)
				}
			}
			flops := e.flopsPerTok*float64(n) + e.headFlops*float64(min(n, 256))
			bw := e.hw.HBMGBps * 1e9 * e.c.MemEff
			roof := smoothMax(flops/(e.peak*e.gemmEff), e.weightBytes/bw)
			t.Logf("%-13s tp%d %-6s %-11s H100 %5d tokens: kernels %8.3f ms, calibrated roofline %8.3f ms (x%.2f)",
				c.model, c.tp, c.engine, c.version, n, sec*1e3, roof*1e3, roof/sec)
		}
	}
	if _, _, err := kernelDense(tab, mustArch(t, "Qwen3-14B-AWQ"), 1, 1, 1); !errors.Is(err, errKernelArch) {
		t.Errorf("a weight-only INT4 model's dense step: err = %v, want errKernelArch", err)
	}
	if v, _, _ := kernelDense(tab, mustArch(t, "Qwen3-14B"), 1, 0, 0); v != 0 || math.IsNaN(v) {
		t.Errorf("an empty step takes %g s", v)
	}
}

func mustArch(t *testing.T, model string) Arch {
	t.Helper()
	p, err := Params{Engine: "vllm", Model: model, GPU: "H100"}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.arch()
	if err != nil {
		t.Fatal(err)
	}
	return a
}
