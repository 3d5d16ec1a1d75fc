package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/report"
	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/store"
	"github.com/perflab/perflab/internal/tokenizer"
)

var updateReport = flag.Bool("update-report", false, "rewrite testdata/report-sim.md.golden")

// goldenSpec is a small lab on the calibrated simulator with seeded noise:
// the same seed must give the same report, byte for byte.
const goldenSpec = `
name: golden-sim
model: Qwen/Qwen3-14B
fp8_model: Qwen/Qwen3-14B-FP8
hardware: {gpu: H100, count: 1}
engines:
  - {name: vllm, version: 0.11.0}
  - {name: sglang, version: 0.5.5.post1}
tuning: {name: Random 1000/200, dataset: random, input_len: 1000, output_len: 200, num_prompts: 200, seed: 42}
generalization:
  - {name: Short Prompt, dataset: random, input_len: 128, output_len: 4, num_prompts: 200, seed: 42}
stages:
  - name: engine
  - name: quantization
    values: [fp8-checkpoint]
  - name: max_num_seqs
    values: ["128", "512"]
search:
  knobs: [engine, quantization, max_num_seqs]
repeats: 3
noise: {sigma: 0.01, seed: 7}
`

// TestReportGoldenSimLab runs a whole lab on the simulator into a real
// SQLite store, builds the report from the store alone, and compares the
// Markdown with a golden file. Recalibrating the simulator changes the
// figures: regenerate with
//
//	go test ./internal/lab -run ReportGolden -update-report
func TestReportGoldenSimLab(t *testing.T) {
	tok, err := tokenizer.Load(shareddata.Path(t, "data", "tokenizers", "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	run := func() []byte {
		ctx := context.Background()
		st, err := store.Open(ctx, filepath.Join(t.TempDir(), "lab.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		s := mustSpec(t, goldenSpec)
		r := &PredictRunner{Predictor: SimPredictor{}, Hardware: s.Hardware, Requests: CachedRequests(DatasetRequests(tok)), Noise: s.Noise}
		l := &Lab{Spec: s, Store: st, Runner: r, Guide: r}
		if _, err := l.Run(ctx); err != nil {
			t.Fatal(err)
		}
		runRec, err := st.RunByName(ctx, "golden-sim")
		if err != nil {
			t.Fatal(err)
		}
		trials, err := st.Trials(ctx, runRec.ID)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := report.Build(runRec, trials)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if _, err := report.WriteAll(rep, dir, "md"); err != nil {
			t.Fatal(err)
		}
		md, err := os.ReadFile(filepath.Join(dir, "report.md"))
		if err != nil {
			t.Fatal(err)
		}
		return md
	}
	got := run()
	if again := run(); !bytes.Equal(got, again) {
		t.Fatal("two runs with the same seed wrote different reports")
	}
	for _, want := range []string{"## Conclusion", "Recommended configuration", "| **Random 1000/200** |", "| **Short Prompt** |",
		"### Summary of Optimization Options", "noise floor"} {
		if !bytes.Contains(got, []byte(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	path := filepath.Join("testdata", "report-sim.md.golden")
	if *updateReport {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-report)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("report differs from %s at line %d:\n got: %q\nwant: %q\n(regenerate with -update-report after a deliberate change)", path, i+1, g, w)
			}
		}
	}
}

// TestEngineMetricsFromLabelledPrometheus feeds /metrics as vLLM with two
// data-parallel engines (and `perflab sim serve`) expose it, every sample
// labelled, through engine.ParsePrometheus into a report: the engine-metrics table
// must show the fleet's figures, not the zeros a bare-name lookup of
// labelled keys gives.
func TestEngineMetricsFromLabelledPrometheus(t *testing.T) {
	const exposition = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-14B"} 100
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-14B"} 28
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-14B"} 3
vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen3-14B"} 4
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-14B"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="Qwen/Qwen3-14B"} 0.7
vllm:num_preemptions_total{engine="0",model_name="Qwen/Qwen3-14B"} 5
vllm:num_preemptions_total{engine="1",model_name="Qwen/Qwen3-14B"} 6
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="Qwen/Qwen3-14B"} 7
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-14B"} 9
vllm:e2e_request_latency_seconds_count{engine="0",model_name="Qwen/Qwen3-14B"} 9
process_open_fds 12
`
	m := engine.ParsePrometheus(bufio.NewScanner(strings.NewReader(exposition)))
	for name, want := range map[string]float64{
		`vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-14B"}`: 28, // the series stay as exposed
		"vllm:num_requests_running":                                         128,
		"vllm:num_requests_waiting":                                         7,
		"vllm:num_preemptions_total":                                        11,
		"vllm:kv_cache_usage_perc":                                          0.6, // mean over engines
		"vllm:e2e_request_latency_seconds_count":                            9,
		"process_open_fds":                                                  12,
	} {
		if got, ok := m[name]; !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if v, ok := m["vllm:e2e_request_latency_seconds_bucket"]; ok {
		t.Errorf("histogram buckets summed over their bounds into %v", v)
	}

	// The same map through the report: the row carries the fleet figures.
	res, err := json.Marshal(map[string]any{"completed": 10, "num_prompts": 10, "duration": 1.0, "total_token_throughput": 1000.0, "output_throughput": 500.0})
	if err != nil {
		t.Fatal(err)
	}
	summary, err := json.Marshal(map[string]any{"name": "em", "gpu": "H100", "gpus": 2,
		"stages": []any{map[string]any{"name": "engine", "candidates": []any{map[string]any{"name": "vLLM DP2", "trial_key": "k", "decision": "not kept"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Build(store.Run{ID: 1, Name: "em", Summary: summary},
		[]store.Trial{{RunID: 1, Key: "k", Name: "vLLM DP2", Status: "ok", Result: res, EngineMetrics: m}})
	if err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := report.WriteMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	if want := "| vLLM DP2 | 60.0% | 11 | 128 | 7 |"; !strings.Contains(md.String(), want) {
		t.Errorf("engine metrics table lacks %q:\n%s", want, md.String())
	}
}
