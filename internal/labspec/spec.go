package labspec

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/objective"
	"github.com/perflab/perflab/internal/runtimes"

	"github.com/perflab/perflab/internal/safeyaml"
)

// Runtime names, as internal/runtimes registers them (the lab asks a
// runtime's Kind what it needs to know and never compares these).
const (
	// RuntimeSimPredict predicts each trial in process with the simulator:
	// no HTTP, no processes, seconds for a whole lab.
	RuntimeSimPredict = runtimes.SimPredict
	// RuntimeSim starts the simulator as a real server process per trial
	// (perflab sim serve, time-scaled) and benchmarks it over HTTP.
	RuntimeSim = runtimes.Sim
	// RuntimeProcess starts the real engines on GPUs.
	RuntimeProcess = runtimes.Process
)

// RuntimeKind is the spec's runtime (the default's when the spec names an
// unknown one, which validation refuses).
func (s *Spec) RuntimeKind() runtimes.Kind {
	if s.kind != nil && s.kind.Name() == s.Runtime {
		return s.kind
	}
	k, err := runtimes.Lookup(s.Runtime)
	if err != nil {
		k, _ = runtimes.Lookup(runtimes.Default)
	}
	return k
}

// SetRuntimeKind keeps the Kind a runtimes.Specializer made for this spec
// (the docker runtime on the simulated engine image), which RuntimeKind
// then returns while the spec's runtime is that Kind's.
func (s *Spec) SetRuntimeKind(k runtimes.Kind) { s.kind = k }

// EngineVersions are the engines the spec runs, name → version.
func (s *Spec) EngineVersions() map[string]string {
	out := make(map[string]string, len(s.Engines))
	for _, e := range s.Engines {
		out[e.Name] = s.version(e.Name)
	}
	return out
}

// Objective metric names (package objective holds them, with their words).
const (
	ObjectiveTotalThroughput  = objective.TotalThroughput
	ObjectiveThroughputPerGPU = objective.ThroughputPerGPU
	ObjectiveGoodput          = objective.Goodput
	// ObjectiveMaxLoadUnderSLO scores a config by the highest load it
	// sustains within objective.load's SLO (loadobjective.go).
	ObjectiveMaxLoadUnderSLO = objective.MaxLoadUnderSLO
)

// Spec is one lab: what to tune, where, against which workloads, with which
// candidate values and budget. Relative paths in it (tokenizer, dataset
// files, a local model directory) are made absolute once, when the spec is
// loaded, against the directory of the spec file (LoadSpec) or the base the
// caller names (ParseSpecIn): an engine runs in a directory, container or
// pod of its own, where a relative path would mean something else.
type Spec struct {
	// Name names the run and the default output directory.
	Name string `yaml:"name" json:"name"`
	// Model is the HF repo id the engines serve, e.g. "Qwen/Qwen3-14B".
	Model string `yaml:"model" json:"model"`
	// FP8Model is the pre-quantized repository used for the
	// "fp8-checkpoint" quantization value, e.g. "Qwen/Qwen3-14B-FP8".
	FP8Model string `yaml:"fp8_model,omitempty" json:"fp8_model,omitempty"`
	// Hardware is the GPU type and how many the lab may use.
	Hardware Hardware `yaml:"hardware" json:"hardware"`
	// Engines lists the engines and their versions; the first one named
	// "vllm" is the baseline.
	Engines []EngineSpec `yaml:"engines" json:"engines"`
	// Base holds settings every trial carries (e.g. reasoning_parser,
	// max_model_len), as engine.Config fields.
	Base engine.Config `yaml:"base,omitempty" json:"base,omitempty"`
	// Runtime is sim-predict, sim or process (the command line may override).
	Runtime string `yaml:"runtime,omitempty" json:"runtime,omitempty"`
	// Images overrides the container image per engine ("vllm", "sglang",
	// "trtllm") for a runtime that runs engines in containers (docker); an
	// engine not named runs in its official image at its version. Giving
	// the simulated engine image (perflab sim image) for every engine runs
	// the same spec on the simulator in containers.
	Images map[string]string `yaml:"images,omitempty" json:"images,omitempty"`
	// Volumes are extra bind mounts for every engine container,
	// "HOST:CONTAINER[:ro]"; a relative HOST resolves against the spec's
	// directory. (Extra environment is base.env, for every runtime.)
	Volumes []string `yaml:"volumes,omitempty" json:"volumes,omitempty"`
	// Kubernetes holds the kubernetes runtime's cluster settings
	// (namespace, access, HF cache, node selection; docs/runtimes.md).
	Kubernetes *runtimes.KubeSettings `yaml:"kubernetes,omitempty" json:"kubernetes,omitempty"`
	// TimeScale speeds the sim runtime's clock (0 = the runtime's default).
	TimeScale float64 `yaml:"time_scale,omitempty" json:"time_scale,omitempty"`
	// Objective is what the lab maximizes.
	Objective Objective `yaml:"objective,omitempty" json:"objective,omitempty"`
	// Tokenizer is a tokenizer directory/file or a model id to resolve
	// (empty: the model's).
	Tokenizer string `yaml:"tokenizer,omitempty" json:"tokenizer,omitempty"`
	// Tuning is the workload the stages are decided on.
	Tuning *Workload `yaml:"tuning,omitempty" json:"tuning,omitempty"`
	// Generalization workloads run on the baseline and the winner.
	Generalization []Workload `yaml:"generalization,omitempty" json:"generalization,omitempty"`
	// NoGeneralization skips the generalization runs (the defaults apply
	// when Generalization is empty and this is false).
	NoGeneralization bool `yaml:"no_generalization,omitempty" json:"no_generalization,omitempty"`
	// Stages in order; empty means the reports' default stages.
	Stages []Stage `yaml:"stages,omitempty" json:"stages,omitempty"`
	// Combinations enables the "&&" step: knobs that helped one by one but
	// were not kept are tried together (default true).
	Combinations *bool `yaml:"combinations,omitempty" json:"combinations,omitempty"`
	// Search configures the simulator-guided joint search after the
	// staged pass.
	Search Search `yaml:"search,omitempty" json:"search,omitempty"`
	// Budget bounds the lab.
	Budget Budget `yaml:"budget,omitempty" json:"budget,omitempty"`
	// Repeats is how many times the incumbent and the best candidate run
	// to measure the noise floor (default 3; 1 disables the floor).
	Repeats int `yaml:"repeats,omitempty" json:"repeats,omitempty"`
	// Parallel is how many trials may run at once (default: as many as
	// the GPUs allow for process/sim, 2 for sim-predict).
	Parallel int `yaml:"parallel,omitempty" json:"parallel,omitempty"`
	// MinSuccessRate is the share of requests that must succeed for a
	// candidate to be kept (default 1.0: every request).
	MinSuccessRate float64 `yaml:"min_success_rate,omitempty" json:"min_success_rate,omitempty"`
	// MinGain is an optional lower bound on the relative gain a change
	// must show on top of the measured noise floor (default 0).
	MinGain float64 `yaml:"min_gain,omitempty" json:"min_gain,omitempty"`
	// Noise adds seeded run-to-run noise to sim-predict trials, which are
	// otherwise deterministic, so the noise-floor rule is exercised.
	Noise Noise `yaml:"noise,omitempty" json:"noise,omitempty"`
	// Simulator is set by perflab for the sim runtimes: the simulator's
	// model revision and calibration hash (sim.Fingerprint). It is part of
	// the run key, so a recalibrated simulator starts a new run rather
	// than resuming on figures the old one produced.
	Simulator string `yaml:"simulator,omitempty" json:"simulator,omitempty"`
	// FreshStartPerRepeat starts a server for every measurement instead
	// of one per config (repeats and generalization workloads then each
	// pay a start), so the noise floor includes start-to-start variance.
	FreshStartPerRepeat bool `yaml:"fresh_start_per_repeat,omitempty" json:"fresh_start_per_repeat,omitempty"`
	// StartupSeconds is the expected engine start time per trial for
	// the ETA (default: 0 for sim-predict, 5 for sim, 180 for process).
	StartupSeconds float64 `yaml:"startup_seconds,omitempty" json:"startup_seconds,omitempty"`

	// file is where the spec was read from (for messages).
	file string
	// kind is the runtime as specialized for this spec (SetRuntimeKind).
	kind runtimes.Kind
	// settingLines are where its runtime settings were written
	// (storedLines).
	settingLines map[string]int
}

