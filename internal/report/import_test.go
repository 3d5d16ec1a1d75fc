package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/store"
)

// sharedDir finds ../shared beside the repository root.
func sharedDir(t *testing.T) string {
	t.Helper()
	return shareddata.Dir(t)
}

func TestImportReferenceReports(t *testing.T) {
	ref := filepath.Join(sharedDir(t), "reference")
	cases := []struct {
		file     string
		minCount int
		flagged  string // a warning some block must raise
	}{
		{"qwen3-14b-h100.md", 15, ""},
		{"qwen3-32b-h100.md", 1, ""},
		{"qwen3.5-9b-h100.md", 2, "20132659"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			items, err := ImportFile(filepath.Join(ref, c.file))
			if err != nil {
				t.Fatal(err)
			}
			if len(items) < c.minCount {
				t.Fatalf("%d blocks, want at least %d", len(items), c.minCount)
			}
			var warns []string
			for _, it := range items {
				if it.Format != "vllm-text" || it.Result.TotalTokenThroughput <= 0 {
					t.Fatalf("%s: format %s, total %v", it.Source, it.Format, it.Result.TotalTokenThroughput)
				}
				warns = append(warns, it.Warnings...)
			}
			if c.flagged != "" && !strings.Contains(strings.Join(warns, "\n"), c.flagged) &&
				!strings.Contains(strings.Join(warns, "\n"), "20,132,659") && !strings.Contains(strings.Join(warns, "\n"), "2.01327e+07") {
				t.Fatalf("impossible peak not flagged; warnings: %v", warns)
			}
			trials, err := ToTrials(7, items)
			if err != nil || len(trials) != len(items) {
				t.Fatalf("to trials: %d, %v", len(trials), err)
			}
			// Imported results go through the same Build path as measured ones.
			c, err := candidateOf(trials[0], 1)
			if err != nil || c.Metrics.TotalTPS != items[0].Result.TotalTokenThroughput || c.Block == "" {
				t.Fatalf("candidate %+v, %v", c, err)
			}
		})
	}
}

func TestImportVLLMJSONRoundTrip(t *testing.T) {
	raw := synthResult(t, 20, 0.5, 0.02, 50)
	items, err := ImportBytes(raw, "run.json")
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Total float64 `json:"total_token_throughput"`
	}
	json.Unmarshal(raw, &want)
	if len(items) != 1 || items[0].Format != "vllm-json" || items[0].Result.TotalTokenThroughput != want.Total {
		t.Fatalf("items = %+v", items)
	}
}

func TestImportErrors(t *testing.T) {
	for name, data := range map[string]string{
		"empty":     "",
		"prose":     "no results in here\n",
		"bad json":  `{"duration": 1,`,
		"bad type":  `{"total_token_throughput": "fast"}`,
		"bad guide": `{"benchmarks": 5}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ImportBytes([]byte(data), name); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := ImportFile(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Fatalf("missing file: %v", err)
	}
	// A 300 MiB file (sparse: no disk used) is refused by its size, before
	// it is read into memory.
	huge := filepath.Join(t.TempDir(), "huge.json")
	if err := os.WriteFile(huge, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 300<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := ImportFile(huge); err == nil || !strings.Contains(err.Error(), "huge.json") || !strings.Contains(err.Error(), "256 MiB") {
		t.Fatalf("300 MiB file: %v", err)
	}
}

// TestImportedReportKeepsWarnings builds the report the way `perflab report`
// does after `perflab report import` of the 9B reference: the implausible
// 20,132,659 tok/s peak must be flagged in the report, the blocks must be
// told apart by their place in the source, and unknown hardware must not
// read "NVIDIA ? GPUs".
func TestImportedReportKeepsWarnings(t *testing.T) {
	items, err := ImportFile(filepath.Join(sharedDir(t), "reference", "qwen3.5-9b-h100.md"))
	if err != nil {
		t.Fatal(err)
	}
	trials, err := ToTrials(1, items)
	if err != nil {
		t.Fatal(err)
	}
	const peak = "peak output token throughput 20132659.20 tok/s is implausible"
	check := func(t *testing.T, trials []store.Trial, stored bool) {
		t.Helper()
		r, err := Build(store.Run{ID: 1, Name: "import-qwen3.5-9b-h100"}, trials)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := WriteMarkdown(&b, r); err != nil {
			t.Fatal(err)
		}
		md := b.String()
		warnings := md[strings.Index(md, "### Warnings"):]
		if !strings.Contains(warnings, "vLLM (block 1) (import, vllm-text): "+peak) {
			t.Errorf("the Warnings section does not flag block 1's peak:\n%s", warnings)
		}
		// And beside the figures themselves, under the block's heading.
		sec := md[strings.Index(md, "#### vLLM (block 1)"):]
		sec = sec[:strings.Index(sec[1:], "#### ")+1]
		if !strings.Contains(sec, "20132659.20") || !strings.Contains(sec, "Warnings on this result:") || !strings.Contains(sec, "\n- "+peak+" (above") {
			t.Errorf("block 1's section lacks its warning:\n%s", sec)
		}
		// A finding only the importer makes (its parser's notes) shows that
		// the stored perflab.warnings are read back, not merely recomputed.
		if na := `vLLM (block 1) (import, vllm-text): row "P95 TTFT (ms)" is N/A`; stored != strings.Contains(warnings, na) {
			t.Errorf("stored importer note %q shown: %v, want %v", na, !stored, stored)
		}
		for _, bad := range []string{"NVIDIA ?", "NVIDIA  GPU", "```bash\n\n```", "No configuration finished successfully"} {
			if strings.Contains(md, bad) {
				t.Errorf("report contains %q", bad)
			}
		}
		names := map[string]int{}
		for _, c := range r.Stages[0].Candidates {
			names[c.Name]++
		}
		if len(names) != len(items) || names["SGLang (block 2)"] != 1 || names["Max Num Seqs 512 (block 12)"] != 1 {
			t.Errorf("%d distinct names for %d blocks: %v", len(names), len(items), names)
		}
	}
	t.Run("stored warnings", func(t *testing.T) { check(t, trials, true) })
	// A result stored without its warnings (an older import, or a store
	// written by another tool) is checked again when the report reads it.
	t.Run("re-validated", func(t *testing.T) {
		bare := make([]store.Trial, len(trials))
		for i, tr := range trials {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(tr.Result, &m); err != nil {
				t.Fatal(err)
			}
			delete(m, "perflab")
			raw, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			tr.Result, tr.Reason = raw, ""
			bare[i] = tr
		}
		check(t, bare, false)
	})
}
