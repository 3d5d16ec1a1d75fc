package tokenizer

import (
	"runtime"
	"testing"
)

// BenchmarkEncodeShareGPT encodes every turn of the ShareGPT sample once per
// iteration, single-threaded; b.SetBytes makes the MB/s figure text per core.
// The word cache is reset per iteration so the figure is not flattered by a
// warm cache from earlier iterations (it still warms within one pass, as a
// real run does).
func BenchmarkEncodeShareGPT(b *testing.B) {
	tok := qwen3(b)
	var texts []string
	total := 0
	for _, c := range loadShareGPT(b) {
		for _, turn := range c.Conversations {
			texts = append(texts, turn.Value)
			total += len(turn.Value)
		}
	}
	b.SetBytes(int64(total))
	// Pin to one thread so its CPU time measures the work of one core even
	// when the machine is shared.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu float64
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		tok.bpe.cache.init()
		c0, ok0 := threadCPU()
		b.StartTimer()
		n := 0
		for _, s := range texts {
			n += tok.Count(s)
		}
		if n == 0 {
			b.Fatal("no tokens")
		}
		b.StopTimer()
		if c1, ok1 := threadCPU(); ok0 && ok1 {
			cpu += c1 - c0
		}
		b.StartTimer()
	}
	if cpu > 0 {
		b.ReportMetric(float64(total)*float64(b.N)/1e6/cpu, "MB/cpu-s")
	}
}

// BenchmarkEncodeShareGPTWarm is the same with the word cache kept across
// iterations: the steady state of a long benchmark run.
func BenchmarkEncodeShareGPTWarm(b *testing.B) {
	tok := qwen3(b)
	var texts []string
	total := 0
	for _, c := range loadShareGPT(b) {
		for _, turn := range c.Conversations {
			texts = append(texts, turn.Value)
			total += len(turn.Value)
		}
	}
	b.SetBytes(int64(total))
	for b.Loop() {
		for _, s := range texts {
			tok.Count(s)
		}
	}
}

// BenchmarkDecodeShareGPT decodes the ids of every turn.
func BenchmarkDecodeShareGPT(b *testing.B) {
	tok := qwen3(b)
	var ids [][]int
	total := 0
	for _, c := range loadShareGPT(b) {
		for _, turn := range c.Conversations {
			ids = append(ids, tok.Encode(turn.Value))
			total += len(turn.Value)
		}
	}
	b.SetBytes(int64(total))
	for b.Loop() {
		for _, x := range ids {
			tok.Decode(x)
		}
	}
}