// Hardware is the GPU type and count.
type Hardware struct {
	// GPU is the GPU type the simulator models, e.g. "H100-SXM-80GB".
	GPU string `yaml:"gpu" json:"gpu"`
	// Count is how many GPUs the lab may use.
	Count int `yaml:"count" json:"count"`
	// Device is what the engines' start-up defaults read of the GPU (its
	// memory), for telling a limit spelled at its default from a change;
	// the lab fills it from the GPU catalog, and it is never read from or
	// written to a spec. The zero Device assumes no GPU-dependent default.
	Device engine.Device `yaml:"-" json:"-"`
	// AttentionDefaults are the attention backend each engine picks for
	// the spec's model on the GPU when none is named (vLLM's and SGLang's
	// follow the GPU and the model's attention kind), filled by the lab
	// from the simulator's engines: a candidate naming it is the
	// incumbent's server, as TensorRT-LLM's fixed default is. Never read
	// from or written to a spec.
	AttentionDefaults map[string]string `yaml:"-" json:"-"`
}

// EngineSpec is one engine and its version.
type EngineSpec struct {
	Name    string `yaml:"name" json:"name"`
	Version string `yaml:"version" json:"version"`
}

// Objective is the metric maximized, with optional SLOs.
type Objective struct {
	// Metric is total_throughput (default), throughput_per_gpu or goodput.
	Metric string `yaml:"metric,omitempty" json:"metric,omitempty"`
	// SLO holds per-request bounds (tpot_ms, ttft_ms, e2el_ms), which
	// goodput counts (requests/s meeting all of them, vLLM's --goodput),
	// and P99 bounds, which are constraints under any metric: a trial
	// whose P99 breaks one is not eligible. Goodput with only P99 bounds
	// is normalized to total_throughput under those constraints.
	SLO SLO `yaml:"slo,omitempty" json:"slo,omitempty"`
	// Load is the SLO, load axis and tolerance of max_load_under_slo.
	Load *LoadObjective `yaml:"load,omitempty" json:"load,omitempty"`
}

// PerRequest says whether the SLO has per-request bounds (goodput's).
func (s SLO) PerRequest() bool { return s.TPOTMs > 0 || s.TTFTMs > 0 || s.E2ELMs > 0 }

