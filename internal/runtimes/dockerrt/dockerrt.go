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

// dockerKind runs each server as a container of the engine's official image
// through the Docker Engine API (podman's too), on the host's GPUs. A spec
// whose images are the simulated engine image gets simKind instead
// (Specialize), so no method here asks which of the two it is.
type dockerKind struct{}

// simKind is docker on the simulated engine image: the simulator on a
// compressed clock in containers, without GPUs. It has the sim runtime's
// traits (clock, counted GPUs, start-up) and docker's transport.
type simKind struct {
	dockerKind
	sim runtimes.Kind
}

var (
	_ runtimes.Kind            = dockerKind{}
	_ runtimes.Specializer     = dockerKind{}
	_ runtimes.Cleaner         = dockerKind{}
	_ runtimes.Kind            = simKind{}
	_ runtimes.SettingsDecoder = dockerKind{}
)

// Settings are the docker runtime's settings: a spec's
// `runtime: {kind: docker, settings: {...}}`, or its top-level images:
// and volumes:.
type Settings struct {
	// Images overrides the container image per engine.
	Images map[string]string `yaml:"images,omitempty"`
	// Volumes are extra bind mounts "HOST:CONTAINER[:ro]" of every
	// engine container.
	Volumes []string `yaml:"volumes,omitempty"`
}

// DecodeSettings reads the engines' images and the containers' extra
// bind mounts.
func (dockerKind) DecodeSettings(decode func(any) error) (any, error) {
	var d Settings
	if err := decode(&d); err != nil {
		return nil, err
	}
	return d, nil
}

// FromStored takes images: and volumes:; a cluster's settings
// (kubernetes:) are not docker's.
func (dockerKind) FromStored(st runtimes.Stored) (any, error) {
	if err := runtimes.Unused(runtimes.Docker, st, "images", "volumes"); err != nil {
		return nil, err
	}
	return Settings{Images: st.Images, Volumes: st.Volumes}, nil
}

// Store is the stored form of Settings.
func (dockerKind) Store(v any) runtimes.Stored {
	d, _ := runtimes.SettingsOf[Settings](runtimes.Docker, v)
	return runtimes.Stored{Images: d.Images, Volumes: d.Volumes}
}

func (dockerKind) Name() string { return runtimes.Docker }
func (dockerKind) Summary() string {
	return "the engines' official images as containers on this host's GPUs (Docker or podman), or the simulated engine image"
}
func (dockerKind) Servers() bool             { return true }
func (dockerKind) Simulated() bool           { return false }
func (dockerKind) Noisy() bool               { return false }
func (dockerKind) DefaultTimeScale() float64 { return 0 }
func (dockerKind) StartupSeconds() float64 {
	return runtimes.Builtin(runtimes.Process).StartupSeconds()
}
func (dockerKind) GPUs(ctx context.Context, count int) (*engine.Allocator, error) {
	return runtimes.HostGPUs(ctx, count)
}
func (dockerKind) Provenance() string { return "" }

// New returns the docker runtime: the spec's images and volumes, its
// containers labelled with the run key.
func (dockerKind) New(env runtimes.Env) (engine.Runtime, error) {
	s, err := runtimes.SettingsOf[Settings](runtimes.Docker, env.Settings)
	if err != nil {
		return nil, err
	}
	rt := &docker.Runtime{Images: maps.Clone(s.Images), Volumes: slices.Clone(s.Volumes)}
	if env.Run != "" {
		rt.Labels = map[string]string{docker.LabelRun: env.Run}
	}
	return rt, nil
}

func newSimKind() simKind { return simKind{sim: runtimes.Builtin(runtimes.Sim)} }

func (k simKind) Simulated() bool           { return k.sim.Simulated() }
func (k simKind) Noisy() bool               { return k.sim.Noisy() }
func (k simKind) DefaultTimeScale() float64 { return k.sim.DefaultTimeScale() }
func (k simKind) StartupSeconds() float64   { return k.sim.StartupSeconds() }
func (k simKind) GPUs(ctx context.Context, count int) (*engine.Allocator, error) {
	return k.sim.GPUs(ctx, count)
}
func (simKind) Provenance() string {
	return "measured over HTTP against the simulated engine image in containers, not on GPUs"
}

// New is docker's runtime with the simulator's settings as the containers'
// environment (its host files mounted) and no GPU devices or ulimits (it
// needs neither, and an unprivileged daemon refuses ulimits).
func (k simKind) New(env runtimes.Env) (engine.Runtime, error) {
	if env.GPU == "" {
		return nil, fmt.Errorf("runtimes: docker: the simulated GPU type is required")
	}
	r, err := k.dockerKind.New(env)
	if err != nil {
		return nil, err
	}
	rt := r.(*docker.Runtime)
	simEnv, vols := settings.Settings{GPU: env.GPU, TimeScale: env.TimeScale, StartupDelay: env.StartupDelay,
		Tokenizer: env.Tokenizer, Coefficients: env.Coefficients}.Container()
	rt.Env = simEnv
	rt.Volumes = append(rt.Volumes, vols...)
	rt.NoGPU, rt.NoUlimits = true, true
	return rt, nil
}

// Specialize looks at the images the spec's engines run in: all of them the
// simulated engine image makes a simulated kind; none of them, the real
// one. A mix is refused, as its figures would be neither. It asks the
// daemon only when the spec overrides an image: an official image is
// never the simulated one.
func (dockerKind) Specialize(ctx context.Context, c runtimes.Choice) (runtimes.Kind, error) {
	s, err := runtimes.SettingsOf[Settings](runtimes.Docker, c.Settings)
	if err != nil {
		return nil, err
	}
	if len(s.Images) == 0 {
		return dockerKind{}, nil
	}
	rt := &docker.Runtime{Images: s.Images}
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
	if len(sim) > 0 {
		return newSimKind(), nil
	}
	return dockerKind{}, nil
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
