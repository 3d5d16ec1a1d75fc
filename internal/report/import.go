package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/store"

	"github.com/perflab/perflab/internal/safeyaml"
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
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("report: import %s: %w", path, err)
	}
	defer f.Close()
	tooBig := fmt.Errorf("report: import %s: over %d MiB, far beyond any benchmark result or log of them", path, maxImportBytes>>20)
	// A regular file is judged by its size before a byte is read; a pipe
	// is read up to the limit.
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > maxImportBytes {
		return nil, tooBig
	}
	data, err := io.ReadAll(io.LimitReader(f, maxImportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("report: import %s: %w", path, err)
	}
	if len(data) > maxImportBytes {
		return nil, tooBig
	}
	return ImportBytes(data, path)
}

// maxImportBytes bounds what an import reads: a result is kilobytes and a
// log of a few thousand printed blocks a few megabytes.
const maxImportBytes = 256 << 20

// ImportBytes is ImportFile on data already read; name labels errors.
func ImportBytes(data []byte, name string) ([]Imported, error) {
	trim := bytes.TrimSpace(data)
	if len(trim) > 0 && (trim[0] == '{' || trim[0] == '[') {
		if err := safeyaml.CheckJSON(data, safeyaml.Limits{MaxBytes: maxImportBytes}); err != nil {
			return nil, fmt.Errorf("report: import %s: %w", name, err)
		}
	}
	var out []Imported
	var incomplete []string
	add := func(format string, rs ...*metrics.Result) {
		for i, r := range rs {
			src := name
			if len(rs) > 1 {
				src = fmt.Sprintf("%s#%d", name, i+1)
			}
			if miss := missingFigures(r); len(miss) > 0 {
				incomplete = append(incomplete, fmt.Sprintf("%s lacks %s", src, strings.Join(miss, ", ")))
				continue
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
			return complete(out, incomplete, name)
		}
		r, err := metrics.ParseJSON(trim)
		if err != nil {
			return nil, fmt.Errorf("report: import %s: %w", name, err)
		}
		add("vllm-json", r)
		return complete(out, incomplete, name)
	}
	rs, err := metrics.ParseText(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("report: import %s: %w", name, err)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("report: import %s: no vLLM JSON, guidellm JSON or \"Serving Benchmark Result\" block found", name)
	}
	add("vllm-text", rs...)
	return complete(out, incomplete, name)
}

// requiredFigures are what a report needs of a result: how long it ran,
// how many requests completed, and a throughput.
var requiredFigures = []string{"duration", "completed"}

// missingFigures names the figures a report needs that the result's
// source did not carry (a parsed zero is not a measured zero).
func missingFigures(r *metrics.Result) []string {
	var miss []string
	for _, k := range requiredFigures {
		if !r.Has(k) {
			miss = append(miss, k)
		}
	}
	if !r.Has("total_token_throughput") && !r.Has("output_throughput") {
		miss = append(miss, "total_token_throughput (or output_throughput)")
	}
	return miss
}

// complete refuses an import with any incomplete result, naming each.
func complete(out []Imported, incomplete []string, name string) ([]Imported, error) {
	if len(incomplete) > 0 {
		return nil, fmt.Errorf("report: import %s: %s; a report needs the duration, the completed count and a throughput of every result, so nothing was imported",
			name, strings.Join(incomplete, "; "))
	}
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

// importedName names an imported result after the heading it sits under in
// its source and its position there ("vLLM (block 1)"), so the blocks of
// one file are told apart in the report; with no heading just before it,
// the file and the position. A file holding one result keeps its own name.
func importedName(it Imported) string {
	src, pos, multi := strings.Cut(it.Source, "#")
	base := filepath.Base(src)
	base = strings.TrimSuffix(base, filepath.Ext(base))
	heading := ""
	if p := it.Result.Perflab; p != nil && p.Origin != nil {
		heading = lastHeading(p.Origin.Preceding)
	}
	switch {
	case !multi:
		return nonEmpty(heading, base)
	case heading != "":
		return fmt.Sprintf("%s (block %s)", heading, pos)
	}
	return fmt.Sprintf("%s block %s", base, pos)
}

// headingRe finds Markdown headings in text whose line breaks were folded
// into spaces (metrics keeps the text before a block that way): a run of
// '#' after a space or the start, then the title up to the next list item,
// fence, admonition, table cell or heading.
var headingRe = regexp.MustCompile(`(?:^|\s)#{1,6} +(.+?)(?: +- | *` + "```" + `| *\?\?\?| *!!!| *\|| +#{1,6} |$)`)

// lastHeading is the title of the last heading in s, or "" if none.
func lastHeading(s string) string {
	var title string
	for rest := s; ; {
		loc := headingRe.FindStringSubmatchIndex(rest)
		if loc == nil {
			break
		}
		title = strings.TrimSpace(rest[loc[2]:loc[3]])
		rest = rest[loc[3]:]
	}
	if len(title) > 80 {
		title = strings.TrimSpace(title[:80]) + "…"
	}
	return title
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
		trials = append(trials, store.Trial{
			RunID: runID, Key: "import/" + it.Source, Stage: "import", Name: importedName(it),
			Workload: it.Format, Status: "ok", Result: raw, Reason: strings.Join(it.Warnings, "; "),
			Started: now, Ended: now,
		})
	}
	return trials, nil
}
