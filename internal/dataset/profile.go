package dataset

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/token"

	"github.com/perflab/perflab/internal/safeyaml"
)

// Profile is a named workload: which requests to send and how fast.
type Profile struct {
	// Name is the lookup key (lower case, dashes).
	Name string `json:"name" yaml:"name"`
	// Description says where the workload comes from.
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	// Dataset selects the requests. A sharegpt profile leaves Path empty:
	// the caller points it at its ShareGPT file.
	Dataset Options `json:"dataset" yaml:"dataset"`
	// RequestRate is requests per second; math.Inf(1) sends all at once
	// (vLLM's default "inf").
	RequestRate float64 `json:"request_rate" yaml:"request_rate"`
	// MaxConcurrency caps in-flight requests; 0 means no cap.
	MaxConcurrency int `json:"max_concurrency,omitempty" yaml:"max_concurrency,omitempty"`
}

var inf = math.Inf(1)

// builtinProfiles are the reference reports' workloads (vLLM v0.11.0,
// `vllm bench serve`, default request rate inf, no concurrency cap: ShareGPT
// with vLLM's default seed 0, random with --seed 42) and GPUStack's four
// benchmark profiles from the Qwen3.5-9B report. GPUStack runs those
// through guidellm, whose scheduler caps in-flight requests at 512 by
// default (GUIDELLM__MAX_CONCURRENCY); the report's blocks show that cap as
// their peak concurrency at request rate 1000.
var builtinProfiles = []Profile{
	{Name: "sharegpt", Description: "reference reports: vllm bench serve --dataset-name sharegpt --num-prompts 1000",
		Dataset: Options{Name: NameShareGPT, NumPrompts: 1000}, RequestRate: inf},
	{Name: "short", Description: "reference reports: random 128 in / 4 out, 1000 prompts, seed 42",
		Dataset: Options{Name: NameRandom, RandomInputLen: 128, RandomOutputLen: 4, NumPrompts: 1000, Seed: 42}, RequestRate: inf},
	{Name: "medium", Description: "reference reports: random 2000 in / 100 out, 500 prompts, seed 42",
		Dataset: Options{Name: NameRandom, RandomInputLen: 2000, RandomOutputLen: 100, NumPrompts: 500, Seed: 42}, RequestRate: inf},
	{Name: "long", Description: "reference reports: random 4000 in / 200 out, 500 prompts, seed 42",
		Dataset: Options{Name: NameRandom, RandomInputLen: 4000, RandomOutputLen: 200, NumPrompts: 500, Seed: 42}, RequestRate: inf},
	{Name: "very-long", Description: "reference reports: random 32000 in / 100 out, 100 prompts, seed 42",
		Dataset: Options{Name: NameRandom, RandomInputLen: 32000, RandomOutputLen: 100, NumPrompts: 100, Seed: 42}, RequestRate: inf},
	{Name: "gpustack-sharegpt", Description: "GPUStack ShareGPT profile: dataset_name ShareGPT, request_rate 1000, total_requests 1000, guidellm max concurrency 512",
		Dataset: Options{Name: NameShareGPT, NumPrompts: 1000}, RequestRate: 1000, MaxConcurrency: 512},
	{Name: "throughput", Description: "GPUStack Throughput profile: Random 1024/128, seed 42, request_rate 1000, total_requests 1000, guidellm max concurrency 512",
		Dataset: Options{Name: NameRandom, RandomInputLen: 1024, RandomOutputLen: 128, NumPrompts: 1000, Seed: 42}, RequestRate: 1000, MaxConcurrency: 512},
	{Name: "long-context", Description: "GPUStack Long Context profile: Random 32000/100, seed 42, request_rate 1, total_requests 100, guidellm max concurrency 512",
		Dataset: Options{Name: NameRandom, RandomInputLen: 32000, RandomOutputLen: 100, NumPrompts: 100, Seed: 42}, RequestRate: 1, MaxConcurrency: 512},
	{Name: "generation-heavy", Description: "GPUStack Generation Heavy profile: Random 1000/2000, seed 42, request_rate 1, total_requests 200, guidellm max concurrency 512",
		Dataset: Options{Name: NameRandom, RandomInputLen: 1000, RandomOutputLen: 2000, NumPrompts: 200, Seed: 42}, RequestRate: 1, MaxConcurrency: 512},
}