// SLO is a set of latency bounds in milliseconds (0 = none).
type SLO struct {
	P99TPOTMs float64 `yaml:"p99_tpot_ms,omitempty" json:"p99_tpot_ms,omitempty"`
	P99TTFTMs float64 `yaml:"p99_ttft_ms,omitempty" json:"p99_ttft_ms,omitempty"`
	// TPOTMs / TTFTMs / E2ELMs are per-request bounds for goodput, the way
	// vllm bench serve --goodput tpot:100 defines it.
	TPOTMs float64 `yaml:"tpot_ms,omitempty" json:"tpot_ms,omitempty"`
	TTFTMs float64 `yaml:"ttft_ms,omitempty" json:"ttft_ms,omitempty"`
	E2ELMs float64 `yaml:"e2el_ms,omitempty" json:"e2el_ms,omitempty"`
}

// Workload is one benchmark workload.
type Workload struct {
	// Name labels the workload ("ShareGPT", "Long Prompt").
	Name string `yaml:"name" json:"name"`
	// Profile names a dataset profile (dataset.LookupProfile); explicit
	// fields below override it.
	Profile string `yaml:"profile,omitempty" json:"profile,omitempty"`
	// Dataset is "sharegpt" or "random".
	Dataset string `yaml:"dataset,omitempty" json:"dataset,omitempty"`
	// Path is the dataset file (sharegpt).
	Path string `yaml:"path,omitempty" json:"path,omitempty"`
	// NumPrompts is how many requests (vLLM --num-prompts).
	NumPrompts int `yaml:"num_prompts,omitempty" json:"num_prompts,omitempty"`
	// InputLen / OutputLen for the random dataset.
	InputLen  int `yaml:"input_len,omitempty" json:"input_len,omitempty"`
	OutputLen int `yaml:"output_len,omitempty" json:"output_len,omitempty"`
	// RangeRatio is vLLM's --random-range-ratio.
	RangeRatio float64 `yaml:"range_ratio,omitempty" json:"range_ratio,omitempty"`
	// RequestRate is "inf" or requests per second.
	RequestRate Rate `yaml:"request_rate,omitempty" json:"request_rate,omitempty"`
	// MaxConcurrency caps in-flight requests (0 = none).
	MaxConcurrency int `yaml:"max_concurrency,omitempty" json:"max_concurrency,omitempty"`
	// Point is set only on the workloads a load search derives from this
	// one: the load it measures and its warm-up (loadobjective.go).
	Point *LoadPoint `yaml:"-" json:"load_point,omitempty"`
	// Seed is the dataset and schedule seed (vLLM default 0).
	Seed int64 `yaml:"seed,omitempty" json:"seed,omitempty"`
}

// Rate is a request rate: a positive number, or "inf" (the zero value is
// read as inf, as vLLM's default is).
type Rate float64

// UnmarshalYAML accepts "inf" or a number.
func (r *Rate) UnmarshalYAML(b []byte) error {
	s := strings.TrimSpace(string(b))
	s = strings.Trim(s, `"'`)
	if strings.EqualFold(s, "inf") || strings.EqualFold(s, ".inf") {
		*r = Rate(math.Inf(1))
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || math.IsNaN(f) {
		return &rateError{raw: s}
	}
	*r = Rate(f)
	return nil
}

// rateError is a bad request_rate; the decoder does not give custom
// unmarshalers a position, so ParseSpec finds the line from the raw value.
type rateError struct{ raw string }

func (e *rateError) Error() string {
	return fmt.Sprintf("request_rate %q: want a positive number or inf", e.raw)
}

// lineContaining is the first line holding both key and value (0 if none).
func lineContaining(data []byte, key, value string) int {
	for i, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, key) && strings.Contains(l, value) {
			return i + 1
		}
	}
	return 0
}

// MarshalYAML writes inf as "inf".
func (r Rate) MarshalYAML() ([]byte, error) { return []byte(r.String()), nil }

// MarshalJSON writes inf as "inf" (JSON has no infinity).
func (r Rate) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(r.String())), nil }

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Rate) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		s = string(b)
	}
	return r.UnmarshalYAML([]byte(s))
}

// Value is the rate in requests per second (+Inf for inf or unset).
func (r Rate) Value() float64 {
	if r == 0 || math.IsInf(float64(r), 1) {
		return math.Inf(1)
	}
	return float64(r)
}

func (r Rate) String() string {
	if math.IsInf(r.Value(), 1) {
		return "inf"
	}
	return strconv.FormatFloat(float64(r), 'g', -1, 64)
}

// Stage is one step of the staged pass: one knob and its candidate values.
type Stage struct {
	// Name labels the stage; it defaults to the knob.
	Name string `yaml:"name" json:"name"`
	// Knob is the knob the stage varies (default: Name).
	Knob string `yaml:"knob,omitempty" json:"knob,omitempty"`
	// Values are the candidates, in the knob's spelling (see docs/lab.md).
	Values []string `yaml:"values,omitempty" json:"values,omitempty"`
	// PerEngine gives engine-specific candidates (e.g. attention backend
	// names), used instead of Values for that engine.
	PerEngine map[string][]string `yaml:"per_engine,omitempty" json:"per_engine,omitempty"`
}

