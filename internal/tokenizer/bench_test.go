package tokenizer

import (
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
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		tok.bpe.cache.init()
		b.StartTimer()
		n := 0
		for _, s := range texts {
			n += tok.Count(s)
		}
		if n == 0 {
			b.Fatal("no tokens")
		}
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