// Profiles lists the built-in profiles.
func Profiles() []Profile { return slices.Clone(builtinProfiles) }

// profileKey folds "Long Context", "long_context" and "LONG-CONTEXT" together.
func profileKey(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.NewReplacer(" ", "-", "_", "-").Replace(s)
	return strings.TrimSuffix(s, "-profile")
}

// LookupProfile finds a built-in profile by name (case, spaces and
// underscores do not matter; "Very long" and "ShareGPT Profile" work).
func LookupProfile(name string) (Profile, bool) {
	k := profileKey(name)
	for _, p := range builtinProfiles {
		if p.Name == k {
			return p, true
		}
	}
	return Profile{}, false
}

// profileFile is perflab's own profile form.
type profileFile struct {
	Name           string  `yaml:"name"`
	Description    string  `yaml:"description"`
	Dataset        Options `yaml:"dataset"`
	RequestRate    any     `yaml:"request_rate"`
	MaxConcurrency int     `yaml:"max_concurrency"`
}

// gpustackFile is GPUStack's benchmark profile form.
type gpustackFile struct {
	Name                string `yaml:"name"`
	DatasetName         string `yaml:"dataset_name"`
	DatasetInputTokens  int    `yaml:"dataset_input_tokens"`
	DatasetOutputTokens int    `yaml:"dataset_output_tokens"`
	DatasetSeed         int64  `yaml:"dataset_seed"`
	DatasetPath         string `yaml:"dataset_path"`
	RequestRate         any    `yaml:"request_rate"`
	TotalRequests       int    `yaml:"total_requests"`
	MaxConcurrency      int    `yaml:"max_concurrency"`
}

// LoadProfile reads a profile from a YAML or JSON file, strictly (unknown
// keys, duplicate keys and wrong types are errors naming file:line:col). It
// accepts perflab's form (name, dataset: {...Options}, request_rate,
// max_concurrency) and GPUStack's (dataset_name, dataset_input_tokens,
// dataset_output_tokens, dataset_seed, request_rate, total_requests).
func LoadProfile(path string) (Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Profile{}, fmt.Errorf("dataset: read profile: %w", err)
	}
	return DecodeProfile(data, path)
}

