package engine

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Protocol is how a running server of one engine answers perflab, where the
// engines differ: the model name it lists and accepts, where its Prometheus
// metrics are, which GET a cluster may probe for readiness without making
// it generate, and what it must be started with for those to exist. Each
// engine's answers are read from its own source at the pinned versions
// (docs/protocols.md names file and commit); they are registered once, in
// each engine's Kind (kind.go), and every caller asks ProtocolFor instead
// of switching on the engine's name.
type Protocol interface {
	// ServedName is the model name the server lists in /v1/models and
	// accepts in a request's "model" for cfg.
	ServedName(cfg Config) string
	// MetricsPath is where the server serves Prometheus text ("" for
	// none). Only a server started with MetricsSetup serves it.
	MetricsPath() string
	// MetricsSetup is what cfg's command needs for MetricsPath to exist:
	// flags to add to the argv and keys to set in the engine's options
	// file (TensorRT-LLM's LLM-API YAML).
	MetricsSetup(cfg Config) MetricsSetup
	// ProbePath is a GET that answers 200 once the server is ready and
	// does no work for the model: what a readiness probe that runs every
	// few seconds, benchmarks included, may call.
	ProbePath() string
	// ProbeEnv is what the server must be started with for ProbePath to
	// stay free of generations (nil when it is so by default).
	ProbeEnv() map[string]string
}

// MetricsSetup is what turns an engine's Prometheus endpoint on.
type MetricsSetup struct {
	// Flags are added to the argv, e.g. SGLang's --enable-metrics.
	Flags []string
	// Options are top-level keys of TensorRT-LLM's options file, e.g.
	// return_perf_metrics: true.
	Options map[string]any
}

// ProtocolFor is the protocol of engine; an unknown engine gets vLLM's,
// the OpenAI-compatible defaults the others imitate (Validate refuses an
// unknown engine before anything starts).
func ProtocolFor(engine string) Protocol {
	if k, ok := KindOf(engine); ok {
		return k.Protocol
	}
	return vllmProtocol{}
}

// Compile-time checks that each engine's protocol is complete.
var (
	_ Protocol = vllmProtocol{}
	_ Protocol = sglangProtocol{}
	_ Protocol = trtllmProtocol{}
)

// servedNameFlag is what vLLM and SGLang list: --served-model-name, else
// the model argument as written (vllm/entrypoints/openai/api_server.py,
// python/sglang/srt/server_args.py: served_model_name defaults to
// model_path).
func servedNameFlag(cfg Config) string {
	if cfg.ServedModelName != "" {
		return cfg.ServedModelName
	}
	return cfg.ModelPath()
}

// vllmProtocol: vLLM serves Prometheus /metrics always
// (vllm/entrypoints/openai/api_server.py, mount_metrics), and /health
// only checks the engine core, without generating.
type vllmProtocol struct{}

func (vllmProtocol) ServedName(cfg Config) string     { return servedNameFlag(cfg) }
func (vllmProtocol) MetricsPath() string              { return "/metrics" }
func (vllmProtocol) MetricsSetup(Config) MetricsSetup { return MetricsSetup{} }
func (vllmProtocol) ProbePath() string                { return "/health" }
func (vllmProtocol) ProbeEnv() map[string]string      { return nil }

// sglangProtocol: SGLang serves /metrics only when started with
// --enable-metrics (python/sglang/srt/entrypoints/http_server.py,
// add_prometheus_middleware under server_args.enable_metrics), and its
// /health runs a one-token generation unless
// SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is false (environ.py:
// EnvBool(True); http_server.py health_generate). /v1/models answers from
// the tokenizer manager, without the scheduler.
type sglangProtocol struct{}

func (sglangProtocol) ServedName(cfg Config) string { return servedNameFlag(cfg) }
func (sglangProtocol) MetricsPath() string          { return "/metrics" }
func (sglangProtocol) MetricsSetup(Config) MetricsSetup {
	return MetricsSetup{Flags: []string{"--enable-metrics"}}
}
func (sglangProtocol) ProbePath() string { return "/health" }

