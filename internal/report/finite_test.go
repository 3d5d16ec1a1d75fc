package report

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFailedCasesHaveNoChange (issue 11, defect 2: a run whose every
// trial failed wrote "unsupported value: NaN" and a 0-byte report.json):
// a case whose sides failed or measured nothing has no change, and the
// report writes, in every format, with no NaN anywhere.
func TestFailedCasesHaveNoChange(t *testing.T) {
	failed := &Candidate{Name: "vLLM", Status: "failed", Failure: "startup_crash"}
	zero := &Candidate{Name: "vLLM", Status: "ok"}
	ok := &Candidate{Name: "SGLang", Status: "ok", Metrics: Metrics{TotalTPS: 100, MeanTPOTMs: 20}}
	r := &Report{Title: "t", RunName: "all-failed"}
	for _, c := range []Case{newCase("Short", failed, failed), newCase("Medium", zero, ok), newCase("Long", ok, ok)} {
		r.Cases = append(r.Cases, c)
	}
	if r.Cases[0].Change != nil || r.Cases[1].Change != nil || r.Cases[1].TPOTChange != nil {
		t.Errorf("changes of failed or empty sides: %v %v %v", r.Cases[0].Change, r.Cases[1].Change, r.Cases[1].TPOTChange)
	}
	if r.Cases[2].Change == nil || *r.Cases[2].Change != 0 {
		t.Errorf("change of equal sides: %v, want 0", r.Cases[2].Change)
	}
	dir := t.TempDir()
	if _, err := WriteAll(r, dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.json", "report.md", "report.csv", "report.html"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: %v (%d bytes)", f, err, len(b))
		}
		if strings.Contains(string(b), "NaN") || strings.Contains(string(b), "Inf") {
			t.Errorf("%s carries NaN or Inf", f)
		}
		if f == "report.json" && !json.Valid(b) {
			t.Errorf("report.json is not JSON")
		}
	}
}

// TestNonFiniteIsRefusedWholesale: a report holding a NaN anywhere is a
// bug; WriteAll names the field and leaves the previous files as they were.
func TestNonFiniteIsRefusedWholesale(t *testing.T) {
	dir := t.TempDir()
	good := &Report{Title: "t", RunName: "r"}
	if _, err := WriteAll(good, dir); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	nan := math.NaN()
	bad := &Report{Title: "t", RunName: "r", Cases: []Case{{Workload: "w", Change: &nan}}}
	_, err := WriteAll(bad, dir)
	if err == nil || !strings.Contains(err.Error(), "Cases[0].Change") {
		t.Fatalf("err = %v, want it to name report.Cases[0].Change", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	if string(before) != string(after) {
		t.Error("a refused report changed report.json")
	}
}

// TestImportRefusesIncomplete (issue 11, defect 17: a printed block
// without its duration and throughput lines was stored as 0.00 tok/s, and
// a JSON holding only {"duration":1} was stored too): a result lacking a
// figure the report needs is refused, naming what it lacks, and nothing
// of its file is imported; a complete block still imports.
func TestImportRefusesIncomplete(t *testing.T) {
	full := `============ Serving Benchmark Result ============
Successful requests:                     20        
Failed requests:                         0         
Benchmark duration (s):                  2.00      
Total input tokens:                      640       
Total generated tokens:                  320       
Request throughput (req/s):              10.00     
Output token throughput (tok/s):         160.00    
Total token throughput (tok/s):          480.00    
==================================================
`
	partial := `============ Serving Benchmark Result ============
Successful requests:                     20        
Failed requests:                         0         
Total input tokens:                      640       
Total generated tokens:                  320       
==================================================
`
	if got, err := ImportBytes([]byte(full), "full.txt"); err != nil || len(got) != 1 || got[0].Result.TotalTokenThroughput != 480 {
		t.Fatalf("a complete block: %v %+v", err, got)
	}
	for _, tc := range []struct{ name, data, want string }{
		{"block.txt", partial, "lacks duration, total_token_throughput"},
		{"two.txt", full + "\n" + partial, "two.txt#2 lacks duration"},
		{"only-duration.json", `{"duration": 1}`, "lacks completed, total_token_throughput"},
	} {
		got, err := ImportBytes([]byte(tc.data), tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.want) || got != nil {
			t.Errorf("%s: %d imported, err %v; want nothing and %q", tc.name, len(got), err, tc.want)
		}
	}
}

// TestParetoLegendBand (issue 11, defect 7: the Pareto chart's legend
// covered a point): the y axis leaves a band below the lowest point for
// the legend, whatever corner the points fill.
func TestParetoLegendBand(t *testing.T) {
	r := &Report{Tried: []Candidate{
		{Status: "ok", Metrics: Metrics{TokensPerUser: 3, TPSPerGPU: 5000}}, // slow baseline: bottom left
		{Status: "ok", Metrics: Metrics{TokensPerUser: 30, TPSPerGPU: 12000}},
		{Status: "ok", Metrics: Metrics{TokensPerUser: 10, TPSPerGPU: 11000}},
	}}
	p, err := paretoChart(r)
	if err != nil || p == nil {
		t.Fatal(err)
	}
	span := 12000.0 - 5000
	if band := 5000 - p.Y.Min; band < 0.25*span {
		t.Errorf("the band below the lowest point is %.0f, want at least a quarter of the span (%.0f)", band, 0.25*span)
	}
	if p.Legend.Top {
		t.Error("the legend is not at the bottom, where its band is")
	}
}

// TestCostInReport (issue 12): a run on a runtime with servers says how
// many it started, the GPU-hours, and how the noise floor was measured.
func TestCostInReport(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		var b strings.Builder
		r := &Report{Title: "t", RunName: "r", Runtime: "process", EngineStarts: 26, GPUHours: 2.0123, FreshStarts: fresh}
		if err := WriteMarkdown(&b, r); err != nil {
			t.Fatal(err)
		}
		want := "one server per configuration"
		if fresh {
			want = "start-to-start variance"
		}
		if !strings.Contains(b.String(), "Engine servers started: 26, GPU-hours: 2.01") || !strings.Contains(b.String(), want) {
			t.Errorf("fresh=%v: the report lacks the cost line with %q:\n%s", fresh, want, b.String())
		}
	}
	var b strings.Builder
	if err := WriteMarkdown(&b, &Report{Title: "t", RunName: "r", Runtime: "sim-predict"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Engine servers started") {
		t.Error("a run without servers reports engine starts")
	}
}
