package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	stdhtml "html"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/store"
)

var update = flag.Bool("update", false, "rewrite golden files")

// synthResult makes a result whose figures follow from a fixed schedule:
// n requests, each with the given TTFT and per-token gap, all sent at 0.
func synthResult(t *testing.T, n int, ttft, gap float64, out int) json.RawMessage {
	t.Helper()
	recs := make([]metrics.Record, n)
	for i := range recs {
		itl := make([]float64, out-1)
		for j := range itl {
			itl[j] = gap
		}
		recs[i] = metrics.Record{ID: fmt.Sprint(i), Success: true, PromptLen: 200, OutputLen: out,
			TTFT: ttft, ITL: itl, Latency: ttft + gap*float64(out-1)}
	}
	res := metrics.Compute(recs, ttft+gap*float64(out-1), metrics.Options{})
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fixture(t *testing.T) (store.Run, []store.Trial) {
	t.Helper()
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	mk := func(key, stage, name, wl, cmd string, res json.RawMessage) store.Trial {
		st := "ok"
		if res == nil {
			st = "failed"
		}
		return store.Trial{RunID: 1, Key: key, Stage: stage, Name: name, Workload: wl, Command: cmd, Status: st,
			Result: res, Config: json.RawMessage(`{"engine":"vllm","tensor_parallel":1}`), Started: at, Ended: at}
	}
	trials := []store.Trial{
		mk("engine/a/ShareGPT/r0", "engine", "vLLM", "ShareGPT", "vllm serve Qwen/Qwen3-14B", synthResult(t, 100, 2.0, 0.05, 200)),
		mk("engine/b/ShareGPT/r0", "engine", "SGLang", "ShareGPT", "python3 -m sglang.launch_server --model-path Qwen/Qwen3-14B", synthResult(t, 100, 1.5, 0.04, 200)),
		mk("quant/c/ShareGPT/r0", "quantization", "SGLang + FP8", "ShareGPT", "python3 -m sglang.launch_server --model-path Qwen/Qwen3-14B-FP8", synthResult(t, 100, 1.0, 0.03, 200)),
		mk("quant/d/ShareGPT/r0", "quantization", "SGLang + FP8 KV", "ShareGPT", "python3 -m sglang.launch_server --model-path Qwen/Qwen3-14B --kv-cache-dtype fp8_e4m3", nil),
		mk("gen/a/Long/r0", "generalization", "vLLM", "Long Prompt", "vllm serve Qwen/Qwen3-14B", synthResult(t, 50, 3.0, 0.06, 200)),
		mk("gen/c/Long/r0", "generalization", "SGLang + FP8", "Long Prompt", "python3 -m sglang.launch_server --model-path Qwen/Qwen3-14B-FP8", synthResult(t, 50, 2.0, 0.04, 200)),
	}
	trials[3].FailureClass, trials[3].Reason = "oom", "torch.OutOfMemoryError: CUDA out of memory\nmore"
	cand := func(name, key, decision, reason string, gain float64) map[string]any {
		return map[string]any{"name": name, "trial_key": key, "decision": decision, "reason": reason, "gain": gain, "gpus": 1}
	}
	sum := map[string]any{
		"version": 1, "name": "qwen3-14b-h100", "model": "Qwen/Qwen3-14B", "runtime": "sim-predict",
		"objective": "total_throughput", "gpu": "H100", "gpus": 1, "noise_floor": 0.012,
		"engines":         []map[string]string{{"name": "vllm", "version": "0.11.0"}, {"name": "sglang", "version": "0.5.5.post1"}},
		"workloads":       []map[string]string{{"name": "ShareGPT", "description": "1000 prompts", "perflab_command": "perflab bench --dataset-name sharegpt", "vllm_command": "vllm bench serve --dataset-name sharegpt"}},
		"tuning_workload": "ShareGPT",
		"baseline":        cand("vLLM", "engine/a/ShareGPT/r0", "baseline", "", 0),
		"winner":          cand("SGLang + FP8", "quant/c/ShareGPT/r0", "kept", "", 0),
		"stages": []map[string]any{
			{"name": "Engine", "knob": "engine", "incumbent": cand("vLLM", "engine/a/ShareGPT/r0", "baseline", "", 0),
				"candidates": []any{cand("SGLang", "engine/b/ShareGPT/r0", "kept", "", 0.25)}, "kept": "SGLang"},
			{"name": "Quantization", "knob": "quantization", "incumbent": cand("SGLang", "engine/b/ShareGPT/r0", "kept", "", 0),
				"candidates": []any{cand("SGLang + FP8", "quant/c/ShareGPT/r0", "kept", "", 0.3),
					cand("SGLang + FP8 KV", "quant/d/ShareGPT/r0", "failed", "crash: oom", 0)}, "kept": "SGLang + FP8"},
		},
		"generalization": []map[string]any{{"workload": "Long Prompt", "baseline": cand("vLLM", "gen/a/Long/r0", "baseline", "", 0),
			"winner": cand("SGLang + FP8", "gen/c/Long/r0", "kept", "", 0)}},
	}
	raw, _ := json.Marshal(sum)
	return store.Run{ID: 1, Key: "k", Name: "qwen3-14b-h100", Status: "done", Summary: raw}, trials
}

func TestBuildAndWrite(t *testing.T) {
	run, trials := fixture(t)
	r, err := Build(run, trials)
	if err != nil {
		t.Fatal(err)
	}
	if r.Recommended == nil || r.Recommended.Name != "SGLang + FP8" || r.Baseline == nil {
		t.Fatalf("recommended/baseline = %+v / %+v", r.Recommended, r.Baseline)
	}
	// The change is computed from the stored results, not typed: check it
	// against the results themselves.
	want := r.Recommended.Metrics.TotalTPS/r.Baseline.Metrics.TotalTPS - 1
	if len(r.Cases) != 2 || r.Cases[0].Change == nil || *r.Cases[0].Change != want || want <= 0 {
		t.Fatalf("cases = %+v, want change %v", r.Cases, want)
	}
	if len(r.Stages) != 2 || r.Stages[1].Winner.Name != "SGLang + FP8" {
		t.Fatalf("stages = %+v", r.Stages)
	}
	if !strings.Contains(r.Stages[0].Ranking, "SGLang (") || !strings.HasPrefix(r.Stages[0].Ranking, "SGLang") {
		t.Fatalf("ranking = %q", r.Stages[0].Ranking)
	}
	if !strings.Contains(r.Stages[1].Ranking, "failed: SGLang + FP8 KV (oom)") {
		t.Fatalf("failed candidate missing from ranking: %q", r.Stages[1].Ranking)
	}

	dir := t.TempDir()
	if d := os.Getenv("PERFLAB_REPORT_KEEP"); d != "" {
		dir = d
	}
	paths, err := WriteAll(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 4 {
		t.Fatalf("paths = %v", paths)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	golden(t, "report.md.golden", md)

	// Charts: real PNGs of the intended size, and SVGs inlined in the HTML.
	if len(r.Charts) < 3 {
		t.Fatalf("charts = %+v", r.Charts)
	}
	for _, c := range r.Charts {
		f, err := os.Open(filepath.Join(dir, c.PNG))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.PNG, err)
		}
		if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 250 {
			t.Fatalf("%s is %v", c.PNG, b)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	html := []byte(stdhtml.UnescapeString(string(raw)))
	for _, want := range []string{"<svg", "Conclusion", "SGLang + FP8 KV", "Summary of Optimization Options", "Failed: oom", "(+"} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("html lacks %q", want)
		}
	}
	if bytes.Contains(html, []byte("<?xml")) {
		t.Error("html carries an XML prolog inside the body")
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "report.csv"))
	if n := bytes.Count(csv, []byte("\n")); n != 1+3+4 {
		t.Errorf("csv has %d lines:\n%s", n, csv)
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs at line %d:\n got: %q\nwant: %q", path, i+1, g, w)
			}
		}
	}
}

