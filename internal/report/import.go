package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/store"
)

// Imported is one result taken in from a file, ready to store.
type Imported struct {
	// Source is "file" or "file#N" for the N-th block of a file.
	Source string
	// Format is "vllm-json", "vllm-text" or "guidellm-json".
	Format string
	Result *metrics.Result
	// Warnings lists impossible values found in it (flagged, not dropped).
	Warnings []string
}

// ImportFile reads a vLLM --save-result JSON, a file with vLLM's printed
// "Serving Benchmark Result" blocks (any version's layout, Markdown around
// them allowed), or a GPUStack/guidellm benchmark JSON.
func ImportFile(path string) ([]Imported, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("report: import %s: %w", path, err)
	}
	return ImportBytes(data, path)
}

// ImportBytes is ImportFile on data already read; name labels errors.
func ImportBytes(data []byte, name string) ([]Imported, error) {
	trim := bytes.TrimSpace(data)
	var out []Imported
	add := func(format string, rs ...*metrics.Result) {
		for i, r := range rs {
			src := name
			if len(rs) > 1 {
				src = fmt.Sprintf("%s#%d", name, i+1)
			}
			out = append(out, Imported{Source: src, Format: format, Result: r, Warnings: r.Validate()})
		}
	}
	if len(trim) > 0 && (trim[0] == '{' || trim[0] == '[') {
		if looksGuidellm(trim) {
			rs, err := metrics.ParseGuidellm(trim)
			if err != nil {
				return nil, fmt.Errorf("report: import %s: %w", name, err)
			}
			add("guidellm-json", rs...)
			return out, nil
		}
		r, err := metrics.ParseJSON(trim)
		if err != nil {
			return nil, fmt.Errorf("report: import %s: %w", name, err)
		}
		add("vllm-json", r)
		return out, nil
	}
	rs, err := metrics.ParseText(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("report: import %s: %w", name, err)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("report: import %s: no vLLM JSON, guidellm JSON or \"Serving Benchmark Result\" block found", name)
	}
	add("vllm-text", rs...)
	return out, nil
}

// looksGuidellm tells guidellm's report (a "benchmarks" list) from vLLM's
// flat result object without decoding either fully.
func looksGuidellm(data []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(data, &probe) != nil {
		return false
	}
	_, ok := probe["benchmarks"]
	return ok
}

// ToTrials turns imported results into stored trials of run, so imported
// and measured results sit side by side in reports and queries.
func ToTrials(runID int64, items []Imported) ([]store.Trial, error) {
	trials := make([]store.Trial, 0, len(items))
	now := time.Now().UTC()
	for _, it := range items {
		raw, err := json.Marshal(it.Result)
		if err != nil {
			return nil, fmt.Errorf("report: encode %s: %w", it.Source, err)
		}
		base := filepath.Base(it.Source)
		trials = append(trials, store.Trial{
			RunID: runID, Key: "import/" + it.Source, Stage: "import", Name: strings.TrimSuffix(base, filepath.Ext(base)),
			Workload: it.Format, Status: "ok", Result: raw, Reason: strings.Join(it.Warnings, "; "),
			Started: now, Ended: now,
		})
	}
	return trials, nil
}
