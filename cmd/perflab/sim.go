package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/sim"
	"github.com/perflab/perflab/internal/sim/serve"
	"github.com/perflab/perflab/internal/sim/simargs"
	"github.com/perflab/perflab/internal/tokenizer"
)

// simCmd is `perflab sim`; its subcommands (serve here, predict/calibrate/
// fidelity in their own files) register on it from init functions.
var simCmd = &cobra.Command{
	Use:   "sim",
	Short: "The calibrated simulator of vLLM, SGLang and TensorRT-LLM serving",
}

var simServeOpts struct {
	engine, version, gpu, tokenizer, modelConfig string
	coefficients                                 string
	gpus                                         int
	timeScale                                    float64
	startupDelay                                 time.Duration
	noFaults                                     bool
	occupiedGiB                                  float64
}

var simServeCmd = &cobra.Command{
	Use:   "serve --engine vllm|sglang|trtllm --gpu H100 [flags] -- ENGINE ARGV...",
	Short: "Serve an OpenAI-compatible API from the simulator, taking the engine's own command line",
	Long: `Serve an OpenAI-compatible API (chat/completions, completions, models,
health, Prometheus metrics with vLLM's names) whose tokens come out at the
simulated engine's times, in real time (× --time-scale).

Everything after "--" is the exact command the real engine would get, e.g.
  perflab sim serve --engine vllm --gpu H100 -- vllm serve Qwen/Qwen3-14B --port 8000
It is parsed with the engine's own spelling at --engine-version and rejected
the way the engine would reject it. The server listens on the argv's
--host/--port (default 127.0.0.1 and the engine's default port).`,
	Args: cobra.ArbitraryArgs,
	RunE: func(cmd *cobra.Command, args []string) error {
		o := simServeOpts
		if cmd.ArgsLenAtDash() < 0 || len(args) == 0 {
			return errors.New("sim serve: give the engine's command after --, e.g. -- vllm serve Qwen/Qwen3-14B")
		}
		if cmd.ArgsLenAtDash() > 0 {
			return fmt.Errorf("sim serve: unexpected arguments before --: %q", args[:cmd.ArgsLenAtDash()])
		}
		var counter serve.Counter
		if o.tokenizer != "" {
			tok, err := loadTokenizer(o.tokenizer)
			if err != nil {
				return fmt.Errorf("sim serve: --tokenizer: %w", err)
			}
			counter = serve.TokenizerCounter{Tok: tok}
		}
		var coef *sim.Coefficients
		if o.coefficients != "" {
			c, err := sim.LoadCoefficients(o.coefficients)
			if err != nil {
				return fmt.Errorf("sim serve: --coefficients: %w", err)
			}
			coef = c
		}
		env := map[string]string{}
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
		version := o.version
		if version == "" {
			version = simargs.DefaultVersion(o.engine)
		}
		fmt.Fprintln(cmd.ErrOrStderr(), "perflab sim serve: "+simulating(o.engine, version, o.version != "", o.gpu, o.gpus))
		err := serve.Run(cmd.Context(), serve.Options{
			Engine: o.engine, Version: o.version, Argv: args, Env: env, GPU: o.gpu, GPUs: o.gpus,
			ModelConfig: o.modelConfig, TimeScale: o.timeScale, StartupDelay: o.startupDelay, Counter: counter,
			NoFaults: o.noFaults, Coefficients: coef, OccupiedGiB: o.occupiedGiB,
		})
		var ee *serve.ExitError
		if errors.As(err, &ee) {
			// The engine-like log already said why; exit as the engine would.
			os.Exit(ee.Code)
		}
		return err
	},
}

// loadTokenizer accepts a tokenizer directory or a tokenizer.json path.
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		return tokenizer.LoadFile(path)
	}
	return tokenizer.Load(path)
}

// newSimCmd is `perflab sim` with its subcommands. Its commands are
// package variables: call it once per process.
func newSimCmd() *cobra.Command {
	f := simServeCmd.Flags()
	f.StringVar(&simServeOpts.engine, "engine", "vllm", "engine to imitate: vllm, sglang or trtllm")
	f.StringVar(&simServeOpts.version, "engine-version", "", "engine version (default: "+defaultVersionsHelp()+")")
	f.StringVar(&simServeOpts.gpu, "gpu", "H100", "GPU: H100, H200, A100, L40S or B200")
	f.BoolVar(&simServeOpts.noFaults, "no-faults", false, "do not reproduce known engine bugs (the simulated engine never crashes)")
	f.Float64Var(&simServeOpts.occupiedGiB, "gpu-occupied-gib", 0, "GiB of each GPU held by other processes at start (vLLM's start-up memory guard refuses when the rest is below gpu_memory_utilization × total)")
	f.StringVar(&simServeOpts.coefficients, "coefficients", "", "coefficients JSON from perflab sim calibrate (default: the embedded calibration)")
	f.IntVar(&simServeOpts.gpus, "gpus", 0, "number of GPUs (default: TP×DP)")
	f.Float64Var(&simServeOpts.timeScale, "time-scale", 1, "run K× faster than real time")
	f.DurationVar(&simServeOpts.startupDelay, "startup-delay", serve.DefaultStartupDelay, "simulated model-load time (divided by --time-scale)")
	f.StringVar(&simServeOpts.tokenizer, "tokenizer", "", "tokenizer directory or tokenizer.json for exact prompt counts (default: estimate, 4 bytes a token)")
	f.StringVar(&simServeOpts.modelConfig, "model-config", "", "HF config.json for a model outside the built-in catalog")
	simCmd.AddCommand(simServeCmd, newSimImageCmd(), newSimPredictCmd(), newSimCalibrateCmd(), newSimFidelityCmd())
	return simCmd
}

// simulating says which engine and version a command simulates, and
// whether the version was chosen or is the default: the same argv gives
// other figures at another version, and the lab's examples pin the
// reports' versions while these commands default to the newest.
func simulating(engine, version string, pinned bool, gpu string, gpus int) string {
	name := map[string]string{"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}[engine]
	if name == "" {
		name = engine
	}
	how := "set by --engine-version"
	if !pinned {
		how = "the default; --engine-version pins another"
	}
	return fmt.Sprintf("simulating %s %s (%s) on %dx %s", name, version, how, max(gpus, 1), gpu)
}

// defaultVersionsHelp lists engine.DefaultVersions for help texts, so they
// never name a version of their own.
func defaultVersionsHelp() string {
	names := map[string]string{engine.VLLM: "vLLM", engine.SGLang: "SGLang", engine.TRTLLM: "TensorRT-LLM"}
	var parts []string
	for _, e := range []string{engine.VLLM, engine.SGLang, engine.TRTLLM} {
		parts = append(parts, names[e]+" "+engine.DefaultVersions[e])
	}
	return strings.Join(parts, ", ")
}
