package engine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/token"

	"github.com/perflab/perflab/internal/safeyaml"
)

// Engine names as written in Config.Engine.
const (
	VLLM   = "vllm"
	SGLang = "sglang"
	TRTLLM = "trtllm"
)

// DefaultVersions is each registered engine's Kind.DefaultVersion, by
// name: the version assumed when Config.Version is empty.
var DefaultVersions = func() map[string]string {
	m := map[string]string{}
	for _, k := range kinds {
		m[k.Name] = k.DefaultVersion
	}
	return m
}()

// LoadConfig reads a YAML or JSON engine config from path, strictly: unknown
// fields, duplicate keys and type mismatches are errors that name
// path:line:col. The config is validated before it is returned.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("engine: read config: %w", err)
	}
	return DecodeConfig(data, path)
}

// DecodeConfig decodes and validates a YAML or JSON config (JSON is decoded
// by the same YAML parser, so its errors carry line:col too). name is used in
// error messages, typically the file path.
func DecodeConfig(data []byte, name string) (Config, error) {
	var c Config
	if len(bytes.TrimSpace(data)) == 0 {
		return c, fmt.Errorf("engine: %s: empty config", name)
	}
	if err := safeyaml.Check(data, safeyaml.Defaults); err != nil {
		return Config{}, fmt.Errorf("engine: %s: %w", name, err)
	}
	if err := safeyaml.Unmarshal(data, &c, yaml.Strict(), yaml.DisallowUnknownField()); err != nil {
		if keys := labSpecKeys(data); len(keys) > 0 {
			return Config{}, &NotEngineConfigError{File: name, Keys: keys}
		}
		return Config{}, decodeError(name, err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// NotEngineConfigError says that a file given as an engine config is a lab
// spec (a common slip: both are YAML, and the examples hold both).
type NotEngineConfigError struct {
	File string
	// Keys are the lab-spec fields found at the top level.
	Keys []string
}

func (e *NotEngineConfigError) Error() string {
	return fmt.Sprintf("engine: %s is a lab spec (it has %s), not an engine config: run it with `perflab lab %s`; "+
		"an engine config names one server (engine:, version:, model:, and knobs such as max_num_seqs:), "+
		"e.g. examples/engine-vllm-qwen3-14b.yaml", e.File, strings.Join(e.Keys, ", "), e.File)
}

// labSpecKeys returns the top-level fields of data that only a lab spec
// has, or none when data does not parse as a mapping.
func labSpecKeys(data []byte) []string {
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		return nil
	}
	var keys []string
	for _, k := range []string{"engines", "hardware", "stages", "tuning", "search", "generalization"} {
		if _, ok := top[k]; ok {
			keys = append(keys, k+":")
		}
	}
	if len(keys) < 2 {
		return nil // one stray field is a typo, not a lab spec
	}
	return keys
}

// yamlError is the part of goccy/go-yaml's error types that carries a
// position; declared here so we do not depend on its internal package.
type yamlError interface {
	GetToken() *token.Token
	GetMessage() string
}

func decodeError(name string, err error) error {
	var ye yamlError
	if errors.As(err, &ye) {
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			return fmt.Errorf("engine: %s:%d:%d: %s", name, tk.Position.Line, tk.Position.Column, ye.GetMessage())
		}
		return fmt.Errorf("engine: %s: %s", name, ye.GetMessage())
	}
	// Some errors only carry "[line:col] msg" in their text.
	msg := err.Error()
	if strings.HasPrefix(msg, "[") {
		if i := strings.Index(msg, "]"); i > 0 {
			if lc := strings.SplitN(msg[1:i], ":", 2); len(lc) == 2 {
				if _, e1 := strconv.Atoi(lc[0]); e1 == nil {
					first, _, _ := strings.Cut(strings.TrimSpace(msg[i+1:]), "\n")
					return fmt.Errorf("engine: %s:%s:%s: %s", name, lc[0], lc[1], first)
				}
			}
		}
	}
	return fmt.Errorf("engine: %s: %w", name, err)
}

// EffectiveVersion is Version, or the engine's default when Version is empty.
func (c Config) EffectiveVersion() string {
	if c.Version != "" {
		return c.Version
	}
	return DefaultVersions[c.Engine]
}

// ModelPath is the repository the engine loads: Model, or its "-FP8"
// sibling when Quantization is "fp8-checkpoint" (pre-quantized weights live
// in a separate repository, e.g. Qwen/Qwen3-14B-FP8).
func (c Config) ModelPath() string {
	if c.Quantization == QuantFP8Checkpoint && !strings.HasSuffix(strings.ToUpper(c.Model), "-FP8") {
		return c.Model + "-FP8"
	}
	return c.Model
}

// ServedName is the model name the server lists in /v1/models and
// accepts in requests, as the config's engine names it (Protocol).
func (c Config) ServedName() string { return ProtocolFor(c.Engine).ServedName(c) }

// Quantization values.
const (
	QuantNone          = ""
	QuantFP8           = "fp8"
	QuantFP8Checkpoint = "fp8-checkpoint"
)

// Validate checks what is wrong whatever the engine (ValidationError) and
// what the chosen engine/version cannot do (UnsupportedError). All problems
// are reported at once as ValidationErrors.
func (c Config) Validate() error {
	var errs ValidationErrors
	bad := func(field string, value any, reason string) {
		errs = append(errs, &ValidationError{Field: field, Value: fmt.Sprint(value), Reason: reason})
	}
	if _, ok := KindOf(c.Engine); !ok {
		if c.Engine == "" {
			bad("engine", c.Engine, "required: one of "+strings.Join(KindNames(), ", "))
		} else {
			bad("engine", c.Engine, "unknown engine: want "+KindList())
		}
	}
	if c.Version != "" {
		if _, err := parseVersion(c.Version); err != nil {
			bad("version", c.Version, "not a version like 0.11.0, 0.5.5.post1 or 1.2.0rc1")
		}
	}
	if strings.TrimSpace(c.Model) == "" {
		bad("model", c.Model, "required")
	} else if strings.ContainsAny(c.Model, " \t\n") {
		bad("model", c.Model, "must not contain whitespace")
	}
	switch c.Quantization {
	case QuantNone, QuantFP8, QuantFP8Checkpoint:
	default:
		bad("quantization", c.Quantization, `want "", "fp8" (online) or "fp8-checkpoint" (pre-quantized -FP8 repository)`)
	}
	switch c.KVCacheDtype {
	case "", "auto", "fp8", "fp8_e4m3", "fp8_e5m2":
	default:
		bad("kv_cache_dtype", c.KVCacheDtype, `want "auto", "fp8", "fp8_e4m3" or "fp8_e5m2"`)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"tensor_parallel", c.TensorParallel}, {"data_parallel", c.DataParallel},
		{"max_num_seqs", c.MaxNumSeqs}, {"max_num_batched_tokens", c.MaxNumBatchedTokens},
		{"max_model_len", c.MaxModelLen}} {
		if f.v < 0 {
			bad(f.name, f.v, "must not be negative (0 = engine default)")
		}
	}
	if c.GPUMemoryFraction < 0 || c.GPUMemoryFraction > 1 {
		bad("gpu_memory_fraction", c.GPUMemoryFraction, "must be in (0, 1]")
	}
	if s := c.Speculative; s != nil {
		switch s.Method {
		case "eagle", "eagle3", "mtp", "ngram", "draft_model":
		default:
			bad("speculative.method", s.Method, "want eagle, eagle3, mtp, ngram or draft_model")
		}
		if s.NumSpeculativeTokens <= 0 {
			bad("speculative.num_speculative_tokens", s.NumSpeculativeTokens, "must be positive")
		}
		needsDraft := s.Method == "eagle" || s.Method == "eagle3" || s.Method == "draft_model"
		if needsDraft && s.DraftModel == "" {
			bad("speculative.draft_model", s.DraftModel, "required for method "+s.Method)
		}
		if !needsDraft && s.DraftModel != "" {
			bad("speculative.draft_model", s.DraftModel, "not used by method "+s.Method)
		}
	}
	switch c.PerformanceMode {
	case "", "balanced", "interactivity", "throughput":
	default:
		bad("performance_mode", c.PerformanceMode, `want "balanced", "interactivity" or "throughput"`)
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "= \t\n") {
			bad("env", k, "not a valid environment variable name")
		}
		if k == "CUDA_VISIBLE_DEVICES" {
			bad("env", k, "set by the runtime from the assigned GPUs")
		}
	}
	for _, a := range c.ExtraArgs {
		if a == "--host" || a == "--port" || strings.HasPrefix(a, "--host=") || strings.HasPrefix(a, "--port=") {
			bad("extra_args", a, "host and port are chosen by the runtime")
		}
	}
	if len(errs) == 0 {
		// Engine-specific support is only meaningful for a well-formed config.
		errs = append(errs, support(c)...)
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}
