package simimage

import (
	"path/filepath"
	"strconv"
	"time"
)

// Settings are the simulator's settings for a container of the simulated
// image: what the sim runtime passes as `perflab sim serve` flags, given
// instead as the container's environment, with the host files it names
// mounted read-only.
type Settings struct {
	// GPU is the simulated GPU model ("" = H100); GPUs its count (0 = TP×DP).
	GPU  string
	GPUs int
	// TimeScale runs the simulated engine K× faster than real time (0 = 1).
	TimeScale float64
	// StartupDelay is the simulated model load (0 = sim serve's default).
	StartupDelay time.Duration
	// Tokenizer, ModelConfig and Coefficients are host paths (a tokenizer
	// directory or file, an HF config.json, a calibration file); each is
	// mounted read-only under /perflab/sim.
	Tokenizer, ModelConfig, Coefficients string
	// NoFaults turns off the engine bugs the simulator reproduces.
	NoFaults bool
}

// simDir is where Settings' host files are mounted in the container.
const simDir = "/perflab/sim"

// Container returns the environment and the bind mounts ("HOST:CONTAINER:ro")
// that give these settings to a container of the image: the docker
// runtime's Env and Volumes.
func (s Settings) Container() (env map[string]string, volumes []string) {
	env = map[string]string{}
	if s.GPU != "" {
		env[EnvGPU] = s.GPU
	}
	if s.GPUs > 0 {
		env[EnvGPUs] = strconv.Itoa(s.GPUs)
	}
	if s.TimeScale > 0 {
		env[EnvTimeScale] = strconv.FormatFloat(s.TimeScale, 'f', -1, 64)
	}
	if s.StartupDelay > 0 {
		env[EnvStartupDelay] = s.StartupDelay.String()
	}
	if s.NoFaults {
		env[EnvNoFaults] = "1"
	}
	for _, f := range []struct{ host, name, env string }{
		{s.Tokenizer, "tokenizer", EnvTokenizer},
		{s.ModelConfig, "model-config", EnvModelConfig},
		{s.Coefficients, "coefficients", EnvCoefficients},
	} {
		if f.host == "" {
			continue
		}
		abs, err := filepath.Abs(f.host)
		if err != nil {
			abs = f.host
		}
		in := simDir + "/" + f.name
		if ext := filepath.Ext(abs); ext != "" {
			// A file keeps its name's extension (tokenizer.json).
			in += ext
		}
		env[f.env] = in
		volumes = append(volumes, abs+":"+in+":ro")
	}
	return env, volumes
}
