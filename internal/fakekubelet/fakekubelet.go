// Package fakekubelet is a stand-in for a kubelet, for tests that run
// perflab against a real kube-apiserver and kube-scheduler on a machine
// where no kubelet and no container runtime for it can run.
//
// What it replaces, exactly: the kubelet of one node and its container
// runtime. It registers a Node that advertises nvidia.com/gpu, watches the
// pods the real scheduler binds to that node, and runs each pod's one
// container as a local process of the perflab binary, which is what the
// simulated engine image holds (run as vllm, python3 or trtllm-serve it
// serves the engine's command with the simulator). Each pod gets its own
// loopback address as its IP (127.0.0.N: Linux routes all of 127/8 to lo),
// and the --host of its command is pointed there, as a pod's network
// namespace would. It writes back what a kubelet writes: the pod's phase,
// IP, container state (waiting, running, terminated with the exit code) and
// Ready condition from the pod's readiness probe; it serves the kubelet API's
// containerLogs and portForward (with the streaming library a kubelet
// uses), so logs and port-forwards work through the API server; and it
// finishes a graceful delete by stopping the process
// and removing the pod. A pod's ConfigMap volumes and its
// PersistentVolumeClaims (bound to a hostPath PersistentVolume) are local
// directories in place of the kubelet's mounts, and with InCluster set a
// pod that names a ServiceAccount gets that account's credentials, so a
// pod of perflab's own image (a Job's) can run a lab through the API
// server as it would in a cluster. An image not in Images is reported as ErrImagePull,
// as a kubelet that cannot pull it would. Everything else in such a test
// (API server, etcd, scheduler, client-go, the engine's HTTP server) is real.
package fakekubelet

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/cri-streaming/pkg/streaming/portforward"

	"github.com/perflab/perflab/internal/engine"
)

// Kubelet is the stand-in for one node's kubelet.
type Kubelet struct {
	// Client talks to the real API server.
	Client kubernetes.Interface
	// Node is the node's name; GPUs its nvidia.com/gpu capacity.
	Node string
	GPUs int
	// Binary is the perflab binary that stands in for the engines' images.
	Binary string
	// Images are the images this node "has"; a pod of any other is
	// ErrImagePull. Empty: every image is there.
	Images map[string]bool
	// ImageEnv is the environment the images' own config sets (their ENV
	// lines), given to every container before the pod's env.
	ImageEnv []string
	// WorkDir holds the pods' files (default: a temporary directory).
	WorkDir string
	// Entrypoints are the images' ENTRYPOINTs, as their configs set them:
	// a container without a command runs its image's entrypoint with the
	// container's args, as a container runtime does. An entrypoint's
	// program, and any program a container names, whose base name is
	// perflab or one of the engines' is the Binary (the image's file, not
	// the host's).
	Entrypoints map[string][]string
	// InCluster, when set, is the API server as a pod in the cluster
	// reaches it (its address and CA). A pod that names a ServiceAccount
	// then gets a token of that account (a TokenRequest, as the kubelet's
	// projected service-account volume holds) in a kubeconfig named by
	// KUBECONFIG: the stand-in for the in-cluster credentials at
	// /var/run/secrets/kubernetes.io/serviceaccount, which a local process
	// cannot be given at that path.
	InCluster *rest.Config

	mu     sync.Mutex
	pods   map[types.UID]*pod
	nextIP int
	logsLn net.Listener
	bin    string // dir of engine-named links to Binary
}

// pod is one pod this node runs.
type pod struct {
	ns, name, container string
	uid                 types.UID
	ip                  string
	dir, log            string
	cmd                 *exec.Cmd
	exited              chan struct{}
	stopping            bool
}

// imagePrograms are the programs of the images the stand-in runs, all of
// them the perflab binary: every registered engine's server programs (the
// simulated engine image) and perflab itself (perflab's own image, which
// the deploy/kubernetes Job runs).
func imagePrograms() []string {
	return append(engine.ServerPrograms(), "perflab")
}

// Run registers the node and runs its pods until ctx ends; then it stops
// every process it started and deletes the Node.
func (k *Kubelet) Run(ctx context.Context) error {
	if k.WorkDir == "" {
		d, err := os.MkdirTemp("", "perflab-fakekubelet-")
		if err != nil {
			return fmt.Errorf("fakekubelet: %w", err)
		}
		defer os.RemoveAll(d)
		k.WorkDir = d
	}
	k.pods = map[types.UID]*pod{}
	k.bin = filepath.Join(k.WorkDir, "bin")
	if err := os.MkdirAll(k.bin, 0o755); err != nil {
		return fmt.Errorf("fakekubelet: %w", err)
	}
	if err := linkPrograms(k.bin, k.Binary); err != nil {
		return err
	}
	if err := k.serveLogs(); err != nil {
		return err
	}
	defer k.logsLn.Close()
	if err := k.register(ctx); err != nil {
		return err
	}
	defer func() {
		k.stopAll()
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = k.Client.CoreV1().Nodes().Delete(dctx, k.Node, metav1.DeleteOptions{})
	}()
	for ctx.Err() == nil {
		if err := k.watch(ctx); err != nil && ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond) // a dropped watch: list and watch again
		}
	}
	return nil
}

