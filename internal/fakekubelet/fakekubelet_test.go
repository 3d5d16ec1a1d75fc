package fakekubelet

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
)

// A pod of perflab's own image as deploy/kubernetes/job.yaml makes it: no
// command (the image's ENTRYPOINT runs, an image path resolved to the
// binary), the spec ConfigMap and the results claim mounted as local
// directories, paths in flags mapped (after "=" and after "sqlite:"), and
// the ServiceAccount's credentials in KUBECONFIG.
func TestCommandJobPod(t *testing.T) {
	results := t.TempDir()
	cli := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "spec"}, Data: map[string]string{"lab.yaml": "name: x\n"}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "results"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv1"}},
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: results}}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "perflab"}},
	)
	// The fake's tracker has no TokenRequest: the API server's answer.
	cli.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		return true, &authv1.TokenRequest{Status: authv1.TokenRequestStatus{Token: "sa-token"}}, nil
	})
	work := t.TempDir()
	k := &Kubelet{Client: cli, WorkDir: work, bin: filepath.Join(work, "bin"),
		Entrypoints: map[string][]string{"perflab:x": {"/usr/local/bin/perflab"}},
		InCluster:   &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-pod", UID: "u1"},
		Spec: corev1.PodSpec{ServiceAccountName: "perflab",
			Containers: []corev1.Container{{Name: "perflab", Image: "perflab:x",
				Args:         []string{"lab", "/spec/lab.yaml", "--db=sqlite:/results/perflab.db", "--out=/results/out"},
				VolumeMounts: []corev1.VolumeMount{{Name: "spec", MountPath: "/spec"}, {Name: "results", MountPath: "/results"}}}},
			Volumes: []corev1.Volume{
				{Name: "spec", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "spec"}}}},
				{Name: "results", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "results"}}},
			}}}
	pp := &pod{dir: filepath.Join(work, "u1")}
	pp.log = filepath.Join(pp.dir, "container.log")
	cmd, err := k.command(t.Context(), p, p.Spec.Containers[0], pp)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(k.bin, "perflab"); cmd.Path != want {
		t.Errorf("program %s, want the image's entrypoint as %s", cmd.Path, want)
	}
	spec := filepath.Join(pp.dir, "vol-spec", "lab.yaml")
	want := []string{"/usr/local/bin/perflab", "lab", spec, "--db=sqlite:" + results + "/perflab.db", "--out=" + results + "/out"}
	if !slices.Equal(cmd.Args, want) {
		t.Errorf("argv\n%q\nwant\n%q", cmd.Args, want)
	}
	if b, err := os.ReadFile(spec); err != nil || string(b) != "name: x\n" {
		t.Errorf("the ConfigMap's file: %q %v", b, err)
	}
	var kc string
	for _, e := range cmd.Env {
		if v, ok := strings.CutPrefix(e, "KUBECONFIG="); ok {
			kc = v
		}
	}
	if kc == "" {
		t.Fatalf("no KUBECONFIG in %q", cmd.Env)
	}
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || ctx.Namespace != "ns" || cfg.Clusters[ctx.Cluster].Server != "https://127.0.0.1:6443" ||
		cfg.AuthInfos[ctx.AuthInfo].Token != "sa-token" {
		t.Errorf("kubeconfig: %+v", cfg)
	}
}

// A claim that is not bound, and a container with neither a command nor
// an entrypoint for its image, are errors that say which.
func TestCommandErrors(t *testing.T) {
	cli := fake.NewClientset(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "results"}})
	work := t.TempDir()
	k := &Kubelet{Client: cli, WorkDir: work, bin: filepath.Join(work, "bin")}
	pp := &pod{dir: filepath.Join(work, "u1")}
	c := corev1.Container{Name: "c", Image: "perflab:x", Command: []string{"perflab"},
		VolumeMounts: []corev1.VolumeMount{{Name: "results", MountPath: "/results"}}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{c},
		Volumes: []corev1.Volume{{Name: "results", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "results"}}}}}}
	if _, err := k.command(t.Context(), p, c, pp); err == nil || !strings.Contains(err.Error(), "ns/results is not bound") {
		t.Errorf("unbound claim: %v", err)
	}
	c.Command, c.VolumeMounts = nil, nil
	if _, err := k.command(t.Context(), p, c, pp); err == nil || !strings.Contains(err.Error(), `image "perflab:x" has no entrypoint`) {
		t.Errorf("no entrypoint: %v", err)
	}
}
