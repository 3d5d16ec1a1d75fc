// Package kubernetes is the engine runtime on a Kubernetes cluster, through
// client-go: each server is a Pod (restartPolicy Never) of the engine's
// official image (or any image with the engines' entry points, such as the
// simulated engine image), started from the same rendered Command as a
// local process or a container would be. The scheduler places it on a node
// with the GPUs it asks for (nvidia.com/gpu); perflab reaches it through a
// port-forward over the API server, or directly at its pod IP when perflab
// itself runs in the cluster.
//
// Every pod of a run is owned by one ConfigMap named after the run, so
// deleting that ConfigMap lets the cluster's garbage collector remove the
// run's pods; Cleanup and Sweep delete the pods themselves as well, so they
// work on a cluster without a garbage collector.
package kubernetes

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	k8s "k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/perflab/perflab/internal/engine"
)

// Labels perflab puts on every pod (and ConfigMap) it creates, so that one
// selector finds them all (Cleanup) or those of one run. Values that are not
// valid label values (a trial key holds '/') are sanitized, with the raw
// value kept in an annotation of the same key.
const (
	LabelManaged = engine.LabelManaged // always "true"
	LabelRun     = engine.LabelRun
	LabelTrial   = engine.LabelTrial
	LabelConfig  = engine.LabelConfig // a hash of the rendered command
	LabelEngine  = engine.LabelEngine
	LabelVersion = engine.LabelVersion
	LabelModel   = engine.LabelModel
	// LabelRole tells a run's owner ConfigMap ("owner") from a server's
	// files ConfigMap ("files").
	LabelRole = "perflab.role"
)

// Access is how perflab reaches a pod's server.
type Access string

// Access paths.
const (
	// PortForward forwards a local port on 127.0.0.1 to the pod's port
	// through the API server (SPDY), as kubectl port-forward does: for
	// perflab outside the cluster. The default there.
	PortForward Access = "port-forward"
	// PodIP connects to http://PODIP:PORT directly: for perflab running in
	// the cluster (or next to a test cluster whose pods are local). The
	// default in a cluster.
	PodIP Access = "pod-ip"
)

// Paths and names inside the pod.
const (
	// containerName is the pod's one container.
	containerName = "engine"
	// defaultPort is where the engine listens in the pod.
	defaultPort = 8000
	// filesDir holds Command.Files (a ConfigMap volume); it is the
	// container's working directory, so the argv's relative names
	// (TensorRT-LLM's extra_llm_api_options.yaml) resolve.
	filesDir = "/perflab/work"
	// hfHomeInPod is where the Hugging Face cache volume is mounted (HF_HOME
	// points there).
	hfHomeInPod = "/root/.cache/huggingface"
	// gpuResource is the NVIDIA device plugin's resource.
	gpuResource corev1.ResourceName = "nvidia.com/gpu"
)

// EnvEngineVersion is set in every pod to the engine version the config
// names, as the docker runtime does, so an image that serves several
// versions (the simulated engine image) knows which one to be.
const EnvEngineVersion = engine.EnvEngineVersion

