package doctor

import (
	"context"
	"testing"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/perflab/perflab/internal/engine/kubernetes"
)

// Kubernetes tests run on k8s.io/client-go/kubernetes/fake, which stands in
// for the API server: its object tracker answers the node list, and a
// reactor answers each SelfSubjectAccessReview as the cluster's authorizer
// would (allowed unless the test denies that permission).

func node(name string, gpus int64) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}
	if gpus > 0 {
		n.Status.Allocatable[gpuResource] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return n
}

// fakeCluster returns a client with the nodes whose access reviews deny
// the given permissions; reviews records what was asked.
func fakeCluster(nodes []*corev1.Node, deny map[kubernetes.Permission]bool, reviews *[]authv1.ResourceAttributes) k8s.Interface {
	var objs []runtime.Object
	for _, n := range nodes {
		objs = append(objs, n)
	}
	cli := fake.NewClientset(objs...)
	cli.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authv1.SelfSubjectAccessReview).DeepCopy()
		ra := *r.Spec.ResourceAttributes
		*reviews = append(*reviews, ra)
		r.Status.Allowed = !deny[kubernetes.Permission{Verb: ra.Verb, Resource: ra.Resource, Subresource: ra.Subresource}]
		return true, r, nil
	})
	return cli
}

func kubeEnv(cli k8s.Interface) Env {
	return Env{Kube: func() (k8s.Interface, string, string, error) {
		return cli, "context lab-gpu, server https://10.0.0.1:6443", "perflab", nil
	}}
}

// TestKubeHealthyCluster: GPU nodes and every permission: all ok, one
// review per call the runtime makes, in its namespace.
func TestKubeHealthyCluster(t *testing.T) {
	var reviews []authv1.ResourceAttributes
	cli := fakeCluster([]*corev1.Node{node("gpu-a", 8), node("gpu-b", 8), node("cpu-a", 0)}, nil, &reviews)
	rep, err := Run(context.Background(), "kubernetes", kubeEnv(cli))
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range statuses(rep) {
		if s != OK {
			t.Errorf("%s: %s, want ok", name, s)
		}
	}
	if len(reviews) != len(kubernetes.Permissions) {
		t.Errorf("%d access reviews, want %d (one per permission)", len(reviews), len(kubernetes.Permissions))
	}
	for _, r := range reviews {
		if r.Namespace != "perflab" {
			t.Errorf("review %+v outside the runtime's namespace", r)
		}
	}
	golden(t, "healthy-kubernetes", rep)
}

// TestKubeBrokenCluster: no node advertises nvidia.com/gpu, and the user
// may neither forward a port nor read events: both are errors naming what
// is missing.
func TestKubeBrokenCluster(t *testing.T) {
	var reviews []authv1.ResourceAttributes
	deny := map[kubernetes.Permission]bool{
		{Verb: "create", Resource: "pods", Subresource: "portforward"}: true,
		{Verb: "list", Resource: "events"}:                             true,
	}
	cli := fakeCluster([]*corev1.Node{node("cpu-a", 0), node("cpu-b", 0)}, deny, &reviews)
	env := kubeEnv(cli)
	env.Namespace = "team-a"
	rep, err := Run(context.Background(), "kubernetes", env)
	if err != nil {
		t.Fatal(err)
	}
	got := statuses(rep)
	if got["kube context"] != OK || got["kube gpus"] != Error || got["kube rbac"] != Error {
		t.Errorf("statuses %v, want context ok, gpus and rbac errors", got)
	}
	golden(t, "broken-kubernetes", rep)
}

// TestKubeNodesForbidden: a namespaced user may not list nodes; that is a
// warning (the scheduler still places pods), not an error.
func TestKubeNodesForbidden(t *testing.T) {
	var reviews []authv1.ResourceAttributes
	cli := fakeCluster(nil, nil, &reviews).(*fake.Clientset)
	cli.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", nil)
	})
	rep, err := Run(context.Background(), "kubernetes", kubeEnv(cli))
	if err != nil {
		t.Fatal(err)
	}
	if s := statuses(rep)["kube gpus"]; s != Warning {
		t.Errorf("nodes forbidden: %s, want warning", s)
	}
}
