package dataset

import (
	"fmt"
	"slices"
	"strconv"
)

// samplePrefixShared is SGLang's generated-shared-prefix dataset
// (bench_serving.py sample_generated_shared_prefix_requests): one random
// system prompt per group, one random question per request, prompt =
// system + "\n\n" + question, then a shuffle of all requests. Randomness is
// Python's random seeded with the seed, as SGLang seeds it at start-up.
//
// SGLang draws tokens with random.choices over tokenizer.get_vocab().values(),
// whose order is a Rust hash map's and so differs run to run; no
// implementation can match its text exactly. perflab draws from the sorted
// non-special ids below VocabSize instead, which keeps the lengths and the
// sharing structure SGLang produces, deterministically.
func samplePrefixShared(opt Options, tok Tokenizer) ([]Request, error) {
	groups := orDefault(opt.GSPNumGroups, DefaultGSPNumGroups)
	per := orDefault(opt.GSPPromptsPerGroup, DefaultGSPPromptsPerGroup)
	sysLen := orDefault(opt.GSPSystemPromptLen, DefaultGSPSystemPromptLen)
	qLen := orDefault(opt.GSPQuestionLen, DefaultGSPQuestionLen)
	outLen := orDefault(opt.GSPOutputLen, DefaultGSPOutputLen)
	if groups < 1 || per < 1 || sysLen < 0 || qLen < 0 || outLen < 1 {
		return nil, fmt.Errorf("dataset: prefix-shared: invalid shape (groups %d, prompts per group %d, system %d, question %d, output %d)", groups, per, sysLen, qLen, outLen)
	}
	pool := allowedTokens(tok)
	if len(pool) == 0 {
		return nil, fmt.Errorf("dataset: prefix-shared: tokenizer has no non-special tokens (vocab %d)", tok.VocabSize())
	}
	r := newPyRandom(opt.Seed)
	gen := func(k int) []int {
		ids := make([]int, k)
		for i, c := range r.choices(len(pool), k) {
			ids[i] = pool[c]
		}
		return ids
	}
	sysIDs := make([][]int, groups)
	for g := range sysIDs {
		sysIDs[g] = gen(sysLen)
	}
	qIDs := make([][]int, groups*per)
	for q := range qIDs {
		qIDs[q] = gen(qLen)
	}
	sys := make([]string, groups)
	parallelFor(groups, func(g int) { sys[g] = tok.Decode(sysIDs[g]) })
	reqs := make([]Request, groups*per)
	enc := make([][]int, groups*per)
	parallelFor(len(reqs), func(i int) {
		g := i / per
		p := sys[g] + "\n\n" + tok.Decode(qIDs[i])
		enc[i] = tok.Encode(p)
		reqs[i] = Request{
			Prompt:      p,
			PromptLen:   len(enc[i]),
			OutputLen:   outLen,
			PrefixGroup: g + 1,
			SourceID:    "g" + strconv.Itoa(g+1) + "q" + strconv.Itoa(i%per+1),
		}
	})
	// Shared leading tokens per group: what a prefix cache could reuse.
	for g := range groups {
		first := enc[g*per]
		shared := len(first)
		if per == 1 {
			shared = commonPrefix(first, tok.Encode(sys[g]))
		}
		for i := g*per + 1; i < (g+1)*per; i++ {
			shared = min(shared, commonPrefix(first, enc[i]))
		}
		for i := g * per; i < (g+1)*per; i++ {
			reqs[i].PrefixLen = shared
		}
	}
	r.shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
	return reqs, nil
}

// allowedTokens is every id below VocabSize that is not special, ascending.
func allowedTokens(tok Tokenizer) []int {
	special := tok.SpecialIDs()
	pool := make([]int, 0, tok.VocabSize())
	for id := range tok.VocabSize() {
		if !slices.Contains(special, id) {
			pool = append(pool, id)
		}
	}
	return pool
}
