package dataset

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// Dataset names accepted in Options.Name (vLLM's --dataset-name spellings,
// plus SGLang's generated-shared-prefix under "prefix-shared").
const (
	NameShareGPT     = "sharegpt"
	NameRandom       = "random"
	NameCustom       = "custom"
	NamePrefixShared = "prefix-shared"
)

// Defaults applied when the corresponding Options field is zero. They are
// vLLM's argparse defaults (and SGLang's for the gsp-* fields).
const (
	DefaultNumPrompts         = 1000
	DefaultRandomInputLen     = 1024
	DefaultRandomOutputLen    = 128
	DefaultCustomOutputLen    = 256
	DefaultGSPNumGroups       = 64
	DefaultGSPPromptsPerGroup = 16
	DefaultGSPSystemPromptLen = 2048
	DefaultGSPQuestionLen     = 128
	DefaultGSPOutputLen       = 256
)

// Options selects and parameterises a dataset. Field names follow vLLM's
// `vllm bench serve` flags (--dataset-name, --dataset-path, --num-prompts,
// --seed, --sharegpt-output-len, --random-*) and SGLang's --gsp-* flags.
// A zero numeric field means "the tool's default" (see the Default*
// constants); vLLM's "None" for --sharegpt-output-len is 0 here.
type Options struct {
	// Name is "sharegpt", "random", "custom" or "prefix-shared".
	Name string `json:"name" yaml:"name"`
	// Path is the dataset file (sharegpt JSON, custom JSONL).
	Path string `json:"path,omitempty" yaml:"path,omitempty"`
	// NumPrompts is --num-prompts (default 1000).
	NumPrompts int `json:"num_prompts,omitempty" yaml:"num_prompts,omitempty"`
	// Seed is --seed (vLLM's default is 0).
	Seed int64 `json:"seed,omitempty" yaml:"seed,omitempty"`
	// NoOversample is --no-oversample.
	NoOversample bool `json:"no_oversample,omitempty" yaml:"no_oversample,omitempty"`
	// DisableShuffle is --disable-shuffle (sharegpt, custom).
	DisableShuffle bool `json:"disable_shuffle,omitempty" yaml:"disable_shuffle,omitempty"`

	// ShareGPTOutputLen is --sharegpt-output-len; 0 keeps each
	// conversation's completion length.
	ShareGPTOutputLen int `json:"sharegpt_output_len,omitempty" yaml:"sharegpt_output_len,omitempty"`

	// RandomInputLen is --random-input-len (default 1024).
	RandomInputLen int `json:"random_input_len,omitempty" yaml:"random_input_len,omitempty"`
	// RandomOutputLen is --random-output-len (default 128).
	RandomOutputLen int `json:"random_output_len,omitempty" yaml:"random_output_len,omitempty"`
	// RandomRangeRatio is --random-range-ratio, in [0, 1).
	RandomRangeRatio float64 `json:"random_range_ratio,omitempty" yaml:"random_range_ratio,omitempty"`
	// RandomPrefixLen is --random-prefix-len.
	RandomPrefixLen int `json:"random_prefix_len,omitempty" yaml:"random_prefix_len,omitempty"`

	// CustomOutputLen is --custom-output-len: > 0 overrides every line's
	// output_tokens; 0 uses a line's output_tokens, else 256; -1 requires
	// output_tokens on every line.
	CustomOutputLen int `json:"custom_output_len,omitempty" yaml:"custom_output_len,omitempty"`

	// GSPNumGroups is SGLang's --gsp-num-groups (default 64).
	GSPNumGroups int `json:"gsp_num_groups,omitempty" yaml:"gsp_num_groups,omitempty"`
	// GSPPromptsPerGroup is --gsp-prompts-per-group (default 16).
	GSPPromptsPerGroup int `json:"gsp_prompts_per_group,omitempty" yaml:"gsp_prompts_per_group,omitempty"`
	// GSPSystemPromptLen is --gsp-system-prompt-len (default 2048).
	GSPSystemPromptLen int `json:"gsp_system_prompt_len,omitempty" yaml:"gsp_system_prompt_len,omitempty"`
	// GSPQuestionLen is --gsp-question-len (default 128).
	GSPQuestionLen int `json:"gsp_question_len,omitempty" yaml:"gsp_question_len,omitempty"`
	// GSPOutputLen is --gsp-output-len (default 256).
	GSPOutputLen int `json:"gsp_output_len,omitempty" yaml:"gsp_output_len,omitempty"`
}

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

func (o Options) numPrompts() int { return orDefault(o.NumPrompts, DefaultNumPrompts) }

// Sample builds the requests that `vllm bench serve` (v0.11.0) would send
// for the same options and seed, using tok for all token counts.
func Sample(opt Options, tok Tokenizer) ([]Request, error) {
	if tok == nil {
		return nil, errors.New("dataset: nil tokenizer")
	}
	if opt.NumPrompts < 0 {
		return nil, fmt.Errorf("dataset: num prompts %d is negative", opt.NumPrompts)
	}
	switch opt.Name {
	case NameShareGPT:
		return sampleShareGPT(opt, tok)
	case NameRandom:
		return sampleRandom(opt, tok)
	case NameCustom:
		return sampleCustom(opt, tok)
	case NamePrefixShared, "generated-shared-prefix":
		return samplePrefixShared(opt, tok)
	case "":
		return nil, errors.New("dataset: no dataset name (want sharegpt, random, custom or prefix-shared)")
	default:
		return nil, fmt.Errorf("dataset: unknown dataset %q (want sharegpt, random, custom or prefix-shared)", opt.Name)
	}
}

// specialTokenCounter is the optional HF num_special_tokens_to_add(); a
// tokenizer without it is taken to add none (true of Qwen's).
type specialTokenCounter interface {
	NumSpecialTokensToAdd() int
}

func numSpecialTokensToAdd(tok Tokenizer) int {
	if c, ok := tok.(specialTokenCounter); ok {
		return c.NumSpecialTokensToAdd()
	}
	return 0
}

// parallelFor runs fn(i) for i in [0, n) on all CPUs. Tokenizing is the
// whole cost of sampling and each request is independent once the RNG
// draws are made, so this is where the speed comes from.
func parallelFor(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// oversample is maybe_oversample_requests as of vLLM v0.11.0:
// random.seed(seed) then random.choices(requests, k=missing).
func oversample(reqs []Request, n int, seed int64, disabled bool) []Request {
	if disabled || len(reqs) >= n || len(reqs) == 0 {
		return reqs
	}
	r := newPyRandom(seed)
	base := len(reqs)
	for _, i := range r.choices(base, n-base) {
		reqs = append(reqs, reqs[i])
	}
	return reqs
}
