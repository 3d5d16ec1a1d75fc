package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	klabels "k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Cleanup deletes every pod perflab made that carries all of labels (every
// perflab pod in the namespace when labels is empty), running or not: the
// leftovers of a perflab killed with -9, for `perflab engine cleanup` and a
// lab starting again on its run. Label values are given raw (a trial key
// with its '/'); they are matched as the pods were labelled. The files
// ConfigMaps of those pods go too, and so does the run's owner ConfigMap
// when labels name no more than the run. It waits (up to a minute) until
// the pods are gone, so that their GPUs are free, and returns the pods'
// names; on an error it still tries the others.
func (r *Runtime) Cleanup(ctx context.Context, labels map[string]string) ([]string, error) {
	if err := r.init(); err != nil {
		return nil, err
	}
	raw := maps.Clone(labels)
	if raw == nil {
		raw = map[string]string{}
	}
	raw[LabelManaged] = "true"
	set, _, err := podLabels(raw)
	if err != nil {
		return nil, err
	}
	sel := klabels.SelectorFromSet(set)
	pods := r.cli.CoreV1().Pods(r.ns)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list pods: %w", err)
	}
	zero, grace := int64(0), int64(cleanupGrace)
	var removed, errs []string
	for _, p := range list.Items {
		// The selector is checked again here: a stand-in server that
		// ignored it must not make this delete another run's pods.
		if !sel.Matches(klabels.Set(p.Labels)) {
			continue
		}
		g := &grace
		if !containerStarted(&p) {
			g = &zero // nothing runs that a grace period would help
		}
		err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: g})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Sprintf("pod %s: %v", p.Name, err))
			continue
		}
		removed = append(removed, p.Name)
	}
	cms := r.cli.CoreV1().ConfigMaps(r.ns)
	if cml, err := cms.List(ctx, metav1.ListOptions{LabelSelector: sel.String()}); err != nil {
		errs = append(errs, fmt.Sprintf("list configmaps: %v", err))
	} else {
		for _, cm := range cml.Items {
			if !sel.Matches(klabels.Set(cm.Labels)) {
				continue
			}
			if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Sprintf("configmap %s: %v", cm.Name, err))
			}
			if cm.Labels[LabelRole] == "owner" {
				r.forgetOwner()
			}
		}
	}
	// Wait for the pods to go: a pod still terminating holds its GPUs
	// (the scheduler would find the next one unschedulable), and one
	// deleted with no grace may leave its process holding GPU memory for
	// a moment. A pod no kubelet confirms goes with no grace at the end.
	if left := waitGone(ctx, pods, removed, time.Duration(cleanupGrace+20)*time.Second); len(left) > 0 {
		for _, name := range left {
			_ = pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
		for _, name := range waitGone(ctx, pods, left, 10*time.Second) {
			errs = append(errs, fmt.Sprintf("pod %s: still there after its deletion", name))
		}
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("kubernetes: cleanup: %s", strings.Join(errs, "; "))
	}
	return removed, nil
}

// cleanupGrace is the grace period, in seconds, of a leftover pod's
// deletion.
const cleanupGrace = 2

// waitGone waits until the named pods are gone, or for at most d; it
// returns those still there.
func waitGone(ctx context.Context, pods corev1client.PodInterface, names []string, d time.Duration) []string {
	deadline := time.Now().Add(d)
	var left []string
	for i, name := range names {
		for {
			_, err := pods.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil || time.Now().After(deadline) {
				return append(left, names[i:]...)
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return left
}

// containerStarted says whether any container of the pod has run.
func containerStarted(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return true
		}
	}
	return false
}

// Sweep implements engine.Sweeper: it deletes the pods of the run named by
// the runtime's LabelRun label, which a perflab killed with -9 left
// behind. A runtime without a run label sweeps nothing, rather than every
// perflab pod in the namespace (other labs' among them).
func (r *Runtime) Sweep(ctx context.Context) ([]string, error) {
	run := r.Labels[LabelRun]
	if run == "" {
		return nil, nil
	}
	return r.Cleanup(ctx, map[string]string{LabelRun: run})
}