// DecodeProfile is LoadProfile on bytes; name is used in errors.
func DecodeProfile(data []byte, name string) (Profile, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return Profile{}, fmt.Errorf("dataset: profile %s: empty file", name)
	}
	if err := safeyaml.Check(data, safeyaml.Defaults); err != nil {
		return Profile{}, fmt.Errorf("dataset: profile %s: %w", name, err)
	}
	var keys map[string]any
	if err := safeyaml.Unmarshal(data, &keys); err != nil {
		return Profile{}, yamlErr(name, err)
	}
	if keys == nil {
		return Profile{}, fmt.Errorf("dataset: profile %s: want a mapping", name)
	}
	opts := []yaml.DecodeOption{yaml.Strict(), yaml.DisallowUnknownField()}
	var p Profile
	var rate any
	if _, ok := keys["dataset_name"]; ok {
		var g gpustackFile
		if err := safeyaml.Unmarshal(data, &g, opts...); err != nil {
			return Profile{}, yamlErr(name, err)
		}
		p = Profile{Name: g.Name, Description: "GPUStack profile from " + name, MaxConcurrency: g.MaxConcurrency}
		switch strings.ToLower(g.DatasetName) {
		case "sharegpt":
			p.Dataset = Options{Name: NameShareGPT, Path: g.DatasetPath, NumPrompts: g.TotalRequests, Seed: g.DatasetSeed}
		case "random":
			p.Dataset = Options{Name: NameRandom, RandomInputLen: g.DatasetInputTokens, RandomOutputLen: g.DatasetOutputTokens, NumPrompts: g.TotalRequests, Seed: g.DatasetSeed}
		default:
			return Profile{}, fmt.Errorf("dataset: profile %s: dataset_name %q: want ShareGPT or Random", name, g.DatasetName)
		}
		rate = g.RequestRate
	} else {
		var f profileFile
		if err := safeyaml.Unmarshal(data, &f, opts...); err != nil {
			return Profile{}, yamlErr(name, err)
		}
		p = Profile{Name: f.Name, Description: f.Description, Dataset: f.Dataset, MaxConcurrency: f.MaxConcurrency}
		rate = f.RequestRate
	}
	if p.Name == "" {
		p.Name = profileKey(strings.TrimSuffix(baseName(name), extOf(name)))
	}
	r, err := parseRate(rate)
	if err != nil {
		return Profile{}, fmt.Errorf("dataset: profile %s: request_rate: %w", name, err)
	}
	p.RequestRate = r
	if p.MaxConcurrency < 0 {
		return Profile{}, fmt.Errorf("dataset: profile %s: max_concurrency %d is negative", name, p.MaxConcurrency)
	}
	if err := p.Dataset.validate(); err != nil {
		return Profile{}, fmt.Errorf("dataset: profile %s: %w", name, err)
	}
	return p, nil
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

func extOf(p string) string {
	b := baseName(p)
	if i := strings.LastIndex(b, "."); i > 0 {
		return b[i:]
	}
	return ""
}

// parseRate accepts a positive number or "inf"; absent means inf.
func parseRate(v any) (float64, error) {
	var r float64
	switch x := v.(type) {
	case nil:
		return inf, nil
	case uint64:
		r = float64(x)
	case int64:
		r = float64(x)
	case int:
		r = float64(x)
	case float64:
		r = x
	case string:
		if s := strings.ToLower(strings.TrimSpace(x)); s == "inf" || s == "infinity" || s == "+inf" {
			return inf, nil
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, fmt.Errorf("%q is neither a number nor \"inf\"", x)
		}
		r = f
	default:
		return 0, fmt.Errorf("want a number or \"inf\", got %T", v)
	}
	if !(r > 0) {
		return 0, fmt.Errorf("%v must be positive", r)
	}
	return r, nil
}

// validate checks what can be checked without a tokenizer or files.
func (o Options) validate() error {
	switch o.Name {
	case NameShareGPT, NameRandom, NameCustom, NamePrefixShared:
	case "":
		return errors.New("dataset name missing")
	default:
		return fmt.Errorf("unknown dataset %q (want sharegpt, random, custom or prefix-shared)", o.Name)
	}
	if o.NumPrompts < 0 || o.RandomInputLen < 0 || o.RandomOutputLen < 0 || o.RandomPrefixLen < 0 {
		return errors.New("negative count or length")
	}
	if !(o.RandomRangeRatio >= 0 && o.RandomRangeRatio < 1) {
		return fmt.Errorf("random_range_ratio %v must be in [0, 1)", o.RandomRangeRatio)
	}
	return nil
}

type yamlError interface {
	GetToken() *token.Token
	GetMessage() string
}

func yamlErr(name string, err error) error {
	var ye yamlError
	if errors.As(err, &ye) {
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			return fmt.Errorf("dataset: profile %s:%d:%d: %s", name, tk.Position.Line, tk.Position.Column, ye.GetMessage())
		}
		return fmt.Errorf("dataset: profile %s: %s", name, ye.GetMessage())
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "[") {
		if i := strings.Index(msg, "]"); i > 0 {
			first, _, _ := strings.Cut(strings.TrimSpace(msg[i+1:]), "\n")
			return fmt.Errorf("dataset: profile %s:%s: %s", name, msg[1:i], first)
		}
	}
	return fmt.Errorf("dataset: profile %s: %w", name, err)
}
