package metrics

import (
	"encoding/json"
	"testing"
)

func TestScaleSpeed(t *testing.T) {
	r, err := ParseJSON([]byte(`{"num_prompts": 10, "completed": 9, "duration": 20, "request_throughput": 0.5,
		"request_goodput": 0.25, "output_throughput": 100, "total_token_throughput": 300, "max_output_tokens_per_s": 40,
		"mean_ttft_ms": 80, "median_ttft_ms": 60, "std_ttft_ms": 8, "p99_ttft_ms": 200, "mean_tpot_ms": 10, "p99_tpot_ms": 30}`))
	if err != nil {
		t.Fatal(err)
	}
	orig := r.Percentiles["ttft"]
	r.ScaleSpeed(2)
	b, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"num_prompts": 10, "completed": 9, "duration": 10, "request_throughput": 1,
		"request_goodput": 0.5, "output_throughput": 200, "total_token_throughput": 600, "max_output_tokens_per_s": 80,
		"mean_ttft_ms": 40, "median_ttft_ms": 30, "std_ttft_ms": 4, "p99_ttft_ms": 100, "mean_tpot_ms": 5, "p99_tpot_ms": 15}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if orig[0].Value != 200 {
		t.Errorf("the input's percentile slice was changed in place: %v", orig)
	}
}

// TestDecodeStored: a result perflab wrote reads back without being taken
// for an import (no source rewritten, no warnings added) and re-encodes to
// the same keys; ParseJSON, for imports, does flag it.
func TestDecodeStored(t *testing.T) {
	in := []byte(`{"completed": 9, "num_prompts": 10, "duration": 20, "output_throughput": 100, "max_output_tokens_per_s": 10}`)
	r, err := DecodeStored(in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Perflab != nil {
		t.Fatalf("a stored result gained a perflab section: %+v", r.Perflab)
	}
	out, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var a, b map[string]any
	_ = json.Unmarshal(in, &a)
	_ = json.Unmarshal(out, &b)
	if len(a) != len(b) {
		t.Fatalf("keys changed: %s -> %s", in, out)
	}
	imp, err := ParseJSON(in)
	if err != nil {
		t.Fatal(err)
	}
	if imp.Perflab == nil || len(imp.Perflab.Warnings) == 0 {
		t.Fatal("ParseJSON did not flag the peak below the mean: the test input no longer exercises validation")
	}
	if _, err := DecodeStored([]byte(`null`)); err == nil {
		t.Fatal("null decoded")
	}
}
