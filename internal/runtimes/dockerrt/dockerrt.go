// Package dockerrt is the docker runtime: each server a container through
// the Docker Engine API. It registers itself with package runtimes when
// imported (cmd/perflab's main does), so that the lab and the reports,
// which only ask runtimes.Lookup, never link the Docker client.
package dockerrt

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/engine/docker"
	"github.com/perflab/perflab/internal/runtimes"
	"github.com/perflab/perflab/internal/sim/serve/settings"
)

func init() { runtimes.Register(dockerKind{}) }

// dockerKind runs each server as a container through the Docker Engine API
// (podman's too). What it measures depends on the images: the engines' own
// (GPU measurements) or the simulated engine image (the simulator, on a
// compressed clock, without GPUs). Specialize tells them apart, so the
// registry's entry is the real-engine one until a spec is looked at.
type dockerKind struct {
	// simulated: every image the spec uses is the simulated engine image.
	simulated bool
}

var (
	_ runtimes.Kind        = dockerKind{}
	_ runtimes.Specializer = dockerKind{}
	_ runtimes.Cleaner     = dockerKind{}
)

func (dockerKind) Name() string { return runtimes.Docker }
func (dockerKind) Summary() string {
	return "the engines' official images as containers on this host's GPUs (Docker or podman), or the simulated engine image"
}
func (dockerKind) Servers() bool     { return true }
func (k dockerKind) Simulated() bool { return k.simulated }
func (dockerKind) Noisy() bool       { return false }
func (k dockerKind) DefaultTimeScale() float64 {
	if k.simulated {
		return runtimes.Builtin(runtimes.Sim).DefaultTimeScale()
	}
	return 0
}
func (k dockerKind) StartupSeconds() float64 {
	if k.simulated {
		return runtimes.Builtin(runtimes.Sim).StartupSeconds()
	}
	return runtimes.Builtin(runtimes.Process).StartupSeconds()
}

func (k dockerKind) GPUs(ctx context.Context, count int) (*engine.Allocator, error) {
	if k.simulated {
		return runtimes.Builtin(runtimes.Sim).GPUs(ctx, count)
	}
	return runtimes.HostGPUs(ctx, count)
}

func (k dockerKind) Provenance() string {
	if k.simulated {
		return "measured over HTTP against the simulated engine image in containers, not on GPUs"
	}
	return ""
}

// New returns the docker runtime: the spec's images and volumes, its
// containers labelled with the run key; on the simulated image, the
// simulator's settings as the containers' environment and no GPU devices
// or ulimits (it needs neither, and an unprivileged daemon refuses
// ulimits).
func (k dockerKind) New(env runtimes.Env) (engine.Runtime, error) {
	rt := &docker.Runtime{Images: maps.Clone(env.Images), Volumes: slices.Clone(env.Volumes)}
	if env.Run != "" {
		rt.Labels = map[string]string{docker.LabelRun: env.Run}
	}
	if k.simulated {
		if env.GPU == "" {
			return nil, fmt.Errorf("runtimes: docker: the simulated GPU type is required")
		}
		simEnv, vols := settings.Settings{GPU: env.GPU, TimeScale: env.TimeScale, StartupDelay: env.StartupDelay,
			Tokenizer: env.Tokenizer, Coefficients: env.Coefficients}.Container()
		rt.Env = simEnv
		rt.Volumes = append(rt.Volumes, vols...)
		rt.NoGPU, rt.NoUlimits = true, true
	}
	return rt, nil
}

// Specialize looks at the images the spec's engines run in: all of them the
// simulated engine image makes a simulated kind; none of them, the real
// one. A mix is refused, as its figures would be neither. It asks the
// daemon only when the spec overrides an image: an official image is
// never the simulated one.
func (k dockerKind) Specialize(ctx context.Context, c runtimes.Choice) (runtimes.Kind, error) {
	if len(c.Images) == 0 {
		return dockerKind{}, nil
	}
	rt := &docker.Runtime{Images: c.Images}
	var sim, real []string
	for _, eng := range slices.Sorted(maps.Keys(c.Engines)) {
		cfg := engine.Config{Engine: eng, Version: c.Engines[eng]}
		img, err := rt.Image(cfg)
		if err != nil {
			return nil, fmt.Errorf("runtimes: docker: %w", err)
		}
		is, err := rt.Simulated(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("runtimes: docker: is %s the simulated engine image? %w", img, err)
		}
		if is {
			sim = append(sim, eng+" "+img)
		} else {
			real = append(real, eng+" "+img)
		}
	}
	if len(sim) > 0 && len(real) > 0 {
		return nil, fmt.Errorf("runtimes: docker: images: %s run the simulated engine image but %s do not; give the simulated image for every engine or for none",
			strings.Join(sim, ", "), strings.Join(real, ", "))
	}
	return dockerKind{simulated: len(sim) > 0}, nil
}

// Cleanup removes the containers perflab started that are still there: a
// run's (run is its key), or every one when run is "".
func (dockerKind) Cleanup(ctx context.Context, run string) ([]string, error) {
	var labels map[string]string
	if run != "" {
		labels = map[string]string{docker.LabelRun: run}
	}
	return (&docker.Runtime{}).Cleanup(ctx, labels)
}