// ProbeEnv turns /health's generation off: a probe every few seconds must
// not add requests to a benchmark.
func (sglangProtocol) ProbeEnv() map[string]string {
	return map[string]string{SGLangHealthGenerationEnv: "false"}
}

// SGLangHealthGenerationEnv is SGLang's switch for /health's one-token
// generation (on by default).
const SGLangHealthGenerationEnv = "SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"

// trtllmProtocol: trtllm-serve's OpenAIServer lists model_dir.name (the
// last path component) when the model argument is an existing directory,
// else the argument itself, and has no --served_model_name
// (tensorrt_llm/serve/openai_server.py, OpenAIServer.__init__). Its
// /metrics is JSON iteration stats; Prometheus text is mounted at
// /prometheus/metrics only when the LLM args set return_perf_metrics
// (register_routes → mount_metrics).
type trtllmProtocol struct{}

func (trtllmProtocol) ServedName(cfg Config) string {
	m := cfg.ModelPath()
	if st, err := os.Stat(m); err == nil {
		// Seen here: the process and simulator runtimes run the server
		// on this host, and docker mounts a local model at its own path.
		if !st.IsDir() {
			return m
		}
		return modelDirName(m)
	}
	if filepath.IsAbs(m) {
		// Not here, so in the server's filesystem only: a pod's volume
		// (a PVC, a node's hostPath), an image, a container path of a
		// mount. An absolute path is no Hugging Face repo id (those are
		// "name" or "org/name"), so a trtllm-serve that starts at all
		// found a directory there and lists its name.
		return modelDirName(m)
	}
	return m
}

// modelDirName is Python's Path(m).name: the last component, trailing
// slashes ignored.
func modelDirName(m string) string { return filepath.Base(filepath.Clean(m)) }

func (trtllmProtocol) MetricsPath() string { return "/prometheus/metrics" }
func (trtllmProtocol) MetricsSetup(Config) MetricsSetup {
	return MetricsSetup{Options: map[string]any{"enable_iter_perf_stats": true, "return_perf_metrics": true}}
}
func (trtllmProtocol) ProbePath() string           { return "/health" }
func (trtllmProtocol) ProbeEnv() map[string]string { return nil }

// WithMetrics is cmd, cfg's rendered command, with what cfg's engine needs
// to serve Prometheus text at its MetricsPath: SGLang's flag, TensorRT-LLM's
// options-file keys (the file and its flag are added when the config had
// none). Render itself stays the command the reference reports ran; the
// runner launches this one, and records it.
func WithMetrics(cfg Config, cmd Command) Command {
	setup := ProtocolFor(cfg.Engine).MetricsSetup(cfg)
	if len(setup.Flags) == 0 && len(setup.Options) == 0 {
		return cmd
	}
	out := Command{Argv: slices.Clone(cmd.Argv), Env: maps.Clone(cmd.Env), Files: maps.Clone(cmd.Files)}
	for _, f := range setup.Flags {
		if !slices.Contains(out.Argv, f) {
			out.Argv = append(out.Argv, f)
		}
	}
	_, had := out.Files[TRTLLMOptionsFile]
	if len(setup.Options) > 0 && !had && slices.ContainsFunc(out.Argv, func(a string) bool {
		return strings.HasPrefix(a, "--extra_llm_api_options")
	}) {
		// The user's extra_args name their own options file: theirs
		// stands, untouched.
		return out
	}
	if len(setup.Options) > 0 {
		if out.Files == nil {
			out.Files = map[string]string{}
		}
		text := out.Files[TRTLLMOptionsFile]
		// Top-level keys of a block-style YAML mapping: appended lines
		// are more keys of the same mapping.
		var b strings.Builder
		b.WriteString(text)
		for _, k := range slices.Sorted(maps.Keys(setup.Options)) {
			if strings.Contains("\n"+text, "\n"+k+":") {
				continue // already set, by the config's own rendering
			}
			fmt.Fprintf(&b, "%s: %v\n", k, setup.Options[k])
		}
		out.Files[TRTLLMOptionsFile] = b.String()
		if !had {
			out.Argv = append(out.Argv, "--extra_llm_api_options="+TRTLLMOptionsFile)
		}
	}
	return out
}
