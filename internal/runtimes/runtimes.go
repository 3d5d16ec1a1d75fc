// Package runtimes is the one place where runtimes are named. Each name
// (sim-predict, sim, process, docker, kubernetes)
// maps to a Kind: the traits the lab plans and keys a run by, the GPUs its
// trials are handed, and the engine.Runtime that starts its servers. The lab and the CLI ask a Kind what they need to know and never
// compare a runtime's name.
package runtimes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/perflab/perflab/internal/engine"
)

// Env is what a runtime's servers need from the spec and the command line:
// what every runtime may read (the simulator's clock and files, the run
// key), and the runtime's own settings as an opaque value.
type Env struct {
	// GPU is the GPU type the simulator models (sim runtime).
	GPU string
	// TimeScale is the sim runtime's clock speed-up.
	TimeScale float64
	// Tokenizer is a local tokenizer directory or file for the simulator
	// ("" when the spec names a Hub id).
	Tokenizer string
	// Coefficients is a calibration file for the simulator.
	Coefficients string
	// StartupDelay is the simulated model load (sim runtime).
	StartupDelay time.Duration
	// Binary is the perflab executable the sim runtime starts (default:
	// this one).
	Binary string
	// Settings are the runtime's own settings, as its SettingsDecoder
	// made them (SettingsFor); only that runtime reads them, and nil means
	// none.
	Settings any
	// Run is the run key the servers are tagged with, where the runtime
	// can tag them, so that a later lab of the run finds what a killed one
	// left.
	Run string
}

// Choice is what a spec runs, for a Specializer: the engines it uses
// (name → version) and the runtime's own settings (SettingsFor).
type Choice struct {
	Engines  map[string]string
	Settings any
}

// Specializer is a Kind whose traits depend on what a spec runs: the docker
// runtime measures GPUs on the engines' images and the simulator on the
// simulated engine image. Specialize returns the Kind for that spec; the
// caller keeps it with the spec (lab.Spec.SetRuntimeKind).
type Specializer interface {
	Specialize(ctx context.Context, c Choice) (Kind, error)
}

// Cleaner is a Kind whose servers can outlive perflab (containers): Cleanup
// removes those still there, a run's (by its key) or every one perflab
// started when run is "", for `perflab engine cleanup`.
type Cleaner interface {
	Cleanup(ctx context.Context, run string) ([]string, error)
}

// Kind is one runtime: what the lab must know about it, and how to start
// its servers.
type Kind interface {
	// Name is the runtime's name in specs and on the command line.
	Name() string
	// Summary says in a few words what it runs, for help texts.
	Summary() string
	// Servers says whether a trial starts a server and holds GPUs while
	// it runs (false: the trial is a prediction made in process).
	Servers() bool
	// Simulated says whether its figures come from the simulator, whose
	// fingerprint is then part of the run key.
	Simulated() bool
	// Noisy says whether the spec's seeded noise applies (its figures are
	// otherwise deterministic).
	Noisy() bool
	// DefaultTimeScale is its clock's speed-up when the spec sets none;
	// 0 when it runs in real time (the spec's time scale does not apply).
	DefaultTimeScale() float64
	// StartupSeconds is the expected start of one server, for the ETA.
	StartupSeconds() float64
	// GPUs returns the allocator that hands trials their devices, for a
	// spec that may use count of them; nil for a runtime without servers.
	GPUs(ctx context.Context, count int) (*engine.Allocator, error)
	// New returns the engine runtime that starts its servers; nil for a
	// runtime without servers.
	New(env Env) (engine.Runtime, error)
	// Provenance says where its figures come from, for a report to print
	// next to them ("" for measurements on GPUs).
	Provenance() string
}

// Names of the runtimes. The first three are built in; docker and
// kubernetes are registered by their packages (dockerrt, kubert) when a
// program imports them, as database/sql drivers are, so that a package
// that only looks runtimes up links neither the Docker client nor
// client-go.
const (
	SimPredict = "sim-predict"
	Sim        = "sim"
	Process    = "process"
	Docker     = "docker"
	Kubernetes = "kubernetes"
)

// registry holds every runtime, by name.
var registry = struct {
	sync.RWMutex
	kinds map[string]Kind
}{kinds: map[string]Kind{
	SimPredict: predictKind{},
	Sim:        simKind{},
	Process:    processKind{},
}}

