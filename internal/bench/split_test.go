package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/tokenizer"
)

func qwenTokenizer(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.Load(shareddata.Path(t, "data", "tokenizers", "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// streamText builds a streamed text of n chunks of two words each and the
// byte offsets where the chunks end.
func streamText(n int) (string, []int32) {
	var b strings.Builder
	ends := make([]int32, n)
	for i := range n {
		fmt.Fprintf(&b, " word%d token", i%97)
		ends[i] = int32(b.Len())
	}
	return b.String(), ends
}

// prefixSplit is the quadratic method splitByTokenizer replaced (issue 11,
// defect 13): every prefix tokenized again. Kept here as the reference its
// counts are checked against and as the benchmark's "before".
func prefixSplit(text string, ends []int32, tok dataset.Tokenizer) []int {
	out := make([]int, len(ends))
	prev := 0
	for i, e := range ends {
		n := len(tok.Encode(text[:e]))
		out[i] = max(0, n-prev)
		prev = max(prev, n)
	}
	return out
}

// TestSplitByTokenizer: the counts sum to the whole text's, equal the
// prefix method's where chunks end on token boundaries, give a token
// split across two chunks to the chunk its last byte came in, and the
// fallback for a tokenizer without token bytes sums right too.
func TestSplitByTokenizer(t *testing.T) {
	tok := qwenTokenizer(t)
	text, ends := streamText(300)
	got := splitByTokenizer(text, ends, tok)
	want := prefixSplit(text, ends, tok)
	total := len(tok.Encode(text))
	sum := 0
	for i := range got {
		sum += got[i]
		if got[i] != want[i] {
			t.Fatalf("chunk %d: %d tokens, the prefix method says %d", i, got[i], want[i])
		}
	}
	if sum != total {
		t.Errorf("counts sum to %d, the text has %d tokens", sum, total)
	}
	// " tokenization" split mid-word: the token that ends in the second
	// chunk counts there.
	split := " tokeni" + "zation"
	parts := splitByTokenizer(split, []int32{7, int32(len(split))}, tok)
	if parts[0]+parts[1] != len(tok.Encode(split)) || parts[1] == 0 {
		t.Errorf("split word: %v", parts)
	}
	// A tokenizer that cannot give token bytes takes the fallback.
	plain := struct{ dataset.Tokenizer }{tok}
	fb := splitByTokenizer(text, ends, plain)
	fsum := 0
	for _, c := range fb {
		fsum += c
	}
	if fsum != total {
		t.Errorf("fallback sums to %d, want %d", fsum, total)
	}
}

// TestSettleOutputStopsOnCancel: post-processing returns at once when the
// run's context is canceled (Ctrl-C), instead of tokenizing on.
func TestSettleOutputStopsOnCancel(t *testing.T) {
	tok := qwenTokenizer(t)
	text, ends := streamText(2000)
	recs := []metrics.Record{{Success: true, GeneratedText: text, ChunkTokens: make([]int, len(ends))}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	settleOutput(ctx, recs, [][]int32{ends}, tok, false)
	if recs[0].OutputLenSource != "" {
		t.Errorf("a canceled settle still tokenized: %+v", recs[0].OutputLenSource)
	}
}

// BenchmarkSplitByTokenizer: one request's post-processing for n chunks of
// two tokens, linear now; the prefix method it replaced is measured at the
// smaller sizes for the ratio (it is quadratic: 18.5 s at 16,000 chunks).
func BenchmarkSplitByTokenizer(b *testing.B) {
	tok := qwenTokenizer(b)
	for _, n := range []int{4000, 8000, 16000} {
		text, ends := streamText(n)
		b.Run(fmt.Sprintf("linear/chunks=%d", n), func(b *testing.B) {
			for b.Loop() {
				splitByTokenizer(text, ends, tok)
			}
		})
		if n <= 8000 {
			b.Run(fmt.Sprintf("prefix/chunks=%d", n), func(b *testing.B) {
				for b.Loop() {
					prefixSplit(text, ends, tok)
				}
			})
		}
	}
}
