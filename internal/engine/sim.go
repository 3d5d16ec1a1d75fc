package engine

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/perflab/perflab/internal/sim/serve/settings"
)

// Sim runs the embedded simulator as a real server process:
//
//	<Binary> sim serve --engine E --engine-version V --gpu G --gpus N
//	    --time-scale K --startup-delay D [--tokenizer P] [--coefficients F] -- <engine argv with --host/--port>
//
// so the full pipeline (render, launch, readiness, benchmark, teardown) runs
// on a CPU. The simulator reads the engine's own argv and env, exactly as the
// real engine would.
type Sim struct {
	// Binary is the perflab executable; empty means os.Executable().
	Binary string
	// GPU is the simulated GPU model, e.g. "H100-SXM-80GB" (required).
	GPU string
	// GPUs is the simulated GPU count; 0 means len(Launch.GPUs), or
	// TP×DP of the config, or 1.
	GPUs int
	// TimeScale speeds simulated time up (K > 1) or down; 0 means 1.
	TimeScale float64
	// StartupDelay is the simulated model-load time.
	StartupDelay time.Duration
	// Tokenizer is a tokenizer directory or file for the simulator.
	Tokenizer string
	// Coefficients is a calibration file from `perflab sim calibrate`
	// (empty: the embedded calibration).
	Coefficients string
	// LogLines and PollInterval as for Process.
	LogLines     int
	PollInterval time.Duration
}

var _ Runtime = (*Sim)(nil)

// Start implements Runtime.
func (s *Sim) Start(ctx context.Context, l Launch) (Handle, error) {
	bin := s.Binary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("engine: sim: find perflab binary: %w", err)
		}
		bin = exe
	}
	if s.GPU == "" {
		return nil, fmt.Errorf("engine: sim: GPU model is required")
	}
	wrap := func(l Launch, argv []string) []string {
		return append(s.prefix(bin, l), append([]string{"--"}, argv...)...)
	}
	return startProcess(ctx, l, wrap, s.LogLines, s.PollInterval)
}

// prefix is the `perflab sim serve ...` part before "--".
func (s *Sim) prefix(bin string, l Launch) []string {
	n := s.GPUs
	if n == 0 {
		n = len(l.GPUs)
	}
	if n == 0 {
		n = max(l.Config.TensorParallel, 1) * max(l.Config.DataParallel, 1)
	}
	scale := s.TimeScale
	if scale == 0 {
		scale = 1
	}
	out := []string{bin, "sim", "serve",
		"--" + settings.FlagEngine, l.Config.Engine,
		"--" + settings.FlagEngineVersion, l.Config.EffectiveVersion(),
	}
	out = append(out, settings.Settings{GPU: s.GPU, GPUs: n, TimeScale: scale, StartupDelay: s.StartupDelay,
		Tokenizer: s.Tokenizer, Coefficients: s.Coefficients}.Args()...)
	return out
}
