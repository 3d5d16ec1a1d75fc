package main

import (
	"fmt"
	"os"

	"github.com/perflab/perflab/internal/simimage"
)

// Inside the simulated engine image, perflab also runs as the engines'
// programs (vllm, python3, trtllm-serve, linked to it): such a call becomes
// `perflab sim serve` with the engine's own argv. Done in init, before
// main parses anything, so main needs no branch for it.
func init() {
	args, ok, err := simimage.EntryArgs(os.Args, os.Getenv)
	if !ok {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(127)
	}
	rootCmd.SetArgs(args)
}
