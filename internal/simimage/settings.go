package simimage

import "github.com/perflab/perflab/internal/sim/serve/settings"

// Settings are the simulator's settings (serve.Settings, defined in
// sim/serve/settings), which a container of the image gets as its
// environment (Settings.Container) and EntryArgs turns back into `perflab
// sim serve` flags.
type Settings = settings.Settings

// The simulator's settings inside the image, read from the container's
// environment; each is optional. They are settings' names, kept here for
// the image's callers.
const (
	EnvGPU          = settings.EnvGPU
	EnvGPUs         = settings.EnvGPUs
	EnvTimeScale    = settings.EnvTimeScale
	EnvStartupDelay = settings.EnvStartupDelay
	EnvTokenizer    = settings.EnvTokenizer
	EnvModelConfig  = settings.EnvModelConfig
	EnvCoefficients = settings.EnvCoefficients
	EnvNoFaults     = settings.EnvNoFaults
)
