package metrics

import (
	"math/rand/v2"
	"testing"
)

// benchRecords builds n successful records of ~200 chunks each (20M ITL
// samples at n=100k), the shape of a long ShareGPT run.
func benchRecords(n, chunks int) []Record {
	rng := rand.New(rand.NewPCG(1, 2))
	recs := make([]Record, n)
	for i := range recs {
		r := &recs[i]
		r.Success, r.PromptLen, r.OutputLenSource = true, 200, "usage"
		r.Sent = float64(i) * 0.001
		r.Scheduled = r.Sent
		r.TTFT = 0.05 + rng.Float64()*0.1
		r.ITL = make([]float64, chunks-1)
		r.Latency = r.TTFT
		for k := range r.ITL {
			r.ITL[k] = 0.01 + rng.Float64()*0.01
			r.Latency += r.ITL[k]
		}
		r.OutputLen = chunks
	}
	return recs
}

func BenchmarkCompute100k(b *testing.B) {
	recs := benchRecords(100_000, 20)
	b.ResetTimer()
	for b.Loop() {
		Compute(recs, 200, DefaultOptions())
	}
}