// Runtime starts each server as a pod. The zero value uses KUBECONFIG (or
// ~/.kube/config, or the in-cluster service account), the kubeconfig's
// namespace, the official images, a GPU limit of the config's GPU count, a
// memory-backed /dev/shm and no Hugging Face cache volume.
type Runtime struct {
	// Client is the API client; nil means one built from Config.
	Client k8s.Interface
	// Config is the REST config (needed for a port-forward); nil means
	// one from clientcmd's default loading rules (KUBECONFIG,
	// ~/.kube/config, in-cluster) with Context as the current context.
	Config *rest.Config
	// Context is the kubeconfig context to use ("" = the current one).
	Context string
	// Namespace the pods go in; "" means the kubeconfig's (unless Client
	// is given), else "default".
	Namespace string
	// Images overrides the image per engine ("vllm", "sglang", "trtllm"),
	// e.g. the simulated engine image for all three.
	Images map[string]string
	// Labels go on every pod besides perflab's own, e.g. {LabelRun: runKey};
	// Cleanup finds the pods by them, and LabelRun names the run's owner.
	Labels map[string]string
	// Owner is the name of the ConfigMap that owns every pod of this
	// runtime (created when missing); "" means one named after the run
	// label, and no owner when there is none. "none" sets no owner.
	Owner string
	// HFCachePVC mounts this PersistentVolumeClaim as the Hugging Face
	// cache; HFCacheHostPath a directory of the node instead. Neither
	// mounts none (the engine downloads into the container).
	HFCachePVC      string
	HFCacheHostPath string
	// HFTokenSecret is a Secret whose key HFTokenKey (default "token")
	// becomes HF_TOKEN in the pod, for gated models.
	HFTokenSecret string
	HFTokenKey    string
	// NodeSelector, Tolerations, RuntimeClassName, ImagePullSecrets and
	// PriorityClassName go into every pod's spec as they are.
	NodeSelector      map[string]string
	Tolerations       []corev1.Toleration
	RuntimeClassName  string
	ImagePullSecrets  []string
	PriorityClassName string
	// Env is added to every pod's environment (after the config's).
	Env map[string]string
	// Resources are extra requests and limits (cpu, memory, ...); the GPU
	// limit is added to them unless NoGPU.
	Resources corev1.ResourceRequirements
	// ShmSize caps the memory-backed /dev/shm (zero: no cap).
	ShmSize resource.Quantity
	// Access is how perflab reaches the server ("" = PodIP inside a
	// cluster, PortForward outside).
	Access Access
	// Port is where the engine listens in the pod (0 = 8000).
	Port int
	// NoGPU asks for no nvidia.com/gpu (the simulated engine image needs
	// none).
	NoGPU bool
	// LogLines is the size of the in-memory ring of recent log lines
	// (0 = 2000). PollInterval is how often Ready probes and re-reads the
	// pod besides its watch (0 = 250 ms). PullTimeout caps an image pull,
	// during which the log is silent (0 = 30 min).
	LogLines     int
	PollInterval time.Duration
	PullTimeout  time.Duration

	once    sync.Once
	cli     k8s.Interface
	restCfg *rest.Config
	ns      string
	access  Access
	initErr error

	rcOnce sync.Once
	rc     rest.Interface
	rcErr  error

	ownerMu  sync.Mutex
	ownerRef *metav1.OwnerReference
}

var (
	_ engine.Runtime = (*Runtime)(nil)
	_ engine.Sweeper = (*Runtime)(nil)
)

// init resolves the client, the REST config, the namespace and the access
// path once.
func (r *Runtime) init() error {
	r.once.Do(func() {
		r.cli, r.restCfg, r.ns, r.access = r.Client, r.Config, r.Namespace, r.Access
		if r.cli == nil || r.restCfg == nil {
			cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
				clientcmd.NewDefaultClientConfigLoadingRules(),
				&clientcmd.ConfigOverrides{CurrentContext: r.Context})
			if r.restCfg == nil {
				cfg, err := cc.ClientConfig()
				switch {
				case err == nil:
					if cfg.QPS == 0 {
						cfg.QPS, cfg.Burst = 50, 100
					}
					r.restCfg = cfg
				case r.cli == nil:
					r.initErr = fmt.Errorf("kubernetes: client config: %w", err)
					return
				}
				// A client given without a config: no port-forward.
			}
			if r.ns == "" && r.Client == nil {
				if ns, _, err := cc.Namespace(); err == nil {
					r.ns = ns
				}
			}
			if r.cli == nil {
				c, err := k8s.NewForConfig(r.restCfg)
				if err != nil {
					r.initErr = fmt.Errorf("kubernetes: client: %w", err)
					return
				}
				r.cli = c
			}
		}
		if r.ns == "" {
			r.ns = "default"
		}
		if r.access == "" {
			r.access = PortForward
			if inCluster() {
				r.access = PodIP
			}
		}
		if r.access != PortForward && r.access != PodIP {
			r.initErr = fmt.Errorf("kubernetes: access %q: want %q or %q", r.access, PortForward, PodIP)
		}
	})
	return r.initErr
}

