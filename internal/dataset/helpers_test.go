package dataset

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/perflab/perflab/internal/shareddata"

	"github.com/perflab/perflab/internal/tokenizer"
)

// Compile-time check that the real tokenizer satisfies the contract.
var _ Tokenizer = (*tokenizer.Tokenizer)(nil)

// sharedDir returns ../shared relative to the module root; skips when it is
// missing, fails under CI=true.
func sharedDir(t testing.TB) string {
	t.Helper()
	return shareddata.Dir(t)
}

var (
	qwenOnce sync.Once
	qwenTok  *tokenizer.Tokenizer
	qwenErr  error
)

func qwen3(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	dir := filepath.Join(sharedDir(t), "data", "tokenizers", "qwen3")
	qwenOnce.Do(func() { qwenTok, qwenErr = tokenizer.Load(dir) })
	if qwenErr != nil {
		t.Fatal(qwenErr)
	}
	return qwenTok
}

func shareGPTSample(t testing.TB) string {
	return filepath.Join(sharedDir(t), "data", "sharegpt", "sharegpt_v3_sample_1000.json")
}

// byteTok is a tiny stand-in tokenizer: one token per byte.
type byteTok struct{ special []int }

func (byteTok) Encode(s string) []int {
	ids := make([]int, len(s))
	for i := range len(s) {
		ids[i] = int(s[i])
	}
	return ids
}

func (byteTok) Decode(ids []int) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}

func (byteTok) VocabSize() int      { return 256 }
func (b byteTok) SpecialIDs() []int { return b.special }

type randomResult struct {
	reqs []Request
	ids  [][]int
	err  error
}

var (
	randomMu    sync.Mutex
	randomCache = map[Options]randomResult{}
)

// sampleRandomCached runs generateRandom once per Options per test binary:
// the reference-total and golden tests share the 500 x 4000 case, the most
// expensive thing in the suite (and far more so under -race).
func sampleRandomCached(t testing.TB, opt Options) ([]Request, [][]int) {
	t.Helper()
	tok := qwen3(t)
	randomMu.Lock()
	defer randomMu.Unlock()
	r, ok := randomCache[opt]
	if !ok {
		r.reqs, r.ids, r.err = generateRandom(opt, tok, true)
		randomCache[opt] = r
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.reqs, r.ids
}

// prefixedOnce fails unless err's message starts with prefix and says it
// once: each layer adds its own context, once (issue 11, defect 21).
func prefixedOnce(t testing.TB, err error, prefix string) {
	t.Helper()
	if msg := err.Error(); !strings.HasPrefix(msg, prefix) || strings.Count(msg, prefix) != 1 {
		t.Errorf("err %q: want it to start with %q and say it once", msg, prefix)
	}
}
