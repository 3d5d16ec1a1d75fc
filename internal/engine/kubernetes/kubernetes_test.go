package kubernetes

// Unit tests on k8s.io/client-go/kubernetes/fake: a stand-in for the API
// server that keeps objects in memory and serves watches, with no scheduler
// and no kubelet. The tests play those parts by writing the pod's status
// (scheduled or not, image pulled or not, running, terminated) and its log,
// and check what the runtime builds and how it classes each state. The
// real-cluster tests (a kube-apiserver and scheduler, PERFLAB_TEST_KUBE=1)
// live elsewhere.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/perflab/perflab/internal/engine"
)

const testNS = "lab"

func vllmConfig() engine.Config {
	return engine.Config{Engine: engine.VLLM, Model: "Qwen/Qwen3-0.6B", TensorParallel: 2}
}

func TestBuildPod(t *testing.T) {
	r := &Runtime{
		Labels:        map[string]string{LabelRun: "run-1"},
		HFCachePVC:    "hf-cache",
		HFTokenSecret: "hf",
		Env:           map[string]string{"X": "1"},
		NodeSelector:  map[string]string{"gpu": "h100"},
	}
	cfg := vllmConfig()
	cmd, err := engine.Render(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := engine.Launch{Config: cfg, Labels: map[string]string{LabelTrial: "run-1/stage-2/trial-3"}}
	sp, err := r.build(l, cmd, testNS, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := sp.pod
	if pod.Namespace != testNS || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("namespace %q restart policy %q", pod.Namespace, pod.Spec.RestartPolicy)
	}
	if len(validation.IsDNS1123Subdomain(pod.Name)) > 0 || !strings.HasPrefix(pod.Name, "perflab-vllm-") {
		t.Errorf("pod name %q", pod.Name)
	}
	c := pod.Spec.Containers[0]
	if !strings.HasPrefix(c.Image, "vllm/vllm-openai:v") {
		t.Errorf("image %q", c.Image)
	}
	if c.Command[0] != cmd.Argv[0] || !slices.Equal(c.Command[len(c.Command)-2:], []string{"--host=0.0.0.0", "--port=8000"}) || len(c.Args) != 0 {
		t.Errorf("command %q args %q", c.Command, c.Args)
	}
	if q := c.Resources.Limits[gpuResource]; q.Value() != 2 {
		t.Errorf("GPU limit %v, want 2", q.String())
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if env[EnvEngineVersion].Value != cfg.EffectiveVersion() || env["HF_HOME"].Value != hfHomeInPod || env["X"].Value != "1" {
		t.Errorf("env %v", c.Env)
	}
	if ref := env["HF_TOKEN"].ValueFrom; ref == nil || ref.SecretKeyRef.Name != "hf" || ref.SecretKeyRef.Key != "token" {
		t.Errorf("HF_TOKEN %+v", env["HF_TOKEN"])
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
	}
	if v := vols["dshm"]; v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("shm volume %+v", v)
	}
	if v := vols["hf-cache"]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "hf-cache" {
		t.Errorf("HF volume %+v", v)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["dshm"] != "/dev/shm" || mounts["hf-cache"] != hfHomeInPod {
		t.Errorf("mounts %v", mounts)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/health" || p.HTTPGet.Port.IntValue() != 8000 {
		t.Errorf("readiness probe %+v", p)
	}
	for k, v := range pod.Labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Errorf("label key %q: %v", k, errs)
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("label %s=%q: %v", k, v, errs)
		}
	}
	if pod.Labels[LabelManaged] != "true" || pod.Labels[LabelRun] != "run-1" || pod.Labels[LabelEngine] != "vllm" || pod.Labels[LabelConfig] == "" {
		t.Errorf("labels %v", pod.Labels)
	}
	if pod.Labels[LabelTrial] != LabelValue("run-1/stage-2/trial-3") || pod.Annotations[LabelTrial] != "run-1/stage-2/trial-3" {
		t.Errorf("trial label %q annotation %q", pod.Labels[LabelTrial], pod.Annotations[LabelTrial])
	}
	if pod.Annotations[LabelModel] != cfg.Model {
		t.Errorf("model annotation %q", pod.Annotations[LabelModel])
	}
	if pod.Spec.NodeSelector["gpu"] != "h100" || sp.files != nil || c.WorkingDir != "" {
		t.Errorf("node selector %v files %v workdir %q", pod.Spec.NodeSelector, sp.files, c.WorkingDir)
	}

	// No GPU, a host-path cache, another port.
	r = &Runtime{NoGPU: true, HFCacheHostPath: "/data/hf", Port: 9000}
	sp, err = r.build(l, cmd, testNS, &metav1.OwnerReference{Kind: "ConfigMap", Name: "o", UID: "u"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c = sp.pod.Spec.Containers[0]
	if _, ok := c.Resources.Limits[gpuResource]; ok {
		t.Errorf("NoGPU: limits %v", c.Resources.Limits)
	}
	if c.Command[len(c.Command)-1] != "--port=9000" || c.ReadinessProbe.HTTPGet.Port.IntValue() != 9000 {
		t.Errorf("port: %q", c.Command)
	}
	if refs := sp.pod.OwnerReferences; len(refs) != 1 || refs[0].Name != "o" {
		t.Errorf("owner references %v", refs)
	}
	hostPath := false
	for _, v := range sp.pod.Spec.Volumes {
		hostPath = hostPath || (v.HostPath != nil && v.HostPath.Path == "/data/hf")
	}
	if !hostPath {
		t.Errorf("no host-path HF volume: %+v", sp.pod.Spec.Volumes)
	}
}

func TestBuildTRTLLMFiles(t *testing.T) {
	cfg := engine.Config{Engine: engine.TRTLLM, Model: "Qwen/Qwen3-0.6B", EnforceEager: true}
	cmd, err := engine.Render(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmd.Files) == 0 {
		t.Fatal("the TensorRT-LLM config rendered no file")
	}
	r := &Runtime{Images: map[string]string{engine.TRTLLM: "sim:latest"}}
	sp, err := r.build(engine.Launch{Config: cfg}, cmd, testNS, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sp.files == nil || sp.files.Data[engine.TRTLLMOptionsFile] != cmd.Files[engine.TRTLLMOptionsFile] {
		t.Fatalf("files configmap %+v", sp.files)
	}
	c := sp.pod.Spec.Containers[0]
	if c.Image != "sim:latest" || c.WorkingDir != filesDir {
		t.Errorf("image %q workdir %q", c.Image, c.WorkingDir)
	}
	found := false
	for _, v := range sp.pod.Spec.Volumes {
		found = found || (v.ConfigMap != nil && v.ConfigMap.Name == sp.files.Name)
	}
	if !found || !slices.Contains(c.Command, "--extra_llm_api_options="+engine.TRTLLMOptionsFile) {
		t.Errorf("volumes %+v command %q", sp.pod.Spec.Volumes, c.Command)
	}
}

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("a", 100)
	for _, s := range []string{"ok-1.2_3", "run/trial", "/", "", long, "Qwen/Qwen3-14B", "-x-"} {
		v := LabelValue(s)
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("LabelValue(%q) = %q: %v", s, v, errs)
		}
		if v != LabelValue(s) {
			t.Errorf("LabelValue(%q) not stable", s)
		}
	}
	if LabelValue("ok-1.2_3") != "ok-1.2_3" || LabelValue("a/b") == LabelValue("a-b") {
		t.Error("valid values must stay, distinct values must stay distinct")
	}
	if n := ownerName(strings.Repeat("Run/", 30)); len(validation.IsDNS1123Subdomain(n)) > 0 {
		t.Errorf("owner name %q", n)
	}
}

// kube is a fake cluster and a runtime on it.
type kube struct {
	t   *testing.T
	cli *fake.Clientset
	rt  *Runtime
}

func newKube(t *testing.T) *kube {
	cli := fake.NewClientset()
	rt := &Runtime{
		Client: cli, Namespace: testNS, Access: PodIP, NoGPU: true,
		Labels:       map[string]string{LabelRun: "run-A"},
		PollInterval: 20 * time.Millisecond,
	}
	return &kube{t: t, cli: cli, rt: rt}
}

// logs makes the pod log read as these lines, with time stamps.
func (k *kube) logs(lines ...string) {
	var b strings.Builder
	ts := time.Now()
	for i, l := range lines {
		fmt.Fprintf(&b, "%s %s\n", ts.Add(time.Duration(i)*time.Millisecond).UTC().Format(time.RFC3339Nano), l)
	}
	k.cli.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "log" {
			return false, nil, nil
		}
		return true, &runtime.Unknown{Raw: []byte(b.String())}, nil
	})
}