// Search configures the joint search beyond the greedy pass.
type Search struct {
	// Disable turns the joint search off.
	Disable bool `yaml:"disable,omitempty" json:"disable,omitempty"`
	// Knobs lists the knobs searched jointly (default: every stage knob,
	// the same space as --grid). The others stay at the incumbent's value.
	Knobs []string `yaml:"knobs,omitempty" json:"knobs,omitempty"`
	// MaxTrials bounds the search's own trials (default 24).
	MaxTrials int `yaml:"max_trials,omitempty" json:"max_trials,omitempty"`
	// GuidePrompts is how many of the tuning workload's prompts the
	// simulator's guiding predictions use (default 0: all of them). A
	// truncated burst is a smaller batch than the real one and can rank
	// engines differently (on the 14B example, the first 300 of 1,000
	// ShareGPT prompts steered the search 8% below the grid's best), and a
	// full prediction costs only tens of milliseconds.
	GuidePrompts int `yaml:"guide_prompts,omitempty" json:"guide_prompts,omitempty"`
	// Batch is how many configs the search runs per round before it
	// decides and refits (default: the GPU count for sim and process, 2
	// for sim-predict). It is not Parallel: the batch shapes the search's
	// path, so it must not change when a rerun asks for another
	// --parallel; Parallel only says how many of a batch run at once.
	Batch int `yaml:"batch,omitempty" json:"batch,omitempty"`
}

// SearchBatch is Search.Batch or its default.
func (s *Spec) SearchBatch() int {
	switch {
	case s.Search.Batch > 0:
		return s.Search.Batch
	case !s.RuntimeKind().Servers():
		return 2
	}
	return max(s.Hardware.Count, 1)
}

// Budget bounds the lab; zero means unbounded.
type Budget struct {
	MaxTrials int     `yaml:"max_trials,omitempty" json:"max_trials,omitempty"`
	MaxHours  float64 `yaml:"max_hours,omitempty" json:"max_hours,omitempty"`
}

// Noise is seeded multiplicative noise for sim-predict trials.
type Noise struct {
	// Sigma is the relative standard deviation of throughput (e.g. 0.01).
	Sigma float64 `yaml:"sigma,omitempty" json:"sigma,omitempty"`
	// Seed seeds the noise; each trial's draw also depends on its key, so
	// a resumed lab sees the same numbers.
	Seed int64 `yaml:"seed,omitempty" json:"seed,omitempty"`
}

// SpecError is a spec problem with its place in the file.
type SpecError struct {
	File string
	Line int
	Msg  string
	// Field is the YAML path of the value at fault ("$.stages[1].knob"),
	// when the check knows it.
	Field string
	// Err is the cause when it is an error of its own (a *PathError).
	Err error
}

// Unwrap returns the cause, if any.
func (e *SpecError) Unwrap() error { return e.Err }

func (e *SpecError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("lab: %s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("lab: %s: %s", e.File, e.Msg)
}

// LoadSpec reads and validates a spec file; its relative paths resolve
// against the file's own directory, so the spec means the same thing from
// whatever directory perflab is started.
func LoadSpec(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lab: read spec: %w", err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("lab: spec %s: %w", path, err)
	}
	return ParseSpecIn(path, data, dir)
}

// ParseSpec is ParseSpecIn with the current directory as the base of
// relative paths.
func ParseSpec(name string, data []byte) (*Spec, error) {
	return ParseSpecIn(name, data, "")
}

// ParseSpecIn decodes a spec strictly (unknown fields are errors), resolves
// its relative paths against base (the current directory when empty),
// fills the defaults and validates it. name is used in error messages
// (file:line).
func ParseSpecIn(name string, data []byte, base string) (*Spec, error) {
	return parseSpec(name, data, PathResolver{Base: base})
}

// ParseSpecConfined is ParseSpecIn for a spec sent to a server: every
// host path it names must lie under root (PathResolver.Confined), which
// relative paths resolve against, and a name that is not a path under
// root is a Hub id, never a file of the server's working directory.
func ParseSpecConfined(name string, data []byte, root string) (*Spec, error) {
	return parseSpec(name, data, PathResolver{Base: root, Confined: true})
}

func parseSpec(name string, data []byte, paths PathResolver) (*Spec, error) {
	if paths.Base == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("lab: spec %s: %w", name, err)
		}
		paths.Base = wd
	}
	s, line, err := decodeSpec(name, data)
	if err != nil {
		return nil, err
	}
	if err := s.resolvePaths(paths, line); err != nil {
		return nil, err
	}
	if err := s.checkDatasets(line); err != nil {
		return nil, err
	}
	s.fillDefaults()
	return s, nil
}

// ValidateSpec decodes and validates a spec as ParseSpecIn does, without
// looking at the files it names: whether a stored run's spec is still
// accepted (a run whose spec is now refused, say a number past a limit
// added since, cannot be resumed, and the list says why).
func ValidateSpec(name string, data []byte) error {
	_, _, err := decodeSpec(name, data)
	return err
}

// decodeSpec decodes a spec strictly and validates it; line finds the
// line of a YAML path in it.
func decodeSpec(name string, data []byte) (s *Spec, line func(string) int, err error) {
	// The YAML decoder panics on some malformed documents (the fuzzer
	// found "generalization:\n ! 0\n0: #" a nil dereference in its
	// decodeSlice): one request's spec must not take its handler down.
	defer func() {
		if r := recover(); r != nil {
			s, line, err = nil, nil, &SpecError{File: name, Msg: fmt.Sprintf("the YAML decoder failed on this document (%v): check its syntax", r)}
		}
	}()
	return decodeSpecUnsafe(name, data)
}

