package runtimes

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
