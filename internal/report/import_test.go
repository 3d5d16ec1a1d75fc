package report

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/shareddata"
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
}