// decodeSpecUnsafe is decodeSpec without the guard against the decoder's
// panics.
func decodeSpecUnsafe(name string, data []byte) (*Spec, func(string) int, error) {
	// Refused before decoding: a few KB of nested aliases would expand
	// to billions of nodes in the decoder.
	if err := safeyaml.Check(data, safeyaml.Defaults); err != nil {
		var se *safeyaml.Error
		errors.As(err, &se)
		return nil, nil, &SpecError{File: name, Line: se.Line, Msg: se.Msg}
	}
	body, sec, err := splitRuntime(name, data)
	if err != nil {
		return nil, nil, err
	}
	var s Spec
	decode := func() error { return yaml.UnmarshalWithOptions(data, &s, yaml.Strict()) }
	unknown := func() []unknownField { return specUnknownFields(data) }
	if body != nil {
		// runtime: {kind, settings}: the rest decodes as ever, the
		// section read as its kind (runtimesection.go).
		decode = func() error { return yaml.NodeToValue(body, &s, yaml.Strict()) }
		unknown = func() []unknownField { return unknownFields(body, reflect.TypeFor[Spec]()) }
	}
	if err := decode(); err != nil {
		var ue *yaml.UnknownFieldError
		if errors.As(err, &ue) {
			if u := unknown(); len(u) > 0 {
				return nil, nil, &SpecError{File: name, Line: u[0].line, Msg: unknownMessage(u)}
			}
		}
		var ye yaml.Error
		if errors.As(err, &ye) && ye.GetToken() != nil {
			return nil, nil, &SpecError{File: name, Line: ye.GetToken().Position.Line, Msg: ye.GetMessage()}
		}
		var re *rateError
		if errors.As(err, &re) {
			return nil, nil, &SpecError{File: name, Line: lineContaining(data, "request_rate", re.raw), Msg: re.Error()}
		}
		return nil, nil, &SpecError{File: name, Msg: err.Error()}
	}
	s.file = name
	file, _ := parser.ParseBytes(data, 0)
	line := func(path string) int { return lineOf(file, path) }
	if sec != nil {
		line = sec.settingsLine(line)
		if err := sec.apply(&s, line); err != nil {
			return nil, nil, err
		}
	}
	if err := s.validate(line); err != nil {
		return nil, nil, err
	}
	s.settingLines = storedLines(line)
	return &s, line, nil
}

// specUnknownFields lists a spec's unknown keys in document order.
func specUnknownFields(data []byte) []unknownField {
	f, err := parser.ParseBytes(data, 0)
	if err != nil || f == nil {
		return nil
	}
	var u []unknownField
	for _, d := range f.Docs {
		u = append(u, unknownFields(d.Body, reflect.TypeFor[Spec]())...)
	}
	return u
}

// lineOf finds the line of a YAML path ("$.stages[1].knob") or 0.
func lineOf(f *ast.File, path string) int {
	if f == nil {
		return 0
	}
	p, err := yaml.PathString(path)
	if err != nil {
		return 0
	}
	n, err := p.FilterFile(f)
	if err != nil || n == nil || n.GetToken() == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

func (s *Spec) validate(line func(string) int) error {
	bad := func(path, format string, a ...any) error {
		return &SpecError{File: s.file, Line: line(path), Msg: fmt.Sprintf(format, a...), Field: path}
	}
	if s.Name == "" {
		return bad("$", "name is required")
	}
	if strings.ContainsAny(s.Name, `/\ `) {
		return bad("$.name", "name %q must not contain slashes or spaces (it names the output directory)", s.Name)
	}
	if s.Model == "" {
		return bad("$", "model is required")
	}
	if s.Hardware.Count < 0 {
		return bad("$.hardware.count", "hardware.count %d must be positive", s.Hardware.Count)
	}
	if len(s.Engines) == 0 {
		return bad("$", "engines: at least one engine is required")
	}
	seen := map[string]bool{}
	for i, e := range s.Engines {
		if _, ok := engine.KindOf(e.Name); !ok {
			return bad(fmt.Sprintf("$.engines[%d].name", i), "engine %q: want %s", e.Name, engine.KindList())
		}
		if seen[e.Name] {
			return bad(fmt.Sprintf("$.engines[%d].name", i), "engine %q listed twice", e.Name)
		}
		seen[e.Name] = true
	}
	if err := s.checkRanges(line); err != nil {
		return err
	}
	if s.Runtime != "" {
		if _, err := runtimes.Lookup(s.Runtime); err != nil {
			return bad("$.runtime", "%v", err)
		}
	}
	for _, eng := range slices.Sorted(maps.Keys(s.Images)) {
		if _, ok := defaultVersions[eng]; !ok {
			return bad("$.images."+eng, "images: unknown engine %q (want vllm, sglang or trtllm)", eng)
		}
		if strings.TrimSpace(s.Images[eng]) == "" || strings.ContainsAny(s.Images[eng], " \t\n") {
			return bad("$.images."+eng, "images: %s: %q is not an image reference", eng, s.Images[eng])
		}
	}
	for i, v := range s.Volumes {
		if err := checkVolume(v); err != nil {
			return bad(fmt.Sprintf("$.volumes[%d]", i), "volumes: %v", err)
		}
	}
	if _, ok := s.Base.Env["HF_TOKEN"]; ok {
		return bad("$.base.env.HF_TOKEN", "HF_TOKEN does not belong in a spec, which is stored with its run: perflab passes its own environment's HF_TOKEN to the engines")
	}
	if path, err := s.Objective.Check(); err != nil {
		return bad(path, "%v", err)
	}
	for name, v := range map[string]float64{"tpot_ms": s.Objective.SLO.TPOTMs, "ttft_ms": s.Objective.SLO.TTFTMs,
		"e2el_ms": s.Objective.SLO.E2ELMs, "p99_tpot_ms": s.Objective.SLO.P99TPOTMs, "p99_ttft_ms": s.Objective.SLO.P99TTFTMs} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return bad("$.objective.slo."+name, "slo %s %v must be a non-negative number of milliseconds", name, v)
		}
	}
	if s.MinSuccessRate < 0 || s.MinSuccessRate > 1 {
		return bad("$.min_success_rate", "min_success_rate %v must be within [0, 1]", s.MinSuccessRate)
	}
	if s.Repeats < 0 || s.Parallel < 0 || s.Budget.MaxTrials < 0 || s.Budget.MaxHours < 0 || s.Search.Batch < 0 {
		return bad("$", "repeats, parallel, search.batch and budget must not be negative")
	}
	if s.Noise.Sigma < 0 || s.Noise.Sigma > 0.5 {
		return bad("$.noise.sigma", "noise.sigma %v must be within [0, 0.5]", s.Noise.Sigma)
	}
	if s.Tuning != nil {
		if err := s.Tuning.validate("$.tuning", bad); err != nil {
			return err
		}
	}
	for i := range s.Generalization {
		p := fmt.Sprintf("$.generalization[%d]", i)
		if err := s.Generalization[i].validate(p, bad); err != nil {
			return err
		}
	}
	for i, st := range s.Stages {
		p := fmt.Sprintf("$.stages[%d]", i)
		k := st.Knob
		if k == "" {
			k = st.Name
		}
		kn, ok := knobs[k]
		if !ok {
			// The line that names the knob: knob: when written, else name:.
			kp := p + ".knob"
			if line(kp) == 0 {
				kp = p + ".name"
			}
			return bad(kp, "stage %q: unknown knob %q (want one of %s)", st.Name, k, strings.Join(KnobNames(), ", "))
		}
		if k != KnobEngine && len(st.Values) == 0 && len(st.PerEngine) == 0 {
			if len(defaultValues(k)) == 0 && perEngineDefaults(k) == nil {
				return bad(p, "stage %q: no candidate values", st.Name)
			}
		}
		for j, v := range st.Values {
			if k == KnobEngine && v == "" {
				// The default engine stage's "derived from engines" marker:
				// a stored run's normalized spec carries it.
				continue
			}
			if err := kn.check(v); err != nil {
				return bad(fmt.Sprintf("%s.values[%d]", p, j), "stage %q: %v", st.Name, err)
			}
		}
		for eng, vs := range st.PerEngine {
			if !seen[eng] {
				return bad(p+".per_engine", "stage %q: per_engine names engine %q that is not in engines", st.Name, eng)
			}
			for _, v := range vs {
				if err := kn.check(v); err != nil {
					return bad(p+".per_engine."+eng, "stage %q: %v", st.Name, err)
				}
			}
		}
	}
	for i, k := range s.Search.Knobs {
		if _, ok := knobs[k]; !ok {
			return bad(fmt.Sprintf("$.search.knobs[%d]", i), "search: unknown knob %q (want one of %s)", k, strings.Join(KnobNames(), ", "))
		}
	}
	return nil
}