// Register makes a runtime available by its name, as sql.Register does a
// driver: a runtime's package calls it from init. A nil Kind or a second
// Kind of one name is a programming error and panics.
func Register(k Kind) {
	if k == nil {
		panic("runtimes: Register of a nil Kind")
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.kinds[k.Name()]; dup {
		panic("runtimes: Register called twice for " + k.Name())
	}
	registry.kinds[k.Name()] = k
}

// Builtin is the built-in runtime named name (sim-predict, sim; any other
// name: process), whose traits a registered runtime may share: the docker
// runtime on the simulated image keeps the sim runtime's clock.
func Builtin(name string) Kind {
	switch name {
	case SimPredict:
		return predictKind{}
	case Sim:
		return simKind{}
	}
	return processKind{}
}

// Cleaners are the runtimes whose servers can outlive perflab.
func Cleaners() []Cleaner {
	var out []Cleaner
	for _, n := range Names() {
		k, _ := Lookup(n)
		if c, ok := k.(Cleaner); ok {
			out = append(out, c)
		}
	}
	return out
}

// Lookup returns the runtime named name, or an error that lists the names.
func Lookup(name string) (Kind, error) {
	registry.RLock()
	k, ok := registry.kinds[name]
	registry.RUnlock()
	if ok {
		return k, nil
	}
	return nil, fmt.Errorf("runtime %q: want %s", name, strings.Join(Names(), ", "))
}

// Names lists the runtimes, sorted.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.kinds))
	for n := range registry.kinds {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Default is the runtime a spec gets when it names none.
const Default = SimPredict

// predictKind predicts each trial in process with the simulator.
type predictKind struct{}

func (predictKind) Name() string { return SimPredict }
func (predictKind) Summary() string {
	return "the simulator, in process: no server, no GPU, seconds for a lab"
}
func (predictKind) Servers() bool             { return false }
func (predictKind) Simulated() bool           { return true }
func (predictKind) Noisy() bool               { return true }
func (predictKind) DefaultTimeScale() float64 { return 0 }
func (predictKind) StartupSeconds() float64   { return 0 }
func (predictKind) GPUs(context.Context, int) (*engine.Allocator, error) {
	return nil, nil
}
func (predictKind) New(Env) (engine.Runtime, error) { return nil, nil }
func (predictKind) Provenance() string {
	return "the calibrated simulator's predictions, not GPU measurements"
}

// simKind starts `perflab sim serve` as a local process per server, on a
// compressed clock, with simulated GPUs.
type simKind struct{}

func (simKind) Name() string { return Sim }
func (simKind) Summary() string {
	return "the simulator as a real server process over HTTP, time-scaled"
}
func (simKind) Servers() bool             { return true }
func (simKind) Simulated() bool           { return true }
func (simKind) Noisy() bool               { return false }
func (simKind) DefaultTimeScale() float64 { return 20 }
func (simKind) StartupSeconds() float64   { return 2 }

// GPUs are the indices 0..count-1: the simulator only counts them, so each
// lab has its own.
func (simKind) GPUs(_ context.Context, count int) (*engine.Allocator, error) {
	ids := make([]int, max(count, 1))
	for i := range ids {
		ids[i] = i
	}
	return engine.NewAllocator(ids), nil
}

func (simKind) Provenance() string {
	return "measured over HTTP against the simulator running as real server processes, not on GPUs"
}

func (simKind) New(env Env) (engine.Runtime, error) {
	if env.GPU == "" {
		return nil, fmt.Errorf("runtimes: sim: the simulated GPU type is required")
	}
	return &engine.Sim{Binary: env.Binary, GPU: env.GPU, TimeScale: env.TimeScale, StartupDelay: env.StartupDelay,
		Tokenizer: env.Tokenizer, Coefficients: env.Coefficients}, nil
}

// processKind starts the real engines as local processes on this host's
// GPUs.
type processKind struct{}

func (processKind) Name() string              { return Process }
func (processKind) Summary() string           { return "the real engines as local processes on this host's GPUs" }
func (processKind) Servers() bool             { return true }
func (processKind) Simulated() bool           { return false }
func (processKind) Noisy() bool               { return false }
func (processKind) DefaultTimeScale() float64 { return 0 }
func (processKind) StartupSeconds() float64   { return 180 }
func (processKind) GPUs(ctx context.Context, count int) (*engine.Allocator, error) {
	return HostGPUs(ctx, count)
}
func (processKind) New(Env) (engine.Runtime, error) { return &engine.Process{}, nil }
func (processKind) Provenance() string              { return "" }

// host is this process's one allocator of the host's real GPUs, shared by
// every lab and every runtime that runs on them, so two labs in one
// process never both hand out GPU 0.
var host struct {
	once  sync.Once
	alloc *engine.Allocator
	gpus  []engine.GPU
	err   error
}

// HostGPUs returns the process-wide allocator of the host's GPUs, after
// checking that the host has at least count of them (nvidia-smi lists
// them).
func HostGPUs(ctx context.Context, count int) (*engine.Allocator, error) {
	host.once.Do(func() {
		host.gpus, host.err = engine.DiscoverGPUs(ctx)
		if host.err != nil {
			return
		}
		ids := make([]int, len(host.gpus))
		for i, g := range host.gpus {
			ids[i] = g.Index
		}
		host.alloc = engine.NewAllocator(ids)
	})
	n := max(count, 1)
	if host.err != nil {
		return nil, fmt.Errorf("runtimes: %d GPUs wanted: discover GPUs: %w", n, host.err)
	}
	if len(host.gpus) < n {
		return nil, fmt.Errorf("runtimes: %d GPUs wanted but nvidia-smi lists %d", n, len(host.gpus))
	}
	return host.alloc, nil
}
