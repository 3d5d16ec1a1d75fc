package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/shareddata"

	"github.com/perflab/perflab/internal/bench/benchtest"
)

var updateBench = flag.Bool("update-bench", false, "rewrite cmd/perflab/testdata/bench_*.golden")

// sharedTokenizer finds ../shared/data/tokenizers/qwen3 from the module root.
func sharedTokenizer(t *testing.T) string {
	t.Helper()
	return shareddata.Path(t, "data", "tokenizers", "qwen3")
}

func runBenchCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := newBenchCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

// floatCell matches a `{:<10.2f}` value cell.
var floatCell = regexp.MustCompile(`^(.{40} )(-?\d+\.\d\d)( *)$`)

// TestBenchCLI runs `perflab bench` against the fake server: the printed
// block's layout matches the golden line by line (timing values masked,
// counts exact), and the saved JSON carries vLLM's --save-result keys.
func TestBenchCLI(t *testing.T) {
	tok := sharedTokenizer(t)
	srv := benchtest.New(func(i int, body map[string]any) benchtest.Plan {
		return benchtest.Plan{TTFT: 5 * time.Millisecond, Chunks: 16, Gap: time.Millisecond}
	})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	dir := t.TempDir()
	stdout, stderr, err := runBenchCmd(t, "--base-url", hs.URL, "--model", "Qwen/Qwen3-8B", "--tokenizer", tok,
		"--dataset-name", "random", "--random-input-len", "32", "--random-output-len", "16", "--num-prompts", "20",
		"--request-rate", "200", "--max-concurrency", "8", "--seed", "3",
		"--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99",
		"--goodput", "ttft:1000", "tpot:100", "--metadata", "tp=1", "gpu=H100",
		"--save-result", "--save-detailed", "--result-dir", dir, "--label", "lab", "--disable-tqdm")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	start := strings.Index(stdout, "============ Serving Benchmark Result")
	if start < 0 {
		t.Fatalf("no result block in:\n%s", stdout)
	}
	block := stdout[start:]
	if end := strings.Index(block, "\n"+strings.Repeat("=", 50)+"\n"); end >= 0 {
		block = block[:end+52]
	}
	var masked []string
	for _, l := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		if m := floatCell.FindStringSubmatch(l); m != nil && !strings.HasPrefix(l, "Request rate configured") {
			// Keep the cell width (value plus pad = at least 10) visible.
			l = m[1] + "<f2>" + strings.Repeat(".", len(m[2])+len(m[3])-4)
		}
		masked = append(masked, l)
	}
	got := strings.Join(masked, "\n") + "\n"
	golden := filepath.Join("testdata", "bench_block.golden")
	if *updateBench {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update-bench)", err)
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Errorf("line %d:\n got %q\nwant %q", i+1, g, w)
		}
	}

	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != 1 {
		t.Fatalf("result files %v", files)
	}
	if base := filepath.Base(files[0]); !regexp.MustCompile(`^lab-200\.0qps-concurrency8-Qwen3-8B-\d{8}-\d{6}\.json$`).MatchString(base) {
		t.Errorf("result file name %q does not follow vLLM's pattern", base)
	}
	raw, _ := os.ReadFile(files[0])
	var res map[string]any
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	// Every key `vllm bench serve --save-result --save-detailed` writes for
	// these flags (serve.py main_async + benchmark).
	for _, k := range []string{
		"date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
		"request_rate", "burstiness", "max_concurrency", "tp", "gpu",
		"duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
		"request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
		"input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "queue_times",
		"generated_texts", "errors", "max_output_tokens_per_s", "max_concurrent_requests", "rtfx",
		"mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p50_ttft_ms", "p99_ttft_ms",
		"mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p50_tpot_ms", "p99_tpot_ms",
		"mean_itl_ms", "median_itl_ms", "std_itl_ms", "p50_itl_ms", "p99_itl_ms",
		"mean_e2el_ms", "median_e2el_ms", "std_e2el_ms", "p50_e2el_ms", "p99_e2el_ms",
	} {
		if _, ok := res[k]; !ok {
			t.Errorf("saved result lacks vLLM key %q", k)
		}
	}
	if res["completed"] != 20.0 || res["num_prompts"] != 20.0 || res["label"] != "lab" || res["tp"] != "1" {
		t.Errorf("values: completed=%v num_prompts=%v label=%v tp=%v", res["completed"], res["num_prompts"], res["label"], res["tp"])
	}
	if _, ok := res["perflab"].(map[string]any); !ok {
		t.Errorf("no perflab section")
	}
	if lg := srv.Logs(0); lg == nil || lg.Body["ignore_eos"] != true {
		t.Errorf("random dataset should set ignore_eos like vLLM; body %v", lg)
	}
}

func TestBenchCLIErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--goodput", "foo:1", "--model", "m"}, "invalid metric name"},
		{[]string{"--ramp-up-strategy", "linear", "--model", "m"}, "ramp-up-start-rps"},
		{[]string{"--output", "yaml", "--model", "m"}, "--output"},
		{[]string{"--max-concurrency", "0", "--model", "m"}, "greater than 0"},
		{[]string{"--profile", "no-such-profile", "--model", "m"}, "neither a built-in profile"},
		{[]string{"--percentile-metrics", "ttft,bogus", "--model", "m"}, "unknown metric"},
		{[]string{"--transport", "bogus", "--model", "m"}, "unknown transport"},
	} {
		_, _, err := runBenchCmd(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
}

func TestResultFilename(t *testing.T) {
	var r resultFlags
	if got := r.name("org/Model-7B", loadShape{backend: "openai", rate: 10}, "20250101-000000"); got != "openai-10.0qps-Model-7B-20250101-000000.json" {
		t.Errorf("got %q", got)
	}
	r = resultFlags{dir: "out", label: "x"}
	ld := loadShape{backend: "vllm", rampUp: "linear", rampStart: 1, rampEnd: 20, maxConcurrency: 4, rate: 1}
	if got := r.name("m", ld, "d"); got != filepath.Join("out", "x-ramp-up-linear-1qps-20qps-concurrency4-m-d.json") {
		t.Errorf("got %q", got)
	}
}

// TestBenchCLIPerflabMetrics: --perflab-metrics appends perflab's section
// after vLLM's lines; without it the block is vLLM's alone.
func TestBenchCLIPerflabMetrics(t *testing.T) {
	tok := sharedTokenizer(t)
	srv := benchtest.New(func(i int, body map[string]any) benchtest.Plan {
		return benchtest.Plan{TTFT: 2 * time.Millisecond, Chunks: 4, Gap: time.Millisecond}
	})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	args := []string{"--base-url", hs.URL, "--model", "Qwen/Qwen3-8B", "--tokenizer", tok,
		"--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "4", "--num-prompts", "8",
		"--request-rate", "100", "--disable-tqdm"}
	for _, on := range []bool{false, true} {
		a := args
		if on {
			a = append(append([]string(nil), args...), "--perflab-metrics")
		}
		stdout, stderr, err := runBenchCmd(t, a...)
		if err != nil {
			t.Fatalf("bench: %v\n%s", err, stderr)
		}
		has := strings.Contains(stdout, "perflab additions") && strings.Contains(stdout, "Achieved request rate (req/s):")
		if has != on {
			t.Errorf("--perflab-metrics=%v: perflab section printed %v:\n%s", on, has, stdout)
		}
		if !strings.Contains(stdout, "Total token throughput (tok/s):") {
			t.Errorf("vLLM's lines missing:\n%s", stdout)
		}
	}
}

// TestBenchCLIOptions: --output json prints the result JSON, --num-warmups
// sends its warm-up requests before (and outside) the measured run, and a
// built-in --profile sets the dataset, with explicit flags overriding it.
func TestBenchCLIOptions(t *testing.T) {
	tok := sharedTokenizer(t)
	base := []string{"--model", "Qwen/Qwen3-8B", "--tokenizer", tok, "--disable-tqdm"}
	random := []string{"--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "3", "--num-prompts", "8"}
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, stdout string, srv *benchtest.Server)
	}{
		{"output json", append(append([]string(nil), random...), "--output", "json"), func(t *testing.T, stdout string, _ *benchtest.Server) {
			var res map[string]any
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("stdout is not the result JSON: %v\n%s", err, stdout)
			}
			if res["completed"] != 8.0 || res["total_output_tokens"] != 24.0 {
				t.Errorf("completed %v, output tokens %v; want 8 and 24", res["completed"], res["total_output_tokens"])
			}
		}},
		{"warmups", append(append([]string(nil), random...), "--num-warmups", "2"), func(t *testing.T, stdout string, srv *benchtest.Server) {
			if n := srv.Requests(); n != 10 {
				t.Errorf("server saw %d requests, want 8 measured + 2 warm-up", n)
			}
			if !strings.Contains(stdout, "Successful requests:                     8") {
				t.Errorf("warm-ups counted in the result:\n%s", stdout)
			}
		}},
		{"profile", []string{"--profile", "short", "--num-prompts", "10"}, func(t *testing.T, stdout string, srv *benchtest.Server) {
			if !strings.Contains(stdout, "Successful requests:                     10") ||
				!strings.Contains(stdout, "Total generated tokens:                  40") {
				t.Errorf("profile short (128 in / 4 out) with --num-prompts 10:\n%s", stdout)
			}
			if lg := srv.Logs(0); lg == nil || lg.Body["max_tokens"] != 4.0 {
				t.Errorf("profile's output length not sent: %v", lg)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := benchtest.New(func(i int, body map[string]any) benchtest.Plan {
				n := 3
				if m, ok := body["max_tokens"].(float64); ok {
					n = int(m)
				}
				return benchtest.Plan{Chunks: n}
			})
			hs := httptest.NewServer(srv)
			defer hs.Close()
			args := append(append([]string{"--base-url", hs.URL}, base...), tc.args...)
			stdout, stderr, err := runBenchCmd(t, args...)
			if err != nil {
				t.Fatalf("bench: %v\n%s", err, stderr)
			}
			tc.check(t, stdout, srv)
		})
	}
}

