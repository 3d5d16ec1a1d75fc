package dataset

import (
	"fmt"
	"math"
	"strconv"
)

// sampleRandom is vLLM v0.11.0's RandomDataset: numpy default_rng(seed)
// draws input lengths, output lengths and offsets (in that order, each a
// size-n integers call), then the prefix; prompt i is the prefix followed by
// token ids (offset+i+j) mod vocab_size, decoded, re-encoded, truncated to
// the target length and decoded again. prompt_len is the truncated length,
// which can be below the target when re-encoding merges tokens (the reference
// reports' "Total input tokens" show exactly that).
func sampleRandom(opt Options, tok Tokenizer) ([]Request, error) {
	reqs, _, err := generateRandom(opt, tok, false)
	return reqs, err
}

// generateRandom also returns each prompt's token ids (the ones vLLM
// counted) when keepIDs is set or a prefix needs them.
func generateRandom(opt Options, tok Tokenizer, keepIDs bool) ([]Request, [][]int, error) {
	n := opt.numPrompts()
	inputLen := orDefault(opt.RandomInputLen, DefaultRandomInputLen)
	outputLen := orDefault(opt.RandomOutputLen, DefaultRandomOutputLen)
	ratio := opt.RandomRangeRatio
	prefixLen := opt.RandomPrefixLen
	switch {
	case inputLen < 0 || outputLen < 0 || prefixLen < 0:
		return nil, nil, fmt.Errorf("dataset: random: negative length (input %d, output %d, prefix %d)", inputLen, outputLen, prefixLen)
	case !(ratio >= 0 && ratio < 1):
		return nil, nil, fmt.Errorf("dataset: random: range ratio %v must be in [0, 1)", ratio)
	case opt.Seed < 0:
		return nil, nil, fmt.Errorf("dataset: random: seed %d must be non-negative (numpy SeedSequence)", opt.Seed)
	}
	vocab := tok.VocabSize()
	if vocab <= 0 {
		return nil, nil, fmt.Errorf("dataset: random: tokenizer vocab size %d", vocab)
	}
	realInput := max(0, inputLen-numSpecialTokensToAdd(tok))
	inLow := int64(math.Floor(float64(realInput) * (1 - ratio)))
	inHigh := int64(math.Ceil(float64(realInput) * (1 + ratio)))
	outLow := max(int64(math.Floor(float64(outputLen)*(1-ratio))), 1)
	outHigh := int64(math.Ceil(float64(outputLen) * (1 + ratio)))
	if int64(prefixLen)+inLow < 1 {
		return nil, nil, fmt.Errorf("dataset: random: input length %d with range ratio %v and prefix %d can give an empty prompt", inputLen, ratio, prefixLen)
	}
	if outLow > outHigh {
		return nil, nil, fmt.Errorf("dataset: random: invalid output interval [%d, %d]", outLow, outHigh)
	}

	g := newNPGenerator(uint64(opt.Seed))
	inLens := g.integers(inLow, inHigh+1, n)
	outLens := g.integers(outLow, outHigh+1, n)
	offsets := g.integers(0, int64(vocab), n)
	var prefix []int
	if prefixLen > 0 {
		for _, v := range g.integers(0, int64(vocab), prefixLen) {
			prefix = append(prefix, int(v))
		}
	}

	reqs := make([]Request, n)
	var ids [][]int
	if prefixLen > 0 || keepIDs {
		ids = make([][]int, n)
	}
	parallelFor(n, func(i int) {
		in := int(inLens[i])
		seq := make([]int, 0, prefixLen+in)
		seq = append(seq, prefix...)
		// (offset + i + j) mod vocab without materialising offset+i+j: the
		// start wraps once, then the run counts up and wraps at vocab.
		t := int((offsets[i] + int64(i)) % int64(vocab))
		for range in {
			seq = append(seq, t)
			t++
			if t == vocab {
				t = 0
			}
		}
		re := tok.Encode(tok.Decode(seq))
		if len(re) > prefixLen+in {
			re = re[:prefixLen+in]
		}
		reqs[i] = Request{
			Prompt:    tok.Decode(re),
			PromptLen: len(re),
			OutputLen: int(outLens[i]),
			IgnoreEOS: true,
			SourceID:  strconv.Itoa(i),
		}
		if ids != nil {
			ids[i] = re
		}
	})
	if prefixLen > 0 && n > 0 {
		shared := len(ids[0])
		for _, s := range ids[1:] {
			shared = min(shared, commonPrefix(ids[0], s))
		}
		for i := range reqs {
			reqs[i].PrefixGroup = 1
			reqs[i].PrefixLen = shared
		}
	}
	return reqs, ids, nil
}

func commonPrefix(a, b []int) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