func (w *Workload) validate(p string, bad func(string, string, ...any) error) error {
	if w.Name == "" {
		return bad(p, "workload name is required")
	}
	switch w.Dataset {
	case "", "sharegpt", "random":
	default:
		return bad(p+".dataset", "workload %q: dataset %q: want sharegpt or random", w.Name, w.Dataset)
	}
	if w.Dataset == "random" && (w.InputLen <= 0 || w.OutputLen <= 0) && w.Profile == "" {
		return bad(p, "workload %q: random needs input_len and output_len", w.Name)
	}
	if w.NumPrompts < 0 || w.MaxConcurrency < 0 {
		return bad(p, "workload %q: num_prompts and max_concurrency must not be negative", w.Name)
	}
	if w.RangeRatio < 0 || w.RangeRatio >= 1 {
		return bad(p+".range_ratio", "workload %q: range_ratio %v must be within [0, 1)", w.Name, w.RangeRatio)
	}
	return nil
}

// DefaultShareGPTPath is where the tuning workload's ShareGPT sample lives
// when a spec names none, relative to the current directory (the
// repository root, with the shared data beside it).
const DefaultShareGPTPath = "../shared/data/sharegpt/sharegpt_v3_sample_1000.json"

// DefaultTuning is the reports' tuning workload: ShareGPT, 1,000 prompts,
// rate inf.
func DefaultTuning() Workload {
	return Workload{Name: "ShareGPT", Dataset: "sharegpt", Path: ResolvePath(DefaultShareGPTPath), NumPrompts: 1000, RequestRate: Rate(math.Inf(1))}
}

// DefaultGeneralization is the reports' four random cases (seed 42, rate inf).
func DefaultGeneralization() []Workload {
	inf := Rate(math.Inf(1))
	return []Workload{
		{Name: "Short Prompt", Dataset: "random", InputLen: 128, OutputLen: 4, NumPrompts: 1000, Seed: 42, RequestRate: inf},
		{Name: "Medium Prompt", Dataset: "random", InputLen: 2000, OutputLen: 100, NumPrompts: 500, Seed: 42, RequestRate: inf},
		{Name: "Long Prompt", Dataset: "random", InputLen: 4000, OutputLen: 200, NumPrompts: 500, Seed: 42, RequestRate: inf},
		{Name: "Very Long Prompt", Dataset: "random", InputLen: 32000, OutputLen: 100, NumPrompts: 100, Seed: 42, RequestRate: inf},
	}
}

