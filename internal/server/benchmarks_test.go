package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/sim/serve"
)

// TestBenchmark runs one benchmark through the API against a live
// OpenAI-compatible endpoint (the simulator's own server, vLLM's face, on
// a loopback port): the run ends done with one trial whose result has the
// requests it sent, and its report renders. Bad requests are refused.
func TestBenchmark(t *testing.T) {
	root := shareddata.Path(t, "data")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- serve.Run(ctx, serve.Options{Engine: "vllm", Argv: []string{"vllm", "serve", "Qwen/Qwen3-14B", "--host", "127.0.0.1", "--port", "0"},
			GPU: "H100-SXM-80GB", GPUs: 1, TimeScale: 50, Stderr: io.Discard, Ready: func(a string) { addr <- a }})
	}()
	var endpoint string
	select {
	case a := <-addr:
		endpoint = "http://" + a
	case err := <-served:
		t.Fatalf("sim serve: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("sim serve not ready in a minute")
	}
	ts := newTestServer(t, stores(t)["sqlite"](t), Config{DataRoot: root})
	body := fmt.Sprintf(`{"name": "one-click", "base_url": %q, "model": "Qwen/Qwen3-14B", "tokenizer": "tokenizers/qwen3", "profile": "short", "num_prompts": 40}`, endpoint)
	code, b := ts.do(t, "POST", "/api/v1/benchmarks", "application/json", strings.NewReader(body))
	if code != 202 {
		t.Fatalf("POST /benchmarks: %d %s", code, b)
	}
	var s started
	json.Unmarshal(b, &s)
	evs := ts.follow(t, s.ID, 0, nil)
	if got := types(evs); strings.Join(got, ",") != "trial_started,trial_ended,end" {
		t.Fatalf("events %v", got)
	}
	if end := evs[len(evs)-1].data; end.Status != "done" || end.Error != "" {
		t.Fatalf("benchmark ended %s: %s", end.Status, end.Error)
	}
	var trials struct{ Trials []trialInfo }
	ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d/trials", s.ID), &trials)
	if len(trials.Trials) != 1 || trials.Trials[0].Status != "ok" || trials.Trials[0].TotalThroughput <= 0 {
		t.Fatalf("trials %+v", trials.Trials)
	}
	var res struct {
		Completed int `json:"completed"`
	}
	var tr trialDetail
	ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d/trials/%s", s.ID, "benchmark%2Fshort"), &tr)
	json.Unmarshal(tr.Result, &res)
	if res.Completed != 40 || !strings.Contains(tr.Command, "--profile short") {
		t.Errorf("result: %d completed, want 40; command %q", res.Completed, tr.Command)
	}
	if code, b := ts.do(t, "GET", fmt.Sprintf("/api/v1/runs/%d/report.md", s.ID), "", nil); code != 200 {
		t.Errorf("report.md: %d %s", code, b)
	}
	for _, bad := range []string{
		`{"base_url": "ftp://x", "model": "m", "profile": "short"}`,
		`{"base_url": "http://x", "model": "m", "profile": "nope"}`,
		`{"base_url": "http://x", "profile": "short"}`,
		`{"base_url": "http://x", "model": "m", "profile": "short", "tokenizer": "/etc"}`,
		`{"base_url": "http://x", "model": "m", "profile": "sharegpt"}`,
		`{"base_url": "http://x", "model": "m", "profile": "short", "unknown": 1}`,
	} {
		if code, b := ts.do(t, "POST", "/api/v1/benchmarks", "application/json", strings.NewReader(bad)); code != 400 {
			t.Errorf("POST %s: %d %s, want 400", bad, code, b)
		}
	}
}
