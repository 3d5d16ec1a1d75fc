package kubert

import (
	"context"
	"errors"
	"reflect"
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
		ks := Settings{KubeSettings: runtimes.KubeSettings{Simulated: true, GPURequests: gpuRequests, Namespace: "lab"}}
		sim, err := sp.Specialize(context.Background(), runtimes.Choice{Settings: ks})
		if err != nil || !sim.Simulated() || sim.DefaultTimeScale() != runtimes.Builtin(runtimes.Sim).DefaultTimeScale() || sim.Name() != runtimes.Kubernetes {
			t.Fatalf("simulated: %v %v", sim, err)
		}
		rt, err := sim.New(runtimes.Env{GPU: "H100", TimeScale: 20, Settings: ks, Run: "abc"})
		if err != nil {
			t.Fatal(err)
		}
		r := rt.(*kubernetes.Runtime)
		if r.NoGPU == gpuRequests || r.Env[settings.EnvGPU] != "H100" || r.Env[settings.EnvTimeScale] != "20" || r.Namespace != "lab" || r.Labels[kubernetes.LabelRun] != "abc" {
			t.Errorf("gpu_requests %v: runtime %+v", gpuRequests, r)
		}
		if _, err := sim.New(runtimes.Env{Settings: ks}); err == nil {
			t.Error("a simulated kubernetes runtime without a GPU type")
		}
	}
	rt, err := k.New(runtimes.Env{Settings: Settings{KubeSettings: runtimes.KubeSettings{Resources: map[string]string{"cpu": "lots"}}}})
	if err == nil {
		t.Errorf("a bad resource quantity: runtime %v, want an error", rt)
	}
}

// TestKubeSettingsStored: the top-level form (images:, kubernetes:)
// decodes to the runtime's own Settings and back unchanged; volumes:,
// which a pod has no use for, is refused by name.
func TestKubeSettingsStored(t *testing.T) {
	k := kubeKind{}
	st := runtimes.Stored{Images: map[string]string{"vllm": "a:1"}, Kubernetes: &runtimes.KubeSettings{Namespace: "lab"}}
	v, err := k.FromStored(st)
	if err != nil {
		t.Fatal(err)
	}
	if s := v.(Settings); s.Namespace != "lab" || s.Images["vllm"] != "a:1" {
		t.Errorf("settings %+v", s)
	}
	if back := k.Store(v); !reflect.DeepEqual(back, st) {
		t.Errorf("stored back as %+v, want %+v", back, st)
	}
	var se *runtimes.SettingError
	if _, err := k.FromStored(runtimes.Stored{Volumes: []string{"/a:/a"}}); !errors.As(err, &se) || se.Field != "volumes" {
		t.Errorf("volumes: err = %v, want a *runtimes.SettingError for volumes", err)
	}
	if _, err := k.New(runtimes.Env{Settings: struct{}{}}); err == nil {
		t.Error("another runtime's settings value was accepted")
	}
}