func (k *kube) start(l engine.Launch) *handle {
	k.t.Helper()
	if l.Config.Engine == "" {
		l.Config = vllmConfig()
	}
	h, err := k.rt.Start(context.Background(), l)
	if err != nil {
		k.t.Fatal(err)
	}
	hh := h.(*handle)
	k.t.Cleanup(func() { _ = hh.Stop(context.Background()) })
	k.waitPod(hh.PodName())
	return hh
}

func (k *kube) waitPod(name string) *corev1.Pod {
	k.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := k.cli.CoreV1().Pods(testNS).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			return p
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("pod %s never created: %v", name, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// status rewrites the pod's status, as the scheduler or the kubelet would.
func (k *kube) status(name string, f func(*corev1.PodStatus)) {
	k.t.Helper()
	p := k.waitPod(name)
	f(&p.Status)
	if _, err := k.cli.CoreV1().Pods(testNS).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		k.t.Fatal(err)
	}
}

func running(ip string) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		s.Phase, s.PodIP = corev1.PodRunning, ip
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	}
}

func terminated(code int32, reason string) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		s.Phase = corev1.PodFailed
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}}
	}
}

// ready waits for Ready and returns its failure, timing it.
func ready(t *testing.T, h *handle, within time.Duration) *engine.Failure {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	err := h.Ready(ctx)
	if err == nil {
		return nil
	}
	var f *engine.Failure
	if !errors.As(err, &f) {
		t.Fatalf("Ready: %v, not a *engine.Failure", err)
	}
	return f
}

