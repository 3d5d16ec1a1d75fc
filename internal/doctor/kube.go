package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/perflab/perflab/internal/engine/kubernetes"
)

// gpuResource is what the NVIDIA device plugin advertises and the runtime
// asks for.
const gpuResource corev1.ResourceName = "nvidia.com/gpu"

// kubeChecks checks the context, the cluster's GPUs per node and the RBAC
// the runtime needs in its namespace.
func kubeChecks(ctx context.Context, e *Env) []Check {
	load := e.Kube
	if load == nil {
		load = func() (k8s.Interface, string, string, error) { return loadKube(e.KubeContext) }
	}
	cli, desc, ns, err := load()
	if err != nil {
		return []Check{{Name: "kube context", Status: Error, Found: err.Error(),
			Advice: "set KUBECONFIG (or ~/.kube/config) to a cluster's credentials, or pick one with --kube-context; the simulator (--runtime sim) needs no cluster"}}
	}
	if e.Namespace != "" {
		ns = e.Namespace
	}
	if ns == "" {
		ns = "default"
	}
	out := []Check{{Name: "kube context", Status: OK, Found: fmt.Sprintf("%s, namespace %s", desc, ns)}}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out = append(out, kubeGPUs(ctx, cli))
	return append(out, kubeRBAC(ctx, cli, ns))
}

// loadKube loads the client as the runtime does: the kubeconfig's context
// (or the one named), else the in-cluster config.
func loadKube(kubeContext string) (k8s.Interface, string, string, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(),
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", "", fmt.Errorf("no usable kubeconfig (KUBECONFIG, ~/.kube/config) and not in a cluster: %w", err)
	}
	desc := "in-cluster config"
	if raw, err := cc.RawConfig(); err == nil {
		name := kubeContext
		if name == "" {
			name = raw.CurrentContext
		}
		if name != "" {
			desc = "context " + name
		}
	}
	desc += ", server " + cfg.Host
	ns, _, err := cc.Namespace()
	if err != nil {
		ns = ""
	}
	cli, err := k8s.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, "", "", fmt.Errorf("kubernetes client: %w", err)
	}
	return cli, desc, ns, nil
}

// kubeGPUs lists the nodes' allocatable nvidia.com/gpu.
func kubeGPUs(ctx context.Context, cli k8s.Interface) Check {
	c := Check{Name: "kube gpus"}
	nodes, err := cli.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		c.Status, c.Found = Warning, "may not list nodes, so the GPUs per node are unknown"
		c.Advice = "ask the cluster's admin for `list nodes` (a ClusterRole) to see them; the scheduler places the pods either way"
		return c
	case err != nil:
		c.Status, c.Found = Error, fmt.Sprintf("list nodes: %v", err)
		c.Advice = "check that the API server is reachable (kubectl get nodes)"
		return c
	}
	var per []string
	total := 0
	for _, n := range nodes.Items {
		q, ok := n.Status.Allocatable[gpuResource]
		k := 0
		if ok {
			k = int(q.Value())
		}
		total += k
		per = append(per, fmt.Sprintf("%s %d", n.Name, k))
	}
	slices.Sort(per)
	if total == 0 {
		c.Status = Error
		c.Found = fmt.Sprintf("no node has allocatable %s (%d node(s): %s)", gpuResource, len(nodes.Items), strings.Join(per, ", "))
		c.Advice = "install the NVIDIA device plugin or the GPU Operator on the GPU nodes; the simulated engine image (kubernetes: {simulated: true}) needs no GPU"
		return c
	}
	c.Status = OK
	c.Found = fmt.Sprintf("%d allocatable %s on %d node(s): %s", total, gpuResource, len(nodes.Items), strings.Join(per, ", "))
	return c
}

// kubeRBAC asks the API server, one SelfSubjectAccessReview per call the
// runtime makes, whether this user may make it in the namespace.
func kubeRBAC(ctx context.Context, cli k8s.Interface, ns string) Check {
	c := Check{Name: "kube rbac"}
	var denied []string
	for _, p := range kubernetes.Permissions {
		r := &authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authv1.ResourceAttributes{
				Namespace: ns, Verb: p.Verb, Resource: p.Resource, Subresource: p.Subresource,
			}}}
		res, err := cli.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, r, metav1.CreateOptions{})
		if err != nil {
			c.Status, c.Found = Error, fmt.Sprintf("access review of %s: %v", p, err)
			c.Advice = "check that the API server is reachable and serves authorization.k8s.io/v1"
			return c
		}
		if !res.Status.Allowed {
			denied = append(denied, p.String())
		}
	}
	if len(denied) > 0 {
		c.Status = Error
		c.Found = fmt.Sprintf("denied in namespace %s: %s", ns, strings.Join(denied, ", "))
		c.Advice = "apply deploy/kubernetes/rbac.yaml (Role perflab, in your namespace) and bind it to your user or service account"
		return c
	}
	c.Status = OK
	c.Found = fmt.Sprintf("all %d calls the runtime makes are allowed in namespace %s", len(kubernetes.Permissions), ns)
	return c
}
