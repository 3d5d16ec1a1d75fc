package lab

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
)

// sloSpec tunes max_num_seqs on a burst large enough that more sequences
// buy throughput at a longer TPOT (the analytic model's step grows with
// the batch's KV): 128 → ~20.8 ms, default 256 → ~24.2 ms (P99 = 3× mean
// in that model, ~73 ms), 300 → ~25.4 ms (P99 ~76), 512 and 1024 → ~29.6 ms
// (the KV cache caps both at ~455 sequences; P99 ~89).
// sloSpec is on an A100, where vLLM's default max_num_seqs is 256 (the
// analytic model's), so 1024 is a change (on an H100 it is the default).
const sloSpec = `
name: slo
model: Qwen/Qwen3-14B
hardware: {gpu: A100, count: 1}
engines: [{name: vllm, version: 0.11.0}]
tuning: {name: rnd, dataset: random, input_len: 512, output_len: 128, num_prompts: 2000, seed: 42}
no_generalization: true
stages:
  - name: max_num_seqs
    values: ["128", "300", "512", "1024"]
combinations: false
search: {disable: true}
repeats: 1
`

// goodputAnalytic adds vLLM's request_goodput to the analytic model's
// result: every request of a trial has the same TPOT there, so under a
// per-request TPOT bound either all completed requests count or none.
type goodputAnalytic struct{ slo labspec.SLO }

func (g goodputAnalytic) Predict(ctx context.Context, cfg engine.Config, hw labspec.Hardware, reqs []dataset.Request, w labspec.Workload) (Prediction, error) {
	p, err := AnalyticPredictor{}.Predict(ctx, cfg, hw, reqs, w)
	if err != nil || p.FailureClass != "" {
		return p, err
	}
	var m map[string]any
	if err := json.Unmarshal(p.Result, &m); err != nil {
		return p, err
	}
	good := 0.0
	if m["mean_tpot_ms"].(float64) <= g.slo.TPOTMs {
		good = m["completed"].(float64)
	}
	m["request_goodput"] = good / m["duration"].(float64)
	p.Result, err = json.Marshal(m)
	return p, err
}