// TestBenchAllFailedExitsNonZero (issue 11, defect 16: bench exited 0
// when every request failed): 500s everywhere make the command fail with
// ErrNoSuccess after printing the block; --allow-all-failed keeps vLLM's
// exit 0; one success among failures is not an error.
func TestBenchAllFailedExitsNonZero(t *testing.T) {
	tok := sharedTokenizer(t)
	for _, tc := range []struct {
		name    string
		okEvery int // request i succeeds when i%okEvery == 0 (0: none)
		allow   bool
		wantErr bool
	}{
		{"every request fails", 0, false, true},
		{"allowed as vLLM does", 0, true, false},
		{"one succeeds", 4, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := benchtest.New(func(i int, body map[string]any) benchtest.Plan {
				if tc.okEvery > 0 && i%tc.okEvery == 0 {
					return benchtest.Plan{TTFT: time.Millisecond, Chunks: 2, Gap: time.Millisecond}
				}
				return benchtest.Plan{Fault: benchtest.FaultStatus, Status: 500}
			})
			hs := httptest.NewServer(srv)
			defer hs.Close()
			args := []string{"--base-url", hs.URL, "--model", "Qwen/Qwen3-8B", "--tokenizer", tok,
				"--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "4", "--num-prompts", "8",
				"--disable-tqdm"}
			if tc.allow {
				args = append(args, "--allow-all-failed")
			}
			stdout, _, err := runBenchCmd(t, args...)
			if got := err != nil; got != tc.wantErr || (err != nil && !errors.Is(err, app.ErrNoSuccess)) {
				t.Fatalf("err = %v, want error %v (ErrNoSuccess)", err, tc.wantErr)
			}
			if !strings.Contains(stdout, "Serving Benchmark Result") {
				t.Errorf("the result block was not printed:\n%s", stdout)
			}
		})
	}
}

