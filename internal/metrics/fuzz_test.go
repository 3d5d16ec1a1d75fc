package metrics

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func FuzzParseText(f *testing.F) {
	for _, name := range []string{"text_default.txt", "text_all_metrics.txt", "text_perflab.txt"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("====== Serving Benchmark Result ====== Successful requests: 5 Peak concurrent requests: N/A ---x--- Mean TTFT (ms): 1e400 ====="))
	f.Add([]byte("== Serving Benchmark Result ==\nMean Latency(s): -3\nP99.9 ITL (ms): nan\nBackend: sglang\nMax ITL (ms): 1,000.5\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ParseText(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, r := range rs {
			var b bytes.Buffer
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			if _, err := json.Marshal(r); err != nil {
				t.Fatalf("marshal parsed result: %v", err)
			}
			_ = r.Validate()
		}
	})
}

func FuzzParseJSON(f *testing.F) {
	r := Compute(recordsFrom(fixedPlan), 3, Options{Detailed: true})
	b, _ := json.Marshal(r)
	f.Add(b)
	f.Add([]byte(`{"completed": NaN, "request_rate": Infinity, "p99.9_ttft_ms": -Infinity, "tp": "2", "x": [1, {"a": null}]}`))
	f.Add([]byte(`{"max_concurrent_requests": 3.5, "itls": [[0.1, null]], "errors": [null, "e"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseJSON(data)
		if err != nil {
			return
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
		if _, err := ParseJSON(out); err != nil {
			t.Fatalf("re-parse of our own output failed: %v\n%s", err, out)
		}
		var w bytes.Buffer
		if err := r.WriteText(&w); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParseGuidellm(f *testing.F) {
	if b, err := os.ReadFile("testdata/guidellm_report.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`[{"duration": 1, "metrics": {"request_totals": {"successful": 1}}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ParseGuidellm(data)
		if err != nil {
			return
		}
		for _, r := range rs {
			if _, err := json.Marshal(r); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestParseJSONPythonTokensAndMetadata(t *testing.T) {
	in := `{"date": "20250101-000000", "backend": "vllm", "label": null, "num_prompts": 10,
	"version": "0.11.0", "request_rate": "inf", "burstiness": 1.0, "max_concurrency": null,
	"duration": 2.5, "completed": 9, "failed": 1, "total_input_tokens": 900, "total_output_tokens": 450,
	"request_throughput": 3.6, "request_goodput": null, "output_throughput": 180.0, "total_token_throughput": 540.0,
	"max_output_tokens_per_s": 120.0, "max_concurrent_requests": 9, "mean_ttft_ms": NaN,
	"median_ttft_ms": 10, "std_ttft_ms": 1, "p99_ttft_ms": 20, "p99.9_ttft_ms": Infinity,
	"spec_decode_acceptance_rate": 71.5, "text": "say \"NaN\" Infinity"}`
	r, err := ParseJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if r.Metadata["version"] != "0.11.0" || r.Metadata["text"] != `say "NaN" Infinity` {
		t.Errorf("metadata %v", r.Metadata)
	}
	if r.Extra["spec_decode_acceptance_rate"] != 71.5 || r.GoodputConfigured || !r.RateIsInf() {
		t.Errorf("extra/goodput/rate wrong: %v %v %v", r.Extra, r.GoodputConfigured, r.RequestRate)
	}
	if v, ok := r.Percentile("ttft", 99.9); !ok || v < 1e308 {
		t.Errorf("p99.9 ttft = %v %v", v, ok)
	}
	ws := r.Perflab.Warnings
	if len(ws) == 0 {
		t.Error("NaN/Inf values not flagged")
	}
	for _, bad := range []string{"", "[]", "null", `{"completed": "x"}`, `{"completed": 1.5}`, `{"duration": [1]}`} {
		if _, err := ParseJSON([]byte(bad)); err == nil {
			t.Errorf("ParseJSON(%q) succeeded", bad)
		}
	}
}
