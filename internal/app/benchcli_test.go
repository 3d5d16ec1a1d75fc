package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/bench/benchtest"
	"github.com/perflab/perflab/internal/shareddata"
)

// benchArgs are the defaults perflab bench's flags give, against url.
func benchArgs(t *testing.T, url string) *BenchArgs {
	return &BenchArgs{BaseURL: url, Backend: "openai", Endpoint: "/v1/completions", Model: "Qwen/Qwen3-8B",
		Tokenizer: shareddata.Path(t, "data", "tokenizers", "qwen3"), RequestRate: 1e9, Burstiness: 1,
		MetricPercentiles: "99", Output: "text", Transport: "auto", RequestTimeout: 30, DisableTqdm: true}
}

// TestRunBenchProfileAndChanged: a profile supplies the dataset, rate and
// concurrency; a flag the user set (Changed) wins over it, one left at its
// default does not. The server sees as many requests as the merged
// num-prompts, and --output json puts the result alone on stdout.
func TestRunBenchProfileAndChanged(t *testing.T) {
	srv := benchtest.New(func(i int, body map[string]any) benchtest.Plan {
		return benchtest.Plan{TTFT: time.Millisecond, Chunks: 2, Gap: time.Millisecond}
	})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	f := benchArgs(t, hs.URL)
	f.Profile = "short"
	f.Output = "json"
	f.Dataset.NumPrompts = 12
	f.Changed = func(flag string) bool { return flag == "num-prompts" }
	var stdout, stderr bytes.Buffer
	if err := RunBench(context.Background(), f, nil, &stdout, &stderr); err != nil {
		t.Fatalf("RunBench: %v\n%s", err, stderr.String())
	}
	if got := srv.Requests(); got != 12 {
		t.Errorf("server saw %d requests, want the 12 num-prompts set over the profile's 1000", got)
	}
	if f.Dataset.RandomInputLen != 128 || f.Seed != 42 {
		t.Errorf("profile not merged: input len %d, seed %d; want short's 128 and 42", f.Dataset.RandomInputLen, f.Seed)
	}
	var res struct {
		Completed  int `json:"completed"`
		NumPrompts int `json:"num_prompts"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not the result JSON alone: %v\n%s", err, stdout.String())
	}
	if res.Completed != 12 || res.NumPrompts != 12 {
		t.Errorf("result: completed %d, num_prompts %d; want 12, 12", res.Completed, res.NumPrompts)
	}
}

// TestRunBenchAllFailed: a benchmark none of whose requests succeeded
// prints its block and returns ErrNoSuccess, unless AllowAllFailed (vLLM
// exits 0); with Result.Save the file is written either way.
func TestRunBenchAllFailed(t *testing.T) {
	srv := benchtest.New(func(i int, body map[string]any) benchtest.Plan {
		return benchtest.Plan{Fault: benchtest.FaultStatus, Status: 500}
	})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	for _, allow := range []bool{false, true} {
		dir := t.TempDir()
		f := benchArgs(t, hs.URL)
		f.Dataset.Name, f.Dataset.NumPrompts, f.Dataset.RandomInputLen, f.Dataset.RandomOutputLen = "random", 4, 16, 4
		f.AllowAllFailed = allow
		f.Result = ResultFiles{Save: true, Dir: dir, Filename: "r.json"}
		var stdout, stderr bytes.Buffer
		err := RunBench(context.Background(), f, nil, &stdout, &stderr)
		if allow != (err == nil) || (err != nil && !errors.Is(err, ErrNoSuccess)) {
			t.Errorf("allow %v: err = %v, want ErrNoSuccess only when not allowed", allow, err)
		}
		if !strings.Contains(stdout.String(), "Serving Benchmark Result") {
			t.Errorf("allow %v: no result block:\n%s", allow, stdout.String())
		}
		if _, err := os.Stat(filepath.Join(dir, "r.json")); err != nil {
			t.Errorf("allow %v: result file: %v", allow, err)
		}
	}
}

// TestRunBenchRefusals: bad arguments are refused before a request is
// sent, each error naming its flag.
func TestRunBenchRefusals(t *testing.T) {
	srv := benchtest.New(func(i int, body map[string]any) benchtest.Plan { return benchtest.Plan{Chunks: 1} })
	hs := httptest.NewServer(srv)
	defer hs.Close()
	for _, tc := range []struct {
		name    string
		edit    func(f *BenchArgs)
		args    []string
		changed []string
		flag    string
	}{
		{"output", func(f *BenchArgs) { f.Output = "yaml" }, nil, nil, "--output"},
		{"transport", func(f *BenchArgs) { f.Transport = "bogus" }, nil, nil, "--transport"},
		{"zero concurrency set", func(f *BenchArgs) { f.MaxConcurrency = 0 }, nil, []string{"max-concurrency"}, "--max-concurrency"},
		{"goodput word", func(f *BenchArgs) {}, []string{"foo:1"}, nil, "foo:1"},
		{"goodput metric", func(f *BenchArgs) { f.Goodput = []string{"itl:5"} }, nil, nil, "--goodput"},
		{"ramp without ends", func(f *BenchArgs) { f.RampUp = "linear" }, nil, nil, "ramp-up-start-rps"},
		{"percentile metric", func(f *BenchArgs) { f.PercentileMetrics = "ttft,bogus" }, nil, nil, "--percentile-metrics"},
		{"profile", func(f *BenchArgs) { f.Profile = "no-such-profile" }, nil, nil, "--profile"},
		{"slo without search", func(f *BenchArgs) { f.SLO = "ttft_p99<=200ms" }, nil, nil, "--search"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := benchArgs(t, hs.URL)
			f.Dataset.Name, f.Dataset.NumPrompts, f.Dataset.RandomInputLen, f.Dataset.RandomOutputLen = "random", 4, 16, 4
			tc.edit(f)
			f.Changed = func(flag string) bool { return slices.Contains(tc.changed, flag) }
			var stdout, stderr bytes.Buffer
			err := RunBench(context.Background(), f, tc.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("err = %v, want it to name %s", err, tc.flag)
			}
		})
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("%d requests sent for refused arguments", n)
	}
}

func TestResultFilesName(t *testing.T) {
	var r ResultFiles
	if got := r.Name("org/Model-7B", LoadShape{Backend: "openai", Rate: 10}, "20250101-000000"); got != "openai-10.0qps-Model-7B-20250101-000000.json" {
		t.Errorf("got %q", got)
	}
	r = ResultFiles{Dir: "out", Label: "x"}
	ld := LoadShape{Backend: "vllm", RampUp: "linear", RampStart: 1, RampEnd: 20, MaxConcurrency: 4, Rate: 1}
	if got := r.Name("m", ld, "d"); got != filepath.Join("out", "x-ramp-up-linear-1qps-20qps-concurrency4-m-d.json") {
		t.Errorf("got %q", got)
	}
}
