package lab_test

// deploy/kubernetes as a user applies it, run by the real Job controller
// (kube-controller-manager, started by .ci/kube.sh with the Job and the
// PersistentVolume binder controllers): the controller creates the Job's
// pod, the real scheduler places it, the stand-in kubelet runs it as
// perflab's own image would (its ENTRYPOINT, read from the Dockerfile, is
// the perflab binary), the lab inside starts its engine pods through the
// API server with the pod's ServiceAccount token, writes its store and
// report to the results volume, and exits 0; the controller then marks
// the Job Complete. Without a controller no pod is ever created, and the
// test fails saying so.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/perflab/perflab/internal/fakekubelet"
	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/simimage"
)

// perflabImage is perflab's own image as the fake node knows it.
const perflabImage = "perflab:e2e"

// kubeJobSpec is the small lab the test puts in the spec ConfigMap in place
// of the example's: one simulated vLLM config, a few prompts, one short
// generalization case (the default suite would run eight more trials).
const kubeJobSpec = `
name: kube-job-e2e
model: Qwen/Qwen3-14B
hardware: {gpu: H100, count: 1}
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
tuning: {name: rnd, dataset: random, input_len: 128, output_len: 8, num_prompts: 12, seed: 42}
generalization:
  - {name: short, dataset: random, input_len: 64, output_len: 4, num_prompts: 6, seed: 42}
stages:
  - name: max_num_seqs
    values: ["32"]
search: {disable: true}
combinations: false
repeats: 1
`

// dockerEntrypoint is the ENTRYPOINT of the repository's Dockerfile (its
// exec form), the program perflab's image runs.
func dockerEntrypoint(t *testing.T, root string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var ep []string
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "ENTRYPOINT "); ok {
			if err := json.Unmarshal([]byte(rest), &ep); err != nil {
				t.Fatalf("Dockerfile: ENTRYPOINT %q is not the exec form: %v", strings.TrimSpace(rest), err)
			}
		}
	}
	if len(ep) == 0 {
		t.Fatal("Dockerfile: no ENTRYPOINT")
	}
	return ep
}

// deployObjects decodes deploy/kubernetes/*.yaml, the namespace first.
func deployObjects(t *testing.T, root string) []runtime.Object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "deploy", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("deploy/kubernetes: %v %v", files, err)
	}
	var objs []runtime.Object
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
			objs = append(objs, obj)
		}
	}
	slices.SortStableFunc(objs, func(a, b runtime.Object) int {
		_, na := a.(*corev1.Namespace)
		_, nb := b.(*corev1.Namespace)
		switch {
		case na && !nb:
			return -1
		case nb && !na:
			return 1
		}
		return 0
	})
	return objs
}

