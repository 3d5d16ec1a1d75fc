// Package simargs reads the exact command line a real engine would get —
// `vllm serve MODEL ...`, `python3 -m sglang.launch_server --model-path M ...`,
// `trtllm-serve MODEL ... --extra_llm_api_options f.yaml` — into sim.Params,
// with each engine's spelling at each version, and rejects what that engine
// would reject with the engine's own wording, so a wrong command fails on the
// simulator the way it would fail on a GPU.
//
// Flags the simulator does not model but the engine has are accepted and
// ignored; they come from per-engine, per-version allow-lists read from the
// engines' argument parsers (see flags_*.go).
package simargs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/sim"
)

// Server is where the engine would listen and what it would call the model.
type Server struct {
	// Host and Port as the argv sets them, else the engine's defaults
	// (vLLM 0.0.0.0:8000, SGLang 127.0.0.1:30000, trtllm-serve localhost:8000).
	Host string
	Port int
	// ServedModelNames are the names the API answers to; the first is the
	// one /v1/models lists. Defaults to the model argument.
	ServedModelNames []string
	// APIKey, when set, is required as a Bearer token (vLLM --api-key).
	APIKey string
	// Tokenizer is the tokenizer path or repo the argv names ("" = model).
	Tokenizer string
	// Metrics says the engine serves Prometheus metrics as started: vLLM
	// always, SGLang with --enable-metrics, trtllm-serve with
	// return_perf_metrics in its options file.
	Metrics bool
}

// Warning is a non-fatal remark the engine would log (a deprecated spelling).
type Warning string

// Result is everything Parse reads from an argv.
type Result struct {
	Params   sim.Params
	Server   Server
	Warnings []Warning
}

// Parse reads argv (program words included) for engine at version into
// sim.Params. env is the environment the engine would see (vLLM 0.11 takes
// its attention backend from VLLM_ATTENTION_BACKEND). A rejection is an
// *Error carrying the engine's own message.
func Parse(engine, version string, argv []string, env map[string]string) (sim.Params, error) {
	r, err := ParseAll(engine, version, argv, env)
	if err != nil {
		return sim.Params{}, err
	}
	return r.Params, nil
}

// ParseAll is Parse that also returns the listening address, served model
// names and warnings.
func ParseAll(engine, version string, argv []string, env map[string]string) (*Result, error) {
	return ParseAllFiles(engine, version, argv, env, nil)
}

// ParseFiles is Parse for a command whose side files (TensorRT-LLM's
// --extra_llm_api_options YAML) have not been written to disk: files maps
// the path as the argv names it to its content, and is consulted before the
// filesystem. The in-process predictor uses it; a launched engine finds the
// files its runtime wrote.
func ParseFiles(engine, version string, argv []string, env, files map[string]string) (sim.Params, error) {
	r, err := ParseAllFiles(engine, version, argv, env, files)
	if err != nil {
		return sim.Params{}, err
	}
	return r.Params, nil
}

// ParseAllFiles is ParseAll with ParseFiles' in-memory side files.
func ParseAllFiles(engine, version string, argv []string, env, files map[string]string) (*Result, error) {
	r, err := parseAllFiles(engine, version, argv, env, files)
	if err == nil {
		// The data-parallel front end's routing, as the engine reads it
		// from its own argv.
		r.Params.Route = sim.RouteFor(r.Params.Engine, argv)
	}
	return r, err
}

func parseAllFiles(engine, version string, argv []string, env, files map[string]string) (*Result, error) {
	engine = normEngine(engine)
	k, ok := argvKindOf(engine)
	if !ok {
		return nil, fmt.Errorf("simargs: unknown engine %q (want vllm, sglang or trtllm)", engine)
	}
	read := func(path string) ([]byte, error) {
		if c, ok := files[path]; ok {
			return []byte(c), nil
		}
		return readFile(path)
	}
	rest, err := stripProgram(k, argv)
	if err != nil {
		return nil, err
	}
	return k.parse(version, rest, env, read)
}

// argvKind is how one engine's command line is read: the program words
// that start its server and its argument parser, each from the engine's
// source (see the parsers' files).
type argvKind struct {
	// name is the engine.Kind name.
	name string
	// programs are the words that start the engine's server, the first
	// match winning (see programMatch).
	programs [][]string
	// usage is the refusal when argv does not start the engine's server,
	// quoting its first quote words.
	usage string
	quote int
	// parse reads the arguments after the program words for the engine
	// at version; read gives the side files they name.
	parse func(version string, rest []string, env map[string]string, read func(string) ([]byte, error)) (*Result, error)
}