func (s *Spec) fillDefaults() {
	if s.Hardware.Count == 0 {
		s.Hardware.Count = 1
	}
	if s.Hardware.GPU == "" {
		s.Hardware.GPU = "H100-SXM-80GB"
	}
	for i := range s.Engines {
		if s.Engines[i].Version == "" {
			s.Engines[i].Version = defaultVersions[s.Engines[i].Name]
		}
	}
	if s.Runtime == "" {
		s.Runtime = runtimes.Default
	}
	// A name the registry lacks stays as written: validate rejects it.
	s.Objective = s.Objective.Normalized()
	if s.Tuning == nil {
		t := DefaultTuning()
		s.Tuning = &t
	}
	fillWorkload(s.Tuning)
	if len(s.Generalization) == 0 && !s.NoGeneralization {
		s.Generalization = DefaultGeneralization()
	}
	for i := range s.Generalization {
		fillWorkload(&s.Generalization[i])
	}
	if len(s.Stages) == 0 {
		s.Stages = DefaultStages()
	}
	for i := range s.Stages {
		st := &s.Stages[i]
		if st.Knob == "" {
			st.Knob = st.Name
		}
		// A stage that names only its knob tries the knob's default
		// candidates, as it would among the default stages (the engine
		// and parallelism stages derive theirs from the spec).
		if len(st.Values) == 0 && len(st.PerEngine) == 0 && st.Knob != KnobEngine && st.Knob != KnobParallelism {
			if pe := perEngineDefaults(st.Knob); pe != nil {
				st.PerEngine = pe
			} else {
				st.Values = defaultValues(st.Knob)
			}
		}
		// Only the spec's engines: the normalized spec is stored with the
		// run and must parse again, and validate refuses a per_engine
		// entry for an engine the spec does not list.
		for eng := range st.PerEngine {
			if !slices.ContainsFunc(s.Engines, func(e EngineSpec) bool { return e.Name == eng }) {
				delete(st.PerEngine, eng)
			}
		}
	}
	if s.Combinations == nil {
		t := true
		s.Combinations = &t
	}
	if s.Search.MaxTrials == 0 {
		s.Search.MaxTrials = 24
	}
	if s.Repeats == 0 {
		s.Repeats = 3
	}
	if s.MinSuccessRate == 0 {
		s.MinSuccessRate = 1
	}
}

func fillWorkload(w *Workload) {
	if w.Dataset == "" && w.Profile == "" {
		if w.InputLen > 0 {
			w.Dataset = "random"
		} else {
			w.Dataset = "sharegpt"
		}
	}
	if w.Dataset == "sharegpt" && w.Path == "" {
		w.Path = ResolvePath(DefaultShareGPTPath)
	}
	if w.NumPrompts == 0 {
		w.NumPrompts = 1000
	}
	if w.RequestRate == 0 {
		w.RequestRate = Rate(math.Inf(1))
	}
}

// defaultVersions are the engine package's one table: an engine a spec
// lists without a version runs at the version engine command and the
// simulator assume too. The examples pin the reports' versions.
var defaultVersions = engine.DefaultVersions

