package lab_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/perflab/perflab/internal/engine"
	. "github.com/perflab/perflab/internal/lab"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/tokenizer"
)

// TestE2ECrashDuringBench: a trial whose engine dies mid-benchmark (the
// simulator reproducing vLLM's MTP crash on Qwen3.5 under 300 concurrent
// requests, as a real `perflab sim serve` process) is stored as
// crash_during_bench with the engine's last log lines, and what was measured
// before the crash is kept in the trial's result.
func TestE2ECrashDuringBench(t *testing.T) {
	root := e2eRoot(t)
	tok, err := tokenizer.Load(filepath.Join(root, "..", "shared", "data", "tokenizers", "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	r := &LiveRunner{
		Runtime:   &engine.Sim{Binary: perflabBin, GPU: "H100", TimeScale: 20},
		Requests:  DatasetRequests(tok),
		TimeScale: 20,
	}
	cfg := engine.Config{Engine: engine.VLLM, Version: "0.17.1", Model: "Qwen/Qwen3.5-9B", MaxModelLen: 32768,
		Speculative: &engine.Speculative{Method: "mtp", NumSpeculativeTokens: 4}}
	w := labspec.Workload{Name: "burst", Dataset: "random", InputLen: 64, OutputLen: 3000, NumPrompts: 300, Seed: 42}
	m, err := r.Run(context.Background(), TrialSpec{Key: "crash", Stage: "speculative", Name: "mtp", Config: cfg, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	if m.Failure == nil || m.Failure.Class != engine.ClassCrashDuringBench {
		t.Fatalf("failure %+v, want crash_during_bench; result %+v; log %.800s", m.Failure, m.Result, m.Trace.LogTail)
	}
	if m.Result == nil {
		t.Fatal("partial result not kept")
	}
	if m.Result.Completed+m.Result.Failed != 300 || m.Result.Failed == 0 {
		t.Errorf("kept result: %d completed, %d failed; want the 300 requests accounted for, the cut ones failed", m.Result.Completed, m.Result.Failed)
	}
	if len(m.Trace.LogTail) == 0 {
		t.Error("no log tail kept")
	}
}
