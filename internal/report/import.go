package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
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
	// A regular file is judged by its size before a byte is read; a pipe
	// is read up to the limit and no further.
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > maxImportBytes {
		return nil, tooBig(path, maxImportBytes)
	}
	return ImportReader(f, path)
}

// maxImportBytes bounds a JSON import: a vLLM result with --save-detailed
// holds every request's inter-token latencies, tens of MB for 100,000
// requests; maxTextImportBytes bounds a text one, a log of printed blocks
// (a few thousand blocks are a few MB). Variables so that a test can
// stream past them in megabytes, not hundreds.
var (
	maxImportBytes     int64 = 256 << 20
	maxTextImportBytes int64 = 64 << 20
)

// ErrTooLarge is wrapped by the refusal of an import over its limit.
var ErrTooLarge = errors.New("import too large")

func tooBig(name string, limit int64) error {
	return fmt.Errorf("report: import %s: over %d MiB, far beyond any benchmark result or log of them: %w", name, limit>>20, ErrTooLarge)
}

// ImportBytes is ImportFile on data already read; name labels errors.
func ImportBytes(data []byte, name string) ([]Imported, error) {
	return ImportReader(bytes.NewReader(data), name)
}

// ImportReader is ImportFile on a stream. It reads no further than the
// limit, and a JSON result is decoded key by key from the stream, so the
// memory it takes is what the result keeps (its arrays) and the largest
// single value being decoded, not the whole document several times over.
func ImportReader(r io.Reader, name string) ([]Imported, error) {
	cr := &countReader{r: io.LimitReader(r, maxImportBytes+1)}
	br := bufio.NewReaderSize(cr, 64<<10)
	first, err := firstByte(br)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("report: import %s: %w", name, err)
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
	switch first {
	case '[':
		return nil, fmt.Errorf("report: import %s: a JSON array; want a vLLM result object, a guidellm report object or vLLM's printed result blocks", name)
	case '{':
		guide, rs, err := importJSON(br)
		if cr.n > maxImportBytes {
			return nil, tooBig(name, maxImportBytes)
		}
		if err != nil {
			return nil, fmt.Errorf("report: import %s: %w", name, err)
		}
		format := "vllm-json"
		if guide {
			format = "guidellm-json"
		}
		add(format, rs...)
		return complete(out, incomplete, name)
	}
	data, err := io.ReadAll(io.LimitReader(br, maxTextImportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("report: import %s: %w", name, err)
	}
	if int64(len(data)) > maxTextImportBytes {
		return nil, tooBig(name, maxTextImportBytes)
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

// importJSON decodes a result object from the stream one key at a time,
// each value checked for nesting and keys before it is kept, and parses
// it as a guidellm report (a "benchmarks" list) or a vLLM result.
func importJSON(r io.Reader) (guide bool, rs []*metrics.Result, err error) {
	dec := json.NewDecoder(metrics.PythonJSONReader(r))
	if _, err := dec.Token(); err != nil { // the '{' firstByte saw
		return false, nil, fmt.Errorf("parse result JSON: %w", err)
	}
	lim := safeyaml.Limits{MaxBytes: int(maxImportBytes), MaxDepth: safeyaml.Defaults.MaxDepth - 1}
	raw := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false, nil, fmt.Errorf("parse result JSON: %w", err)
		}
		key, _ := tok.(string)
		if len(raw) >= safeyaml.Defaults.MaxKeys {
			return false, nil, fmt.Errorf("parse result JSON: more than %d keys (at byte %d): %w", safeyaml.Defaults.MaxKeys, dec.InputOffset(), safeyaml.ErrTooLarge)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return false, nil, fmt.Errorf("parse result JSON: key %q: %w", key, err)
		}
		if err := safeyaml.CheckJSON(v, lim); err != nil {
			return false, nil, fmt.Errorf("key %q: %w", key, err)
		}
		raw[key] = v
	}
	if _, err := dec.Token(); err != nil { // '}'
		return false, nil, fmt.Errorf("parse result JSON: %w", err)
	}
	if b, ok := raw["benchmarks"]; ok {
		var raws []json.RawMessage
		if err := json.Unmarshal(b, &raws); err != nil {
			return true, nil, fmt.Errorf("metrics: parse guidellm JSON: %w", err)
		}
		raw = nil // what the list holds is all that is needed now
		rs, err := metrics.ParseGuidellmBenchmarks(raws)
		return true, rs, err
	}
	res, err := metrics.ParseJSONFields(raw)
	if err != nil {
		return false, nil, err
	}
	return false, []*metrics.Result{res}, nil
}

// firstByte peeks the first byte that is not white space, consuming
// nothing (a text import's line numbers count the blank lines too); past
// the buffer of white space it answers a space, which reads as text.
func firstByte(br *bufio.Reader) (byte, error) {
	for i := 1; i <= br.Size(); i++ {
		b, err := br.Peek(i)
		if len(b) < i {
			return 0, err
		}
		switch c := b[i-1]; c {
		case ' ', '\t', '\r', '\n':
		default:
			return c, nil
		}
	}
	return ' ', nil
}

// countReader counts what it has read.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
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
