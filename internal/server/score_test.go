package server

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/store"
)

// TestTrialScores: the trial list and a trial's detail carry each trial's
// score and unit under the run's objective, read from the stored spec, so
// a reloaded dashboard shows goodput and per-GPU scores it cannot derive
// from the list's throughputs; a failed trial's score is null.
func TestTrialScores(t *testing.T) {
	result := `{"completed": 10, "num_prompts": 10, "duration": 5, "request_throughput": 2, "request_goodput": 1.5,
		"output_throughput": 100, "total_token_throughput": 800, "p99_tpot_ms": 40, "p99_ttft_ms": 300}`
	head := "name: %s\nmodel: Qwen/Qwen3-14B\nengines: [{name: vllm}]\n"
	cases := []struct {
		name, objective string
		score           float64
		unit            string
	}{
		{"tput", "", 800, "tok/s"},
		{"pergpu", "objective: {metric: throughput_per_gpu}\n", 400, "tok/s/GPU"},
		{"goodput", "objective: {metric: goodput, slo: {tpot_ms: 50}}\n", 1.5, "req/s within SLO"},
		// Goodput with only a P99 bound is total throughput under it.
		{"p99only", "objective: {metric: goodput, slo: {p99_tpot_ms: 50}}\n", 800, "tok/s"},
	}
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "perflab.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ts := newTestServer(t, st, Config{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run, err := st.EnsureRun(ctx, "key-"+tc.name, tc.name, fmt.Sprintf(head, tc.name)+tc.objective, false)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			for _, tr := range []store.Trial{
				{RunID: run.ID, Key: "ok", Name: "vLLM TP2", Status: "ok", Config: []byte(`{"engine": "vllm", "tensor_parallel": 2}`),
					Result: []byte(result), Started: now, Ended: now.Add(time.Second)},
				{RunID: run.ID, Key: "bad", Name: "vLLM", Status: "failed", FailureClass: "oom", Config: []byte(`{"engine": "vllm"}`),
					Started: now, Ended: now.Add(time.Second)},
			} {
				if err := st.SaveTrial(ctx, &tr); err != nil {
					t.Fatal(err)
				}
			}
			var list struct{ Trials []trialInfo }
			ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d/trials", run.ID), &list)
			got := map[string]trialInfo{}
			for _, ti := range list.Trials {
				got[ti.Key] = ti
			}
			if ok := got["ok"]; ok.Score == nil || *ok.Score != tc.score || ok.Unit != tc.unit {
				t.Errorf("ok trial: score %v %q, want %v %q", ok.Score, ok.Unit, tc.score, tc.unit)
			}
			if bad := got["bad"]; bad.Score != nil {
				t.Errorf("failed trial scored %v", *bad.Score)
			}
			var d trialDetail
			ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d/trials/%s", run.ID, url.PathEscape("ok")), &d)
			if d.Score == nil || *d.Score != tc.score || d.Unit != tc.unit {
				t.Errorf("detail: score %v %q, want %v %q", d.Score, d.Unit, tc.score, tc.unit)
			}
		})
	}
}