// restClient is the core/v1 REST client of the REST config, for the
// port-forward's URL.
func (r *Runtime) restClient() (rest.Interface, error) {
	r.rcOnce.Do(func() {
		c, err := corev1client.NewForConfig(r.restCfg)
		if err != nil {
			r.rcErr = fmt.Errorf("kubernetes: client: %w", err)
			return
		}
		r.rc = c.RESTClient()
	})
	return r.rc, r.rcErr
}

// inCluster says whether perflab runs in a pod.
func inCluster() bool {
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return false
	}
	_, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token")
	return err == nil
}

// Image is the image a config runs in: the override for its engine, or
// the official image of its version (the docker runtime's table).
func (r *Runtime) Image(cfg engine.Config) (string, error) {
	if img := r.Images[cfg.Engine]; img != "" {
		return img, nil
	}
	img, err := engine.ImageFor(cfg.Engine, cfg.EffectiveVersion())
	if err != nil {
		return "", fmt.Errorf("kubernetes: %w", err)
	}
	return img, nil
}

// GPUCount is how many GPUs a config occupies: tensor × data parallel
// (the lab's own count, lab.GPUs).
func GPUCount(cfg engine.Config) int {
	return max(cfg.TensorParallel, 1) * max(cfg.DataParallel, 1)
}

// port is the engine's port in the pod.
func (r *Runtime) port() int {
	if r.Port > 0 {
		return r.Port
	}
	return defaultPort
}

// spec is everything Start decides before it talks to the API server;
// built by a pure function so tests can read it without a cluster.
type spec struct {
	pod   *corev1.Pod
	files *corev1.ConfigMap // nil when the command has no files
	image string
}

