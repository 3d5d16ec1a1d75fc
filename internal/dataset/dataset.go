// Package dataset builds benchmark requests exactly the way vLLM's
// benchmarks/datasets.py does (same seed, same prompts, same token lengths),
// plus custom JSONL, SGLang's generated-shared-prefix and named workload
// profiles (the reference reports' and GPUStack's).
//
// The behaviour followed is vLLM v0.11.0's, the version the reference
// reports ran: ShareGPT oversamples with random.choices (later versions
// loop over random.choice), and the random dataset decodes, re-encodes and
// truncates once, so a prompt can come out a few tokens short (later
// versions pad with more RNG draws). CPython's Mersenne Twister and numpy's
// SeedSequence/PCG64/Generator.integers are reimplemented bit for bit, so
// the same seed gives the same requests as the Python tool.
package dataset

// Request is one benchmark request.
type Request struct {
	// Prompt is the text sent (completions) or the single user message (chat).
	Prompt string `json:"prompt"`
	// PromptLen is the prompt length in tokens, counted by the tokenizer.
	PromptLen int `json:"prompt_len"`
	// OutputLen is the number of tokens to generate (max_tokens).
	OutputLen int `json:"output_len"`
	// IgnoreEOS forces generation to OutputLen (the random dataset sets it).
	IgnoreEOS bool `json:"ignore_eos,omitempty"`
	// SourceID identifies where the prompt came from (e.g. the ShareGPT
	// conversation id), for golden comparisons; may be empty.
	SourceID string `json:"source_id,omitempty"`
	// PrefixGroup tags prompts that share a common prefix (prefix-shared
	// dataset, random prefix); 0 when none. PrefixLen is how many leading
	// tokens are shared within the group (the simulator's prefix cache uses
	// it; the live engines see the text).
	PrefixGroup int `json:"prefix_group,omitempty"`
	PrefixLen   int `json:"prefix_len,omitempty"`
}

// Tokenizer is what datasets need from a tokenizer. *tokenizer.Tokenizer
// implements it; keeping it an interface here keeps the dependency one way.
type Tokenizer interface {
	// Encode returns the ids of text, without adding special tokens.
	Encode(text string) []int
	// Decode turns ids back into text (invalid UTF-8 becomes U+FFFD per
	// maximal invalid run), keeping special tokens.
	Decode(ids []int) string
	// VocabSize is the base vocabulary size as HF's tokenizer.vocab_size
	// reports it (added tokens excluded).
	VocabSize() int
	// SpecialIDs lists the ids of special tokens (HF all_special_ids).
	SpecialIDs() []int
}
