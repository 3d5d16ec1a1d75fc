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
	switch engine {
	case sim.EngineVLLM:
		return parseVLLM(version, argv, env)
	case sim.EngineSGLang:
		return parseSGLang(version, argv, env)
	case sim.EngineTRTLLM:
		read := func(path string) ([]byte, error) {
			if c, ok := files[path]; ok {
				return []byte(c), nil
			}
			return readFile(path)
		}
		return parseTRTLLM(version, argv, env, read)
	}
	return nil, fmt.Errorf("simargs: unknown engine %q (want vllm, sglang or trtllm)", engine)
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
func stripProgram(engine string, argv []string) ([]string, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("simargs: %s: empty command", engine)
	}
	base := filepath.Base(argv[0])
	switch engine {
	case sim.EngineVLLM:
		if base == "vllm" && len(argv) > 1 && argv[1] == "serve" {
			return argv[2:], nil
		}
		if strings.HasPrefix(base, "python") && len(argv) > 2 && argv[1] == "-m" {
			switch argv[2] {
			case "vllm.entrypoints.openai.api_server":
				return argv[3:], nil
			case "vllm.entrypoints.cli.main":
				if len(argv) > 3 && argv[3] == "serve" {
					return argv[4:], nil
				}
			}
		}
		return nil, fmt.Errorf("simargs: vllm: command %q is not `vllm serve ...` or `python3 -m vllm.entrypoints.openai.api_server ...`", strings.Join(head(argv, 3), " "))
	case sim.EngineSGLang:
		if strings.HasPrefix(base, "python") && len(argv) > 2 && argv[1] == "-m" && argv[2] == "sglang.launch_server" {
			return argv[3:], nil
		}
		if base == "sglang" && len(argv) > 1 && argv[1] == "serve" {
			return argv[2:], nil
		}
		return nil, fmt.Errorf("simargs: sglang: command %q is not `python3 -m sglang.launch_server ...` or `sglang serve ...`", strings.Join(head(argv, 3), " "))
	case sim.EngineTRTLLM:
		if base == "trtllm-serve" {
			// trtllm-serve is a click group whose default command is serve.
			if len(argv) > 1 && argv[1] == "serve" {
				return argv[2:], nil
			}
			return argv[1:], nil
		}
		return nil, fmt.Errorf("simargs: trtllm: command %q is not `trtllm-serve ...`", strings.Join(head(argv, 2), " "))
	}
	return nil, fmt.Errorf("simargs: unknown engine %q", engine)
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
