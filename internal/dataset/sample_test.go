package dataset

import (
	"fmt"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/racetest"
)

// The reference reports ran `vllm bench serve --dataset-name random --seed
// 42` with vLLM v0.11.0 on Qwen3 and printed "Total input tokens", which is
// the sum of the sampled prompt lengths. Matching those sums exactly checks
// the RNG draws, the id sequence and the decode/re-encode/truncate step
// against the real tool, not against our reading of it.
func TestRandomMatchesReferenceReportTotals(t *testing.T) {
	racetest.SkipCPUBound(t) // tokenizing whole reports; the smaller sampling tests race parallelFor
	qwen3(t)
	cases := []struct {
		name                 string
		in, out, n           int
		wantInput, wantOutpt int
	}{
		{"short", 128, 4, 1000, 127698, 4000},
		{"medium", 2000, 100, 500, 998175, 50000},
		{"long", 4000, 200, 500, 1997942, 100000},
		{"very-long", 32000, 100, 100, 3200000, 10000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.in > 4000 {
				t.Skip("-short")
			}
			reqs, _ := sampleRandomCached(t, Options{Name: NameRandom, RandomInputLen: c.in, RandomOutputLen: c.out, NumPrompts: c.n, Seed: 42})
			if len(reqs) != c.n {
				t.Fatalf("got %d requests, want %d", len(reqs), c.n)
			}
			in, out := 0, 0
			for _, r := range reqs {
				in += r.PromptLen
				out += r.OutputLen
				if !r.IgnoreEOS {
					t.Fatal("random request without ignore_eos")
				}
			}
			if in != c.wantInput || out != c.wantOutpt {
				t.Fatalf("total input %d output %d, report says %d and %d", in, out, c.wantInput, c.wantOutpt)
			}
		})
	}
}

func TestSampleRejectsBadOptions(t *testing.T) {
	cases := []struct {
		opt  Options
		want string
	}{
		{Options{}, "no dataset name"},
		{Options{Name: "sonnet"}, "unknown dataset"},
		{Options{Name: NameRandom, NumPrompts: -1}, "negative"},
		{Options{Name: NameRandom, RandomRangeRatio: 1}, "range ratio"},
		{Options{Name: NameRandom, RandomRangeRatio: -0.1}, "range ratio"},
		{Options{Name: NameRandom, Seed: -1}, "non-negative"},
		{Options{Name: NameRandom, RandomInputLen: -5}, "negative length"},
		{Options{Name: NameShareGPT}, "needs a dataset path"},
		{Options{Name: NameShareGPT, Path: "/nonexistent/sharegpt.json"}, "no such file"},
		{Options{Name: NameCustom}, "needs a dataset path"},
		{Options{Name: NamePrefixShared, GSPOutputLen: -1}, "invalid shape"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%+v", c.opt), func(t *testing.T) {
			_, err := Sample(c.opt, byteTok{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
	if _, err := Sample(Options{Name: NameRandom}, nil); err == nil {
		t.Fatal("nil tokenizer accepted")
	}
}