func TestBuildBadSummary(t *testing.T) {
	run, trials := fixture(t)
	run.Summary = json.RawMessage(`{"stages": 3}`)
	if _, err := Build(run, trials); err == nil {
		t.Fatal("malformed summary accepted")
	}
	// A trial with a corrupt result is reported as a warning, not a panic.
	run, trials = fixture(t)
	trials[0].Result = json.RawMessage(`{"total_token_throughput": "x"`)
	r, err := Build(run, trials)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Warnings) == 0 {
		t.Fatal("corrupt result not flagged")
	}
}

// A case whose every request failed is shown as a failure, never as
// "0.00 tok/s (-100%)".
func TestAllFailedCaseIsAFailure(t *testing.T) {
	run, trials := fixture(t)
	recs := []metrics.Record{{ID: "0", Error: "400 context length", ErrorClass: "http_status"}, {ID: "1", Error: "400", ErrorClass: "http_status"}}
	raw, _ := json.Marshal(metrics.Compute(recs, 1, metrics.Options{}))
	trials[5].Result = raw // the winner on the Long Prompt case
	r, err := Build(run, trials)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Cases[1]
	if c.Optimized == nil || c.Optimized.Status != "failed" || c.Optimized.Failure != "low_success" {
		t.Fatalf("optimized = %+v", c.Optimized)
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| **Long Prompt** |") || !strings.Contains(b.String(), "failed: low_success") || strings.Contains(b.String(), "-100.0%") {
		t.Fatalf("markdown:\n%s", b.String())
	}
}

