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
	"syscall"

	"github.com/spf13/cobra"
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

func main() {
	// Cancel on SIGINT/SIGTERM so every subcommand tears down what it started.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := rootCmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "perflab:", err)
		os.Exit(1)
	}
}
