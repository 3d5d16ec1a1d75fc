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
	"strconv"
	"strings"
	"time"

	"github.com/perflab/perflab/internal/engine"
)

// EnvMarker is set in the simulated image; only there do the engines'
// names run the simulator, so a perflab binary renamed by accident does
// not pretend to be vLLM.
const EnvMarker = "PERFLAB_SIM_IMAGE"

// The simulator's settings inside the image, read from the container's
// environment (the docker runtime's Env); each is optional.
const (
	EnvGPU          = "PERFLAB_SIM_GPU"           // GPU model (default H100)
	EnvGPUs         = "PERFLAB_SIM_GPUS"          // GPU count (default TP×DP)
	EnvTimeScale    = "PERFLAB_SIM_TIME_SCALE"    // K× faster than real time
	EnvStartupDelay = "PERFLAB_SIM_STARTUP_DELAY" // simulated load time, e.g. 2s
	EnvTokenizer    = "PERFLAB_SIM_TOKENIZER"     // tokenizer dir or file (mounted)
	EnvModelConfig  = "PERFLAB_SIM_MODEL_CONFIG"  // HF config.json (mounted)
	EnvCoefficients = "PERFLAB_SIM_COEFFICIENTS"  // calibration file (mounted)
	EnvNoFaults     = "PERFLAB_SIM_NO_FAULTS"     // "1": no reproduced engine bugs
)

// entryNames are the engines' programs the image provides.
var entryNames = []string{"vllm", "sglang", "python3", "python", "trtllm-serve"}

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
	args = []string{"sim", "serve", "--engine", eng}
	if v := getenv(engine.EnvEngineVersion); v != "" {
		args = append(args, "--engine-version", v)
	}
	gpu := getenv(EnvGPU)
	if gpu == "" {
		gpu = "H100"
	}
	args = append(args, "--gpu", gpu)
	for _, s := range []struct{ env, flag string }{
		{EnvGPUs, "--gpus"}, {EnvTimeScale, "--time-scale"}, {EnvStartupDelay, "--startup-delay"},
		{EnvTokenizer, "--tokenizer"}, {EnvModelConfig, "--model-config"}, {EnvCoefficients, "--coefficients"},
	} {
		v := getenv(s.env)
		if v == "" {
			continue
		}
		if err := checkSetting(s.env, v); err != nil {
			return nil, true, err
		}
		args = append(args, s.flag, v)
	}
	if nf := getenv(EnvNoFaults); nf != "" && nf != "0" && nf != "false" {
		args = append(args, "--no-faults")
	}
	// The program as the engine was called; sim serve checks its spelling.
	argv = slices.Clone(argv)
	argv[0] = filepath.Base(argv[0])
	return append(append(args, "--"), argv...), true, nil
}

// checkSetting rejects a malformed numeric setting with its variable's
// name, before sim serve would name only its flag.
func checkSetting(env, v string) error {
	var err error
	switch env {
	case EnvGPUs:
		_, err = strconv.Atoi(v)
	case EnvTimeScale:
		_, err = strconv.ParseFloat(v, 64)
	case EnvStartupDelay:
		_, err = time.ParseDuration(v)
	}
	if err != nil {
		return fmt.Errorf("simulated engine image: %s=%q: %w", env, v, err)
	}
	return nil
}

// engineOf names the engine an argv starts, or "".
func engineOf(argv []string) string {
	if k, ok := engine.KindOfCommand(argv); ok {
		return k.Name
	}
	return ""
}
