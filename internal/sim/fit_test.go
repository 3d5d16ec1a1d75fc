package sim

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

var refit = flag.Bool("fit", false, "refit testdata coefficients from the reference cases and rewrite coefficients.json (minutes)")

// TestFitReference refits the embedded calibration. Run with -fit.
func TestFitReference(t *testing.T) {
	if !*refit {
		t.Skip("run with -fit to refit coefficients.json")
	}
	ShareGPTLengthsPath = filepath.Join(sharedDir(t), "data", "sharegpt", "sharegpt_v3_sample_1000.json")
	ref, err := ReferenceCases()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	c, err := Fit(ref.Cases, DefaultCoefficients(), FitOptions{Rounds: fitRounds(), Orderings: ref.Orderings, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fit took %v", time.Since(t0))
	c.Source = "fitted to every result block of ../shared/reference (go test ./internal/sim -run TestFitReference -fit)"
	if err := os.WriteFile("coefficients.json", c.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fitRounds reads SIM_FIT_ROUNDS (0 = Fit's default).
func fitRounds() int {
	if n, err := strconv.Atoi(os.Getenv("SIM_FIT_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 0
}
