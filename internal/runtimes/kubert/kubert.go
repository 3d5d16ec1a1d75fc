// Package kubert is the kubernetes runtime: each server a Pod on the
// cluster the kubeconfig names. It registers itself with package runtimes
// when imported (cmd/perflab's main does), so that the lab and the
// reports, which only ask runtimes.Lookup, never link client-go.
package kubert

import (
	"context"
	"fmt"
	"maps"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/engine/kubernetes"
	"github.com/perflab/perflab/internal/runtimes"
	"github.com/perflab/perflab/internal/sim/serve/settings"
)

func init() { runtimes.Register(kubeKind{}) }

// kubeKind runs each server as a Pod of the engine's image on the cluster
// the kubeconfig names; the Kubernetes scheduler places it on a node with
// free GPUs. A spec whose kubernetes.simulated says the images are the
// simulated engine image gets simKind instead (Specialize), so no method
// here asks which of the two it is.
type kubeKind struct{}

// simKind is kubernetes on the simulated engine image: the simulator in
// pods on the sim runtime's clock, counted GPUs requested only when the
// spec asks (gpu_requests).
type simKind struct {
	kubeKind
	sim runtimes.Kind
}

var (
	_ runtimes.Kind            = kubeKind{}
	_ runtimes.Specializer     = kubeKind{}
	_ runtimes.Cleaner         = kubeKind{}
	_ runtimes.Kind            = simKind{}
	_ runtimes.SettingsDecoder = kubeKind{}
)

// Settings are the kubernetes runtime's settings: in a spec's
// `runtime: {kind: kubernetes, settings: {...}}` the engines' images and
// the cluster settings side by side, or its top-level images: and
// kubernetes: block.
type Settings struct {
	// Images overrides the container image per engine.
	Images                map[string]string `yaml:"images,omitempty"`
	runtimes.KubeSettings `yaml:",inline"`
}

// DecodeSettings reads the engines' images and the cluster settings.
func (kubeKind) DecodeSettings(decode func(any) error) (any, error) {
	var d Settings
	if err := decode(&d); err != nil {
		return nil, err
	}
	return d, nil
}

// FromStored takes images: and the kubernetes: block; a pod mounts no
// host directory by volumes: (hf_cache_host_path is the cluster's way).
func (kubeKind) FromStored(st runtimes.Stored) (any, error) {
	if err := runtimes.Unused(runtimes.Kubernetes, st, "images", "kubernetes"); err != nil {
		return nil, err
	}
	d := Settings{Images: st.Images}
	if st.Kubernetes != nil {
		d.KubeSettings = *st.Kubernetes
	}
	return d, nil
}

// Store is the stored form of Settings: with no cluster setting set the
// spec has no kubernetes block, as a spec that writes none at its top
// level.
func (kubeKind) Store(v any) runtimes.Stored {
	d, _ := runtimes.SettingsOf[Settings](runtimes.Kubernetes, v)
	out := runtimes.Stored{Images: d.Images}
	if !reflect.DeepEqual(d.KubeSettings, runtimes.KubeSettings{}) {
		ks := d.KubeSettings
		out.Kubernetes = &ks
	}
	return out
}

func (kubeKind) Name() string { return runtimes.Kubernetes }
func (kubeKind) Summary() string {
	return "the engines' official images as pods on a Kubernetes cluster, placed by its scheduler (or the simulated engine image)"
}
func (kubeKind) Servers() bool             { return true }
func (kubeKind) Simulated() bool           { return false }
func (kubeKind) Noisy() bool               { return false }
func (kubeKind) DefaultTimeScale() float64 { return 0 }
func (kubeKind) StartupSeconds() float64 {
	return runtimes.Builtin(runtimes.Process).StartupSeconds()
}

// GPUs are counted, not named: the device plugin picks a pod's devices,
// but the lab must still know how many of the spec's hardware.count its
// pods hold, so that a server kept up for reuse is stopped when another
// config needs its GPUs (else the new pod would wait behind it forever).
func (kubeKind) GPUs(ctx context.Context, count int) (*engine.Allocator, error) {
	return runtimes.Builtin(runtimes.Sim).GPUs(ctx, count)
}

