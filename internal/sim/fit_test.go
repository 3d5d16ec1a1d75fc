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
	// From the generic prior, not from the embedded file, so the file is
	// reproducible by this command.
	prior := &Coefficients{Entries: map[string]Coef{"*": defaultCoef}}
	c, err := Fit(ref.Cases, prior, FitOptions{Rounds: fitRounds(), Orderings: ref.Orderings, Log: t.Logf})
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

var lomo = flag.Bool("lomo", false, "run leave-one-model-out (one full fit per model, about a minute on one core)")

// TestLeaveOneModelOut fits without each model and prints its errors. Run
// with -lomo; with -update too it rewrites coefficients_lomo.json, the folds
// sim predict's range comes from.
func TestLeaveOneModelOut(t *testing.T) {
	if !*lomo {
		t.Skip("run with -lomo")
	}
	ShareGPTLengthsPath = filepath.Join(sharedDir(t), "data", "sharegpt", "sharegpt_v3_sample_1000.json")
	ref, err := ReferenceCases()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	res, folds := LeaveOneModelOutFits(ref, &Coefficients{Entries: map[string]Coef{"*": defaultCoef}}, FitOptions{Orderings: ref.Orderings, Log: t.Logf})
	t.Logf("leave-one-model-out took %v", time.Since(t0))
	if len(res) != 3 || len(folds.Folds) != 3 {
		t.Fatalf("held out %d models (%d folds), want 3", len(res), len(folds.Folds))
	}
	if *update {
		// The folds PredictSpan spreads predictions over.
		if err := os.WriteFile("coefficients_lomo.json", folds.JSON(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
