package lab_test

// The kubernetes runtime end to end, on a real kube-apiserver, etcd and
// kube-scheduler (.ci/kube.sh starts them and exports KUBECONFIG). The one
// stand-in is internal/fakekubelet, for the kubelet and its container
// runtime that cannot run here: it registers a node with 4 nvidia.com/gpu,
// runs the pods the real scheduler binds to it as local processes of the
// perflab binary (the simulated engine image's content), each on its own
// loopback pod IP, and writes their status back. perflab reaches the pods
// by their IP (access: pod-ip), as it does when it runs in the cluster.

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/engine/kubernetes"
	"github.com/perflab/perflab/internal/fakekubelet"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/simimage"
	"github.com/perflab/perflab/internal/store"
)

// kubeImage is the simulated engine image as the fake node knows it; any
// other image is ErrImagePull there.
const kubeImage = "perflab-sim:e2e"

// kubeE2E connects to the test cluster, runs the fake node for the test,
// and returns the client and a fresh namespace. It skips without
// PERFLAB_TEST_KUBE=1, and fails without it under CI=true.
func kubeE2E(t *testing.T) (cli k8s.Interface, ns, node string) {
	t.Helper()
	e2eRoot(t)
	if os.Getenv("PERFLAB_TEST_KUBE") != "1" {
		if os.Getenv("CI") == "true" {
			t.Fatal("PERFLAB_TEST_KUBE is not 1 under CI=true: .ci/run must start the test cluster (.ci/kube.sh)")
		}
		t.Skip("PERFLAB_TEST_KUBE=1 not set (.ci/kube.sh starts a test cluster)")
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err = k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 3)
	rand.Read(b)
	suffix := hex.EncodeToString(b)
	ns = "perflab-e2e-" + suffix
	if _, err := cli.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No namespace controller runs: a deleted namespace would stay
	// Terminating, so it is left, empty, in the throwaway cluster.
	ctx, cancel := context.WithCancel(context.Background())
	kl := &fakekubelet.Kubelet{Client: cli, Node: "perflab-node-" + suffix, GPUs: 4, Binary: perflabBin,
		Images: map[string]bool{kubeImage: true}, ImageEnv: []string{simimage.EnvMarker + "=1"}}
	done := make(chan error, 1)
	go func() { done <- kl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("fake kubelet: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("fake kubelet did not stop")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := cli.CoreV1().Nodes().Get(t.Context(), kl.Node, metav1.GetOptions{})
		if err == nil && !n.Status.Allocatable.Name("nvidia.com/gpu", "").IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fake node did not register: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cli, ns, kl.Node
}

// kubeSpec is a lab whose configs need 1, 2, 4 and 8 GPUs on a node of 4:
// two 1-GPU candidates in one stage (they run side by side), then TP2 and
// TP4 (placed by the scheduler as GPUs free up) and TP8, which no node
// can hold. The spec claims 8 GPUs, so the lab lets the cluster refuse.
const kubeSpec = `
name: kube-e2e
model: Qwen/Qwen3-14B
hardware: {gpu: H100, count: 8}
engines:
  - {name: vllm, version: 0.11.0}
runtime: kubernetes
tokenizer: TOKENIZER
images: {vllm: ` + kubeImage + `}
kubernetes:
  namespace: NAMESPACE
  access: pod-ip
  simulated: true
  gpu_requests: true
  node_selector: {kubernetes.io/hostname: NODE}
time_scale: 20
tuning: {name: rnd, dataset: random, input_len: 256, output_len: 32, num_prompts: 48, seed: 42}
generalization:
  - {name: short, dataset: random, input_len: 128, output_len: 4, num_prompts: 24, seed: 42}
stages:
  - name: max_num_seqs
    values: ["16", "32"]
  - name: parallelism
    values: [tp2-dp1, tp4-dp1, tp8-dp1]
search: {disable: true}
combinations: false
repeats: 1
parallel: 4
`

func writeKubeSpec(t *testing.T, ns, node string) (spec, db string) {
	dir := t.TempDir()
	spec = filepath.Join(dir, "kube.yaml")
	text := strings.Replace(kubeSpec, "NAMESPACE", ns, 1)
	text = strings.Replace(text, "NODE", node, 1)
	text = strings.Replace(text, "TOKENIZER", shareddata.Path(t, "data", "tokenizers", "qwen3"), 1)
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec, "sqlite:" + filepath.Join(dir, "lab.db")
}

// perflabPods lists the pods perflab started in ns.
func perflabPods(t *testing.T, cli k8s.Interface, ns string) []string {
	t.Helper()
	list, err := cli.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "perflab.managed=true"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Name)
	}
	return out
}