func (k *kube) gone(h *handle) {
	k.t.Helper()
	select {
	case <-h.Done():
	case <-time.After(5 * time.Second):
		k.t.Fatal("Done not closed")
	}
	if _, err := k.cli.CoreV1().Pods(testNS).Get(context.Background(), h.PodName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		k.t.Errorf("pod %s still there: %v", h.PodName(), err)
	}
}

func TestStartOwnerAndLabels(t *testing.T) {
	k := newKube(t)
	h := k.start(engine.Launch{Labels: map[string]string{LabelTrial: "run-A/t-1"}})
	pod := k.waitPod(h.PodName())
	owner, err := k.cli.CoreV1().ConfigMaps(testNS).Get(context.Background(), ownerName("run-A"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("owner configmap: %v", err)
	}
	if refs := pod.OwnerReferences; len(refs) != 1 || refs[0].Kind != "ConfigMap" || refs[0].Name != owner.Name || refs[0].UID != owner.UID {
		t.Errorf("owner references %+v, owner %s/%s", refs, owner.Name, owner.UID)
	}
	if pod.Annotations[LabelTrial] != "run-A/t-1" || pod.Labels[LabelRun] != "run-A" {
		t.Errorf("labels %v annotations %v", pod.Labels, pod.Annotations)
	}
	if l := h.LogTail(0); len(l) == 0 || !strings.Contains(l[0], "directly at its pod IP") {
		t.Errorf("first log line %q", l)
	}
}

func TestReadyUnschedulable(t *testing.T) {
	k := newKube(t)
	h := k.start(engine.Launch{})
	msg := "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
	k.status(h.PodName(), func(s *corev1.PodStatus) {
		s.Phase = corev1.PodPending
		s.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: msg}}
	})
	t0 := time.Now()
	f := ready(t, h, 10*time.Second)
	if f == nil || f.Class != engine.ClassUnschedulable || !strings.Contains(f.Reason, msg) {
		t.Fatalf("failure %+v", f)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("unschedulable took %v", d)
	}
	k.gone(h)
	if h.Failure() != f {
		t.Errorf("Failure() %+v", h.Failure())
	}
}

func TestReadyImagePull(t *testing.T) {
	for _, reason := range []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName"} {
		t.Run(reason, func(t *testing.T) {
			k := newKube(t)
			k.rt.Images = map[string]string{engine.VLLM: "registry.invalid/nope:1"}
			h := k.start(engine.Launch{})
			k.status(h.PodName(), func(s *corev1.PodStatus) {
				s.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{
					Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "manifest unknown"}}}}
			})
			f := ready(t, h, 5*time.Second)
			if f == nil || f.Class != engine.ClassImageUnavailable || !strings.Contains(f.Reason, "registry.invalid/nope:1") {
				t.Fatalf("failure %+v", f)
			}
			k.gone(h)
		})
	}
}

