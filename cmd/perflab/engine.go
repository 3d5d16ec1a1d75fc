package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/runtimes"
)

func newEngineCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "Render, validate and launch engine configs (vLLM, SGLang, TensorRT-LLM)",
	}
	cmd.AddCommand(newEngineCommandCmd(), newEngineValidateCmd(), newEngineLaunchCmd(), newEngineGPUsCmd(), newEngineCleanupCmd())
	return cmd
}

func newEngineCommandCmd() *cobra.Command {
	var asJSON bool
	var host string
	var port int
	c := &cobra.Command{
		Use:   "command CONFIG",
		Short: "Print the exact serving command, env and files for a config (dry run)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := engine.LoadConfig(args[0])
			if err != nil {
				return err
			}
			var rc engine.Command
			if port > 0 {
				rc, err = engine.RenderForLaunch(cfg, host, port)
			} else {
				rc, err = engine.Render(cfg)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			return printCommand(cmd.OutOrStdout(), rc, asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print argv, env and files as JSON")
	c.Flags().StringVar(&host, "host", "127.0.0.1", "host to bind (with --port)")
	c.Flags().IntVar(&port, "port", 0, "add --host/--port as a launch would")
	return c
}

func printCommand(w io.Writer, rc engine.Command, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rc)
	}
	fmt.Fprintln(w, rc.String())
	for _, name := range slices.Sorted(maps.Keys(rc.Files)) {
		fmt.Fprintf(w, "\n# %s (written into the working directory)\n%s", name, rc.Files[name])
	}
	return nil
}

func newEngineValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate CONFIG",
		Short: "Check a config strictly and against the engine/version support matrix",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := engine.LoadConfig(args[0])
			if err != nil {
				return err
			}
			if _, err := engine.Render(cfg); err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%s %s, %s)\n", args[0], cfg.Engine, cfg.EffectiveVersion(), cfg.ModelPath())
			return nil
		},
	}
}

func newEngineLaunchCmd() *cobra.Command {
	var (
		runtime, gpu, workDir, logPath, pidFile, tokenizer, binary string
		timeScale                                                  float64
		startupDelay, readyTimeout, stallTimeout                   time.Duration
		gpus                                                       []int
		exitWhenReady                                              bool
	)
	c := &cobra.Command{
		Use:   "launch CONFIG",
		Short: "Start a server for a config, wait until it is ready, and hold it until interrupted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			// Also on panic: nothing started here may outlive us.
			defer engine.KillAll(5 * time.Second)
			cfg, err := engine.LoadConfig(args[0])
			if err != nil {
				return err
			}
			kind, err := runtimes.Lookup(runtime)
			if err != nil {
				return fmt.Errorf("engine launch: %w", err)
			}
			rt, err := kind.New(runtimes.Env{Binary: binary, GPU: gpu, TimeScale: timeScale, StartupDelay: startupDelay, Tokenizer: tokenizer})
			if err != nil {
				return fmt.Errorf("engine launch: %w", err)
			}
			if rt == nil {
				return fmt.Errorf("engine launch: runtime %s starts no server (%s)", runtime, kind.Summary())
			}
			ctx := cmd.Context()
			h, err := rt.Start(ctx, engine.Launch{
				Config: cfg, GPUs: gpus, WorkDir: workDir, LogPath: logPath,
				ReadyTimeout: readyTimeout, StallTimeout: stallTimeout,
			})
			if err != nil {
				return err
			}
			defer func() {
				stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if serr := h.Stop(stopCtx); serr != nil && err == nil {
					err = serr
				}
			}()
			if pidFile != "" {
				if err := os.WriteFile(pidFile, []byte(strconv.Itoa(engine.PidOf(h))), 0o644); err != nil {
					return fmt.Errorf("engine launch: %w", err)
				}
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "started pid %d, waiting for %s\n", engine.PidOf(h), h.BaseURL())
			if err := h.Ready(ctx); err != nil {
				var f *engine.Failure
				if errors.As(err, &f) {
					for _, l := range f.LogTail {
						fmt.Fprintln(cmd.ErrOrStderr(), "  | "+l)
					}
				}
				return err
			}
			fmt.Fprintf(out, "ready: %s\n", h.BaseURL())
			if exitWhenReady {
				return nil
			}
			select {
			case <-ctx.Done():
				fmt.Fprintln(out, "interrupted: stopping the server")
				return nil
			case <-h.Done():
				if f := h.Failure(); f != nil {
					return f
				}
				return nil
			}
		},
	}
	f := c.Flags()
	f.StringVar(&runtime, "runtime", runtimes.Process, "where the server runs: "+strings.Join(runtimes.Names(), ", "))
	f.StringVar(&gpu, "gpu", "H100", "simulated GPU model (sim runtime)")
	f.Float64Var(&timeScale, "time-scale", 1, "simulated time speed-up (sim runtime)")
	f.DurationVar(&startupDelay, "startup-delay", 0, "simulated load time (sim runtime)")
	f.StringVar(&tokenizer, "tokenizer", "", "tokenizer path for the simulator (sim runtime)")
	f.StringVar(&binary, "perflab-binary", "", "perflab binary for sim serve (default: this executable)")
	f.IntSliceVar(&gpus, "gpus", nil, "GPU indices to assign (CUDA_VISIBLE_DEVICES)")
	f.StringVar(&workDir, "workdir", "", "working directory (default: a temporary one)")
	f.StringVar(&logPath, "log", "", "log file (default: WORKDIR/engine.log)")
	f.StringVar(&pidFile, "pid-file", "", "write the server's process group id here once started")
	f.DurationVar(&readyTimeout, "ready-timeout", 0, "give up if not ready after this long (0: no cap)")
	f.DurationVar(&stallTimeout, "stall-timeout", 5*time.Minute, "give up after this long without log progress")
	f.BoolVar(&exitWhenReady, "exit-when-ready", false, "stop the server and exit as soon as it is ready")
	return c
}

func newEngineGPUsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "gpus",
		Short: "List GPUs as nvidia-smi reports them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			gpus, err := engine.DiscoverGPUs(cmd.Context())
			if err != nil {
				return err
			}
			for _, g := range gpus {
				fmt.Fprintf(cmd.OutOrStdout(), "%d\t%s\t%d MiB total\t%d MiB used\n", g.Index, g.Name, g.MemoryTotalMiB, g.MemoryUsedMiB)
			}
			return nil
		},
	}
}