func TestObjectiveSLO(t *testing.T) {
	cases := []struct {
		name      string
		objective string
		predictor Predictor
		// wantMetric / wantUnit: the objective after normalization.
		wantMetric, wantUnit string
		// wantWinner is the winner's max_num_seqs ("" = the baseline's
		// default, "-" = no eligible config, so no winner).
		wantWinner string
		// wantWhy maps a candidate's max_num_seqs to the start of its reason.
		wantWhy map[string]string
		// wantBaseWhy is the start of the baseline's reason ("" = eligible).
		wantBaseWhy string
		wantGain    bool // a positive gain over an eligible baseline
	}{
		{
			name:      "no SLO takes the most throughput",
			objective: "objective: {metric: total_throughput}",
			predictor: AnalyticPredictor{}, wantMetric: labspec.ObjectiveTotalThroughput, wantUnit: "tok/s",
			wantWinner: "512", wantGain: true,
		},
		{
			name:      "P99 bound only: throughput within it",
			objective: "objective: {metric: goodput, slo: {p99_tpot_ms: 80}}",
			predictor: AnalyticPredictor{}, wantMetric: labspec.ObjectiveTotalThroughput, wantUnit: "tok/s",
			wantWinner: "300", wantGain: true,
			wantWhy: map[string]string{"512": "SLO: P99 TPOT 88.", "1024": "SLO: P99 TPOT 88.", "128": "not the best"},
		},
		{
			name:      "per-request bound: vLLM goodput",
			objective: "objective: {metric: goodput, slo: {tpot_ms: 28}}",
			predictor: goodputAnalytic{labspec.SLO{TPOTMs: 28}}, wantMetric: labspec.ObjectiveGoodput, wantUnit: "req/s within SLO",
			wantWinner: "300", wantGain: true,
			wantWhy: map[string]string{"512": "objective is 0 req/s within SLO: no request met the SLO", "1024": "objective is 0 req/s"},
		},
		{
			name:      "per-request bound the baseline misses entirely",
			objective: "objective: {metric: goodput, slo: {tpot_ms: 22}}",
			predictor: goodputAnalytic{labspec.SLO{TPOTMs: 22}}, wantMetric: labspec.ObjectiveGoodput, wantUnit: "req/s within SLO",
			wantWinner: "128", wantBaseWhy: "objective is 0 req/s within SLO",
			wantWhy: map[string]string{"300": "objective is 0", "512": "objective is 0"},
		},
		{
			name:      "goodput without request_goodput in the results",
			objective: "objective: {metric: goodput, slo: {tpot_ms: 28}}",
			predictor: AnalyticPredictor{}, wantMetric: labspec.ObjectiveGoodput, wantUnit: "req/s within SLO",
			wantWinner: "-", wantBaseWhy: "SLO: the result has no request_goodput",
			wantWhy: map[string]string{"128": "SLO: the result has no request_goodput", "512": "SLO: the result has no request_goodput"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSpec(t, sloSpec+tc.objective+"\n")
			if s.Objective.Metric != tc.wantMetric || ObjectiveUnit(s.Objective) != tc.wantUnit {
				t.Fatalf("objective %s (%s), want %s (%s)", s.Objective.Metric, ObjectiveUnit(s.Objective), tc.wantMetric, tc.wantUnit)
			}
			r := &PredictRunner{Predictor: tc.predictor, Hardware: s.Hardware, Requests: CachedRequests(StandinRequests)}
			sum, err := (&Lab{Spec: s, Store: newMemStore(), Runner: r, Guide: r}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if sum.JSON() == nil {
				t.Fatal("summary does not encode (a NaN or Inf in it?)")
			}
			if !strings.HasPrefix(sum.Baseline.Reason, tc.wantBaseWhy) || (tc.wantBaseWhy == "") != (sum.Baseline.Reason == "") {
				t.Errorf("baseline reason %q, want %q", sum.Baseline.Reason, tc.wantBaseWhy)
			}
			if tc.wantBaseWhy == "" && !(sum.Baseline.Score > 0) {
				t.Errorf("baseline scores %v, want a positive score", sum.Baseline.Score)
			}
			switch {
			case tc.wantWinner == "-":
				if sum.Winner != nil {
					t.Errorf("winner %s, want none (no config is eligible)", sum.Winner.Name)
				}
			case sum.Winner == nil:
				t.Errorf("no winner, want max_num_seqs %q", tc.wantWinner)
			case sum.Winner.Point[labspec.KnobMaxNumSeqs] != tc.wantWinner:
				t.Errorf("winner %s, want max_num_seqs %q", sum.Winner.Name, tc.wantWinner)
			}
			if tc.wantGain != (sum.Gain > 0) || math.IsNaN(sum.Gain) || math.IsInf(sum.Gain, 0) {
				t.Errorf("gain %v, want positive: %v", sum.Gain, tc.wantGain)
			}
			seen := map[string]bool{}
			for _, st := range sum.Stages {
				for _, c := range st.Candidates {
					v := c.Point[labspec.KnobMaxNumSeqs]
					seen[v] = true
					if strings.Contains(c.Reason, "NaN") || strings.Contains(c.Reason, "Inf") || math.IsNaN(c.Gain) || math.IsInf(c.Gain, 0) {
						t.Errorf("candidate %s: gain %v reason %q", c.Name, c.Gain, c.Reason)
					}
					if c.Decision == "kept" && c.Reason != "first working configuration" && !(c.Gain > 0) {
						t.Errorf("candidate %s kept with gain %v (%s)", c.Name, c.Gain, c.Reason)
					}
					if want, ok := tc.wantWhy[v]; ok && (!strings.HasPrefix(c.Reason, want) || c.Decision == "kept") {
						t.Errorf("candidate %s: %s %q, want skipped with %q", c.Name, c.Decision, c.Reason, want)
					}
				}
			}
			for v := range tc.wantWhy {
				if !seen[v] {
					t.Errorf("no candidate with max_num_seqs %s in the summary", v)
				}
			}
		})
	}
}

func TestRelGain(t *testing.T) {
	cases := []struct {
		a, b float64
		want float64
		ok   bool
	}{
		{110, 100, 0.1, true},
		{90, 100, -0.1, true},
		{5, 0, 0, false},
		{0, 0, 0, false},
		{5, -1, 0, false},
		{math.NaN(), 100, 0, false},
		{100, math.NaN(), 0, false},
		{math.Inf(1), 100, 0, false},
		{100, math.Inf(1), 0, false},
	}
	for _, tc := range cases {
		g, ok := relGain(tc.a, tc.b)
		if ok != tc.ok || math.Abs(g-tc.want) > 1e-12 {
			t.Errorf("relGain(%v, %v) = %v, %v; want %v, %v", tc.a, tc.b, g, ok, tc.want, tc.ok)
		}
	}
}
