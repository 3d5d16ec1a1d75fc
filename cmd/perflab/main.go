// Command perflab is a performance lab for LLM serving: it deploys inference
// engines (or the embedded simulator), benchmarks them the way
// `vllm bench serve` does, searches engine configurations and writes the report.
//
// This package is wiring only: one file per subcommand, each registering
// itself on the root command from an init function.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/engine"
)

// defaultDB is where lab results live unless --db says otherwise: SQLite in
// the current directory, so the README's commands need no set-up.
const defaultDB = "sqlite:.perflab/perflab.db"

var rootCmd = &cobra.Command{
	Use:           "perflab",
	Short:         "A performance lab for LLM serving (vLLM, SGLang, TensorRT-LLM, simulator)",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() { os.Exit(run()) }

// run is main with its deferred cleanup: os.Exit would skip the defers, so
// the exit status is returned instead.
func run() (code int) {
	// No engine process may outlive perflab, whatever way it ends: normal
	// return, error, or panic (re-raised after the teardown).
	defer engine.KillAll(5 * time.Second)
	defer func() {
		if p := recover(); p != nil {
			engine.KillAll(5 * time.Second)
			panic(p)
		}
	}()
	// Cancel on SIGINT/SIGTERM so every subcommand tears down what it started.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// PERFLAB_CPUPROFILE=FILE writes a CPU profile of the whole command,
	// for `go tool pprof` (where a lab or a resume spends its time).
	if path := os.Getenv("PERFLAB_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			defer f.Close() // after the profile is written: defers run last first
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	if err := rootCmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "perflab:", err)
		return 1
	}
	return 0
}