// labelSegment is a "label: " an error layer adds (one or two words, as
// "bench", "dataset", "workload ShareGPT").
var labelSegment = regexp.MustCompile(`^[A-Za-z][\w.-]*( [\w.-]+)?$`)

// repeatedLabel returns a label that msg's first line says twice, or "".
func repeatedLabel(msg string) string {
	first, _, _ := strings.Cut(msg, "\n")
	seen := map[string]bool{}
	for _, seg := range strings.Split(first, ": ") {
		if !labelSegment.MatchString(seg) {
			continue
		}
		if seen[seg] {
			return seg
		}
		seen[seg] = true
	}
	return ""
}

// TestBenchErrorsSayEachContextOnce (issue 11, defects 9 and 21: "bench:
// tokenizer: tokenizer: no tokenizer", "bench: dataset: dataset: ..."):
// each layer names itself once, and a missing tokenizer says what was
// tried and how to give one.
func TestBenchErrorsSayEachContextOnce(t *testing.T) {
	if repeatedLabel("lab: workload ShareGPT: lab: workload ShareGPT: x") == "" || repeatedLabel("bench: dataset: open x: no") != "" {
		t.Fatal("repeatedLabel does not tell a repeated label")
	}
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	t.Setenv("HF_HUB_OFFLINE", "1")
	tok := sharedTokenizer(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	truncated := write("truncated.json", `[{"id": "a", "conversations": [`)
	badLine := write("bad.jsonl", "{\"prompt\": \"a\"}\n[1]\n")
	// Nothing listens: every case fails before the first request.
	base := []string{"--base-url", "http://127.0.0.1:1", "--disable-tqdm", "--num-prompts", "2"}
	for _, tc := range []struct {
		name string
		args []string
		want []string
		once string // said exactly once, when set
	}{
		{"no model, no server", nil, []string{"bench: fetch models: Get \"http://127.0.0.1:1/v1/models\""}, "http://127.0.0.1:1"},
		{"no tokenizer", []string{"--model", "Qwen/Qwen3-14B"},
			[]string{"bench: tokenizer: no tokenizer for \"Qwen/Qwen3-14B\"", "local:", "cache:", "offline", "--tokenizer DIR"}, ""},
		{"tokenizer path missing", []string{"--model", "m", "--tokenizer", filepath.Join(dir, "nope")},
			[]string{"path: stat", "--tokenizer DIR"}, ""},
		{"dataset missing", []string{"--model", "m", "--tokenizer", tok, "--dataset-name", "sharegpt", "--dataset-path", filepath.Join(dir, "nope.json")},
			[]string{"bench: dataset: sharegpt: open"}, ""},
		{"dataset truncated", []string{"--model", "m", "--tokenizer", tok, "--dataset-name", "sharegpt", "--dataset-path", truncated},
			[]string{"bench: dataset: " + truncated + ": entry 0: truncated JSON"}, ""},
		{"custom bad line", []string{"--model", "m", "--tokenizer", tok, "--dataset-name", "custom", "--dataset-path", badLine},
			[]string{"bench: dataset: " + badLine + ":2:"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runBenchCmd(t, append(append([]string(nil), base...), tc.args...)...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if l := repeatedLabel(err.Error()); l != "" {
				t.Errorf("%q said twice:\n%v", l, err)
			}
			if tc.once != "" && strings.Count(err.Error(), tc.once) != 1 {
				t.Errorf("%q not said once:\n%v", tc.once, err)
			}
		})
	}
}
