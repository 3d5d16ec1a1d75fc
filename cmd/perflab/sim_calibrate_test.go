package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/racetest"
	"github.com/perflab/perflab/internal/sim"
)

// TestSimCalibrateCLI measures three runs on a simulated vLLM 0.11 whose
// GEMMs are slower than the embedded calibration says (the stand-in for a
// user's own GPU), calibrates on the saved results, and checks that the
// calibration finds the slower GEMMs, names what the runs could not pin
// (no run leaves the CUDA graphs, so eager_ms), and predicts the runs
// better than the embedded calibration does.
func TestSimCalibrateCLI(t *testing.T) {
	racetest.SkipCPUBound(t) // three predictions and a fit; the fit's goroutines are raced in internal/sim
	tok := sharedTokenizer(t)
	dir := t.TempDir()
	const key = "H100/vllm/0.11.0"
	truth := sim.DefaultCoefficients()
	e := truth.Entries[key]
	e.GEMMEff *= 0.6
	truth.Entries[key] = e
	truthPath := filepath.Join(dir, "truth.json")
	if err := os.WriteFile(truthPath, truth.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := []string{"--", "vllm", "serve", "Qwen/Qwen3-14B"}
	runs := [][]string{
		{"--random-input-len", "2000", "--random-output-len", "20"},
		{"--random-input-len", "1000", "--random-output-len", "100", "--max-concurrency", "16"},
		{"--random-input-len", "200", "--random-output-len", "200"},
	}
	predict := func(coef string, run []string) string {
		t.Helper()
		args := append([]string{"--engine", "vllm", "--engine-version", "0.11.0", "--gpu", "H100", "--dataset-name", "random",
			"--num-prompts", "40", "--seed", "3", "--tokenizer", tok, "--output", "json"}, run...)
		if coef != "" {
			args = append(args, "--coefficients", coef)
		}
		out, err := execSimPredict(t, append(args, argv...)...)
		if err != nil {
			t.Fatalf("sim predict %v: %v", run, err)
		}
		return out
	}
	var files []string
	for i, run := range runs {
		f := filepath.Join(dir, "run"+string(rune('a'+i))+".json")
		if err := os.WriteFile(f, []byte(predict(truthPath, run)), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}

	out := filepath.Join(dir, "mine.json")
	cmd := newSimCalibrateCmd()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs(append(append([]string{"--engine", "vllm", "--engine-version", "0.11.0", "-o", out}, files...), argv...))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("sim calibrate: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	mine, err := sim.ParseCoefficients(b)
	if err != nil {
		t.Fatalf("calibration does not parse back: %v", err)
	}
	got, emb := mine.Entries[key].GEMMEff, sim.DefaultCoefficients().Entries[key].GEMMEff
	if math.Abs(math.Log(got/e.GEMMEff)) > 0.5*math.Abs(math.Log(emb/e.GEMMEff)) {
		t.Errorf("calibrated gemm_eff %.3f: not much nearer the runs' %.3f than the embedded %.3f", got, e.GEMMEff, emb)
	}
	t.Logf("gemm_eff: runs %.3f, embedded %.3f, calibrated %.3f; %s", e.GEMMEff, emb, got, strings.TrimSpace(stderr.String()))
	held := strings.Join(mine.Held[key], ",")
	if !strings.Contains(held, "eager_ms") {
		t.Errorf("held %q: no run leaves the CUDA graphs, want eager_ms held", held)
	}
	if !strings.Contains(stderr.String(), "eager_ms") {
		t.Errorf("stderr does not name what the runs do not pin:\n%s", stderr.String())
	}
	// The user's calibration predicts their runs better than the embedded one.
	tps := func(js []byte) float64 {
		t.Helper()
		r, err := metrics.ParseJSON(js)
		if err != nil {
			t.Fatal(err)
		}
		return r.TotalTokenThroughput
	}
	var errMine, errEmb float64
	for i, run := range runs {
		b, err := os.ReadFile(files[i])
		if err != nil {
			t.Fatal(err)
		}
		want := tps(b)
		errMine += math.Abs(tps([]byte(predict(out, run)))/want - 1)
		errEmb += math.Abs(tps([]byte(predict("", run)))/want - 1)
	}
	t.Logf("mean TPS error: calibrated %.1f%%, embedded %.1f%%", errMine/3*100, errEmb/3*100)
	if errMine >= errEmb/2 {
		t.Errorf("mean TPS error with the calibration %.1f%%, embedded %.1f%%: want under half", errMine/3*100, errEmb/3*100)
	}
}