// linkPrograms links every registered engine's server program (and the
// Python interpreters its modules start under), and perflab, in dir to
// binary, as the images do: a pod's command runs whichever it names.
func linkPrograms(dir, binary string) error {
	for _, n := range imagePrograms() {
		if err := os.Symlink(binary, filepath.Join(dir, n)); err != nil {
			return fmt.Errorf("fakekubelet: link %s: %w", n, err)
		}
	}
	return nil
}

// register creates the Node, Ready, with its GPUs, and the kubelet endpoint
// the API server proxies logs to.
func (k *Kubelet) register(ctx context.Context) error {
	port := k.logsLn.Addr().(*net.TCPAddr).Port
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		"nvidia.com/gpu":      *resource.NewQuantity(int64(k.GPUs), resource.DecimalSI),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: k.Node, Labels: map[string]string{"kubernetes.io/hostname": k.Node}},
	}
	created, err := k.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = k.Client.CoreV1().Nodes().Get(ctx, k.Node, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("fakekubelet: register node %s: %w", k.Node, err)
	}
	now := metav1.Now()
	created.Status = corev1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "fakekubelet is ready", LastHeartbeatTime: now, LastTransitionTime: now}},
		// Only an IP: the API server reaches a kubelet at its first address
		// of a preferred type, and the node's name resolves nowhere.
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
	}
	if _, err := k.Client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("fakekubelet: node %s status: %w", k.Node, err)
	}
	return nil
}

// watch lists and then watches the pods bound to the node.
func (k *Kubelet) watch(ctx context.Context) error {
	sel := fields.OneTermEqualSelector("spec.nodeName", k.Node).String()
	list, err := k.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return err
	}
	for i := range list.Items {
		k.sync(ctx, &list.Items[i])
	}
	w, err := k.Client.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			k.sync(ctx, p)
		case watch.Deleted:
			k.kill(p.UID, 0)
		}
	}
	return errors.New("watch closed")
}

// sync starts a new pod, or finishes the graceful delete of one.
func (k *Kubelet) sync(ctx context.Context, p *corev1.Pod) {
	k.mu.Lock()
	known := k.pods[p.UID]
	k.mu.Unlock()
	if p.DeletionTimestamp != nil {
		go k.finishDelete(ctx, p)
		return
	}
	if known != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	go k.start(ctx, p.DeepCopy())
}

// finishDelete stops the pod's process within its grace period and
// removes the pod, as a kubelet confirms a graceful delete.
func (k *Kubelet) finishDelete(ctx context.Context, p *corev1.Pod) {
	grace := 10 * time.Second
	if p.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
	}
	k.kill(p.UID, grace)
	zero := int64(0)
	uid := p.UID
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := k.Client.CoreV1().Pods(p.Namespace).Delete(dctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero,
		Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		fmt.Fprintf(os.Stderr, "fakekubelet: delete pod %s/%s: %v\n", p.Namespace, p.Name, err)
	}
}

// kill stops a pod's process: SIGTERM, then SIGKILL after grace.
func (k *Kubelet) kill(uid types.UID, grace time.Duration) {
	k.mu.Lock()
	pp := k.pods[uid]
	if pp != nil {
		pp.stopping = true
	}
	k.mu.Unlock()
	if pp == nil || pp.cmd == nil || pp.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-pp.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-pp.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pp.cmd.Process.Pid, syscall.SIGKILL)
		<-pp.exited
	}
}

func (k *Kubelet) stopAll() {
	k.mu.Lock()
	var uids []types.UID
	for uid := range k.pods {
		uids = append(uids, uid)
	}
	k.mu.Unlock()
	for _, uid := range uids {
		k.kill(uid, 2*time.Second)
	}
}

