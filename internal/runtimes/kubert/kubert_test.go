package kubert

import (
	"context"
	"testing"

	"github.com/perflab/perflab/internal/engine/kubernetes"
	"github.com/perflab/perflab/internal/runtimes"
	"github.com/perflab/perflab/internal/sim/serve/settings"
)

// TestKubeKind: the registered kind runs the engines' images on the
// cluster's GPUs; a spec that says its images are the simulated one gets
// the sim runtime's traits, the simulator's settings in the pods'
// environment and no GPU requests unless it asks for them.
func TestKubeKind(t *testing.T) {
	k, err := runtimes.Lookup(runtimes.Kubernetes)
	if err != nil {
		t.Fatal(err)
	}
	if k.Simulated() || k.DefaultTimeScale() != 0 || k.Provenance() != "" {
		t.Errorf("real kind: simulated %v, time scale %v, provenance %q", k.Simulated(), k.DefaultTimeScale(), k.Provenance())
	}
	sp := k.(runtimes.Specializer)
	real, err := sp.Specialize(context.Background(), runtimes.Choice{})
	if err != nil || real.Simulated() {
		t.Fatalf("no kubernetes block: %v %v", real, err)
	}
	for _, gpuRequests := range []bool{false, true} {
		ks := &runtimes.KubeSettings{Simulated: true, GPURequests: gpuRequests, Namespace: "lab"}
		sim, err := sp.Specialize(context.Background(), runtimes.Choice{Kubernetes: ks})
		if err != nil || !sim.Simulated() || sim.DefaultTimeScale() != runtimes.Builtin(runtimes.Sim).DefaultTimeScale() || sim.Name() != runtimes.Kubernetes {
			t.Fatalf("simulated: %v %v", sim, err)
		}
		rt, err := sim.New(runtimes.Env{GPU: "H100", TimeScale: 20, Kubernetes: ks, Run: "abc"})
		if err != nil {
			t.Fatal(err)
		}
		r := rt.(*kubernetes.Runtime)
		if r.NoGPU == gpuRequests || r.Env[settings.EnvGPU] != "H100" || r.Env[settings.EnvTimeScale] != "20" || r.Namespace != "lab" || r.Labels[kubernetes.LabelRun] != "abc" {
			t.Errorf("gpu_requests %v: runtime %+v", gpuRequests, r)
		}
		if _, err := sim.New(runtimes.Env{Kubernetes: ks}); err == nil {
			t.Error("a simulated kubernetes runtime without a GPU type")
		}
	}
	rt, err := k.New(runtimes.Env{Kubernetes: &runtimes.KubeSettings{Resources: map[string]string{"cpu": "lots"}}})
	if err == nil {
		t.Errorf("a bad resource quantity: runtime %v, want an error", rt)
	}
}