func TestReadyOOMKilled(t *testing.T) {
	k := newKube(t)
	h := k.start(engine.Launch{})
	k.status(h.PodName(), running("127.0.0.7"))
	k.status(h.PodName(), terminated(137, "OOMKilled"))
	f := ready(t, h, 5*time.Second)
	if f == nil || f.Class != engine.ClassOOM || f.ExitCode != 137 {
		t.Fatalf("failure %+v", f)
	}
	k.gone(h)
}

func TestReadyExitBeforeReady(t *testing.T) {
	k := newKube(t)
	k.logs("INFO loading", "ValueError: no such model")
	h := k.start(engine.Launch{})
	k.status(h.PodName(), running("127.0.0.7"))
	k.status(h.PodName(), terminated(1, "Error"))
	f := ready(t, h, 5*time.Second)
	if f == nil || f.Class != engine.ClassStartupCrash || f.ExitCode != 1 ||
		!strings.Contains(f.Reason, "status 1") || !strings.Contains(f.Reason, "ValueError: no such model") {
		t.Fatalf("failure %+v", f)
	}
	k.gone(h)
	// The log outlives the pod.
	if tail := h.LogTail(0); !slices.Contains(tail, "ValueError: no such model") {
		t.Errorf("log tail %q", tail)
	}
}

func TestReadyOOMLine(t *testing.T) {
	k := newKube(t)
	k.logs("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "exiting")
	h := k.start(engine.Launch{})
	k.status(h.PodName(), running("127.0.0.7"))
	k.status(h.PodName(), terminated(1, "Error"))
	f := ready(t, h, 5*time.Second)
	if f == nil || f.Class != engine.ClassOOM || !strings.Contains(f.Reason, "CUDA out of memory") {
		t.Fatalf("failure %+v", f)
	}
}

// server is an OpenAI-compatible stand-in on 127.0.0.1 at a free port.
func server(t *testing.T, model string) int {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
		case "/v1/models":
			fmt.Fprintf(w, `{"data":[{"id":%q}]}`, model)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return p
}

func TestReadyPodIPThenCrashDuringBench(t *testing.T) {
	k := newKube(t)
	cfg := vllmConfig()
	k.rt.Port = server(t, cfg.ServedName())
	h := k.start(engine.Launch{Config: cfg})
	if h.BaseURL() != "" {
		t.Errorf("BaseURL before the pod has an IP: %q", h.BaseURL())
	}
	k.status(h.PodName(), running("127.0.0.1"))
	if f := ready(t, h, 5*time.Second); f != nil {
		t.Fatalf("Ready: %+v", f)
	}
	if want := fmt.Sprintf("http://127.0.0.1:%d", k.rt.Port); h.BaseURL() != want {
		t.Errorf("BaseURL %q, want %q", h.BaseURL(), want)
	}
	engine.MarkBenchmarking(h)
	k.status(h.PodName(), terminated(139, "Error"))
	k.gone(h)
	if f := h.Failure(); f == nil || f.Class != engine.ClassCrashDuringBench {
		t.Fatalf("failure %+v", f)
	}
}

func TestReadyDiedAfterReady(t *testing.T) {
	k := newKube(t)
	cfg := vllmConfig()
	k.rt.Port = server(t, cfg.ServedName())
	h := k.start(engine.Launch{Config: cfg})
	k.status(h.PodName(), running("127.0.0.1"))
	if f := ready(t, h, 5*time.Second); f != nil {
		t.Fatalf("Ready: %+v", f)
	}
	k.status(h.PodName(), terminated(1, "Error"))
	k.gone(h)
	if f := h.Failure(); f == nil || f.Class != engine.ClassUnhealthy {
		t.Fatalf("failure %+v", f)
	}
}

func TestReadyStall(t *testing.T) {
	k := newKube(t)
	h := k.start(engine.Launch{StallTimeout: 300 * time.Millisecond})
	f := ready(t, h, 5*time.Second)
	if f == nil || f.Class != engine.ClassHung {
		t.Fatalf("failure %+v", f)
	}
	if err := h.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	k.gone(h)
}

func TestStopPending(t *testing.T) {
	k := newKube(t)
	h, err := k.rt.Start(context.Background(), engine.Launch{Config: vllmConfig()})
	if err != nil {
		t.Fatal(err)
	}
	// At once, the create perhaps still under way.
	if err := h.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	k.gone(h.(*handle))
	if f := h.Failure(); f != nil {
		t.Errorf("a stopped server failed: %+v", f)
	}
	pods, _ := k.cli.CoreV1().Pods(testNS).List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 0 {
		t.Errorf("pods left: %d", len(pods.Items))
	}
	if err := h.Ready(context.Background()); err == nil {
		t.Error("Ready after Stop succeeded")
	}
}

func TestStopTRTLLMRemovesFiles(t *testing.T) {
	k := newKube(t)
	h := k.start(engine.Launch{Config: engine.Config{Engine: engine.TRTLLM, Model: "m", EnforceEager: true}})
	name := h.PodName() + "-files"
	if _, err := k.cli.CoreV1().ConfigMaps(testNS).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
		t.Fatalf("files configmap: %v", err)
	}
	if err := h.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := k.cli.CoreV1().ConfigMaps(testNS).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("files configmap left: %v", err)
	}
}

