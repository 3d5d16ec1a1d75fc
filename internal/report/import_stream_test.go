package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/metrics"
)

// endless is a stream of head, then body repeated without end; read
// counts what was taken from it.
type endless struct {
	head, body []byte
	at         int // the place in body
	read       int64
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(e.head) > 0 {
			k := copy(p[n:], e.head)
			e.head = e.head[k:]
			n += k
			continue
		}
		k := copy(p[n:], e.body[e.at:])
		e.at = (e.at + k) % len(e.body)
		n += k
	}
	e.read += int64(n)
	return n, nil
}

// withLimits lowers the import limits for one test, so that a stream
// can run past them in megabytes.
func withLimits(t testing.TB, json, text int64) {
	oj, ot := maxImportBytes, maxTextImportBytes
	maxImportBytes, maxTextImportBytes = json, text
	t.Cleanup(func() { maxImportBytes, maxTextImportBytes = oj, ot })
}

// TestImportStopsAtLimit is issue 23's item 5: an import from a pipe is
// refused at its limit without reading past it (one buffer at most), and
// a JSON array, which no format is, is refused at its first byte (a 120 MB
// one took 3.8 GB and 72 s to refuse).
func TestImportStopsAtLimit(t *testing.T) {
	withLimits(t, 4<<20, 1<<20)
	for _, tc := range []struct {
		name     string
		src      *endless
		most     int64
		tooLarge bool
		errHas   string
	}{
		{"endless JSON", &endless{head: []byte(`{"duration": 1, "ttfts": [`), body: []byte("0.5, ")}, 4<<20 + 1, true, "over 4 MiB"},
		{"endless text", &endless{body: []byte("no block here\n")}, 4<<20 + 1, true, "over 1 MiB"},
		{"endless array", &endless{head: []byte("["), body: []byte("1, ")}, 128 << 10, false, "a JSON array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ImportReader(tc.src, "pipe")
			if err == nil || errors.Is(err, ErrTooLarge) != tc.tooLarge || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("err = %v, want %q (too large: %v)", err, tc.errHas, tc.tooLarge)
			}
			if tc.src.read > tc.most {
				t.Errorf("read %d bytes, want at most %d", tc.src.read, tc.most)
			}
		})
	}
}

// TestImportMemory: importing a detailed result allocates a small multiple
// of its size (the document was held three times over, and walked token
// by token, before: 24 times its size for an 88 MB result).
func TestImportMemory(t *testing.T) {
	recs := make([]metrics.Record, 4000)
	for i := range recs {
		itl := make([]float64, 199)
		for j := range itl {
			itl[j] = 0.02 + float64(j%7)/1000
		}
		recs[i] = metrics.Record{ID: fmt.Sprint(i), Success: true, PromptLen: 200, OutputLen: 200, TTFT: 0.5, ITL: itl, Latency: 4.5}
	}
	raw, err := json.Marshal(metrics.Compute(recs, 10, metrics.Options{Detailed: true}))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	items, err := ImportReader(bytes.NewReader(raw), "big.json")
	runtime.ReadMemStats(&after)
	if err != nil || len(items) != 1 || len(items[0].Result.ITLs) != 4000 {
		t.Fatalf("import: %v", err)
	}
	if n, most := after.TotalAlloc-before.TotalAlloc, uint64(12*len(raw)); n > most {
		t.Errorf("allocated %d bytes for a %d-byte result, want at most %d", n, len(raw), most)
	}
}

// TestImportPythonJSON: Python's bare NaN and Infinity still import when
// the document is streamed.
func TestImportPythonJSON(t *testing.T) {
	doc := `{"duration": 10.0, "completed": 5, "failed": 0, "total_token_throughput": 100.5, "request_rate": Infinity, "mean_ttft_ms": NaN, "label": "NaN"}`
	items, err := ImportReader(strings.NewReader(doc), "py.json")
	if err != nil || len(items) != 1 {
		t.Fatalf("import: %v", err)
	}
	if r := items[0].Result; !r.RateIsInf() || r.Label != "NaN" || r.TotalTokenThroughput != 100.5 {
		t.Errorf("result %+v", r)
	}
}

// TestImportDeepValue: a value nested past the limit is refused with the
// key it sits under.
func TestImportDeepValue(t *testing.T) {
	doc := `{"duration": 1, "x": ` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`
	if _, err := ImportReader(strings.NewReader(doc), "deep.json"); err == nil || !strings.Contains(err.Error(), `key "x"`) {
		t.Errorf("err = %v", err)
	}
}

// FuzzImport: whatever an import is given (POST /imports' body, a file),
// it answers items or an error; it never panics, and what it accepts has
// the figures a report needs.
func FuzzImport(f *testing.F) {
	for _, s := range []string{
		`{"duration": 10, "completed": 5, "total_token_throughput": 1, "mean_ttft_ms": NaN, "itls": [[0.1, Infinity]]}`,
		`{"benchmarks": [{"metrics": {}}]}`, "[1, 2]", "============ Serving Benchmark Result ============\nSuccessful requests: 5\n",
		`{"x": ` + strings.Repeat("[", 120), "  \n{\"a\": -Infinity}",
	} {
		f.Add([]byte(s))
	}
	withLimits(f, 1<<20, 256<<10)
	f.Fuzz(func(t *testing.T, data []byte) {
		items, err := ImportReader(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		for _, it := range items {
			if len(missingFigures(it.Result)) > 0 {
				t.Fatalf("accepted an incomplete result: %+v", it)
			}
		}
	})
}