// Key identifies what the spec measures and decides: rerunning a spec with
// the same key resumes its run. It hashes the spec without the run-control
// options, so a rerun with another --parallel, a larger budget or another
// ETA start-up estimate reuses every stored trial instead of starting over:
// none of them changes a measurement or a decision (the joint search's
// batch is Search.Batch, not Parallel; the budget only decides where the
// lab stops, and a resumed lab replays the same path up to there). The
// noise applies to sim-predict only and the time scale to the sim runtime
// only (a compressed clock shifts what the client measures), so each is
// hashed only there. The runtime is part of the key (a sim-predict run and
// a process run of one spec are different runs). Files count by content,
// not by where they lie (see contentID).
func (s *Spec) Key() string {
	k := s.keyed()
	k.Parallel, k.Budget, k.StartupSeconds = 0, Budget{}, 0
	if k.Kubernetes != nil {
		// Where the pods run and how perflab reaches them do not change
		// what is measured: a lab resumed from inside the cluster, or in
		// another namespace, continues its run.
		ks := *k.Kubernetes
		ks.Context, ks.Namespace, ks.Access = "", "", ""
		k.Kubernetes = &ks
	}
	if !k.RuntimeKind().Noisy() {
		k.Noise = Noise{}
	}
	if k.RuntimeKind().DefaultTimeScale() == 0 {
		k.TimeScale = 0
	}
	b, _ := yaml.Marshal(&k)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// LegacyKey is the key runs were stored under before Key left out the
// run-control options: a hash of the whole normalized spec. The lab adopts
// a run stored under it (see Lab.Run), so an old run resumes.
func (s *Spec) LegacyKey() string {
	b, _ := yaml.Marshal(s)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// YAML is the normalized spec (defaults filled) as YAML.
func (s *Spec) YAML() string {
	b, err := yaml.Marshal(s)
	if err != nil {
		return ""
	}
	return string(b)
}

// File is the path the spec was read from.
func (s *Spec) File() string { return s.file }

// version returns the spec's version of an engine.
func (s *Spec) version(eng string) string {
	for _, e := range s.Engines {
		if e.Name == eng {
			return e.Version
		}
	}
	return defaultVersions[eng]
}

// EngineVersionsText lists the spec's engines at their versions ("vllm
// 0.11.0, sglang 0.5.5.post1"), for the lines that say what runs.
func (s *Spec) EngineVersionsText() string {
	parts := make([]string, len(s.Engines))
	for i, e := range s.Engines {
		parts[i] = e.Name + " " + e.Version
	}
	return strings.Join(parts, ", ")
}

// BaselineEngine is the reports' baseline engine (vLLM, Kind.Baseline)
// when listed, else the first.
func (s *Spec) BaselineEngine() string {
	for _, e := range s.Engines {
		if k, ok := engine.KindOf(e.Name); ok && k.Baseline {
			return e.Name
		}
	}
	return s.Engines[0].Name
}

// ResolvePath makes a relative path absolute against the current
// directory, for paths that did not come from a spec (the default ShareGPT
// sample); a spec's own paths are already absolute.
func ResolvePath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return abs
}

// pathLike says whether a reference is written as a file-system path (and
// not as a Hugging Face id such as "Qwen/Qwen3-14B").
func pathLike(p string) bool {
	return filepath.IsAbs(p) || p == "." || p == ".." || strings.HasPrefix(p, "./") ||
		strings.HasPrefix(p, "../") || strings.HasPrefix(p, "~/")
}

// under joins a relative path to base ("~/" is the home directory).
func under(base, p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// resolvePaths makes every path the spec names absolute against base.
// A reference that may be a path or a Hub id (tokenizer, model) is a path
// when it is written as one or names something that exists under base; a
// path that does not exist is an error at its line, here, rather than an
// engine's start-up crash in another directory later.
func (s *Spec) resolvePaths(paths PathResolver, line func(string) int) error {
	base := paths.Base
	refused := func(path string, err error) error {
		return &SpecError{File: s.file, Line: line(path), Field: path, Msg: fmt.Sprintf("%s: %v", strings.TrimPrefix(path, "$."), err), Err: err}
	}
	ref := func(field, path string, v *string) error {
		if *v == "" {
			return nil
		}
		p, local, err := paths.Ref(*v)
		if err != nil {
			return refused(path, err)
		}
		if local {
			if _, err := os.Stat(p); err != nil {
				return &SpecError{File: s.file, Line: line(path), Field: path, Msg: fmt.Sprintf("%s %s: no such file or directory (%s; relative paths resolve against %s)", field, *v, p, base)}
			}
			*v = p
		}
		return nil // else a Hugging Face id, resolved later
	}
	if err := ref("tokenizer", "$.tokenizer", &s.Tokenizer); err != nil {
		return err
	}
	if err := ref("model", "$.model", &s.Model); err != nil {
		return err
	}
	if err := ref("fp8_model", "$.fp8_model", &s.FP8Model); err != nil {
		return err
	}
	if s.Tuning != nil && s.Tuning.Path != "" {
		p, err := paths.Path(s.Tuning.Path)
		if err != nil {
			return refused("$.tuning.path", err)
		}
		s.Tuning.Path = p
	}
	for i, v := range s.Volumes {
		host, rest, ok := strings.Cut(v, ":")
		if !ok || host == "" {
			continue // validate names it
		}
		field := fmt.Sprintf("$.volumes[%d]", i)
		p, err := paths.Path(host)
		if err != nil {
			return refused(field, err)
		}
		if _, err := os.Stat(p); err != nil {
			return &SpecError{File: s.file, Line: line(field), Field: field, Msg: fmt.Sprintf("volumes: %s: no such file or directory (%s; relative paths resolve against %s)", host, p, base)}
		}
		s.Volumes[i] = p + ":" + rest
	}
	for i := range s.Generalization {
		if s.Generalization[i].Path != "" {
			p, err := paths.Path(s.Generalization[i].Path)
			if err != nil {
				return refused(fmt.Sprintf("$.generalization[%d].path", i), err)
			}
			s.Generalization[i].Path = p
		}
	}
	if k := s.Kubernetes; paths.Confined && k != nil && k.HFCacheHostPath != "" {
		// A directory of the node, which a server on that node would
		// expose: confined like the rest (not followed, being the
		// node's).
		if !filepath.IsAbs(k.HFCacheHostPath) {
			return refused("$.kubernetes.hf_cache_host_path", &PathError{Value: k.HFCacheHostPath, Reason: "must be absolute (a directory of the node)"})
		}
		if _, err := paths.Path(k.HFCacheHostPath); err != nil {
			return refused("$.kubernetes.hf_cache_host_path", err)
		}
	}
	return nil
}

// checkVolume checks a bind mount "HOST:CONTAINER[:OPTIONS]" as docker
// run -v takes it, once the host side is absolute.
func checkVolume(v string) error {
	parts := strings.Split(v, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return fmt.Errorf("%q: want HOST:CONTAINER or HOST:CONTAINER:ro", v)
	}
	if !filepath.IsAbs(parts[1]) {
		return fmt.Errorf("%q: the container path %s must be absolute", v, parts[1])
	}
	if len(parts) == 3 {
		for _, o := range strings.Split(parts[2], ",") {
			switch o {
			case "ro", "rw", "z", "Z":
			default:
				return fmt.Errorf("%q: unknown option %q (want ro or rw)", v, o)
			}
		}
	}
	return nil
}

// checkDatasets refuses a workload whose dataset file is missing, naming
// the workload and the line, before any run is stored. It runs before the
// defaults are filled: the default ShareGPT sample is checked when it is
// read (a spec that is only parsed, never run, does not need it).
func (s *Spec) checkDatasets(line func(string) int) error {
	check := func(w *Workload, path string) error {
		if w == nil || w.Path == "" {
			return nil
		}
		if _, err := os.Stat(w.Path); err != nil {
			return &SpecError{File: s.file, Line: line(path + ".path"), Field: path + ".path",
				Msg: fmt.Sprintf("workload %q: dataset file %s: no such file", w.Name, w.Path)}
		}
		return nil
	}
	if err := check(s.Tuning, "$.tuning"); err != nil {
		return err
	}
	for i := range s.Generalization {
		if err := check(&s.Generalization[i], fmt.Sprintf("$.generalization[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}
