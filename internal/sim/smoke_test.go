package sim

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSmokeEvaluate(t *testing.T) {
	if os.Getenv("SIM_SMOKE") == "" {
		t.Skip("SIM_SMOKE not set")
	}
	ShareGPTLengthsPath = filepath.Join(sharedDir(t), "data", "sharegpt", "sharegpt_v3_sample_1000.json")
	ref, err := ReferenceCases()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	f := Evaluate(ref, DefaultCoefficients())
	t.Logf("evaluate took %v", time.Since(t0))
	f.WriteText(os.Stdout)
}