func TestE2EKubeJob(t *testing.T) {
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
	cli, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	root := shareddata.RepoRoot(t)
	b := make([]byte, 3)
	rand.Read(b)
	suffix := hex.EncodeToString(b)
	// A namespace of its own, not the manifests' "perflab" (which
	// TestE2EKubeDeployRBAC applies), and a node of its own.
	ns, node := "perflab-job-"+suffix, "perflab-job-node-"+suffix

	// The node: it has both images, perflab's with the Dockerfile's
	// entrypoint, and gives a pod its ServiceAccount's credentials.
	ctx, cancel := context.WithCancel(context.Background())
	kl := &fakekubelet.Kubelet{Client: cli, Node: node, GPUs: 1, Binary: perflabBin,
		Images:      map[string]bool{kubeImage: true, perflabImage: true},
		ImageEnv:    []string{simimage.EnvMarker + "=1"},
		Entrypoints: map[string][]string{perflabImage: dockerEntrypoint(t, root)},
		InCluster:   cfg}
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

	// The results volume: a hostPath PersistentVolume bound in advance to
	// this namespace's claim (the binder honours the claimRef, so no other
	// claim of the same shape takes it).
	results := t.TempDir()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "perflab-results-" + suffix},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: results}},
			ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: "perflab-results"},
		},
	}
	if _, err := cli.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The manifests, adapted here: the namespace, the spec, the image and
	// the node; everything else as a user applies it.
	spec := strings.NewReplacer("NAMESPACE", ns, "NODE", node,
		"TOKENIZER", shareddata.Path(t, "data", "tokenizers", "qwen3")).Replace(kubeJobSpec)
	var job *batchv1.Job
	for _, obj := range deployObjects(t, root) {
		if m, ok := obj.(metav1.Object); ok && m.GetNamespace() != "" {
			m.SetNamespace(ns)
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			o.Name = ns
		case *rbacv1.RoleBinding:
			for i := range o.Subjects {
				o.Subjects[i].Namespace = ns
			}
		case *corev1.ConfigMap:
			if _, ok := o.Data["lab.yaml"]; !ok {
				t.Fatalf("deploy/kubernetes: ConfigMap %s has no lab.yaml", o.Name)
			}
			o.Data["lab.yaml"] = spec
		case *batchv1.Job:
			if n := len(o.Spec.Template.Spec.Containers); n != 1 {
				t.Fatalf("deploy/kubernetes: the Job has %d containers, want 1", n)
			}
			o.Spec.Template.Spec.Containers[0].Image = perflabImage
			o.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
			job = o
		}
		if err := applyObject(t.Context(), cli, obj); err != nil {
			t.Fatalf("apply %T: %v", obj, err)
		}
	}
	if job == nil {
		t.Fatal("deploy/kubernetes has no Job")
	}

	// The controller's pod within 30 s, then the Job's end.
	sel := "job-name=" + job.Name
	start := time.Now()
	var podName string
	for podName == "" {
		pods, err := cli.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) > 0 {
			podName = pods.Items[0].Name
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("no pod for the Job after 30 s: is kube-controller-manager running with the Job controller (.ci/kube.sh)?")
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the Job controller created pod %s in %s", podName, time.Since(start).Round(time.Millisecond))
	deadline := time.Now().Add(kubeLabTimeout)
	var cond batchv1.JobConditionType
	for cond == "" {
		j, err := cli.BatchV1().Jobs(ns).Get(t.Context(), job.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range j.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				cond = c.Type
			}
		}
		if cond == "" && time.Now().After(deadline) {
			t.Fatalf("the Job has not ended after %s: %+v", kubeLabTimeout, j.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	logs, _ := cli.CoreV1().Pods(ns).GetLogs(podName, &corev1.PodLogOptions{}).DoRaw(context.Background())
	p, err := cli.CoreV1().Pods(ns).Get(t.Context(), podName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cond != batchv1.JobComplete {
		t.Fatalf("the Job ended %s; pod %s: %s %+v; its log:\n%s", cond, podName, p.Status.Phase, p.Status.ContainerStatuses, logs)
	}
	t.Logf("the Job Complete %s after its creation; the lab's last lines:\n%s", time.Since(start).Round(time.Millisecond), lastLines(string(logs), 3))
	if p.Status.Phase != corev1.PodSucceeded || len(p.Status.ContainerStatuses) != 1 ||
		p.Status.ContainerStatuses[0].State.Terminated == nil || p.Status.ContainerStatuses[0].State.Terminated.ExitCode != 0 {
		t.Errorf("pod %s: %s %+v, want Succeeded with exit code 0", podName, p.Status.Phase, p.Status.ContainerStatuses)
	}
	if p.Spec.NodeName != node {
		t.Errorf("pod %s ran on %q, want the fake node %s", podName, p.Spec.NodeName, node)
	}

	// The lab's store and report, in the results volume.
	if _, err := os.Stat(filepath.Join(results, "out", "report.md")); err != nil {
		t.Errorf("no report in the results volume: %v", err)
	}
	trials := storedTrials(t, "sqlite:"+filepath.Join(results, "perflab.db"))
	if len(trials) == 0 {
		t.Error("no trial in the results volume's store")
	}
	for _, tr := range trials {
		if tr.Status != "ok" {
			t.Errorf("trial %s: %s %s %s", tr.Name, tr.Status, tr.FailureClass, tr.Reason)
		}
	}
	waitNoPods(t, cli, ns)
}