// waitNoPods waits (a kubelet's delete is asynchronous) until ns holds no
// perflab pod, and fails the test if some remain.
func waitNoPods(t *testing.T, cli k8s.Interface, ns string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := perflabPods(t, cli, ns)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("pods left: %v", left)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kubeLab is perflab lab on the test cluster, killed if it runs past 5
// minutes (the output then shows where it stood).
func kubeLab(t *testing.T, spec, db string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), kubeLabTimeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, perflabBin, append([]string{"lab", spec, "--db", db}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+os.Getenv("KUBECONFIG"))
	return cmd
}

func TestE2EKubeLab(t *testing.T) {
	cli, ns, node := kubeE2E(t)
	spec, db := writeKubeSpec(t, ns, node)
	out := t.TempDir()
	start := time.Now()
	b, err := kubeLab(t, spec, db, "--out", out).CombinedOutput()
	if err != nil {
		t.Fatalf("perflab lab --runtime kubernetes: %v\n%s", err, b)
	}
	t.Logf("lab on the test cluster in %s:\n%s", time.Since(start).Round(time.Second), lastLines(string(b), 4))
	if _, err := os.Stat(filepath.Join(out, "report.md")); err != nil {
		t.Error(err)
	}
	waitNoPods(t, cli, ns)
	trials := storedTrials(t, db)
	byGPUs := map[int][]store.Trial{}
	for _, tr := range trials {
		var cfg engine.Config
		if err := json.Unmarshal(tr.Config, &cfg); err != nil {
			t.Fatal(err)
		}
		byGPUs[labspec.GPUs(cfg)] = append(byGPUs[labspec.GPUs(cfg)], tr)
	}
	for _, n := range []int{1, 2, 4} {
		for _, tr := range byGPUs[n] {
			if tr.Status != "ok" {
				t.Errorf("%d-GPU trial %s: %s %s", n, tr.Name, tr.FailureClass, tr.Reason)
			}
		}
		if len(byGPUs[n]) == 0 {
			t.Errorf("no %d-GPU trial ran", n)
		}
	}
	// The 8-GPU config: refused by the scheduler, at once, in its words.
	if len(byGPUs[8]) != 1 {
		t.Fatalf("8-GPU trials: %d, want 1", len(byGPUs[8]))
	}
	big := byGPUs[8][0]
	if big.FailureClass != string(engine.ClassUnschedulable) || !strings.Contains(big.Reason, "nvidia.com/gpu") {
		t.Errorf("8-GPU trial: %s %q, want unschedulable with the scheduler's message", big.FailureClass, big.Reason)
	}
	if d := big.Ended.Sub(big.Started); d > 10*time.Second {
		t.Errorf("the unschedulable trial took %s to be classed, want under 10 s", d)
	}
	// The two 1-GPU candidates of the max_num_seqs stage ran at once.
	var ones []store.Trial
	for _, tr := range byGPUs[1] {
		if tr.Stage == "max_num_seqs" {
			ones = append(ones, tr)
		}
	}
	if len(ones) != 2 {
		t.Fatalf("1-GPU trials in stage max_num_seqs: %d, want 2", len(ones))
	}
	if !(ones[0].Started.Before(ones[1].Ended) && ones[1].Started.Before(ones[0].Ended)) {
		t.Errorf("the two 1-GPU trials did not overlap: %s–%s and %s–%s", ones[0].Started, ones[0].Ended, ones[1].Started, ones[1].Ended)
	}
	// Each measured trial says where its pod ran and how it was reached.
	for _, tr := range byGPUs[1] {
		if !strings.Contains(tr.Reason, "on node "+node) || !strings.Contains(tr.Reason, "reached by pod IP at http://127.0.0.") {
			t.Errorf("trial %s's record does not say where its pod ran: %q", tr.Name, tr.Reason)
		}
	}
	t.Logf("unschedulable in %s: %s", big.Ended.Sub(big.Started).Round(time.Millisecond), big.Reason)
}

