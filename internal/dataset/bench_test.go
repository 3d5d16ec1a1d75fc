package dataset

import "testing"

// Sampling runs on every lab trial, so it has to take seconds, not minutes.
// Run: go test ./internal/dataset -run '^$' -bench . -benchtime=1x
func benchmarkSample(b *testing.B, opt Options) {
	tok := qwen3(b)
	b.ReportAllocs()
	for b.Loop() {
		reqs, err := Sample(opt, tok)
		if err != nil {
			b.Fatal(err)
		}
		if len(reqs) != opt.NumPrompts {
			b.Fatalf("%d requests", len(reqs))
		}
	}
}

func BenchmarkRandomLong500x4000(b *testing.B) {
	benchmarkSample(b, Options{Name: NameRandom, NumPrompts: 500, RandomInputLen: 4000, RandomOutputLen: 200, Seed: 42})
}

func BenchmarkRandomVeryLong100x32000(b *testing.B) {
	benchmarkSample(b, Options{Name: NameRandom, NumPrompts: 100, RandomInputLen: 32000, RandomOutputLen: 100, Seed: 42})
}

func BenchmarkShareGPT1000(b *testing.B) {
	benchmarkSample(b, Options{Name: NameShareGPT, Path: shareGPTSample(b), NumPrompts: 1000})
}

func BenchmarkPyRandomShuffle100k(b *testing.B) {
	for b.Loop() {
		shuffled(newPyRandom(0), 100000)
	}
}

func BenchmarkNPIntegers1M(b *testing.B) {
	for b.Loop() {
		newNPGenerator(42).integers(0, 151643, 1<<20)
	}
}
