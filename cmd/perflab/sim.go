package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/sim"
	"github.com/perflab/perflab/internal/sim/serve"
	"github.com/perflab/perflab/internal/sim/serve/settings"
	"github.com/perflab/perflab/internal/sim/simargs"
	"github.com/perflab/perflab/internal/tokenizer"
)

// simServeOpts are `perflab sim serve`'s flags.
type simServeOpts struct {
	engine, version string
	// set are the simulator's settings, under the flag names the engine
	// package and the simulated image write them with (serve.Settings).
	set         serve.Settings
	occupiedGiB float64
}

// newSimServeCmd is `perflab sim serve`.
func newSimServeCmd() *cobra.Command {
	o := &simServeOpts{}
	cmd := &cobra.Command{
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
		RunE: func(cmd *cobra.Command, args []string) error { return runSimServe(cmd, o, args) },
	}
	f := cmd.Flags()
	set := &o.set
	f.StringVar(&o.engine, settings.FlagEngine, "vllm", "engine to imitate: "+engine.KindList())
	f.StringVar(&o.version, settings.FlagEngineVersion, "", "engine version (default: "+defaultVersionsHelp()+")")
	f.StringVar(&set.GPU, settings.FlagGPU, settings.DefaultGPU, gpuFlagHelp())
	f.BoolVar(&set.NoFaults, settings.FlagNoFaults, false, "do not reproduce known engine bugs (the simulated engine never crashes)")
	f.Float64Var(&o.occupiedGiB, "gpu-occupied-gib", 0, "GiB of each GPU held by other processes at start (vLLM's start-up memory guard refuses when the rest is below gpu_memory_utilization × total)")
	f.StringVar(&set.Coefficients, settings.FlagCoefficients, "", "coefficients JSON from perflab sim calibrate (default: the embedded calibration)")
	f.IntVar(&set.GPUs, settings.FlagGPUs, 0, "number of GPUs (default: TP×DP)")
	f.Float64Var(&set.TimeScale, settings.FlagTimeScale, 1, "run K× faster than real time")
	f.DurationVar(&set.StartupDelay, settings.FlagStartupDelay, settings.DefaultStartupDelay, "simulated model-load time (divided by --time-scale)")
	f.StringVar(&set.Tokenizer, settings.FlagTokenizer, "", "tokenizer directory or tokenizer.json for exact prompt counts (default: estimate, 4 bytes a token)")
	f.StringVar(&set.ModelConfig, settings.FlagModelConfig, "", "HF config.json for a model outside the built-in catalog")
	return cmd
}

func runSimServe(cmd *cobra.Command, o *simServeOpts, args []string) error {
	if cmd.ArgsLenAtDash() < 0 || len(args) == 0 {
		return errors.New("sim serve: give the engine's command after --, e.g. -- vllm serve Qwen/Qwen3-14B")
	}
	if cmd.ArgsLenAtDash() > 0 {
		return fmt.Errorf("sim serve: unexpected arguments before --: %q", args[:cmd.ArgsLenAtDash()])
	}
	var counter serve.Counter
	if o.set.Tokenizer != "" {
		tok, err := loadTokenizer(o.set.Tokenizer)
		if err != nil {
			return fmt.Errorf("sim serve: --tokenizer: %w", err)
		}
		counter = serve.TokenizerCounter{Tok: tok}
	}
	var coef *sim.Coefficients
	if o.set.Coefficients != "" {
		c, err := sim.LoadCoefficients(o.set.Coefficients)
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
	fmt.Fprintln(cmd.ErrOrStderr(), "perflab sim serve: "+simulating(o.engine, version, o.version != "", o.set.GPU, o.set.GPUs))
	err := serve.Run(cmd.Context(), serve.Options{
		Engine: o.engine, Version: o.version, Argv: args, Env: env, GPU: o.set.GPU, GPUs: o.set.GPUs,
		ModelConfig: o.set.ModelConfig, TimeScale: o.set.TimeScale, StartupDelay: o.set.StartupDelay, Counter: counter,
		NoFaults: o.set.NoFaults, Coefficients: coef, OccupiedGiB: o.occupiedGiB,
	})
	var ee *serve.ExitError
	if errors.As(err, &ee) {
		// The engine-like log already said why; exit as the engine would.
		os.Exit(ee.Code)
	}
	return err
}

// loadTokenizer accepts a tokenizer directory or a tokenizer.json path.
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		return tokenizer.LoadFile(path)
	}
	return tokenizer.Load(path)
}

// newSimCmd is `perflab sim` with its subcommands.
func newSimCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "The calibrated simulator of vLLM, SGLang and TensorRT-LLM serving",
	}
	cmd.AddCommand(newSimServeCmd(), newSimImageCmd(), newSimPredictCmd(), newSimCalibrateCmd(), newSimFidelityCmd())
	return cmd
}

// simulating says which engine and version a command simulates, and
// whether the version was chosen or is the default: the same argv gives
// other figures at another version, and the lab's examples pin the
// reports' versions while these commands default to the newest.
func simulating(engine, version string, pinned bool, gpu string, gpus int) string {
	name := engineDisplay(engine)
	how := "set by --engine-version"
	if !pinned {
		how = "the default; --engine-version pins another"
	}
	return fmt.Sprintf("simulating %s %s (%s) on %dx %s", name, version, how, max(gpus, 1), gpu)
}

// defaultVersionsHelp lists engine.DefaultVersions for help texts, so they
// never name a version of their own.
func defaultVersionsHelp() string {
	var parts []string
	for _, k := range engine.Kinds() {
		parts = append(parts, k.Display+" "+k.DefaultVersion)
	}
	return strings.Join(parts, ", ")
}

// engineDisplay is engine.DisplayName, for functions whose parameter
// named engine shadows the package.
func engineDisplay(name string) string { return engine.DisplayName(name) }

// gpuFlagHelp lists the hardware catalog for a --gpu flag, so the help
// text cannot fall behind it.
func gpuFlagHelp() string {
	return "GPU: " + strings.Join(sim.GPUNames(), ", ") + ` (H100 is the SXM; spellings such as "NVIDIA H100 PCIe" are read too)`
}
