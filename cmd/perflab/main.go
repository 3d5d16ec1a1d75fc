// Command perflab is a performance lab for LLM serving: it deploys inference
// engines (or the embedded simulator), benchmarks them the way
// `vllm bench serve` does, searches engine configurations and writes the report.
//
// This package is wiring only: one file per subcommand, each with a
// constructor (newBenchCmd, ...) that newRootCmd calls to build the tree.
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
	"github.com/perflab/perflab/internal/simimage"
)

// defaultDB is where lab results live unless --db says otherwise: SQLite in
// the current directory, so the README's commands need no set-up.
const defaultDB = "sqlite:.perflab/perflab.db"

// newRootCmd builds the whole command tree, each command from its
// constructor: a tree shares no state with another (TestTreeBuildsTwice).
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "perflab",
		Short:         "A performance lab for LLM serving (vLLM, SGLang, TensorRT-LLM, simulator)",
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("perflab {{.Version}}\n")
	root.AddCommand(
		newBenchCmd(),
		newDoctorCmd(),
		newEngineCmd(),
		newLabCmd(),
		newReportCmd(),
		newRunsCmd("runs"),
		newServeCmd(),
		newSimCmd(),
		newTokenizeCmd(),
	)
	return root
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
	// SIGINT/SIGTERM tear down every engine process group this process
	// started, whatever subcommand is running.
	engine.InstallSignalHandler()
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
	root := newRootCmd()
	// Inside the simulated engine image perflab also runs as the engines'
	// programs: such a call becomes `perflab sim serve` with their argv.
	if args, ok, err := simimage.EntryArgs(os.Args, os.Getenv); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 127
		}
		root.SetArgs(args)
	}
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "perflab:", err)
		return 1
	}
	return 0
}
