package runtimes

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/engine/kubernetes"
	"github.com/perflab/perflab/internal/simimage"
)

// Kubernetes is the cluster runtime's name.
const Kubernetes = "kubernetes"

// KubeSettings are a spec's settings for the kubernetes runtime (its
// `kubernetes:` block); every field is optional.
type KubeSettings struct {
	// Context is the kubeconfig context (default: the current one; in a
	// pod, the in-cluster config). Namespace is where the pods run
	// (default: the context's, else "default").
	Context   string `yaml:"context,omitempty" json:"context,omitempty"`
	Namespace string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
	// Access is how perflab reaches a pod: "port-forward" (default outside
	// a cluster) or "pod-ip" (perflab running in the cluster).
	Access string `yaml:"access,omitempty" json:"access,omitempty"`
	// HFCachePVC or HFCacheHostPath is the Hugging Face cache mounted in
	// every pod (none: each pod downloads the weights).
	HFCachePVC      string `yaml:"hf_cache_pvc,omitempty" json:"hf_cache_pvc,omitempty"`
	HFCacheHostPath string `yaml:"hf_cache_host_path,omitempty" json:"hf_cache_host_path,omitempty"`
	// HFTokenSecret names a Secret whose key "token" becomes HF_TOKEN.
	HFTokenSecret string `yaml:"hf_token_secret,omitempty" json:"hf_token_secret,omitempty"`
	// NodeSelector, Tolerations, RuntimeClassName, ImagePullSecrets and
	// PriorityClassName go into every pod's spec as written.
	NodeSelector      map[string]string `yaml:"node_selector,omitempty" json:"node_selector,omitempty"`
	Tolerations       []Toleration      `yaml:"tolerations,omitempty" json:"tolerations,omitempty"`
	RuntimeClassName  string            `yaml:"runtime_class_name,omitempty" json:"runtime_class_name,omitempty"`
	ImagePullSecrets  []string          `yaml:"image_pull_secrets,omitempty" json:"image_pull_secrets,omitempty"`
	PriorityClassName string            `yaml:"priority_class_name,omitempty" json:"priority_class_name,omitempty"`
	// Resources are extra requests and limits of the engine container
	// besides its GPUs, e.g. {cpu: "16", memory: 128Gi}.
	Resources map[string]string `yaml:"resources,omitempty" json:"resources,omitempty"`
	// Simulated says the images are the simulated engine image (perflab
	// sim image): the figures are the simulator's, no GPU is requested,
	// the clock is the spec's time_scale. perflab cannot ask a cluster's
	// registry, so the spec says it.
	Simulated bool `yaml:"simulated,omitempty" json:"simulated,omitempty"`
	// GPURequests asks for nvidia.com/gpu on the simulated image too, so
	// that the cluster's GPU accounting places the simulated lab as it
	// would the real one (a cluster with GPU nodes, or a test node); by
	// default the simulated image asks for none and runs on any node.
	GPURequests bool `yaml:"gpu_requests,omitempty" json:"gpu_requests,omitempty"`
}

// Toleration is a pod toleration, as in a pod spec.
type Toleration struct {
	Key      string `yaml:"key,omitempty" json:"key,omitempty"`
	Operator string `yaml:"operator,omitempty" json:"operator,omitempty"`
	Value    string `yaml:"value,omitempty" json:"value,omitempty"`
	Effect   string `yaml:"effect,omitempty" json:"effect,omitempty"`
}

// kubeKind runs each server as a Pod of the engine's image on the cluster
// the kubeconfig names; the Kubernetes scheduler places it on a node with
// free GPUs. Like docker, it measures GPUs on the engines' images and the
// simulator on the simulated engine image (Specialize, from the spec's
// kubernetes.simulated).
type kubeKind struct {
	simulated bool
}

var (
	_ Kind        = kubeKind{}
	_ Specializer = kubeKind{}
	_ Cleaner     = kubeKind{}
)

func (kubeKind) Name() string { return Kubernetes }
func (kubeKind) Summary() string {
	return "the engines' official images as pods on a Kubernetes cluster, placed by its scheduler (or the simulated engine image)"
}
func (kubeKind) Servers() bool     { return true }
func (k kubeKind) Simulated() bool { return k.simulated }
func (kubeKind) Noisy() bool       { return false }
func (k kubeKind) DefaultTimeScale() float64 {
	if k.simulated {
		return simKind{}.DefaultTimeScale()
	}
	return 0
}
func (k kubeKind) StartupSeconds() float64 {
	if k.simulated {
		return simKind{}.StartupSeconds()
	}
	return processKind{}.StartupSeconds()
}

// GPUs are counted, not named: the device plugin picks a pod's devices,
// but the lab must still know how many of the spec's hardware.count its
// pods hold, so that a server kept up for reuse is stopped when another
// config needs its GPUs (else the new pod would wait behind it forever).
func (kubeKind) GPUs(ctx context.Context, count int) (*engine.Allocator, error) {
	return simKind{}.GPUs(ctx, count)
}

func (k kubeKind) Provenance() string {
	if k.simulated {
		return "measured over HTTP against the simulated engine image in Kubernetes pods, not on GPUs"
	}
	return ""
}

func (k kubeKind) Specialize(_ context.Context, c Choice) (Kind, error) {
	return kubeKind{simulated: c.Kubernetes != nil && c.Kubernetes.Simulated}, nil
}

// New returns the kubernetes runtime with the spec's cluster settings, its
// pods labelled with the run key and owned by the run's ConfigMap.
func (k kubeKind) New(env Env) (engine.Runtime, error) {
	s := env.Kubernetes
	if s == nil {
		s = &KubeSettings{}
	}
	rt := &kubernetes.Runtime{Images: maps.Clone(env.Images), Context: s.Context, Namespace: s.Namespace,
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
				return nil, fmt.Errorf("runtimes: kubernetes: resources.%s: %q: %w", name, q, err)
			}
			rl[corev1.ResourceName(name)] = v
		}
		rt.Resources = corev1.ResourceRequirements{Requests: rl, Limits: rl}
	}
	if k.simulated {
		if env.GPU == "" {
			return nil, fmt.Errorf("runtimes: kubernetes: the simulated GPU type is required")
		}
		// The tokenizer and calibration file are paths on perflab's host,
		// which a pod does not have: the simulator then estimates prompt
		// tokens (4 bytes a token) and uses its embedded calibration.
		simEnv, _ := simimage.Settings{GPU: env.GPU, TimeScale: env.TimeScale, StartupDelay: env.StartupDelay}.Container()
		rt.Env = simEnv
		rt.NoGPU = !s.GPURequests
	}
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
