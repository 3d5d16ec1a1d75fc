package labspec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/perflab/perflab/internal/engine"
)

// Knob names, in the reports' stage order.
const (
	KnobEngine              = "engine"
	KnobQuantization        = "quantization"
	KnobKVCacheDtype        = "kv_cache_dtype"
	KnobAttentionBackend    = "attention_backend"
	KnobParallelism         = "parallelism"
	KnobMaxNumSeqs          = "max_num_seqs"
	KnobMaxNumBatchedTokens = "max_num_batched_tokens"
	KnobChunkedPrefill      = "chunked_prefill"
	KnobPrefixCaching       = "prefix_caching"
	KnobSpeculative         = "speculative"
	KnobPerformanceMode     = "performance_mode"
	KnobAsyncScheduling     = "async_scheduling"
	KnobEnforceEager        = "enforce_eager"
	KnobGPUMemoryFraction   = "gpu_memory_fraction"
	KnobCUDAGraphPadding    = "cuda_graph_padding"
)

// KnobOrder is the order knobs are applied and printed in.
var KnobOrder = []string{
	KnobEngine, KnobQuantization, KnobKVCacheDtype, KnobAttentionBackend, KnobParallelism,
	KnobMaxNumSeqs, KnobMaxNumBatchedTokens, KnobChunkedPrefill, KnobPrefixCaching,
	KnobSpeculative, KnobPerformanceMode, KnobCUDAGraphPadding, KnobAsyncScheduling, KnobEnforceEager,
	KnobGPUMemoryFraction,
}

// knob knows one knob's spelling and how it lands in an engine.Config.
type knob struct {
	// check validates a value's spelling.
	check func(v string) error
	// apply sets v on cfg; false when the value does not apply to this
	// engine/version/hardware (the candidate is then skipped).
	apply func(cfg *engine.Config, s *Spec, v string) bool
}

// IsDefault says whether a knob value leaves the engine's default.
func IsDefault(v string) bool { return v == "" || v == "default" }

func checkInt(v string) error {
	if IsDefault(v) {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return fmt.Errorf("value %q: want a positive integer", v)
	}
	return nil
}

func checkBool(v string) error {
	if IsDefault(v) {
		return nil
	}
	if _, err := strconv.ParseBool(v); err != nil {
		return fmt.Errorf("value %q: want true or false", v)
	}
	return nil
}

func boolPtr(b bool) *bool { return &b }

