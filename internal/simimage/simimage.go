// Package simimage builds the simulated engine image: a container image,
// made on any machine without a registry, whose `vllm`, `python3` (for
// `python3 -m sglang.launch_server`), `sglang` and `trtllm-serve` are
// perflab's simulator taking the engines' own command lines. A lab spec
// runs on it exactly as on the engines' official images; only the image
// changes.
//
// The image holds one perflab binary (with its C libraries when it is not
// static) and links to it under the engines' names; the binary sees which
// name it was run under (EntryArgs) and serves `perflab sim serve` with the
// engine's argv.
package simimage

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/sim/serve/settings"
)

// EnvMarker is set in the simulated image; only there do the engines'
// names run the simulator, so a perflab binary renamed by accident does
// not pretend to be vLLM.
const EnvMarker = "PERFLAB_SIM_IMAGE"

// entryNames are the engines' programs the image provides: those of the
// registered engines.
var entryNames = engine.ServerPrograms()

// EntryNames lists the programs the image links to perflab.
func EntryNames() []string { return slices.Clone(entryNames) }

// EntryError is an engine entry point run with a command the simulator
// does not serve (`python3 -c ...`).
type EntryError struct{ Argv []string }

func (e *EntryError) Error() string {
	return fmt.Sprintf("simulated engine image: %q is not an engine server command this image serves (vllm serve, python3 -m sglang.launch_server, sglang serve, trtllm-serve)",
		strings.Join(e.Argv[:min(len(e.Argv), 3)], " "))
}

// EntryArgs reads a process's argv: when it runs under one of the engines'
// names inside the simulated image, it returns perflab's own arguments for
// `perflab sim serve` with that engine's argv, the engine picked from the
// argv and the settings from the environment; ok is false otherwise.
func EntryArgs(argv []string, getenv func(string) string) (args []string, ok bool, err error) {
	if len(argv) == 0 || getenv(EnvMarker) == "" || !slices.Contains(entryNames, filepath.Base(argv[0])) {
		return nil, false, nil
	}
	eng := engineOf(argv)
	if eng == "" {
		return nil, true, &EntryError{Argv: argv}
	}
	set, err := settings.FromEnv(getenv)
	if err != nil {
		return nil, true, err
	}
	args = []string{"sim", "serve", "--" + settings.FlagEngine, eng}
	if v := getenv(engine.EnvEngineVersion); v != "" {
		args = append(args, "--"+settings.FlagEngineVersion, v)
	}
	args = append(args, set.Args()...)
	// The program as the engine was called; sim serve checks its spelling.
	argv = slices.Clone(argv)
	argv[0] = filepath.Base(argv[0])
	return append(append(args, "--"), argv...), true, nil
}

// engineOf names the engine an argv starts, or "".
func engineOf(argv []string) string {
	if k, ok := engine.KindOfCommand(argv); ok {
		return k.Name
	}
	return ""
}