func (kubeKind) Provenance() string { return "" }

func (kubeKind) Specialize(_ context.Context, c runtimes.Choice) (runtimes.Kind, error) {
	s, err := runtimes.SettingsOf[Settings](runtimes.Kubernetes, c.Settings)
	if err != nil {
		return nil, err
	}
	if s.Simulated {
		return simKind{sim: runtimes.Builtin(runtimes.Sim)}, nil
	}
	return kubeKind{}, nil
}

// New returns the kubernetes runtime with the spec's cluster settings, its
// pods labelled with the run key and owned by the run's ConfigMap.
func (kubeKind) New(env runtimes.Env) (engine.Runtime, error) {
	rt, _, err := newRuntime(env)
	return rt, err
}

func newRuntime(env runtimes.Env) (*kubernetes.Runtime, *Settings, error) {
	s, err := runtimes.SettingsOf[Settings](runtimes.Kubernetes, env.Settings)
	if err != nil {
		return nil, nil, err
	}
	rt := &kubernetes.Runtime{Images: maps.Clone(s.Images), Context: s.Context, Namespace: s.Namespace,
		HFCachePVC: s.HFCachePVC, HFCacheHostPath: s.HFCacheHostPath, HFTokenSecret: s.HFTokenSecret,
		NodeSelector: s.NodeSelector, RuntimeClassName: s.RuntimeClassName, ImagePullSecrets: s.ImagePullSecrets,
		PriorityClassName: s.PriorityClassName, Access: kubernetes.Access(s.Access)}
	if env.Run != "" {
		rt.Labels = map[string]string{kubernetes.LabelRun: env.Run}
	}
	for _, t := range s.Tolerations {
		rt.Tolerations = append(rt.Tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator),
			Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	if len(s.Resources) > 0 {
		rl := corev1.ResourceList{}
		for name, q := range s.Resources {
			v, err := resource.ParseQuantity(q)
			if err != nil {
				return nil, nil, fmt.Errorf("runtimes: kubernetes: resources.%s: %q: %w", name, q, err)
			}
			rl[corev1.ResourceName(name)] = v
		}
		rt.Resources = corev1.ResourceRequirements{Requests: rl, Limits: rl}
	}
	return rt, &s, nil
}

func (k simKind) Simulated() bool           { return k.sim.Simulated() }
func (k simKind) Noisy() bool               { return k.sim.Noisy() }
func (k simKind) DefaultTimeScale() float64 { return k.sim.DefaultTimeScale() }
func (k simKind) StartupSeconds() float64   { return k.sim.StartupSeconds() }
func (simKind) Provenance() string {
	return "measured over HTTP against the simulated engine image in Kubernetes pods, not on GPUs"
}

// New is the cluster runtime with the simulator's settings as the pods'
// environment. The tokenizer and calibration file are paths on perflab's
// host, which a pod does not have: the simulator then estimates prompt
// tokens (4 bytes a token) and uses its embedded calibration.
func (simKind) New(env runtimes.Env) (engine.Runtime, error) {
	if env.GPU == "" {
		return nil, fmt.Errorf("runtimes: kubernetes: the simulated GPU type is required")
	}
	rt, s, err := newRuntime(env)
	if err != nil {
		return nil, err
	}
	simEnv, _ := settings.Settings{GPU: env.GPU, TimeScale: env.TimeScale, StartupDelay: env.StartupDelay}.Container()
	rt.Env = simEnv
	rt.NoGPU = !s.GPURequests
	return rt, nil
}

// Cleanup deletes the pods perflab started that are still there, in the
// current context's namespace: a run's (by its key), or every one.
func (kubeKind) Cleanup(ctx context.Context, run string) ([]string, error) {
	var labels map[string]string
	if run != "" {
		labels = map[string]string{kubernetes.LabelRun: run}
	}
	return (&kubernetes.Runtime{}).Cleanup(ctx, labels)
}