func TestCleanupAndSweep(t *testing.T) {
	k := newKube(t)
	a1 := k.start(engine.Launch{Labels: map[string]string{LabelTrial: "run-A/t-1"}})
	a2 := k.start(engine.Launch{Labels: map[string]string{LabelTrial: "run-A/t-2"}})
	other := &Runtime{Client: k.cli, Namespace: testNS, Access: PodIP, NoGPU: true, Labels: map[string]string{LabelRun: "run-B"}}
	hb, err := other.Start(context.Background(), engine.Launch{Config: vllmConfig()})
	if err != nil {
		t.Fatal(err)
	}
	b := hb.(*handle)
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	k.waitPod(b.PodName())

	// One trial of run A, by its raw key.
	got, err := k.rt.Cleanup(context.Background(), map[string]string{LabelRun: "run-A", LabelTrial: "run-A/t-1"})
	if err != nil || !slices.Equal(got, []string{a1.PodName()}) {
		t.Fatalf("Cleanup of a trial: %v, %v", got, err)
	}
	cms := k.cli.CoreV1().ConfigMaps(testNS)
	if _, err := cms.Get(context.Background(), ownerName("run-A"), metav1.GetOptions{}); err != nil {
		t.Errorf("the owner went with one trial's cleanup: %v", err)
	}
	got, err = k.rt.Sweep(context.Background())
	if err != nil || !slices.Equal(got, []string{a2.PodName()}) {
		t.Fatalf("Sweep: %v, %v", got, err)
	}
	if _, err := cms.Get(context.Background(), ownerName("run-A"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("owner of run A left: %v", err)
	}
	if _, err := k.cli.CoreV1().Pods(testNS).Get(context.Background(), b.PodName(), metav1.GetOptions{}); err != nil {
		t.Errorf("run B's pod swept with run A's: %v", err)
	}
	if got, err := (&Runtime{Client: k.cli, Namespace: testNS, Access: PodIP}).Sweep(context.Background()); err != nil || got != nil {
		t.Errorf("Sweep without a run label: %v, %v", got, err)
	}
	// A server whose pod was swept under it failed.
	k.gone(a1)
	if f := a1.Failure(); f == nil || f.Class != engine.ClassStartupCrash {
		t.Errorf("swept server's failure %+v", f)
	}
	// Everything.
	got, err = (&Runtime{Client: k.cli, Namespace: testNS, Access: PodIP}).Cleanup(context.Background(), nil)
	if err != nil || !slices.Equal(got, []string{b.PodName()}) {
		t.Fatalf("Cleanup of all: %v, %v", got, err)
	}
}

func TestStopRunningGrace(t *testing.T) {
	k := newKube(t)
	h := k.start(engine.Launch{StopGrace: 3 * time.Second})
	k.status(h.PodName(), running("127.0.0.7"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.mu.Lock()
		started := h.started
		h.mu.Unlock()
		if started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the running pod was never seen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	k.cli.ClearActions()
	if err := h.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	k.gone(h)
	var graces []int64
	for _, a := range k.cli.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "pods" {
			if g := d.GetDeleteOptions().GracePeriodSeconds; g != nil {
				graces = append(graces, *g)
			}
		}
	}
	if len(graces) == 0 || graces[0] != 3 {
		t.Errorf("pod deleted with grace %v, want 3 s first", graces)
	}
	if f := h.Failure(); f != nil {
		t.Errorf("a stopped server failed: %+v", f)
	}
}

func TestPullEventsAndPullTimeout(t *testing.T) {
	k := newKube(t)
	k.rt.PullTimeout = 300 * time.Millisecond
	h := k.start(engine.Launch{StallTimeout: time.Minute})
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: h.PodName() + ".1", Namespace: testNS, UID: "e1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: h.PodName(), Namespace: testNS},
		Reason:         "Pulling", Message: "Pulling image \"" + h.Image() + "\"", Type: corev1.EventTypeNormal,
		LastTimestamp: metav1.Now(),
	}
	if _, err := k.cli.CoreV1().Events(testNS).Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := ready(t, h, 10*time.Second)
	if f == nil || f.Class != engine.ClassHung || !strings.Contains(f.Reason, "pull of "+h.Image()) {
		t.Fatalf("failure %+v", f)
	}
	found := false
	for _, l := range h.LogTail(0) {
		found = found || strings.Contains(l, "event Normal Pulling")
	}
	if !found {
		t.Errorf("no event in the log: %q", h.LogTail(0))
	}
}

// TestReadinessProbeDoesNotGenerate: SGLang's /health runs a one-token
// generation while SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is on, its
// default (python/sglang/srt/environ.py, EnvBool(True);
// entrypoints/http_server.py health_generate). A pod probed every 5 s
// must start with it off, unless the config says otherwise; the other
// engines' /health never generates and gets no such variable.
func TestReadinessProbeDoesNotGenerate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  engine.Config
		want string // the variable's value, "" for absent
	}{
		{"sglang", engine.Config{Engine: engine.SGLang, Model: "Qwen/Qwen3-0.6B"}, "false"},
		{"sglang, the config's own say", engine.Config{Engine: engine.SGLang, Model: "Qwen/Qwen3-0.6B",
			Env: map[string]string{engine.SGLangHealthGenerationEnv: "true"}}, "true"},
		{"vllm", vllmConfig(), ""},
		{"trtllm", engine.Config{Engine: engine.TRTLLM, Model: "Qwen/Qwen3-0.6B"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, err := engine.Render(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			sp, err := (&Runtime{}).build(engine.Launch{Config: tc.cfg}, cmd, testNS, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			c := sp.pod.Spec.Containers[0]
			got := ""
			for _, e := range c.Env {
				if e.Name == engine.SGLangHealthGenerationEnv {
					got = e.Value
				}
			}
			if got != tc.want {
				t.Errorf("%s = %q, want %q", engine.SGLangHealthGenerationEnv, got, tc.want)
			}
			if p := c.ReadinessProbe.HTTPGet.Path; p != engine.ProtocolFor(tc.cfg.Engine).ProbePath() || p != "/health" {
				t.Errorf("readiness probe path %q", p)
			}
		})
	}
}

// TestClassifyEndGPUBusy: a pod whose vLLM died of its start-up memory
// guard (vllm/v1/worker/gpu_worker.py) is gpu_busy, a wait, not a
// startup_crash; an out-of-memory line is still oom.
func TestClassifyEndGPUBusy(t *testing.T) {
	for _, tc := range []struct {
		line string
		want engine.FailureClass
	}{
		{"ValueError: Free memory on device (3.25/79.19 GiB) on startup is less than desired GPU memory utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.", engine.ClassGPUBusy},
		{"torch.OutOfMemoryError: CUDA out of memory.", engine.ClassOOM},
		{"error: unrecognized arguments: --bad", engine.ClassStartupCrash},
	} {
		h := &handle{lc: engine.NewLifecycle(10, nil)}
		h.lc.Note(tc.line)
		if f := h.lc.Exited(engine.Exit{Code: 1, What: "container exited (status 1)"}); f.Class != tc.want {
			t.Errorf("%q: class %s, want %s", tc.line, f.Class, tc.want)
		}
	}
}