// argvKinds is the one place the engines' command lines are registered.
var argvKinds = []*argvKind{
	{
		name: engine.VLLM,
		// vLLM's CLI (vllm/entrypoints/cli/main.py) and its module entry
		// points.
		programs: [][]string{{"vllm", "serve"}, {"python*", "-m", "vllm.entrypoints.openai.api_server"},
			{"python*", "-m", "vllm.entrypoints.cli.main", "serve"}},
		usage: "is not `vllm serve ...` or `python3 -m vllm.entrypoints.openai.api_server ...`",
		quote: 3,
		parse: func(version string, rest []string, env map[string]string, _ func(string) ([]byte, error)) (*Result, error) {
			return parseVLLM(version, rest, env)
		},
	},
	{
		name:     engine.SGLang,
		programs: [][]string{{"python*", "-m", "sglang.launch_server"}, {"sglang", "serve"}},
		usage:    "is not `python3 -m sglang.launch_server ...` or `sglang serve ...`",
		quote:    3,
		parse: func(version string, rest []string, env map[string]string, _ func(string) ([]byte, error)) (*Result, error) {
			return parseSGLang(version, rest, env)
		},
	},
	{
		name: engine.TRTLLM,
		// trtllm-serve is a click group whose default command is serve.
		programs: [][]string{{"trtllm-serve", "serve"}, {"trtllm-serve"}},
		usage:    "is not `trtllm-serve ...`",
		quote:    2,
		parse:    parseTRTLLM,
	},
}

func argvKindOf(name string) (*argvKind, bool) {
	i := slices.IndexFunc(argvKinds, func(k *argvKind) bool { return k.name == name })
	if i < 0 {
		return nil, false
	}
	return argvKinds[i], true
}

func normEngine(e string) string {
	if k, ok := engine.ParseKind(e); ok {
		return k.Name
	}
	return strings.ToLower(strings.TrimSpace(e))
}

// DefaultVersion is the version assumed when none is given: the one table
// in the engine package, through the simulator.
func DefaultVersion(engine string) string { return sim.DefaultVersion(normEngine(engine)) }

// DefaultPort is the engine's default listening port.
func DefaultPort(name string) int {
	if k, ok := engine.ParseKind(name); ok {
		return k.DefaultPort
	}
	return 8000
}

// stripProgram removes the program words, checking they name this engine's
// server. It returns the rest of argv.
func stripProgram(k *argvKind, argv []string) ([]string, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("simargs: %s: empty command", k.name)
	}
	for _, w := range k.programs {
		if programMatch(argv, w) {
			return argv[len(w):], nil
		}
	}
	return nil, fmt.Errorf("simargs: %s: command %q %s", k.name, strings.Join(head(argv, k.quote), " "), k.usage)
}

// programMatch reports whether argv starts with the program words w: the
// first compared by base name, a trailing "*" matching any suffix
// (python3, python3.12), the rest exactly.
func programMatch(argv, w []string) bool {
	if len(argv) < len(w) {
		return false
	}
	base := filepath.Base(argv[0])
	if p, ok := strings.CutSuffix(w[0], "*"); ok && !strings.HasPrefix(base, p) || !ok && base != w[0] {
		return false
	}
	return slices.Equal(argv[1:len(w)], w[1:])
}

func head(xs []string, n int) []string {
	if len(xs) < n {
		return xs
	}
	return xs[:n]
}

// fp8Name reports whether a model id names a pre-quantized FP8 checkpoint
// (Qwen/Qwen3-14B-FP8, ...-fp8-dynamic).
func fp8Name(model string) bool {
	m := strings.ToLower(filepath.Base(model))
	return strings.HasSuffix(m, "-fp8") || strings.Contains(m, "-fp8-") || strings.Contains(m, "_fp8")
}

// kvDtype maps an engine's KV-cache dtype spelling to the simulator's.
func kvDtype(s string) string {
	switch strings.ToLower(s) {
	case "", "auto", "bf16", "bfloat16", "float16", "half":
		return ""
	case "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc":
		return "fp8"
	}
	return strings.ToLower(s)
}

func boolp(b bool) *bool { return &b }

// startupError is a rejection raised after argument parsing, while the
// engine builds its config (a Python exception in the real engine).
func startupError(engine, exc, msg string) *Error {
	line := exc + ": " + msg
	return &Error{Engine: engine, Msg: line, Stderr: line + "\n", ExitCode: 1}
}

// readFile is os.ReadFile, replaceable in tests.
var readFile = os.ReadFile
