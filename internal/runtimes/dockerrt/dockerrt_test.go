package dockerrt

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/engine/docker"
	"github.com/perflab/perflab/internal/runtimes"
	"github.com/perflab/perflab/internal/simimage"
)

// TestDockerKind: the registry's docker entry runs the engines' own images
// on the host's GPUs; specialized on the simulated image, it is the
// simulator in containers: time-scaled, counted GPUs, no GPU devices or
// ulimits, the simulator's settings in the environment, and a provenance
// that says so. A spec that overrides no image never needs the daemon.
func TestDockerKind(t *testing.T) {
	k, err := runtimes.Lookup(runtimes.Docker)
	if err != nil {
		t.Fatal(err)
	}
	if k.Simulated() || k.DefaultTimeScale() != 0 || k.Provenance() != "" || k.StartupSeconds() != runtimes.Builtin(runtimes.Process).StartupSeconds() {
		t.Errorf("docker on the official images: simulated %v, time scale %v, provenance %q", k.Simulated(), k.DefaultTimeScale(), k.Provenance())
	}
	sp, ok := k.(runtimes.Specializer)
	if !ok {
		t.Fatal("the docker kind does not specialize on its images")
	}
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	real, err := sp.Specialize(context.Background(), runtimes.Choice{Engines: map[string]string{engine.VLLM: "0.11.0"}})
	if err != nil || real.Simulated() {
		t.Fatalf("no images overridden: %v, %v; want the real kind without asking the daemon", real, err)
	}
	if _, err := sp.Specialize(context.Background(), runtimes.Choice{Engines: map[string]string{engine.VLLM: "0.11.0"},
		Settings: Settings{Images: map[string]string{engine.VLLM: "perflab-sim:dev"}}}); err == nil || !strings.Contains(err.Error(), "perflab-sim:dev") {
		t.Errorf("an overridden image and no daemon: err %v, want one naming the image", err)
	}

	sim := newSimKind()
	if sim.DefaultTimeScale() != runtimes.Builtin(runtimes.Sim).DefaultTimeScale() || !strings.Contains(sim.Provenance(), "simulated engine image") {
		t.Errorf("simulated docker: time scale %v, provenance %q", sim.DefaultTimeScale(), sim.Provenance())
	}
	tok := filepath.Join(t.TempDir(), "tokenizer.json")
	rt, err := sim.New(runtimes.Env{GPU: "H100", TimeScale: 20, Tokenizer: tok,
		Settings: Settings{Images: map[string]string{engine.VLLM: "perflab-sim:dev"}, Volumes: []string{"/data:/data:ro"}}, Run: "abc123"})
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
	if _, err := sim.New(runtimes.Env{}); err == nil {
		t.Error("a simulated docker runtime without a GPU type")
	}
	rt, err = dockerKind{}.New(runtimes.Env{Run: "abc123"})
	if err != nil {
		t.Fatal(err)
	}
	if d := rt.(*docker.Runtime); d.NoGPU || d.NoUlimits || len(d.Env) != 0 {
		t.Errorf("real docker runtime: %+v", d)
	}
	if !slices.ContainsFunc(runtimes.Cleaners(), func(c runtimes.Cleaner) bool { _, ok := c.(dockerKind); return ok }) {
		t.Error("docker is not among the runtimes perflab engine cleanup asks")
	}
}