// start runs the pod's container and reports its states.
func (k *Kubelet) start(ctx context.Context, p *corev1.Pod) {
	if len(p.Spec.Containers) == 0 {
		return
	}
	c := p.Spec.Containers[0]
	k.mu.Lock()
	if k.pods[p.UID] != nil {
		k.mu.Unlock()
		return
	}
	k.nextIP++
	pp := &pod{ns: p.Namespace, name: p.Name, container: c.Name, uid: p.UID, ip: fmt.Sprintf("127.0.0.%d", 2+k.nextIP%250),
		exited: make(chan struct{})}
	k.pods[p.UID] = pp
	k.mu.Unlock()

	if len(k.Images) > 0 && !k.Images[c.Image] {
		k.status(ctx, p, corev1.PodPending, "", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull",
			Message: fmt.Sprintf("failed to pull and unpack image %q: not found (fakekubelet has no registry)", c.Image)}}, false)
		close(pp.exited)
		return
	}
	pp.dir = filepath.Join(k.WorkDir, string(p.UID))
	pp.log = filepath.Join(pp.dir, "container.log")
	cmd, err := k.command(ctx, p, c, pp)
	if err != nil {
		k.status(ctx, p, corev1.PodFailed, "", terminated(128, "StartError", err.Error()), false)
		close(pp.exited)
		return
	}
	k.mu.Lock()
	pp.cmd = cmd
	stopping := pp.stopping
	k.mu.Unlock()
	if stopping {
		close(pp.exited)
		return
	}
	if err := cmd.Start(); err != nil {
		k.status(ctx, p, corev1.PodFailed, "", terminated(128, "StartError", err.Error()), false)
		close(pp.exited)
		return
	}
	started := metav1.Now()
	k.status(ctx, p, corev1.PodRunning, pp.ip, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}, false)
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		k.probe(ctx, p, c, pp, started)
	}()
	err = cmd.Wait()
	close(pp.exited)
	<-probeDone
	code := 0
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	reason, phase := "Completed", corev1.PodSucceeded
	if code != 0 {
		reason, phase = "Error", corev1.PodFailed
	}
	k.status(context.WithoutCancel(ctx), p, phase, pp.ip, terminated(int32(code), reason, ""), false)
}

func terminated(code int32, reason, msg string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg,
		FinishedAt: metav1.Now()}}
}

// command builds the container's process: the pod's command and args, its
// environment, its ConfigMap volumes as files, its host port on the pod's
// address.
func (k *Kubelet) command(ctx context.Context, p *corev1.Pod, c corev1.Container, pp *pod) (*exec.Cmd, error) {
	if err := os.MkdirAll(pp.dir, 0o755); err != nil {
		return nil, err
	}
	command := c.Command
	if len(command) == 0 {
		command = k.Entrypoints[c.Image]
	}
	argv := append(append([]string(nil), command...), c.Args...)
	if len(argv) == 0 {
		return nil, fmt.Errorf("no command, and image %q has no entrypoint in fakekubelet's Entrypoints", c.Image)
	}
	// The container's paths, in place of the kubelet's mounts: a ConfigMap
	// volume is written to a directory of the pod's, a hostPath volume is
	// the host path itself, and a PersistentVolumeClaim is its bound
	// PersistentVolume's hostPath (the only kind the stand-in mounts).
	paths := map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range p.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			switch {
			case v.ConfigMap != nil:
				cm, err := k.Client.CoreV1().ConfigMaps(p.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("configmap %s: %w", v.ConfigMap.Name, err)
				}
				d := filepath.Join(pp.dir, "vol-"+v.Name)
				if err := os.MkdirAll(d, 0o755); err != nil {
					return nil, err
				}
				for name, data := range cm.Data {
					if err := os.WriteFile(filepath.Join(d, name), []byte(data), 0o644); err != nil {
						return nil, err
					}
				}
				paths[m.MountPath] = d
			case v.HostPath != nil:
				paths[m.MountPath] = v.HostPath.Path
			case v.PersistentVolumeClaim != nil:
				d, err := k.claimDir(ctx, p.Namespace, v.PersistentVolumeClaim.ClaimName)
				if err != nil {
					return nil, err
				}
				paths[m.MountPath] = d
			}
		}
	}
	mapPath := func(s string) string {
		for in, out := range paths {
			if s == in || strings.HasPrefix(s, in+"/") {
				return out + strings.TrimPrefix(s, in)
			}
			// After "=" (--out=/results) or ":" (--db=sqlite:/results/x.db).
			for _, sep := range []string{"=", ":"} {
				if i := strings.Index(s, sep+in); i >= 0 && (len(s) == i+1+len(in) || s[i+1+len(in)] == '/') {
					return s[:i+1] + out + s[i+1+len(in):]
				}
			}
		}
		return s
	}
	for i, a := range argv {
		switch {
		case strings.HasPrefix(a, "--host="):
			argv[i] = "--host=" + pp.ip
		case a == "--host" && i+1 < len(argv):
			argv[i+1] = pp.ip
		default:
			argv[i] = mapPath(a)
		}
	}
	prog := argv[0]
	if !strings.Contains(prog, "/") || slices.Contains(imagePrograms(), filepath.Base(prog)) {
		prog = filepath.Join(k.bin, filepath.Base(prog))
	}
	cmd := &exec.Cmd{Path: prog, Args: argv, Dir: pp.dir}
	if wd := c.WorkingDir; wd != "" {
		cmd.Dir = mapPath(wd)
		if cmd.Dir == wd {
			cmd.Dir = pp.dir
		}
	}
	cmd.Env = append([]string{"PATH=" + k.bin + ":/usr/bin:/bin", "HOME=" + pp.dir}, k.ImageEnv...)
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			continue // secrets are not resolved by the stand-in
		}
		cmd.Env = append(cmd.Env, e.Name+"="+mapPath(e.Value))
	}
	if kc, err := k.credentials(ctx, p, pp.dir); err != nil {
		return nil, err
	} else if kc != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+kc)
	}
	logf, err := os.Create(pp.log)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// claimDir is the directory of a PersistentVolumeClaim's bound volume: the
