// Package settings is the simulated engine's settings besides the engine's
// own argv (serve.Settings), and their two encodings: `perflab sim serve`
// flags and the simulated image's environment. It imports nothing of
// perflab's, so the engine package (which starts sim serve) and the image
// (which reads its environment) share it without importing the simulator.
package settings

import (
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

// Settings are what the simulator is told besides the engine's argv.
type Settings struct {
	// GPU is the simulated GPU model; GPUs its count (0 = TP×DP).
	GPU  string
	GPUs int
	// TimeScale runs the simulated engine K× faster than real time
	// (0 = sim serve's default, 1).
	TimeScale float64
	// StartupDelay is the simulated model load. As flags 0 means none
	// ("0s") and DefaultStartupDelay is left to sim serve's default; in a
	// container's environment 0 is left out and the image's default
	// applies (DefaultStartupDelay), as the sim runtime's labs start
	// servers at once and an image's users get the engine's pause.
	StartupDelay time.Duration
	// Tokenizer, ModelConfig and Coefficients are paths: a tokenizer
	// directory or file, an HF config.json, a calibration file.
	Tokenizer, ModelConfig, Coefficients string
	// NoFaults turns off the engine bugs the simulator reproduces.
	NoFaults bool
}

// DefaultStartupDelay is the simulated model load when none is given.
const DefaultStartupDelay = 5 * time.Second

// DefaultGPU is the simulated image's GPU when its environment names none.
const DefaultGPU = "H100"

// Flag names of `perflab sim serve` (without the leading "--").
const (
	FlagEngine        = "engine"
	FlagEngineVersion = "engine-version"
	FlagGPU           = "gpu"
	FlagGPUs          = "gpus"
	FlagTimeScale     = "time-scale"
	FlagStartupDelay  = "startup-delay"
	FlagTokenizer     = "tokenizer"
	FlagModelConfig   = "model-config"
	FlagCoefficients  = "coefficients"
	FlagNoFaults      = "no-faults"
)

// The settings in the simulated image's environment (the container
// runtime's Env); each is optional.
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

// field is one setting in both encodings.
type field struct {
	flag, env string
	get       func(s *Settings) string
	set       func(s *Settings, v string) error
	// notEnv: left out of the environment.
	notEnv func(s *Settings) bool
}

var fields = []field{
	{flag: FlagGPU, env: EnvGPU, get: func(s *Settings) string { return s.GPU },
		set: func(s *Settings, v string) error { s.GPU = v; return nil }},
	{flag: FlagGPUs, env: EnvGPUs, get: func(s *Settings) string { return itoa(s.GPUs) },
		set: func(s *Settings, v string) (err error) { s.GPUs, err = strconv.Atoi(v); return err }},
	{flag: FlagTimeScale, env: EnvTimeScale, get: func(s *Settings) string {
		if s.TimeScale == 0 {
			return ""
		}
		return strconv.FormatFloat(s.TimeScale, 'f', -1, 64)
	}, set: func(s *Settings, v string) (err error) { s.TimeScale, err = strconv.ParseFloat(v, 64); return err }},
	{flag: FlagStartupDelay, env: EnvStartupDelay, get: func(s *Settings) string {
		if s.StartupDelay == DefaultStartupDelay {
			return ""
		}
		return s.StartupDelay.String()
	}, notEnv: func(s *Settings) bool { return s.StartupDelay <= 0 }, set: func(s *Settings, v string) (err error) { s.StartupDelay, err = time.ParseDuration(v); return err }},
	{flag: FlagTokenizer, env: EnvTokenizer, get: func(s *Settings) string { return s.Tokenizer },
		set: func(s *Settings, v string) error { s.Tokenizer = v; return nil }},
	{flag: FlagModelConfig, env: EnvModelConfig, get: func(s *Settings) string { return s.ModelConfig },
		set: func(s *Settings, v string) error { s.ModelConfig = v; return nil }},
	{flag: FlagCoefficients, env: EnvCoefficients, get: func(s *Settings) string { return s.Coefficients },
		set: func(s *Settings, v string) error { s.Coefficients = v; return nil }},
}

func itoa(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// Args are the settings as `perflab sim serve` flags, in a fixed order;
// a zero setting is left out, except the startup delay ("0s": none),
// which is left out at its default.
func (s Settings) Args() []string {
	var out []string
	for _, f := range fields {
		if v := f.get(&s); v != "" {
			out = append(out, "--"+f.flag, v)
		}
	}
	if s.NoFaults {
		out = append(out, "--"+FlagNoFaults)
	}
	return out
}

// Env is the settings as the simulated image's environment, zeros left
// out, paths as they are (Container mounts host files and rewrites them).
func (s Settings) Env() map[string]string {
	env := map[string]string{}
	for _, f := range fields {
		if f.notEnv != nil && f.notEnv(&s) {
			continue
		}
		if v := f.get(&s); v != "" {
			env[f.env] = v
		}
	}
	if s.NoFaults {
		env[EnvNoFaults] = "1"
	}
	return env
}

// FromEnv reads the settings from the simulated image's environment: the
// GPU defaults to DefaultGPU and the startup delay to DefaultStartupDelay;
// a malformed number is an error that names its variable.
func FromEnv(getenv func(string) string) (Settings, error) {
	s := Settings{GPU: DefaultGPU, StartupDelay: DefaultStartupDelay}
	for _, f := range fields {
		v := getenv(f.env)
		if v == "" {
			continue
		}
		if err := f.set(&s, v); err != nil {
			return Settings{}, fmt.Errorf("simulated engine image: %s=%q: %w", f.env, v, err)
		}
	}
	if nf := getenv(EnvNoFaults); nf != "" && nf != "0" && nf != "false" {
		s.NoFaults = true
	}
	return s, nil
}

// dir is where Container mounts the settings' host files.
const dir = "/perflab/sim"

// Container is Env for a container of the simulated image, with the host
// files the settings name (tokenizer, model config, calibration) mounted
// read-only under /perflab/sim: the container runtime's Env and Volumes
// ("HOST:CONTAINER:ro").
func (s Settings) Container() (env map[string]string, volumes []string) {
	in := s
	for _, f := range []struct {
		path *string
		name string
	}{{&in.Tokenizer, "tokenizer"}, {&in.ModelConfig, "model-config"}, {&in.Coefficients, "coefficients"}} {
		if *f.path == "" {
			continue
		}
		abs, err := filepath.Abs(*f.path)
		if err != nil {
			abs = *f.path
		}
		c := dir + "/" + f.name
		if ext := filepath.Ext(abs); ext != "" {
			// A file keeps its name's extension (tokenizer.json).
			c += ext
		}
		*f.path = c
		volumes = append(volumes, abs+":"+c+":ro")
	}
	return in.Env(), volumes
}
