package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/perflab/perflab/internal/bench/benchtest"
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

// countingTok counts the bytes a tokenizer is given to encode.
type countingTok struct {
	dataset.Tokenizer
	bytes int
}

func (c *countingTok) Encode(s string) []int {
	c.bytes += len(s)
	return c.Tokenizer.Encode(s)
}

// countingByter is countingTok for a tokenizer that knows its tokens'
// bytes.
type countingByter struct {
	*countingTok
	tb tokenByter
}

func (c countingByter) TokenBytes(id int) []byte { return c.tb.TokenBytes(id) }

// TestSettleOutputIsLinear (issue 11, defect 13: every prefix of the
// output was tokenized again, 18.5 s for 16,000 chunks): settling a
// request whose chunks carry no counts tokenizes its text once (once more
// with a tokenizer that cannot give token bytes), whatever its chunk
// count, and the counts sum to the text's.
func TestSettleOutputIsLinear(t *testing.T) {
	tok := qwenTokenizer(t)
	for _, n := range []int{10, 1000} {
		text, ends := streamText(n)
		for name, wrap := range map[string]func(*countingTok) dataset.Tokenizer{
			"token bytes": func(c *countingTok) dataset.Tokenizer { return countingByter{c, tok} },
			"fallback":    func(c *countingTok) dataset.Tokenizer { return c },
		} {
			c := &countingTok{Tokenizer: tok}
			recs := []metrics.Record{{Success: true, GeneratedText: text, ChunkTokens: make([]int, n)}}
			settleOutput(context.Background(), recs, [][]int32{ends}, wrap(c), false)
			limit := len(text)
			if name == "fallback" {
				limit = 2 * len(text)
			}
			if c.bytes > limit {
				t.Errorf("%s, %d chunks: %d bytes tokenized for a %d-byte text, want at most %d", name, n, c.bytes, len(text), limit)
			}
			sum := 0
			for _, x := range recs[0].ChunkTokens {
				sum += x
			}
			if sum != recs[0].OutputLen || recs[0].OutputLen != len(tok.Encode(text)) {
				t.Errorf("%s, %d chunks: chunk counts sum to %d, output %d tokens", name, n, sum, recs[0].OutputLen)
			}
		}
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
// two tokens, linear now, beside the prefix method it replaced (quadratic:
// about 20 s at 16,000 chunks, so that size runs only with -bench-old-16k).
var benchOld16k = flag.Bool("bench-old-16k", false, "BenchmarkSplitByTokenizer: time the quadratic prefix method at 16,000 chunks too (about 20 s)")

func BenchmarkSplitByTokenizer(b *testing.B) {
	tok := qwenTokenizer(b)
	for _, n := range []int{4000, 8000, 16000} {
		text, ends := streamText(n)
		b.Run(fmt.Sprintf("linear/chunks=%d", n), func(b *testing.B) {
			for b.Loop() {
				splitByTokenizer(text, ends, tok)
			}
		})
		if n <= 8000 || *benchOld16k {
			b.Run(fmt.Sprintf("prefix/chunks=%d", n), func(b *testing.B) {
				for b.Loop() {
					prefixSplit(text, ends, tok)
				}
			})
		}
	}
}

// cancelingTok cancels the run's context the first time it tokenizes once
// armed, as Ctrl-C arriving during post-processing would.
type cancelingTok struct {
	dataset.Tokenizer
	armed  *atomic.Bool
	cancel context.CancelFunc
}

func (c cancelingTok) Encode(s string) []int {
	if c.armed.Load() {
		c.cancel()
	}
	return c.Tokenizer.Encode(s)
}

// TestRunInterruptedWhileSettling: a run interrupted after its last
// request, while output tokens are being counted, returns the
// cancellation (it returned no error, so bench exited 0 on Ctrl-C).
func TestRunInterruptedWhileSettling(t *testing.T) {
	tok := qwenTokenizer(t)
	srv := benchtest.New(func(int, map[string]any) benchtest.Plan {
		return benchtest.Plan{Chunks: 50, NoUsage: true, Text: " word token"}
	})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	const n = 6
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var armed atomic.Bool
	var finished atomic.Int32
	out, err := Run(ctx, Config{BaseURL: hs.URL, Backend: BackendOpenAI, Model: "m", Requests: requests(n, 4, 50),
		RequestRate: math.Inf(1), Tokenizer: cancelingTok{tok, &armed, cancel},
		OnRecord: func(metrics.Record) {
			if finished.Add(1) == n {
				armed.Store(true)
			}
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the cancellation", err)
	}
	if out == nil || len(out.Records) != n {
		t.Fatalf("the finished requests were not kept: %+v", out)
	}
	if got := out.Records[n-1].OutputLenSource; got == "tokenizer" {
		t.Errorf("the last record was still tokenized after the interrupt")
	}
}