// PersistentVolume's hostPath. An unbound claim is an error (the
// scheduler does not place a pod whose claim is unbound, so it means the
// binding was undone since).
func (k *Kubelet) claimDir(ctx context.Context, ns, claim string) (string, error) {
	pvc, err := k.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("persistentvolumeclaim %s/%s: %w", ns, claim, err)
	}
	if pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("persistentvolumeclaim %s/%s is not bound to a volume", ns, claim)
	}
	pv, err := k.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("persistentvolume %s of claim %s/%s: %w", pvc.Spec.VolumeName, ns, claim, err)
	}
	if pv.Spec.HostPath == nil {
		return "", fmt.Errorf("persistentvolume %s of claim %s/%s: fakekubelet mounts only hostPath volumes", pv.Name, ns, claim)
	}
	return pv.Spec.HostPath.Path, nil
}

// credentials writes the kubeconfig of the pod's ServiceAccount into dir
// and returns its path, or "" when the pod gets none: InCluster unset, the
// pod names no ServiceAccount (perflab's engine pods) or opts out of the
// token's automount. The account must exist, as the ServiceAccount
// admission plugin (off on the test cluster) would require.
func (k *Kubelet) credentials(ctx context.Context, p *corev1.Pod, dir string) (string, error) {
	sa := p.Spec.ServiceAccountName
	if k.InCluster == nil || sa == "" ||
		(p.Spec.AutomountServiceAccountToken != nil && !*p.Spec.AutomountServiceAccountToken) {
		return "", nil
	}
	exp := int64(3600)
	tok, err := k.Client.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, sa, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp,
			BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of serviceaccount %s/%s: %w", p.Namespace, sa, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: k.InCluster.Host,
		CertificateAuthority: k.InCluster.TLSClientConfig.CAFile, CertificateAuthorityData: k.InCluster.TLSClientConfig.CAData}
	cfg.AuthInfos["serviceaccount"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["in-cluster"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "serviceaccount", Namespace: p.Namespace}
	cfg.CurrentContext = "in-cluster"
	path := filepath.Join(dir, "serviceaccount.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("kubeconfig of serviceaccount %s/%s: %w", p.Namespace, sa, err)
	}
	return path, nil
}

// probe runs the readiness probe (HTTP GET on the pod's address) until the
// process exits, reporting Ready as it changes.
func (k *Kubelet) probe(ctx context.Context, p *corev1.Pod, c corev1.Container, pp *pod, started metav1.Time) {
	path, port := "/health", 8000
	if rp := c.ReadinessProbe; rp != nil && rp.HTTPGet != nil {
		path = rp.HTTPGet.Path
		if rp.HTTPGet.Port.IntValue() > 0 {
			port = rp.HTTPGet.Port.IntValue()
		}
	}
	url := "http://" + net.JoinHostPort(pp.ip, strconv.Itoa(port)) + path
	cl := &http.Client{Timeout: 2 * time.Second}
	ready := false
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-pp.exited:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ok := false
		if resp, err := cl.Get(url); err == nil {
			ok = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
		if ok != ready {
			ready = ok
			k.status(ctx, p, corev1.PodRunning, pp.ip, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}, ready)
		}
	}
}

