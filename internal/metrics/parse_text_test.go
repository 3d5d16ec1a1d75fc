package metrics

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var referenceReports = []struct {
	file   string
	blocks int
}{
	{"qwen3-14b-h100.md", 15},
	{"qwen3-32b-h100.md", 13},
	{"qwen3.5-9b-h100.md", 24},
}

// TestParseReferenceReports parses every result block of the published
// reports and compares the parsed results, every field, with goldens.
func TestParseReferenceReports(t *testing.T) {
	for _, ref := range referenceReports {
		t.Run(ref.file, func(t *testing.T) {
			data, err := os.ReadFile(sharedPath(t, filepath.Join("reference", ref.file)))
			if err != nil {
				t.Fatal(err)
			}
			rs, err := ParseText(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != ref.blocks {
				t.Fatalf("parsed %d blocks, want %d", len(rs), ref.blocks)
			}
			// Independent completeness check: every "label: value" pair in a
			// block's text must have landed in a field (present key, extra,
			// or an N/A note).
			rowTok := regexp.MustCompile(`[A-Za-z)]:[ \t]+\S`)
			for i, r := range rs {
				start := r.Perflab.Origin.Offset
				end := len(data)
				if i+1 < len(rs) {
					end = rs[i+1].Perflab.Origin.Offset
				}
				block := data[start:end]
				if k := bytes.Index(block[10:], []byte("=========================")); k >= 0 {
					block = block[:10+k]
				}
				want := len(rowTok.FindAll(block, -1))
				na := bytes.Count(block, []byte("N/A"))
				got := len(r.Present) + len(r.Extra) + na
				if got != want {
					t.Errorf("block %d (line %d): %d rows in text, %d captured (present %v)", i, r.Perflab.Origin.Line, want, got, sortedKeys(r.Present))
				}
				for _, k := range []string{"completed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput", "output_throughput", "total_token_throughput", "mean_ttft_ms", "median_tpot_ms", "p99_itl_ms"} {
					if !r.Has(k) {
						t.Errorf("block %d lacks %s", i, k)
					}
				}
			}
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rs); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("reference", strings.TrimSuffix(ref.file, ".md")+".json"), b.Bytes())
		})
	}
}