// The figures shown beside a decision are the mean of the repeats the
// decision compared, not the first run's: the Result line, the Summary
// sentence and the stage's gain must agree with the lab's "+x%" reason.
func TestRepeatsShowTheMean(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	mk := func(key string, gap float64) store.Trial {
		return store.Trial{RunID: 1, Key: key, Stage: strings.SplitN(key, "/", 2)[0], Name: "x", Workload: "W", Status: "ok",
			Result: synthResult(t, 20, 1.0, gap, 100), Started: at, Ended: at}
	}
	// The baseline's first run is stored under the baseline stage and its
	// repeats under the engine stage, as the lab reuses stored runs.
	trials := []store.Trial{
		mk("baseline/aaa/W/r0", 0.050), mk("engine/aaa/W/r1", 0.040), mk("engine/aaa/W/r2", 0.045),
		mk("engine/bbb/W/r0", 0.030), mk("engine/bbb/W/r1", 0.036), mk("engine/bbb/W/r2", 0.033),
	}
	mean := func(keys ...string) float64 {
		var s float64
		for _, k := range keys {
			for _, tr := range trials {
				if tr.Key == k {
					var v struct {
						T float64 `json:"total_token_throughput"`
					}
					json.Unmarshal(tr.Result, &v)
					s += v.T
				}
			}
		}
		return s / float64(len(keys))
	}
	ma, mb := mean("baseline/aaa/W/r0", "engine/aaa/W/r1", "engine/aaa/W/r2"), mean("engine/bbb/W/r0", "engine/bbb/W/r1", "engine/bbb/W/r2")
	gain := mb/ma - 1
	sum, _ := json.Marshal(map[string]any{"name": "rep", "gpu": "H100", "gpus": 1,
		"baseline": map[string]any{"name": "A", "trial_key": "baseline/aaa/W/r0"},
		"winner":   map[string]any{"name": "B", "trial_key": "engine/bbb/W/r0"},
		"stages": []any{map[string]any{"name": "engine",
			"incumbent":  map[string]any{"name": "A", "trial_key": "baseline/aaa/W/r0"},
			"candidates": []any{map[string]any{"name": "B", "trial_key": "engine/bbb/W/r0", "decision": "kept", "reason": fmt.Sprintf("%+.2f%% > noise floor 1.00%%", 100*gain)}}}},
	})
	r, err := Build(store.Run{ID: 1, Name: "rep", Summary: sum}, trials)
	if err != nil {
		t.Fatal(err)
	}
	st := r.Stages[0]
	if math.Abs(st.Gain-gain) > 1e-12 || st.Winner.Runs != 3 || st.Incumbent.Runs != 3 {
		t.Fatalf("stage gain %v over %d/%d runs, want %v over 3", st.Gain, st.Incumbent.Runs, st.Winner.Runs, gain)
	}
	if want := fmt.Sprintf("B (%.2f ± ", mb); !strings.HasPrefix(st.Ranking, want) || !strings.Contains(st.Ranking, fmt.Sprintf("A (%.2f ± ", ma)) {
		t.Fatalf("ranking %q does not show the means %.2f and %.2f", st.Ranking, mb, ma)
	}
	if want := fmt.Sprintf("(%.2f%%)", 100*gain); !strings.Contains(st.Summary, want) {
		t.Fatalf("summary %q lacks the decision's %s", st.Summary, want)
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"Repeats (Total TPS): ", fmt.Sprintf("mean %.2f ± ", mb), "(first of 3 runs", pct(gain)} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

// TestScriptCommandInReport: a serving command that writes its options file
// first (TensorRT-LLM's, engine.Command.Script) is printed whole wherever
// the report quotes a command: the recommended block, the other cases (as
// a block, not inline code, which cannot hold lines), the HTML, and one
// CSV field.
func TestScriptCommandInReport(t *testing.T) {
	run, trials := fixture(t)
	const script = "cat > extra_llm_api_options.yaml <<'EOF'\ncuda_graph_config:\n  enable_padding: true\nEOF\ntrtllm-serve Qwen/Qwen3-14B --extra_llm_api_options=extra_llm_api_options.yaml"
	for i := range trials {
		if strings.Contains(trials[i].Command, "Qwen3-14B-FP8") {
			trials[i].Command = script
		}
	}
	r, err := Build(run, trials)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := WriteAll(r, dir); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if n := strings.Count(string(md), "```bash\n"+script+"\n```"); n < 2 {
		t.Errorf("the script is printed as a bash block %d times, want the recommended command and the other case:\n%s", n, md)
	}
	if strings.Contains(string(md), "(`cat > ") {
		t.Errorf("a script printed as inline code:\n%s", md)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	if !strings.Contains(stdhtml.UnescapeString(string(raw)), script) {
		t.Error("html lacks the whole script")
	}
	f, err := os.Open(filepath.Join(dir, "report.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("csv: %v", err)
	}
	found := false
	for _, row := range rows {
		found = found || slices.Contains(row, script)
	}
	if !found {
		t.Errorf("no csv field holds the script: %q", rows)
	}
}

// markdownOf builds the report of a stored run and renders its markdown.
func markdownOf(t *testing.T, run store.Run, trials []store.Trial) (*Report, string) {
	t.Helper()
	r, err := Build(run, trials)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, r); err != nil {
		t.Fatal(err)
	}
	return r, buf.String()
}

// TestBaselineHeaderNamesItsEngine: the before/after table names the
// baseline's own engine; it said vLLM whatever the baseline ran.
func TestBaselineHeaderNamesItsEngine(t *testing.T) {
	run, trials := fixture(t)
	for i := range trials {
		trials[i].Config = json.RawMessage(`{"engine":"trtllm","tensor_parallel":1}`)
	}
	_, md := markdownOf(t, run, trials)
	if !strings.Contains(md, "| baseline (TensorRT-LLM without any optimizations) |") || strings.Contains(md, "vLLM without") {
		t.Errorf("before/after header does not name TensorRT-LLM:\n%s", md)
	}
}

// TestNotRunIsNotAFailure: a candidate the lab never launched (the engine
// package said its engine cannot run it) is shown as not run, with the
// reason, in its stage; it used to read "Serving script: not recorded" and
// "Failed: failed — " beside a summary table that said it was skipped.
func TestNotRunIsNotAFailure(t *testing.T) {
	run, trials := fixture(t)
	var sum map[string]any
	if err := json.Unmarshal(run.Summary, &sum); err != nil {
		t.Fatal(err)
	}
	const why = `unsupported: engine: vllm 0.17.1 does not support cuda_graph_padding="false": vLLM always pads`
	stages := sum["stages"].([]any)
	st := stages[1].(map[string]any)
	st["candidates"] = append(st["candidates"].([]any), map[string]any{
		"name": "SGLang + cuda_graph_padding=false", "decision": "skipped", "reason": why, "why": "unsupported", "gpus": 1})
	run.Summary, _ = json.Marshal(sum)
	r, md := markdownOf(t, run, trials)
	_, section, _ := strings.Cut(md, "#### SGLang + cuda_graph_padding=false\n\n")
	section, _, _ = strings.Cut(section, "####")
	if !strings.HasPrefix(section, "Not run: "+why) || strings.Contains(section, "Failed") || strings.Contains(section, "not recorded") {
		t.Errorf("the never-launched candidate's section reads:\n%s", section)
	}
	if !strings.Contains(r.Stages[1].Ranking, "not run: SGLang + cuda_graph_padding=false") || strings.Contains(r.Stages[1].Ranking, "padding=false (failed)") {
		t.Errorf("ranking = %q", r.Stages[1].Ranking)
	}
}

// TestSkippedStageShowsNothingRan: a stage that ran nothing says so and
// who stays the incumbent, without reprinting the incumbent's figures as
// if they were the stage's result, and has no bar in the stage chart.
func TestSkippedStageShowsNothingRan(t *testing.T) {
	run, trials := fixture(t)
	var sum map[string]any
	if err := json.Unmarshal(run.Summary, &sum); err != nil {
		t.Fatal(err)
	}
	stages := sum["stages"].([]any)
	st := stages[1].(map[string]any)
	st["candidates"] = []any{}
	st["kept"] = ""
	st["skipped"] = "nothing to try on sglang: parallelism=tp1 starts the incumbent's own server"
	run.Summary, _ = json.Marshal(sum)
	r, md := markdownOf(t, run, trials)
	_, section, _ := strings.Cut(md, "(skipped: nothing to try on sglang: parallelism=tp1 starts the incumbent's own server)\n\n")
	section, _, _ = strings.Cut(section, "###")
	if !strings.HasPrefix(section, "Nothing ran; the incumbent stays ") || strings.Contains(section, "Benchmark result") || strings.Contains(section, "Result:") {
		t.Errorf("the skipped stage's section reads:\n%s", section)
	}
	p, err := stageChart(r)
	if err != nil || p == nil {
		t.Fatalf("stage chart: %v", err)
	}
	for _, tk := range p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max) {
		if tk.Label == r.Stages[1].Name {
			t.Errorf("the chart has a bar for the skipped stage %s", tk.Label)
		}
	}
}