// status writes the pod's status: phase, IP, the container's state and
// readiness, and the conditions that follow from them.
func (k *Kubelet) status(ctx context.Context, p *corev1.Pod, phase corev1.PodPhase, ip string, st corev1.ContainerState, ready bool) {
	for try := 0; try < 5; try++ {
		cur, err := k.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || cur.UID != p.UID {
			return
		}
		now := metav1.Now()
		cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
			s := corev1.ConditionFalse
			if ok {
				s = corev1.ConditionTrue
			}
			return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now}
		}
		cur.Status.Phase = phase
		cur.Status.HostIP = "127.0.0.1"
		if ip != "" {
			cur.Status.PodIP = ip
			cur.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		}
		if cur.Status.StartTime == nil {
			cur.Status.StartTime = &now
		}
		cur.Status.Conditions = []corev1.PodCondition{cond(corev1.PodScheduled, true), cond(corev1.PodInitialized, true),
			cond(corev1.ContainersReady, ready), cond(corev1.PodReady, ready)}
		c := p.Spec.Containers[0]
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, ImageID: c.Image,
			State: st, Ready: ready, Started: &[]bool{st.Running != nil}[0]}}
		_, err = k.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(50 * time.Millisecond) // a conflict: read it again
	}
}

// serveLogs serves the kubelet API's containerLogs over HTTPS (the API
// server proxies `pods/log` there; it does not verify a kubelet's serving
// certificate unless told to).
func (k *Kubelet) serveLogs() error {
	cert, err := selfSigned()
	if err != nil {
		return fmt.Errorf("fakekubelet: %w", err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		return fmt.Errorf("fakekubelet: %w", err)
	}
	k.logsLn = ln
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", k.containerLogs)
	mux.HandleFunc("/portForward/{ns}/{pod}", k.portForward)
	mux.HandleFunc("/portForward/{ns}/{pod}/{uid}", k.portForward)
	go http.Serve(ln, mux)
	return nil
}

// podNamed is the pod this node runs under that namespace and name, or nil.
func (k *Kubelet) podNamed(ns, name string) *pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.pods {
		if p.ns == ns && p.name == name {
			return p
		}
	}
	return nil
}

// containerLogs writes a container's output, following it while the
// process runs when asked to.
func (k *Kubelet) containerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("ns"), r.PathValue("pod")
	pp := k.podNamed(ns, name)
	if pp == nil || pp.log == "" {
		http.Error(w, "container not found", http.StatusNotFound)
		return
	}
	f, err := os.Open(pp.log)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	follow := r.URL.Query().Get("follow") == "true"
	// With timestamps, each line starts with the time it is served: the
	// stand-in keeps no per-line times, and a followed line is served as
	// it is written. (sinceTime is not honoured, for the same reason.)
	stamp := r.URL.Query().Get("timestamps") == "true"
	w.Header().Set("Content-Type", "text/plain")
	fl, _ := w.(http.Flusher)
	write := func(line string) bool {
		if line == "" {
			return true
		}
		if stamp {
			line = time.Now().UTC().Format(time.RFC3339Nano) + " " + line
		}
		if _, err := io.WriteString(w, line); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	br := bufio.NewReader(f)
	pending := ""
	for {
		chunk, err := br.ReadString('\n')
		pending += chunk
		if err == nil {
			if !write(pending) {
				return
			}
			pending = ""
			continue
		}
		if !follow {
			write(pending)
			return
		}
		select {
		case <-pp.exited:
			// Whatever was written before the exit, then the end.
			rest, _ := io.ReadAll(br)
			for _, l := range strings.SplitAfter(pending+string(rest), "\n") {
				if !write(l) {
					return
				}
			}
			return
		case <-r.Context().Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// portForward serves the kubelet API's portForward (SPDY or WebSocket,
// as the API server proxies `pods/portforward` here) with the streaming
// library a kubelet uses, each stream connected to the pod's address.
func (k *Kubelet) portForward(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("ns"), r.PathValue("pod")
	pp := k.podNamed(ns, name)
	if pp == nil || pp.ip == "" {
		http.Error(w, "pod not found", http.StatusNotFound)
		return
	}
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	portforward.ServePortForward(w, r, podDialer{ip: pp.ip}, name, string(pp.uid), opts,
		4*time.Hour, 30*time.Second, portforward.SupportedProtocols)
}

// podDialer connects a forwarded stream to a port of the pod's address.
type podDialer struct{ ip string }

// PortForward implements portforward.PortForwarder.
func (d podDialer) PortForward(ctx context.Context, _ string, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	var dl net.Dialer
	conn, err := dl.DialContext(ctx, "tcp", net.JoinHostPort(d.ip, strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("fakekubelet: forward to %s:%d: %w", d.ip, port, err)
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(conn, stream); done <- struct{}{} }()
	go func() { io.Copy(stream, conn); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}

func selfSigned() (tls.Certificate, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fakekubelet"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