// The 9B report's impossible peak must be flagged, not silently accepted.
func TestParseFlagsImpossiblePeak(t *testing.T) {
	data, err := os.ReadFile(sharedPath(t, "reference/qwen3.5-9b-h100.md"))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ParseText(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rs {
		if r.MaxOutputTokensPerS == 20132659.20 {
			found = true
			if !strings.Contains(strings.Join(r.Perflab.Warnings, "\n"), "implausible") {
				t.Errorf("20,132,659 tok/s not flagged: %v", r.Perflab.Warnings)
			}
		}
	}
	if !found {
		t.Fatal("the 20132659.20 tok/s block was not parsed")
	}
}

func TestParseTextLayouts(t *testing.T) {
	cases := []struct {
		name, text string
		check      func(t *testing.T, r *Result)
	}{
		{"old no sections, trailing pad, comment prefix", "" +
			"# ============ Serving Benchmark Result ============\n" +
			"# Successful requests:                     32        \n" +
			"# Benchmark duration (s):                  150.87    \n" +
			"# Total input tokens:                      65536     \n" +
			"# Total generated tokens:                  65536     \n" +
			"# Request throughput (req/s):              0.21      \n" +
			"# Output token throughput (tok/s):         434.40    \n" +
			"# Total Token throughput (tok/s):          868.80    \n" +
			"# Mean TTFT (ms):                          7279.56   \n" +
			"# P99 TTFT (ms):                           10999.46  \n" +
			"# ==================================================\n",
			func(t *testing.T, r *Result) {
				if r.Completed != 32 || r.Has("failed") || r.Has("max_concurrent_requests") || r.MeanTTFTMs != 7279.56 {
					t.Errorf("parsed %+v", r)
				}
				if v, ok := r.Percentile("ttft", 99); !ok || v != 10999.46 {
					t.Errorf("p99 ttft %v %v", v, ok)
				}
			}},
		{"latest with goodput, rate, e2el and p99.9", "" +
			"============ Serving Benchmark Result ============\n" +
			"Successful requests:                     10        \n" +
			"Failed requests:                         2         \n" +
			"Maximum request concurrency:             4         \n" +
			"Request rate configured (RPS):           8.00      \n" +
			"Benchmark duration (s):                  2.00      \n" +
			"Total input tokens:                      100       \n" +
			"Total generated tokens:                  200       \n" +
			"Request throughput (req/s):              5.00      \n" +
			"Request goodput (req/s):                 4.00      \n" +
			"Output token throughput (tok/s):         100.00    \n" +
			"Peak output token throughput (tok/s):    150.00    \n" +
			"Peak concurrent requests:                4.00      \n" +
			"Total token throughput (tok/s):          150.00    \n" +
			"----------------End-to-end Latency----------------\n" +
			"Mean E2EL (ms):                          10.00     \n" +
			"Median E2EL (ms):                        9.00      \n" +
			"P99.9 E2EL (ms):                         20.00     \n" +
			"==================================================\n",
			func(t *testing.T, r *Result) {
				if !r.GoodputConfigured || r.RequestGoodput != 4 || r.MaxConcurrency != 4 || r.RequestRate != 8 || r.Failed != 2 {
					t.Errorf("parsed %+v", r)
				}
				if v, ok := r.Percentile("e2el", 99.9); !ok || v != 20 {
					t.Errorf("p99.9 e2el %v %v", v, ok)
				}
				if len(r.Perflab.Warnings) != 0 {
					t.Errorf("unexpected warnings %v", r.Perflab.Warnings)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, err := ParseText(strings.NewReader(c.text))
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 {
				t.Fatalf("got %d blocks", len(rs))
			}
			c.check(t, rs[0])
		})
	}
}

// WriteText's output parses back to the same numbers (to print precision).
func TestWriteTextParseRoundTrip(t *testing.T) {
	r := Compute(recordsFrom(fixedPlan), 3, Options{PercentileMetrics: AllMetrics, Percentiles: []float64{50, 99.9},
		Goodput: map[string]float64{"ttft": 130}, MaxConcurrency: 4, RequestRate: 8})
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	rs, err := ParseText(&b)
	if err != nil || len(rs) != 1 {
		t.Fatalf("%v %d", err, len(rs))
	}
	var b2 bytes.Buffer
	if err := rs[0].WriteText(&b2); err != nil {
		t.Fatal(err)
	}
	var b1 bytes.Buffer
	r.WriteText(&b1)
	if b1.String() != b2.String() {
		t.Errorf("print→parse→print differs:\n%s\n%s", b1.String(), b2.String())
	}
}

func TestParseGuidellm(t *testing.T) {
	data, err := os.ReadFile("testdata/guidellm_report.json")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ParseGuidellm(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("got %d benchmarks", len(rs))
	}
	r := rs[0]
	if r.Completed != 1000 || r.TotalInputTokens != 342058 || r.TotalOutputTokens != 281412 || r.MaxConcurrency != 512 {
		t.Errorf("counts: %+v", r)
	}
	if !near(r.OutputThroughput, 281412/54.74) {
		t.Errorf("output throughput %v, want count/duration", r.OutputThroughput)
	}
	if r.MeanTPOTMs != 15.12 || r.MeanITLMs != 15.12 || r.MeanE2ELMs != 24110 {
		t.Errorf("latency mapping: tpot %v itl %v e2el %v", r.MeanTPOTMs, r.MeanITLMs, r.MeanE2ELMs)
	}
	if v, ok := r.Percentile("ttft", 99.9); !ok || v != 8000 {
		t.Errorf("p99.9 ttft = %v %v", v, ok)
	}
	if !strings.Contains(strings.Join(r.Perflab.Warnings, "\n"), "implausible") {
		t.Errorf("guidellm peak not flagged: %v", r.Perflab.Warnings)
	}
	if rs[1].Failed != 20 || rs[1].RequestRate != 8 {
		t.Errorf("second benchmark: failed %d rate %v", rs[1].Failed, rs[1].RequestRate)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rs); err != nil {
		t.Fatal(err)
	}
	golden(t, "guidellm_report.parsed.json", b.Bytes())
	for _, bad := range []string{"", "{}", "[]", `{"benchmarks":[{"metrics":{}}]}`, "nope"} {
		if _, err := ParseGuidellm([]byte(bad)); err == nil {
			t.Errorf("ParseGuidellm(%q) succeeded", bad)
		}
	}
}