var knobs = map[string]knob{
	KnobEngine: {
		check: func(v string) error {
			if _, ok := engine.KindOf(v); ok {
				return nil
			}
			return fmt.Errorf("engine %q: want %s", v, engine.KindList())
		},
		apply: func(cfg *engine.Config, s *Spec, v string) bool {
			cfg.Engine, cfg.Version = v, s.version(v)
			return true
		},
	},
	KnobQuantization: {
		check: func(v string) error {
			switch v {
			case "", "default", "none", "bf16", "fp8", "fp8-checkpoint":
				return nil
			}
			return fmt.Errorf("quantization %q: want none, fp8 or fp8-checkpoint", v)
		},
		apply: func(cfg *engine.Config, s *Spec, v string) bool {
			switch v {
			case "", "default", "none", "bf16":
				cfg.Quantization = ""
			case "fp8-checkpoint":
				cfg.Quantization = v
				if s.FP8Model != "" {
					cfg.Model = s.FP8Model
				}
			default:
				cfg.Quantization = v
			}
			return true
		},
	},
	KnobKVCacheDtype: {
		check: func(v string) error {
			switch v {
			case "", "default", "auto", "fp8", "fp8_e4m3", "fp8_e5m2":
				return nil
			}
			return fmt.Errorf("kv_cache_dtype %q: want auto, fp8, fp8_e4m3 or fp8_e5m2", v)
		},
		apply: func(cfg *engine.Config, _ *Spec, v string) bool {
			if v == "auto" || v == "default" {
				v = ""
			}
			cfg.KVCacheDtype = v
			return true
		},
	},
	KnobAttentionBackend: {
		check: func(v string) error {
			if IsDefault(v) {
				return nil
			}
			// A stage's plain Values are filtered to the current
			// engine's names at apply, so any engine's name is valid.
			var display []string
			for _, k := range engine.Kinds() {
				if k.HasAttentionBackend(v) {
					return nil
				}
				display = append(display, k.Display)
			}
			return fmt.Errorf("attention backend %q is not a %s backend name", v, orList(display))
		},
		apply: func(cfg *engine.Config, s *Spec, v string) bool {
			if IsDefault(v) {
				cfg.AttentionBackend = ""
				return true
			}
			if k, ok := engine.KindOf(cfg.Engine); ok && k.HasAttentionBackend(v) {
				cfg.AttentionBackend = v
				if v == k.AttentionDefault || s != nil && v == s.Hardware.AttentionDefaults[cfg.Engine] {
					// Naming the default changes nothing the engine
					// does: left unset, the candidate is the incumbent's
					// config and is not measured again.
					cfg.AttentionBackend = ""
				}
				return true
			}
			return false
		},
	},
	KnobParallelism: {
		check: func(v string) error {
			if IsDefault(v) {
				return nil
			}
			_, _, _, err := parseParallelism(v)
			return err
		},
		apply: func(cfg *engine.Config, s *Spec, v string) bool {
			if IsDefault(v) {
				cfg.TensorParallel, cfg.DataParallel, cfg.ExpertParallel = 0, 0, false
				return true
			}
			tp, dp, ep, err := parseParallelism(v)
			if err != nil {
				return false
			}
			if dp == 0 {
				// Fill the node with replicas so TP choices are compared on
				// the same GPUs: TP4 on 8 GPUs runs as 2 data-parallel replicas.
				dp = s.Hardware.Count / tp
			}
			if dp < 1 || tp*dp > s.Hardware.Count {
				return false
			}
			cfg.TensorParallel, cfg.DataParallel, cfg.ExpertParallel = tp, dp, ep
			if tp == 1 {
				cfg.TensorParallel = 0
			}
			if dp == 1 {
				cfg.DataParallel = 0
			}
			return true
		},
	},
	KnobMaxNumSeqs: {
		check: checkInt,
		apply: func(cfg *engine.Config, _ *Spec, v string) bool {
			cfg.MaxNumSeqs, _ = strconv.Atoi(v)
			return true
		},
	},
	KnobMaxNumBatchedTokens: {
		check: checkInt,
		apply: func(cfg *engine.Config, _ *Spec, v string) bool {
			cfg.MaxNumBatchedTokens, _ = strconv.Atoi(v)
			return true
		},
	},
	KnobChunkedPrefill: {
		check: checkBool,
		apply: func(cfg *engine.Config, _ *Spec, v string) bool {
			b := parseTri(v)
			// The engine's default is no change (vLLM's V1 chunks already;
			// --enable-chunked-prefill started the same server under
			// another name, and the lab measured it again).
			if k, ok := engine.KindOf(cfg.Engine); ok && b != nil && *b == k.ChunksByDefault(cfg.Version) {
				b = nil
			}
			cfg.ChunkedPrefill = b
			return true
		},
	},
	KnobPrefixCaching: {
		check: checkBool,
		apply: func(cfg *engine.Config, _ *Spec, v string) bool {
			cfg.PrefixCaching = parseTri(v)
			return true
		},
	},
	KnobAsyncScheduling: {
		check: checkBool,
		apply: func(cfg *engine.Config, _ *Spec, v string) bool {
			if k, ok := engine.KindOf(cfg.Engine); (!ok || !k.AsyncScheduling) && !IsDefault(v) {
				return false
			}
			cfg.AsyncScheduling = parseTri(v)
			return true
		},
	},
	KnobCUDAGraphPadding: {
		check: checkBool,
		apply: func(cfg *engine.Config, _ *Spec, v string) bool {
			b := parseTri(v)
			// The engine's own default is no change: leaving it unset keeps
			// the candidate's config (and its hash) the incumbent's, so a
			// stage does not measure the same server twice.
			if k, ok := engine.KindOf(cfg.Engine); ok && b != nil && *b == k.PadsGraphs {
				b = nil
			}
			cfg.CUDAGraphPadding = b
			return true
		},
	},
	KnobEnforceEager: {
		check: checkBool,
		apply: func(cfg *engine.Config, _ *Spec, v string) bool {
			b, _ := strconv.ParseBool(v)
			cfg.EnforceEager = b
			return true
		},
	},
	KnobGPUMemoryFraction: {
		check: func(v string) error {
			if IsDefault(v) {
				return nil
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 || f > 1 {
				return fmt.Errorf("gpu_memory_fraction %q: want a number in (0, 1]", v)
			}
			return nil
		},
		apply: func(cfg *engine.Config, _ *Spec, v string) bool {
			cfg.GPUMemoryFraction, _ = strconv.ParseFloat(v, 64)
			return true
		},
	},
	KnobSpeculative: {
		check: func(v string) error {
			_, err := parseSpeculative(v)
			return err
		},
		apply: func(cfg *engine.Config, _ *Spec, v string) bool {
			sp, err := parseSpeculative(v)
			if err != nil {
				return false
			}
			cfg.Speculative = sp
			return true
		},
	},
	KnobPerformanceMode: {
		// vLLM's --performance-mode choices (engine.Config validates the
		// same set); "latency" is not one of them.
		check: func(v string) error {
			switch v {
			case "", "default", "balanced", "interactivity", "throughput":
				return nil
			}
			return fmt.Errorf("performance_mode %q: want balanced, interactivity or throughput (vLLM's --performance-mode)", v)
		},
		apply: func(cfg *engine.Config, _ *Spec, v string) bool {
			if IsDefault(v) {
				cfg.PerformanceMode = ""
				return true
			}
			// A vLLM knob: another engine has no such setting, so the value
			// does not apply there (and is dropped on an engine switch). The
			// version gate is the engine package's (engine.Config.Validate):
			// a vLLM too old for it is a candidate skipped as unsupported,
			// with the engine's reason, before anything launches.
			if k, ok := engine.KindOf(cfg.Engine); !ok || !k.PerformanceMode {
				return false
			}
			cfg.PerformanceMode = v
			return true
		},
	},
}

// KnobNames lists the known knobs in stage order.
func KnobNames() []string { return append([]string(nil), KnobOrder...) }

func parseTri(v string) *bool {
	if IsDefault(v) {
		return nil
	}
	b, _ := strconv.ParseBool(v)
	return boolPtr(b)
}

// parseParallelism reads "tp4", "tp4-dp2", "tp2-ep", "dp8" (dp 0 = fill).
func parseParallelism(v string) (tp, dp int, ep bool, err error) {
	tp = 1
	for _, part := range strings.Split(strings.ToLower(v), "-") {
		switch {
		case part == "ep":
			ep = true
		case strings.HasPrefix(part, "tp"):
			tp, err = strconv.Atoi(part[2:])
		case strings.HasPrefix(part, "dp"):
			dp, err = strconv.Atoi(part[2:])
		default:
			err = fmt.Errorf("bad part %q", part)
		}
		if err != nil || tp < 1 || dp < 0 {
			return 0, 0, false, fmt.Errorf("parallelism %q: want e.g. tp4, tp4-dp2, tp2-ep or dp8", v)
		}
	}
	return tp, dp, ep, nil
}

// parseSpeculative reads "off", "mtp:4", "ngram:4", "eagle3:4:org/draft".
func parseSpeculative(v string) (*engine.Speculative, error) {
	if IsDefault(v) || v == "off" || v == "none" {
		return nil, nil
	}
	parts := strings.SplitN(v, ":", 3)
	switch parts[0] {
	case "eagle", "eagle3", "mtp", "ngram", "draft_model":
	default:
		return nil, fmt.Errorf("speculative %q: want off or METHOD:N[:DRAFT] with method eagle, eagle3, mtp, ngram or draft_model", v)
	}
	sp := &engine.Speculative{Method: parts[0], NumSpeculativeTokens: 1}
	if len(parts) > 1 {
		n, err := strconv.Atoi(parts[1])
		if err != nil || n < 1 || n > 16 {
			return nil, fmt.Errorf("speculative %q: token count %q: want 1..16", v, parts[1])
		}
		sp.NumSpeculativeTokens = n
	}
	if len(parts) > 2 {
		sp.DraftModel = parts[2]
	}
	if (sp.Method == "eagle" || sp.Method == "eagle3" || sp.Method == "draft_model") && sp.DraftModel == "" {
		return nil, fmt.Errorf("speculative %q: method %s needs a draft model (METHOD:N:REPO)", v, sp.Method)
	}
	return sp, nil
}

// Point is one configuration in the search space: knob → value ("" is the
// engine's default). It always names the engine.
type Point map[string]string

// Clone copies p.
func (p Point) Clone() Point {
	q := make(Point, len(p))
	for k, v := range p {
		q[k] = v
	}
	return q
}

// With returns a copy of p with the knob set.
func (p Point) With(k, v string) Point {
	q := p.Clone()
	if IsDefault(v) {
		delete(q, k)
	} else {
		q[k] = v
	}
	return q
}

// String is the point's stable label: "sglang quantization=fp8 ...".
func (p Point) String() string {
	var parts []string
	parts = append(parts, p[KnobEngine])
	for _, k := range KnobOrder[1:] {
		if v, ok := p[k]; ok && !IsDefault(v) {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

// Config builds the engine.Config for p on top of the spec's base settings;
// ok is false when a value does not apply (e.g. a vLLM backend name on
// SGLang, performance mode before vLLM 0.17, TP8 on 4 GPUs).
func (s *Spec) Config(p Point) (engine.Config, bool) {
	cfg := s.Base
	cfg.Model = s.Model
	cfg.ExtraArgs = append([]string(nil), s.Base.ExtraArgs...)
	if s.Base.Env != nil {
		cfg.Env = map[string]string{}
		for k, v := range s.Base.Env {
			cfg.Env[k] = v
		}
	}
	eng := p[KnobEngine]
	if eng == "" {
		eng = s.BaselineEngine()
	}
	knobs[KnobEngine].apply(&cfg, s, eng)
	for _, k := range KnobOrder[1:] {
		v, ok := p[k]
		if !ok || IsDefault(v) {
			continue
		}
		if !knobs[k].apply(&cfg, s, v) {
			return cfg, false
		}
	}
	return cfg, true
}

// Unsupported is the engine package's reason a config cannot run on its
// engine/version ("" when it can): every engine.UnsupportedError that
// engine.Config.Validate finds, which is what Render would refuse. Other
// validation errors are left to the trial, which records them.
func Unsupported(cfg engine.Config) string {
	err := cfg.Validate()
	if err == nil {
		return ""
	}
	var errs []error
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		errs = m.Unwrap()
	} else {
		errs = []error{err}
	}
	var out []string
	for _, e := range errs {
		var ue *engine.UnsupportedError
		if errors.As(e, &ue) {
			out = append(out, ue.Error())
		}
	}
	return strings.Join(out, "; ")
}

// SameServer is what a config starts on device d, for telling two
// candidates apart: the engine, its version and the exact command, files
// and environment it renders to once the batch limits equal to the
// engine's defaults on d are left unset (engine.WithoutDefaults). Configs
// that differ only in spelling an engine default (SGLang's chunked prefill
// set to true renders nothing, nor does TensorRT-LLM's set to false;
// vLLM's max_num_batched_tokens 8192 on an H100 is its default) start the
// same server, so a lab measures one of them. A config that does not
// render is its ConfigHash.
func SameServer(cfg engine.Config, d engine.Device) string {
	cmd, err := engine.Render(engine.WithoutDefaults(cfg, d))
	if err != nil {
		return "config " + ConfigHash(cfg)
	}
	return cfg.Engine + " " + cfg.EffectiveVersion() + "\n" + cmd.Script()
}

// ConfigHash is a short stable hash of a normalized config.
func ConfigHash(cfg engine.Config) string {
	b, _ := json.Marshal(cfg)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:6])
}

// GPUs is how many GPUs a config occupies.
func GPUs(cfg engine.Config) int {
	return cfg.GPUs()
}

// DefaultStages are the reports' stages in the reports' order, with their
// candidate values. Stages whose values do not apply to the incumbent's
// engine are skipped at run time.
func DefaultStages() []Stage {
	var out []Stage
	for _, k := range []string{KnobEngine, KnobQuantization, KnobAttentionBackend, KnobParallelism,
		KnobMaxNumSeqs, KnobMaxNumBatchedTokens, KnobChunkedPrefill, KnobPrefixCaching,
		KnobSpeculative, KnobPerformanceMode, KnobCUDAGraphPadding} {
		st := Stage{Name: k, Knob: k}
		if pe := perEngineDefaults(k); pe != nil {
			st.PerEngine = pe
		} else {
			st.Values = defaultValues(k)
		}
		out = append(out, st)
	}
	return out
}

// perEngineDefaults are a knob's default candidates where they differ by
// engine (each Kind's attention backends; its precisions), else nil.
func perEngineDefaults(k string) map[string][]string {
	var of func(*engine.Kind) []string
	switch k {
	case KnobAttentionBackend:
		of = func(ek *engine.Kind) []string { return ek.AttentionCandidates }
	case KnobQuantization:
		of = func(ek *engine.Kind) []string { return ek.QuantizationCandidates }
	default:
		return nil
	}
	out := map[string][]string{}
	for _, ek := range engine.Kinds() {
		out[ek.Name] = of(ek)
	}
	return out
}

// defaultValues are a knob's default candidates (nil: the knob needs values,
// its candidates are per engine (perEngineDefaults: quantization, attention
// backend), or, for engine and parallelism, derives them from the spec).
func defaultValues(k string) []string {
	switch k {
	case KnobKVCacheDtype:
		return []string{"fp8"}
	case KnobMaxNumSeqs:
		return []string{"256", "512", "1024", "2048"}
	case KnobMaxNumBatchedTokens:
		return []string{"8192", "16384", "32768"}
	case KnobChunkedPrefill, KnobPrefixCaching, KnobAsyncScheduling:
		return []string{"true", "false"}
	case KnobSpeculative:
		return []string{"ngram:4"}
	case KnobPerformanceMode:
		return []string{"throughput"}
	case KnobEnforceEager:
		return []string{"true"}
	case KnobCUDAGraphPadding:
		// Padding on is the change worth a trial: it is the default of
		// every engine but TensorRT-LLM, where it is one.
		return []string{"true"}
	case KnobEngine, KnobParallelism:
		return []string{""} // derived
	}
	return nil
}

// StageValues are the candidates of a stage for one engine.
func (s *Spec) StageValues(st Stage, eng string) []string {
	switch st.Knob {
	case KnobEngine:
		var out []string
		for _, e := range s.Engines {
			out = append(out, e.Name)
		}
		return out
	case KnobParallelism:
		if len(st.Values) == 0 || (len(st.Values) == 1 && st.Values[0] == "") {
			var out []string
			for tp := 1; tp <= s.Hardware.Count; tp *= 2 {
				out = append(out, "tp"+strconv.Itoa(tp))
			}
			return out
		}
	}
	if vs, ok := st.PerEngine[eng]; ok {
		return vs
	}
	if st.Knob == KnobAttentionBackend && len(st.Values) == 0 {
		return nil
	}
	return st.Values
}

// spaceValues lists, per stage knob, every value across engines plus the
// default: the axes of the grid and the joint search.
func (s *Spec) spaceValues(only []string) map[string][]string {
	want := map[string]bool{}
	for _, k := range only {
		want[k] = true
	}
	out := map[string][]string{}
	for _, st := range s.Stages {
		if len(only) > 0 && !want[st.Knob] {
			continue
		}
		set := map[string]bool{}
		if st.Knob != KnobEngine {
			set[""] = true
		}
		for _, e := range s.Engines {
			for _, v := range s.StageValues(st, e.Name) {
				set[v] = true
			}
		}
		for _, v := range out[st.Knob] {
			set[v] = true
		}
		vals := make([]string, 0, len(set))
		for v := range set {
			vals = append(vals, v)
		}
		sort.Strings(vals)
		out[st.Knob] = vals
	}
	return out
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