// perflab killed with -9 leaves its pods (no kubelet ends them with it);
// the rerun deletes them before it starts its own, resumes without running
// a finished trial again, and leaves no pod.
func TestE2EKubeKillAndResume(t *testing.T) {
	cli, ns, node := kubeE2E(t)
	spec, db := writeKubeSpec(t, ns, node)
	cmd := kubeLab(t, spec, db, "--out", t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	ran := 0
	for sc.Scan() && ran < 2 {
		if strings.Contains(sc.Text(), "] ran ") {
			ran++
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for sc.Scan() {
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for len(perflabPods(t, cli, ns)) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	wg.Wait()
	stale := perflabPods(t, cli, ns)
	if len(stale) == 0 {
		t.Fatal("no pod was up when perflab was killed: the test proves nothing")
	}
	before := storedTrials(t, db)
	if len(before) < 2 {
		t.Fatalf("%d trials stored before the kill, want at least 2", len(before))
	}
	b, err := kubeLab(t, spec, db, "--out", t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, b)
	}
	rerun := checkResumed(t, db, before, b)
	waitNoPods(t, cli, ns)
	t.Logf("%d pods outlived perflab; resumed: %d stored trials kept, %d rerun", len(stale), len(before), rerun)
}

// A pod whose image the node cannot pull is image_unavailable, named.
func TestE2EKubeImageUnavailable(t *testing.T) {
	_, ns, node := kubeE2E(t)
	rt := newKubeRuntime(t, ns, "registry.invalid/vllm:nope")
	rt.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	h, err := rt.Start(t.Context(), engine.Launch{Config: engine.Config{Engine: engine.VLLM, Model: "Qwen/Qwen3-14B"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	err = h.Ready(ctx)
	f, ok := err.(*engine.Failure)
	if !ok || f.Class != engine.ClassImageUnavailable || !strings.Contains(f.Reason, "registry.invalid/vllm:nope") {
		t.Fatalf("Ready: %v, want image_unavailable naming the image", err)
	}
}

func newKubeRuntime(t *testing.T, ns, image string) *kubernetes.Runtime {
	t.Helper()
	return &kubernetes.Runtime{Namespace: ns, Images: map[string]string{engine.VLLM: image}, Access: kubernetes.PodIP,
		NoGPU: true, Labels: map[string]string{engine.LabelRun: "e2e-" + ns}}
}

// kubeLabTimeout bounds one perflab lab on the test cluster.
var kubeLabTimeout = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("PERFLAB_KUBE_LAB_TIMEOUT")); err == nil {
		return d
	}
	return 5 * time.Minute
}()

// deploy/kubernetes applies to the real API server, and the RBAC it grants
// is enough for a lab: the lab runs with the perflab ServiceAccount's own
// token (a TokenRequest), not the test's admin one. (The Job object is
// created but its pod never placed: no volume here matches its claim. The
// lab is run as the Job would run it, from outside with that token;
// TestE2EKubeJob runs the Job itself.)
func TestE2EKubeDeployRBAC(t *testing.T) {
	cli, _, node := kubeE2E(t)
	root := shareddata.RepoRoot(t)
	ns := "perflab" // as the manifests name it
	files, err := filepath.Glob(filepath.Join(root, "deploy", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("deploy/kubernetes: %v %v", files, err)
	}
	slices.SortStableFunc(files, func(a, b string) int { // the namespace first
		first := func(f string) int {
			if filepath.Base(f) == "namespace.yaml" {
				return 0
			}
			return 1
		}
		return cmp.Compare(first(a), first(b))
	})
	ctx := t.Context()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(data), "\n---\n") {
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("%s: document %d: %v", filepath.Base(f), i+1, err)
			}
			if err := applyObject(ctx, cli, obj); err != nil {
				t.Fatalf("%s: document %d: %v", filepath.Base(f), i+1, err)
			}
		}
	}
	exp := int64(3600)
	tok, err := cli.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "perflab",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.NewDefaultClientConfigLoadingRules().Load()
	if err != nil {
		t.Fatal(err)
	}
	sa := clientcmdapi.NewConfig()
	for name, c := range admin.Clusters {
		sa.Clusters[name] = c
	}
	sa.AuthInfos["perflab"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	for name := range admin.Clusters {
		sa.Contexts["perflab"] = &clientcmdapi.Context{Cluster: name, AuthInfo: "perflab", Namespace: ns}
		break
	}
	sa.CurrentContext = "perflab"
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*sa, kc); err != nil {
		t.Fatal(err)
	}
	spec, db := writeKubeSpec(t, ns, node)
	cmd := kubeLab(t, spec, db, "--out", t.TempDir())
	cmd.Env = append(cmd.Env, "KUBECONFIG="+kc) // the last one wins
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the lab under the perflab ServiceAccount: %v\n%s", err, b)
	}
	for _, tr := range storedTrials(t, db) {
		if tr.Status != "ok" && tr.FailureClass != string(engine.ClassUnschedulable) {
			t.Errorf("trial %s under the ServiceAccount: %s %s", tr.Name, tr.FailureClass, tr.Reason)
		}
	}
	waitNoPods(t, cli, ns)
	t.Logf("lab under the perflab ServiceAccount's token:\n%s", lastLines(string(b), 2))
}

// applyObject creates one object of the manifests (or leaves it if there).
func applyObject(ctx context.Context, cli k8s.Interface, obj runtime.Object) error {
	var err error
	switch o := obj.(type) {
	case *corev1.Namespace:
		_, err = cli.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ServiceAccount:
		_, err = cli.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.ConfigMap:
		_, err = cli.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.PersistentVolumeClaim:
		_, err = cli.CoreV1().PersistentVolumeClaims(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.Role:
		_, err = cli.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.RoleBinding:
		_, err = cli.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *batchv1.Job:
		_, err = cli.BatchV1().Jobs(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		return fmt.Errorf("unexpected kind %T in deploy/kubernetes", obj)
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// From outside a cluster perflab reaches a pod through a port-forward:
// client-go's SPDY port-forward, through the real API server, to the
// stand-in kubelet's portForward (the kubelet's own streaming code), to the
// engine. The server answers through it, and the trial's place says so.
func TestE2EKubePortForward(t *testing.T) {
	_, ns, node := kubeE2E(t)
	rt := newKubeRuntime(t, ns, kubeImage)
	rt.Access = kubernetes.PortForward
	rt.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	h, err := rt.Start(t.Context(), engine.Launch{Config: engine.Config{Engine: engine.VLLM, Model: "Qwen/Qwen3-14B"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := h.Ready(ctx); err != nil {
		t.Fatalf("Ready through a port-forward: %v\n%s", err, strings.Join(h.LogTail(20), "\n"))
	}
	if !strings.HasPrefix(h.BaseURL(), "http://127.0.0.1:") {
		t.Errorf("BaseURL %s, want a local forwarded port", h.BaseURL())
	}
	resp, err := http.Get(h.BaseURL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Qwen/Qwen3-14B") {
		t.Errorf("GET /v1/models through the port-forward: %d %s", resp.StatusCode, body)
	}
	if w := engine.WhereOf(h); !strings.Contains(w, "port-forward") || !strings.Contains(w, node) {
		t.Errorf("Where = %q, want the port-forward and the node", w)
	}
	if err := h.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