// build turns a Launch into the pod (and files ConfigMap) to create. owner
// is the run's owner, or nil.
func (r *Runtime) build(l engine.Launch, cmd engine.Command, ns string, owner *metav1.OwnerReference, extraLabels map[string]string) (spec, error) {
	img, err := r.Image(l.Config)
	if err != nil {
		return spec{}, err
	}
	if len(cmd.Argv) == 0 {
		return spec{}, errors.New("kubernetes: empty command")
	}
	port := r.port()
	argv := append(slices.Clone(cmd.Argv), "--host=0.0.0.0", "--port="+strconv.Itoa(port))
	name := "perflab-" + dnsLabel(l.Config.Engine) + "-" + randomHex(5)

	proto := engine.ProtocolFor(l.Config.Engine)
	env := map[string]string{EnvEngineVersion: l.Config.EffectiveVersion()}
	// What keeps the readiness probe's path free of generations (SGLang's
	// /health generates one token unless told not to); the config's own
	// env, copied after, can still say otherwise.
	maps.Copy(env, proto.ProbeEnv())
	maps.Copy(env, cmd.Env)
	maps.Copy(env, r.Env)
	hasHF := r.HFCachePVC != "" || r.HFCacheHostPath != ""
	if hasHF {
		env["HF_HOME"] = hfHomeInPod
	}
	var envVars []corev1.EnvVar
	for _, k := range slices.Sorted(maps.Keys(env)) {
		envVars = append(envVars, corev1.EnvVar{Name: k, Value: env[k]})
	}
	if r.HFTokenSecret != "" {
		if _, set := env["HF_TOKEN"]; !set {
			key := r.HFTokenKey
			if key == "" {
				key = "token"
			}
			envVars = append(envVars, corev1.EnvVar{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: r.HFTokenSecret}, Key: key},
			}})
		}
	}

	raw := map[string]string{
		LabelEngine:  l.Config.Engine,
		LabelVersion: l.Config.EffectiveVersion(),
		LabelModel:   l.Config.Model,
		LabelConfig:  configHash(cmd),
	}
	maps.Copy(raw, r.Labels)
	maps.Copy(raw, l.Labels)
	maps.Copy(raw, extraLabels)
	raw[LabelManaged] = "true" // last: Cleanup finds pods by it
	labels, annotations, err := podLabels(raw)
	if err != nil {
		return spec{}, err
	}

	volumes := []corev1.Volume{{
		Name: "dshm",
		VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory,
		}},
	}}
	if !r.ShmSize.IsZero() {
		q := r.ShmSize.DeepCopy()
		volumes[0].EmptyDir.SizeLimit = &q
	}
	mounts := []corev1.VolumeMount{{Name: "dshm", MountPath: "/dev/shm"}}
	switch {
	case r.HFCachePVC != "":
		volumes = append(volumes, corev1.Volume{Name: "hf-cache", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: r.HFCachePVC},
		}})
	case r.HFCacheHostPath != "":
		t := corev1.HostPathDirectoryOrCreate
		volumes = append(volumes, corev1.Volume{Name: "hf-cache", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: r.HFCacheHostPath, Type: &t},
		}})
	}
	if hasHF {
		mounts = append(mounts, corev1.VolumeMount{Name: "hf-cache", MountPath: hfHomeInPod})
	}

	var owners []metav1.OwnerReference
	if owner != nil {
		owners = []metav1.OwnerReference{*owner}
	}
	var files *corev1.ConfigMap
	workDir := ""
	if len(cmd.Files) > 0 {
		data := map[string]string{}
		for fn, content := range cmd.Files {
			if errs := validation.IsConfigMapKey(fn); len(errs) > 0 {
				return spec{}, fmt.Errorf("kubernetes: file name %q must be a plain name in the work dir: %s", fn, strings.Join(errs, "; "))
			}
			data[fn] = content
		}
		fl := maps.Clone(labels)
		fl[LabelRole] = "files"
		files = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-files", Namespace: ns, Labels: fl,
				Annotations: maps.Clone(annotations), OwnerReferences: owners},
			Data: data,
		}
		volumes = append(volumes, corev1.Volume{Name: "files", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: files.Name}},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: "files", MountPath: filesDir})
		workDir = filesDir
	}

	res := *r.Resources.DeepCopy()
	if !r.NoGPU {
		if res.Limits == nil {
			res.Limits = corev1.ResourceList{}
		}
		res.Limits[gpuResource] = *resource.NewQuantity(int64(GPUCount(l.Config)), resource.DecimalSI)
	}

	var pullSecrets []corev1.LocalObjectReference
	for _, s := range r.ImagePullSecrets {
		pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: s})
	}
	var runtimeClass *string
	if r.RuntimeClassName != "" {
		runtimeClass = &r.RuntimeClassName
	}
	grace := int64(stopGrace(l) / time.Second)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, Labels: labels, Annotations: annotations, OwnerReferences: owners,
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  maps.Clone(r.NodeSelector),
			Tolerations:                   slices.Clone(r.Tolerations),
			RuntimeClassName:              runtimeClass,
			ImagePullSecrets:              pullSecrets,
			PriorityClassName:             r.PriorityClassName,
			EnableServiceLinks:            new(bool), // no service env vars in the engine's environment
			Volumes:                       volumes,
			Containers: []corev1.Container{{
				Name:  containerName,
				Image: img,
				// The whole command, program included: images differ in
				// entrypoint (vllm/vllm-openai's is `vllm serve`), so none
				// is inherited.
				Command:         argv,
				Env:             envVars,
				WorkingDir:      workDir,
				Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port), Protocol: corev1.ProtocolTCP}},
				Resources:       res,
				VolumeMounts:    mounts,
				ImagePullPolicy: corev1.PullIfNotPresent,
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: proto.ProbePath(), Port: intstr.FromInt32(int32(port)),
					}},
					PeriodSeconds:    5,
					FailureThreshold: 3,
				},
			}},
		},
	}
	return spec{pod: pod, files: files, image: img}, nil
}

// stopGrace is a Launch's grace period between SIGTERM and SIGKILL.
func stopGrace(l engine.Launch) time.Duration {
	if l.StopGrace > 0 {
		return max(l.StopGrace, time.Second)
	}
	return 10 * time.Second
}

