package lab

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/labspec"
)

// budgetSpec: baseline vLLM, then the engine stage (SGLang +1.7% on a
// single run in the analytic model, TensorRT-LLM -15%), then the repeats
// of vLLM and SGLang; noise makes every repeat differ, as on real engines.
const budgetSpec = `
name: budget
model: Qwen/Qwen3-14B
hardware: {gpu: H100, count: 1}
engines:
  - {name: vllm, version: 0.11.0}
  - {name: sglang, version: 0.5.5.post1}
  - {name: trtllm, version: 1.2.0rc1}
tuning: {name: rnd, dataset: random, input_len: 512, output_len: 128, num_prompts: 200, seed: 42}
no_generalization: true
stages:
  - name: engine
  - name: max_num_seqs
    values: ["512"]
repeats: 3
noise: {sigma: 0.01, seed: 3}
`

func TestBudgetStopsOnCompleteEvidence(t *testing.T) {
	cases := []struct {
		name       string
		maxTrials  int
		wantTrials int
		// wantWhy maps a candidate's engine to its decision and the start
		// of its reason in the engine stage.
		wantWhy map[string][2]string
	}{
		{
			// Baseline with its 2 repeats (run right after it, on its
			// server) + 2 candidates: the budget ends before SGLang's
			// repeats, so its single-run gain decides nothing.
			name: "mid-repeat", maxTrials: 5, wantTrials: 5,
			wantWhy: map[string][2]string{
				"sglang": {"skipped", "stopped by budget before its repeats (single run +"},
				"trtllm": {"skipped", "not the best in stage"},
			},
		},
		{
			// Baseline with its 2 repeats + 1 of 2 candidates: the stage is
			// cut before it can compare them.
			name: "mid-stage", maxTrials: 4, wantTrials: 4,
			wantWhy: map[string][2]string{
				"sglang": {"skipped", "stopped by budget before the stage's decision"},
				"trtllm": {"skipped", "not run: budget spent"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSpec(t, budgetSpec+"budget: {max_trials: "+strconv.Itoa(tc.maxTrials)+"}\n")
			sum, err := analyticLab(s, newMemStore()).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if sum.Stopped != "budget: max_trials" || sum.TrialsRun != tc.wantTrials {
				t.Errorf("stopped %q after %d trials, want budget: max_trials after %d", sum.Stopped, sum.TrialsRun, tc.wantTrials)
			}
			if len(sum.Stages) != 1 || sum.Stages[0].Kept != "" {
				t.Fatalf("stages %+v, want the engine stage only, nothing kept", sum.Stages)
			}
			got := map[string][2]string{}
			for _, c := range sum.Stages[0].Candidates {
				got[c.Point[labspec.KnobEngine]] = [2]string{c.Decision, c.Reason}
			}
			for eng, want := range tc.wantWhy {
				if g := got[eng]; g[0] != want[0] || !strings.HasPrefix(g[1], want[1]) {
					t.Errorf("%s: %s %q, want %s %q", eng, g[0], g[1], want[0], want[1])
				}
			}
			// The winner is the baseline config: its gain is exactly 0,
			// not the difference of two averages of the same config.
			if sum.Winner == nil || sum.Winner.ConfigHash != sum.Baseline.ConfigHash {
				t.Fatalf("winner %+v, want the baseline config", sum.Winner)
			}
			if sum.Gain != 0 || sum.Winner.Gain != 0 || math.Signbit(sum.Gain) {
				t.Errorf("gain %v (winner %v), want exactly 0", sum.Gain, sum.Winner.Gain)
			}
		})
	}
}

// TestBudgetLetsCompleteEvidenceDecide: with room for the repeats the same
// candidate is decided on them (kept or below the floor, never "stopped").
func TestBudgetLetsCompleteEvidenceDecide(t *testing.T) {
	s := mustSpec(t, budgetSpec+"budget: {max_trials: 7}\n")
	sum, err := analyticLab(s, newMemStore()).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range sum.Stages[0].Candidates {
		if c.Point[labspec.KnobEngine] != "sglang" {
			continue
		}
		if len(c.RepeatScores) != 3 || strings.Contains(c.Reason, "budget") {
			t.Errorf("sglang: %s %q with repeats %v, want a decision on 3 repeats", c.Decision, c.Reason, c.RepeatScores)
		}
	}
	if sum.Winner.ConfigHash != sum.Baseline.ConfigHash {
		g, ok := relGain(sum.Winner.Score, sum.Baseline.Score)
		if !ok || g != sum.Gain {
			t.Errorf("gain %v, want winner/baseline - 1 = %v", sum.Gain, g)
		}
	}
}
