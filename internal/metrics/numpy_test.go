package metrics

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
)

// numpyRecords is a fixed, irregular schedule: jittered sends, TTFTs and
// gaps, some failures, some single-token outputs, multi-token chunks.
func numpyRecords() []Record {
	rng := rand.New(rand.NewPCG(42, 7))
	var recs []Record
	for i := range 300 {
		r := Record{PromptLen: 50 + rng.IntN(900), Sent: rng.Float64() * 5}
		r.Scheduled = r.Sent
		if rng.IntN(20) == 0 {
			r.ErrorClass, r.Error = "timeout", "timeout"
			recs = append(recs, r)
			continue
		}
		r.Success = true
		r.TTFT = 0.02 + rng.ExpFloat64()*0.15
		chunks := 1 + rng.IntN(60)
		if rng.IntN(15) == 0 {
			chunks = 1
		}
		per := 1 + rng.IntN(2)
		r.ChunkTokens = []int{per}
		for range chunks - 1 {
			r.ITL = append(r.ITL, 0.005+rng.ExpFloat64()*0.02)
			r.ChunkTokens = append(r.ChunkTokens, per)
		}
		r.Latency = r.TTFT
		for _, g := range r.ITL {
			r.Latency += g
		}
		r.OutputLen = chunks * per
		recs = append(recs, r)
		_ = i
	}
	return recs
}

// TestComputeAgainstNumpy compares Compute with figures numpy computed from
// the same records by vLLM's formulas (testdata/vllm_reference.py). Under
// -update it regenerates both files, which needs Debian's python3-numpy.
func TestComputeAgainstNumpy(t *testing.T) {
	recs := numpyRecords()
	if *update {
		b, _ := json.Marshal(recs)
		if err := os.WriteFile("testdata/numpy_records.json", b, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("/usr/bin/python3", "testdata/vllm_reference.py", "testdata/numpy_records.json").Output()
		if err != nil {
			t.Fatalf("run numpy reference (apt-get install python3-numpy): %v", err)
		}
		if err := os.WriteFile("testdata/numpy_expected.json", out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Use the checked-in records so the comparison does not depend on the
	// generator staying bit-identical across Go versions.
	rb, err := os.ReadFile("testdata/numpy_records.json")
	if err != nil {
		t.Fatal(err)
	}
	recs = nil
	if err := json.Unmarshal(rb, &recs); err != nil {
		t.Fatal(err)
	}
	eb, err := os.ReadFile("testdata/numpy_expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]float64
	if err := json.Unmarshal(eb, &want); err != nil {
		t.Fatal(err)
	}
	r := Compute(recs, 7.25, Options{
		PercentileMetrics: []string{"ttft", "tpot", "itl", "e2el"},
		Percentiles:       []float64{25, 50, 90, 99, 99.9},
		Goodput:           map[string]float64{"ttft": 250, "tpot": 30, "e2el": 2000},
	})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(want) < 30 {
		t.Fatalf("expected file has only %d keys", len(want))
	}
	for k, w := range want {
		g, ok := got[k].(float64)
		if !ok {
			t.Errorf("%s missing from result JSON", k)
			continue
		}
		if math.Abs(g-w) > 1e-9*max(1, math.Abs(w)) {
			t.Errorf("%s = %.15g, numpy says %.15g", k, g, w)
		}
	}
}