// podLabels turns raw labels into valid Kubernetes label values, keeping
// the raw value of each one that changed in an annotation of the same key.
func podLabels(raw map[string]string) (labels, annotations map[string]string, err error) {
	labels = make(map[string]string, len(raw))
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, nil, fmt.Errorf("kubernetes: label key %q: %s", k, strings.Join(errs, "; "))
		}
		v := LabelValue(raw[k])
		labels[k] = v
		if v != raw[k] {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[k] = raw[k]
		}
	}
	return labels, annotations, nil
}

// LabelValue is s as a valid label value: s itself when it is one, else
// s with every other character made '-', cut to fit and suffixed with a
// hash of s, so distinct values stay distinct. The same s always gives
// the same value, so a selector can be built from raw values.
func LabelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '-'
		}
	}
	sum := sha256.Sum256([]byte(s))
	suffix := hex.EncodeToString(sum[:4])
	const keep = validation.LabelValueMaxLength - 9 // "-" + 8 hex digits
	if len(b) > keep {
		b = b[:keep]
	}
	head := strings.Trim(string(b), "-_.")
	if head == "" {
		return suffix
	}
	return head + "-" + suffix
}

// dnsLabel is s as a part of a DNS-1123 name: lower case, alphanumerics
// and '-'.
func dnsLabel(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	out := strings.Trim(string(b), "-")
	if out == "" {
		return "x"
	}
	return out
}

// ownerName is the name of the ConfigMap that owns the pods of a run.
func ownerName(run string) string {
	n := dnsLabel(run)
	if len(n) > 40 || n != strings.ToLower(run) {
		sum := sha256.Sum256([]byte(run))
		if len(n) > 40 {
			n = strings.Trim(n[:40], "-")
		}
		n += "-" + hex.EncodeToString(sum[:4])
	}
	return "perflab-run-" + n
}

// ownerConfigMap is the ConfigMap Owner names: r.Owner, or one named
// after the run label, or "" for none.
func (r *Runtime) ownerConfigMap() string {
	switch r.Owner {
	case "none":
		return ""
	case "":
		if run := r.Labels[LabelRun]; run != "" {
			return ownerName(run)
		}
		return ""
	}
	return r.Owner
}

// EnsureOwner returns the reference to the ConfigMap that owns every pod
// of this runtime, creating it if it is missing; nil when the runtime has
// no owner (no run label and no Owner). Deleting that ConfigMap lets the
// cluster's garbage collector remove the run's pods.
func (r *Runtime) EnsureOwner(ctx context.Context) (*metav1.OwnerReference, error) {
	if err := r.init(); err != nil {
		return nil, err
	}
	name := r.ownerConfigMap()
	if name == "" {
		return nil, nil
	}
	r.ownerMu.Lock()
	defer r.ownerMu.Unlock()
	if r.ownerRef != nil {
		return r.ownerRef, nil
	}
	cms := r.cli.CoreV1().ConfigMaps(r.ns)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		raw := map[string]string{LabelManaged: "true", LabelRole: "owner"}
		if run := r.Labels[LabelRun]; run != "" {
			raw[LabelRun] = run
		}
		labels, annotations, lerr := podLabels(raw)
		if lerr != nil {
			return nil, lerr
		}
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns, Labels: labels, Annotations: annotations},
			Data:       map[string]string{"run": r.Labels[LabelRun]},
		}
		cm, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			cm, err = cms.Get(ctx, name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes: owner configmap %s/%s: %w", r.ns, name, err)
	}
	r.ownerRef = &metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}
	return r.ownerRef, nil
}

// forgetOwner drops the cached owner, after a Cleanup may have deleted it.
func (r *Runtime) forgetOwner() {
	r.ownerMu.Lock()
	r.ownerRef = nil
	r.ownerMu.Unlock()
}

// configHash names a rendered command in a label: the same config gives the
// same label across runs (the docker runtime's hash).
func configHash(cmd engine.Command) string {
	h := sha256.New()
	h.Write([]byte(cmd.String()))
	for _, k := range slices.Sorted(maps.Keys(cmd.Files)) {
		fmt.Fprintf(h, "\x00%s\x00%s", k, cmd.Files[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
