package runtimes

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/engine/docker"
	"github.com/perflab/perflab/internal/simimage"
)

// resetHost forgets the discovered GPUs (they are read once a process).
func resetHost(t *testing.T) {
	t.Helper()
	host.once, host.alloc, host.gpus, host.err = sync.Once{}, nil, nil, nil
	t.Cleanup(func() { host.once, host.alloc, host.gpus, host.err = sync.Once{}, nil, nil, nil })
}

// fakeSMI points engine.NvidiaSMI at a script listing GPUs 3, 5 and 6.
func fakeSMI(t *testing.T) {
	t.Helper()
	script := filepath.Join(t.TempDir(), "nvidia-smi")
	body := "#!/bin/sh\nprintf '3, NVIDIA H100 80GB HBM3, 81559, 0\\n5, NVIDIA H100 80GB HBM3, 81559, 0\\n6, NVIDIA H100 80GB HBM3, 81559, 0\\n'\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	old := engine.NvidiaSMI
	engine.NvidiaSMI = script
	t.Cleanup(func() { engine.NvidiaSMI = old })
}

// TestHostGPUsOnePerProcess: the process runtime's GPUs come from one
// allocator per process, so two labs in one process (a server running
// several) never both hand out the same device; a spec wanting more GPUs
// than the host lists is refused, and so is a host without nvidia-smi.
func TestHostGPUsOnePerProcess(t *testing.T) {
	resetHost(t)
	fakeSMI(t)
	k, err := Lookup(Process)
	if err != nil {
		t.Fatal(err)
	}
	a, err := k.GPUs(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.GPUs(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	ga, err := a.Acquire(context.Background(), 2)
	if err != nil || !slices.Equal(ga, []int{3, 5}) {
		t.Fatalf("first lab got %v (%v), want the first two listed [3 5]", ga, err)
	}
	gb, err := b.Acquire(context.Background(), 1)
	if err != nil || !slices.Equal(gb, []int{6}) {
		t.Fatalf("second lab got %v (%v), want [6], the one left", gb, err)
	}
	if _, err := k.GPUs(context.Background(), 8); err == nil || !strings.Contains(err.Error(), "lists 3") {
		t.Fatalf("8 GPUs wanted, 3 listed: err %v", err)
	}
	resetHost(t)
	engine.NvidiaSMI = filepath.Join(t.TempDir(), "absent")
	if _, err := k.GPUs(context.Background(), 1); err == nil {
		t.Fatal("no nvidia-smi: want an error")
	}
}

// TestSimGPUs: the simulator's GPUs are only counted: 0..n-1, per lab.
func TestSimGPUs(t *testing.T) {
	k, _ := Lookup(Sim)
	a, err := k.GPUs(context.Background(), 8)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := a.Acquire(context.Background(), 8)
	if err != nil || !slices.Equal(ids, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("ids %v err %v, want 0..7", ids, err)
	}
}

// TestRegistry: every name resolves to a Kind of that name whose traits
// hang together, and an unknown name is refused with the known ones.
func TestRegistry(t *testing.T) {
	for _, n := range Names() {
		k, err := Lookup(n)
		if err != nil || k.Name() != n {
			t.Fatalf("%s: %v, %v", n, k, err)
		}
		rt, err := k.New(Env{GPU: "H100"})
		if err != nil {
			t.Fatalf("%s: New: %v", n, err)
		}
		if (rt != nil) != k.Servers() {
			t.Errorf("%s: a runtime %v, but Servers() = %v", n, rt, k.Servers())
		}
		if k.Summary() == "" {
			t.Errorf("%s: no summary", n)
		}
	}
	if _, err := Lookup("docker-compose"); err == nil || !strings.Contains(err.Error(), Process) {
		t.Errorf("unknown runtime: err %v, want one listing the names", err)
	}
	if _, err := Lookup(Default); err != nil {
		t.Errorf("the default runtime %q is not registered", Default)
	}
}

// TestDockerKind: the registry's docker entry runs the engines' own images
// on the host's GPUs; specialized on the simulated image, it is the
// simulator in containers: time-scaled, counted GPUs, no GPU devices or
// ulimits, the simulator's settings in the environment, and a provenance
// that says so. A spec that overrides no image never needs the daemon.
func TestDockerKind(t *testing.T) {
	k, err := Lookup(Docker)
	if err != nil {
		t.Fatal(err)
	}
	if k.Simulated() || k.DefaultTimeScale() != 0 || k.Provenance() != "" || k.StartupSeconds() != (processKind{}).StartupSeconds() {
		t.Errorf("docker on the official images: simulated %v, time scale %v, provenance %q", k.Simulated(), k.DefaultTimeScale(), k.Provenance())
	}
	sp, ok := k.(Specializer)
	if !ok {
		t.Fatal("the docker kind does not specialize on its images")
	}
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	real, err := sp.Specialize(context.Background(), Choice{Engines: map[string]string{engine.VLLM: "0.11.0"}})
	if err != nil || real.Simulated() {
		t.Fatalf("no images overridden: %v, %v; want the real kind without asking the daemon", real, err)
	}
	if _, err := sp.Specialize(context.Background(), Choice{Engines: map[string]string{engine.VLLM: "0.11.0"},
		Images: map[string]string{engine.VLLM: "perflab-sim:dev"}}); err == nil || !strings.Contains(err.Error(), "perflab-sim:dev") {
		t.Errorf("an overridden image and no daemon: err %v, want one naming the image", err)
	}

	sim := dockerKind{simulated: true}
	if sim.DefaultTimeScale() != (simKind{}).DefaultTimeScale() || !strings.Contains(sim.Provenance(), "simulated engine image") {
		t.Errorf("simulated docker: time scale %v, provenance %q", sim.DefaultTimeScale(), sim.Provenance())
	}
	tok := filepath.Join(t.TempDir(), "tokenizer.json")
	rt, err := sim.New(Env{GPU: "H100", TimeScale: 20, Tokenizer: tok, Images: map[string]string{engine.VLLM: "perflab-sim:dev"},
		Volumes: []string{"/data:/data:ro"}, Run: "abc123"})
	if err != nil {
		t.Fatal(err)
	}
	d := rt.(*docker.Runtime)
	if !d.NoGPU || !d.NoUlimits || d.Labels[docker.LabelRun] != "abc123" || d.Images[engine.VLLM] != "perflab-sim:dev" {
		t.Errorf("simulated docker runtime: %+v", d)
	}
	if d.Env[simimage.EnvGPU] != "H100" || d.Env[simimage.EnvTimeScale] != "20" || !slices.Contains(d.Volumes, "/data:/data:ro") ||
		!slices.ContainsFunc(d.Volumes, func(v string) bool { return strings.HasPrefix(v, tok+":") }) {
		t.Errorf("simulator settings: env %v volumes %v", d.Env, d.Volumes)
	}
	if _, err := sim.New(Env{}); err == nil {
		t.Error("a simulated docker runtime without a GPU type")
	}
	rt, err = dockerKind{}.New(Env{Run: "abc123"})
	if err != nil {
		t.Fatal(err)
	}
	if d := rt.(*docker.Runtime); d.NoGPU || d.NoUlimits || len(d.Env) != 0 {
		t.Errorf("real docker runtime: %+v", d)
	}
	if !slices.ContainsFunc(Cleaners(), func(c Cleaner) bool { _, ok := c.(dockerKind); return ok }) {
		t.Error("docker is not among the runtimes perflab engine cleanup asks")
	}
}
