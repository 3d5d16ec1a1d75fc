package kubernetes

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/go-logr/logr"

	"github.com/perflab/perflab/internal/engine"
)

// handle is one server in a pod. Its life: run creates the pod (and its
// files ConfigMap), watches it and classes what happens to it, streams its
// log once the container runs, deletes it when it has failed or ended, and
// closes done once the pod is gone.
type handle struct {
	rt     *Runtime
	cli    k8s.Interface
	ns     string
	launch engine.Launch
	sp     spec
	access Access
	// node and podIP are where the pod runs, once it does (under mu).
	node, podIP string
	// localPort is the port-forward's port on 127.0.0.1 (PortForward).
	localPort int
	// lc is the server's state, failure and log (the log file is nil
	// when the log lives only in the ring).
	lc   *engine.Lifecycle
	poll time.Duration

	// launched is closed when the create phase has ended, one way or the
	// other; up when the server can be reached (the pod runs, has an IP,
	// and a port-forward listens); done when the pod is gone.
	launched, up, done chan struct{}
	readerDone         chan struct{}
	// endedCh is closed when the container has terminated.
	endedCh chan struct{}
	// bg bounds the log reader and the port-forward; canceled when the
	// pod is gone. fw bounds the port-forward; canceled when Stop begins
	// or the server has ended.
	bg       context.Context
	cancelBg context.CancelFunc
	fw       context.Context
	cancelFw context.CancelFunc

	mu           sync.Mutex
	baseURL      string
	pullingSince time.Time // an image pull under way, by the pod's events
	ended        bool      // the container has terminated
	started      bool      // the container has run (or ended)

	// Only the run goroutine touches these.
	lastRV string
	// waitNoted: the log says the pod waits for the run's own pods.
	waitNoted  bool
	seenEvents map[string]bool
	logStarted bool
	upDone     bool
	deleted    time.Time // when run asked for the pod's deletion

	stopOnce sync.Once
	stopErr  error
	upOnce   sync.Once
}

var (
	_ engine.Handle          = (*handle)(nil)
	_ engine.Benchmarker     = (*handle)(nil)
	_ engine.ReadinessSource = (*handle)(nil)
)

// Start implements engine.Runtime. It returns at once: the pod is created,
// scheduled and started in the background, and Ready reports how that went
// (unschedulable, image_unavailable, ...). Stop removes the pod at any
// point.
func (r *Runtime) Start(ctx context.Context, l engine.Launch) (engine.Handle, error) {
	return r.StartLabeled(ctx, l, nil)
}

// StartLabeled is Start with labels of this server's own on its pod besides
// the runtime's (the trial's, {LabelTrial: key}).
func (r *Runtime) StartLabeled(ctx context.Context, l engine.Launch, labels map[string]string) (engine.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kubernetes: start: %w", err)
	}
	if err := r.init(); err != nil {
		return nil, err
	}
	cmd := l.Command
	if len(cmd.Argv) == 0 {
		var err error
		if cmd, err = engine.Render(l.Config); err != nil {
			return nil, err
		}
	}
	sp, err := r.build(l, cmd, r.ns, nil, labels)
	if err != nil {
		return nil, err
	}
	h := &handle{
		rt: r, cli: r.cli, ns: r.ns, launch: l, sp: sp, access: r.access,
		poll:     r.PollInterval,
		launched: make(chan struct{}), up: make(chan struct{}),
		done: make(chan struct{}), readerDone: make(chan struct{}), endedCh: make(chan struct{}),
		seenEvents: map[string]bool{},
	}
	if h.poll <= 0 {
		h.poll = 250 * time.Millisecond
	}
	if h.access == PortForward {
		if h.localPort, err = freePort(); err != nil {
			return nil, err
		}
		h.baseURL = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(h.localPort))
	}
	logPath := l.LogPath
	if logPath == "" && l.WorkDir != "" {
		logPath = filepath.Join(l.WorkDir, "engine.log")
	}
	if logPath == "" && l.KeepWorkDir {
		dir, err := os.MkdirTemp("", "perflab-kube-")
		if err != nil {
			return nil, fmt.Errorf("kubernetes: work dir: %w", err)
		}
		logPath = filepath.Join(dir, "engine.log")
	}
	var logw io.WriteCloser // nil: the log lives only in the ring
	if logPath != "" {
		if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
			return nil, fmt.Errorf("kubernetes: log dir: %w", err)
		}
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("kubernetes: open log: %w", err)
		}
		logw = f
	}
	h.lc = engine.NewLifecycle(r.LogLines, logw)
	h.bg, h.cancelBg = context.WithCancel(context.Background())
	// The port-forward's errors (a refused connection while the engine
	// loads) go to the handle's log, not klog's stderr.
	h.fw, h.cancelFw = context.WithCancel(klog.NewContext(h.bg, logr.Discard()))
	where := "through a port-forward at " + h.baseURL
	if h.access == PodIP {
		where = fmt.Sprintf("directly at its pod IP, http://POD_IP:%d", r.port())
	}
	h.logLine(fmt.Sprintf("perflab: pod %s/%s from %s, reached %s", h.ns, sp.pod.Name, sp.image, where))
	go h.run()
	return h, nil
}

// freePort asks the kernel for an unused TCP port on 127.0.0.1.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("kubernetes: find free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// BaseURL implements engine.Handle: http://127.0.0.1:LOCALPORT through a
// port-forward, or http://PODIP:PORT with PodIP access ("" until the pod
// has an IP).
func (h *handle) BaseURL() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.baseURL
}

// Where implements engine.Placer: the pod, its node and how perflab
// reaches it.
func (h *handle) Where() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	how := "by port-forward at " + h.baseURL
	if h.access == PodIP {
		how = "by pod IP at " + h.baseURL
	}
	return fmt.Sprintf("pod %s/%s on node %s, reached %s", h.ns, h.sp.pod.Name, h.node, how)
}

var _ engine.Placer = (*handle)(nil)

// Done implements engine.Handle: closed when the pod is gone.
func (h *handle) Done() <-chan struct{} { return h.done }

// LogTail implements engine.Handle: the last n lines of the pod's log and
// of perflab's own notes on it, kept after the pod is deleted.
func (h *handle) LogTail(n int) []string { return h.lc.Tail(n) }

// PodName is the pod's name.
func (h *handle) PodName() string { return h.sp.pod.Name }

// Namespace is the pod's namespace.
func (h *handle) Namespace() string { return h.ns }

// Image is the image the pod runs.
func (h *handle) Image() string { return h.sp.image }

// Argv is the command the pod's container runs, program first.
func (h *handle) Argv() []string {
	return append([]string(nil), h.sp.pod.Spec.Containers[0].Command...)
}

// MarkBenchmarking implements engine.Benchmarker.
func (h *handle) MarkBenchmarking() { h.lc.MarkBenchmarking() }

// Failure implements engine.Handle.
func (h *handle) Failure() *engine.Failure { return h.lc.Failure() }

// Lifecycle implements engine.ReadinessSource.
func (h *handle) Lifecycle() *engine.Lifecycle { return h.lc }

// Up implements engine.ReadinessSource: closed once the pod runs, has an
// IP and (by port-forward) a local port that listens.
func (h *handle) Up() <-chan struct{} { return h.up }

// ReadyPlan implements engine.ReadinessSource. The ready timeout counts
// from the container's start, so scheduling and the image pull do not eat
// into it; an image pull, which logs nothing, is capped by the runtime's
// PullTimeout instead of the stall timeout.
func (h *handle) ReadyPlan() engine.ReadyPlan {
	return engine.ReadyPlan{Model: h.launch.Config.ServedName(), ReadyTimeout: h.launch.ReadyTimeout,
		StallTimeout: h.launch.StallTimeout, Poll: h.poll,
		Pulling: func() time.Time {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.pullingSince
		},
		PullTimeout: h.rt.PullTimeout, Image: h.sp.image,
		Started: "the container started", BeforeUp: "pod or log"}
}

// logLine writes one line of perflab's own to the log and the ring, as
// progress.
func (h *handle) logLine(s string) { h.lc.Line(s) }

// note writes one line of perflab's own to the log and the ring, without
// counting as progress.
func (h *handle) note(s string) { h.lc.Note(s) }

// run is the pod's whole life, in the background.
func (h *handle) run() {
	defer close(h.done)
	defer h.lc.CloseLog()
	defer h.cancelBg()
	if f := h.create(); f != nil {
		close(h.launched)
		h.lc.Fail(f)
		h.deleteFiles(context.Background())
		return
	}
	close(h.launched)
	h.watch()
	h.cancelBg()
	// Let the log reader drain what the container wrote last.
	if h.logStarted {
		select {
		case <-h.readerDone:
		case <-time.After(2 * time.Second):
		}
	}
	h.deleteFiles(context.Background())
}

// create makes the owner (if any), the files ConfigMap and the pod. It is
// not canceled by Stop: a create canceled in flight may still be made on
// the server; Stop waits for it, then deletes the pod by name.
func (h *handle) create() *engine.Failure {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if h.lc.Stopping() {
		return nil
	}
	owner, err := h.rt.EnsureOwner(ctx)
	if err != nil {
		return &engine.Failure{Class: engine.ClassStartupCrash, Reason: err.Error()}
	}
	if owner != nil {
		h.sp.pod.OwnerReferences = []metav1.OwnerReference{*owner}
		if h.sp.files != nil {
			h.sp.files.OwnerReferences = []metav1.OwnerReference{*owner}
		}
	}
	if h.sp.files != nil {
		if _, err := h.cli.CoreV1().ConfigMaps(h.ns).Create(ctx, h.sp.files, metav1.CreateOptions{}); err != nil {
			return &engine.Failure{Class: engine.ClassStartupCrash, Reason: fmt.Sprintf("kubernetes: create configmap %s: %v", h.sp.files.Name, err)}
		}
	}
	if _, err := h.cli.CoreV1().Pods(h.ns).Create(ctx, h.sp.pod, metav1.CreateOptions{}); err != nil {
		class := engine.ClassStartupCrash
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			// Refused as written (a quota, an admission policy, a bad
			// field): the same every time.
			class = engine.ClassInvalidConfig
		}
		return &engine.Failure{Class: class, Reason: fmt.Sprintf("kubernetes: create pod %s: %v", h.sp.pod.Name, err)}
	}
	h.logLine(fmt.Sprintf("perflab: pod %s created", h.sp.pod.Name))
	return nil
}

// resync is how often run re-reads the pod and its events besides the
// watch.
func (h *handle) resync() time.Duration { return max(4*h.poll, time.Second) }

// watch follows the pod until it is gone, classing each state it sees.
// The watch is re-opened when it ends; a periodic read of the pod (and
// its events) covers what a watch may miss.
func (h *handle) watch() {
	name := h.sp.pod.Name
	pods := h.cli.CoreV1().Pods(h.ns)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tick := time.NewTicker(h.resync())
	defer tick.Stop()
	var w watch.Interface
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	watchFails := 0
	for {
		if w == nil && watchFails < 3 {
			var err error
			if w, err = pods.Watch(ctx, metav1.ListOptions{FieldSelector: sel}); err != nil {
				w = nil
				watchFails++
			}
			// A fresh read after (re)opening: what happened while no
			// watch was open.
			if h.read(ctx) {
				return
			}
		}
		var events <-chan watch.Event
		if w != nil {
			events = w.ResultChan()
		}
		select {
		case ev, ok := <-events:
			if !ok || ev.Type == watch.Error {
				w.Stop()
				w = nil
				continue
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod || pod.Name != name {
				continue
			}
			if ev.Type == watch.Deleted {
				h.gone()
				return
			}
			h.observe(pod)
		case <-tick.C:
			watchFails = 0
			if h.read(ctx) {
				return
			}
			h.readEvents(ctx)
			if h.giveUp() {
				return
			}
		}
	}
}

// read gets the pod and observes it; true when it is gone.
func (h *handle) read(ctx context.Context) bool {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pod, err := h.cli.CoreV1().Pods(h.ns).Get(rctx, h.sp.pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		h.gone()
		return true
	}
	if err == nil {
		h.observe(pod)
	}
	return false
}

// gone is the pod's deletion, seen: a failure unless perflab asked for it.
func (h *handle) gone() {
	if h.lc.Stopping() || h.lc.Failure() != nil || !h.deleted.IsZero() {
		return
	}
	h.lc.Exited(engine.Exit{Code: -1, What: "pod was deleted (not by perflab)"})
}

// giveUp is true when the pod run asked to delete has not gone in a
// long while (a node that no longer answers): stop watching it.
func (h *handle) giveUp() bool {
	if h.deleted.IsZero() {
		return false
	}
	since := time.Since(h.deleted)
	if since > stopGrace(h.launch)+10*time.Second {
		h.deletePod(0) // force
	}
	if since > stopGrace(h.launch)+2*time.Minute {
		h.note(fmt.Sprintf("perflab: pod %s is still there %v after its deletion; no longer watched", h.sp.pod.Name, since.Round(time.Second)))
		return true
	}
	return false
}

// deletePod asks for the pod's deletion with a grace period in seconds.
func (h *handle) deletePod(grace int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := h.cli.CoreV1().Pods(h.ns).Delete(ctx, h.sp.pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes: delete pod %s: %w", h.sp.pod.Name, err)
	}
	return nil
}

// deleteFiles deletes the files ConfigMap, if any.
func (h *handle) deleteFiles(ctx context.Context) {
	if h.sp.files == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = h.cli.CoreV1().ConfigMaps(h.ns).Delete(ctx, h.sp.files.Name, metav1.DeleteOptions{})
}

// podState is what assess reads from a pod's status.
type podState struct {
	// fail is a failure the status alone shows before the container ran:
	// unschedulable, an image that cannot be pulled, a container that
	// cannot be created.
	fail *engine.Failure
	// running: the container runs and the pod has an IP.
	running bool
	ip      string
	node    string
	// term is the container's end, if it ended; podFailed a pod that
	// failed without one (evicted, refused by the node).
	term      *corev1.ContainerStateTerminated
	podFailed string
}

// assess reads a pod's status: the classification of everything that
// needs no log.
func assess(pod *corev1.Pod, image string) podState {
	st := podState{ip: pod.Status.PodIP, node: pod.Spec.NodeName}
	for _, c := range pod.Status.Conditions {
		// A pod nominated for a node waits for a preemption there.
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
			pod.Status.NominatedNodeName == "" {
			msg := c.Message
			if msg == "" {
				msg = "no node fits it"
			}
			st.fail = &engine.Failure{Class: engine.ClassUnschedulable, Reason: "pod cannot be scheduled: " + msg}
			return st
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != containerName {
			continue
		}
		switch {
		case cs.State.Waiting != nil:
			w := cs.State.Waiting
			detail := w.Reason
			if w.Message != "" {
				detail += ": " + w.Message
			}
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
				st.fail = &engine.Failure{Class: engine.ClassImageUnavailable, Reason: fmt.Sprintf("image %s cannot be pulled: %s", image, detail)}
			case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				st.fail = &engine.Failure{Class: engine.ClassStartupCrash, Reason: "container cannot start: " + detail}
			}
		case cs.State.Terminated != nil:
			st.term = cs.State.Terminated
		case cs.State.Running != nil:
			st.running = st.ip != ""
		}
	}
	if st.term == nil && pod.Status.Phase == corev1.PodFailed {
		st.podFailed = strings.TrimSpace(pod.Status.Reason + ": " + pod.Status.Message)
		if st.podFailed == ":" {
			st.podFailed = "phase Failed"
		}
	}
	return st
}

// observe acts on one state of the pod: progress, failure, start of the
// log and of the access path, the end of the container.
func (h *handle) observe(pod *corev1.Pod) {
	if pod.ResourceVersion != h.lastRV {
		h.lastRV = pod.ResourceVersion
		h.lc.Touch()
	}
	if pod.DeletionTimestamp != nil {
		h.gone()
	}
	h.mu.Lock()
	ended := h.ended
	h.mu.Unlock()
	if ended || !h.deleted.IsZero() {
		return
	}
	st := assess(pod, h.sp.image)
	if st.fail != nil {
		h.lc.Fail(st.fail)
		h.endPod()
		return
	}
	if st.running || st.term != nil {
		h.mu.Lock()
		h.started = true
		h.mu.Unlock()
		h.startLog()
	}
	if st.running {
		h.startAccess(st)
	}
	if st.term != nil || st.podFailed != "" {
		h.mu.Lock()
		h.ended = true
		h.mu.Unlock()
		close(h.endedCh)
		if h.logStarted {
			select {
			case <-h.readerDone:
			case <-time.After(3 * time.Second):
			}
		}
		if st.term != nil {
			t := st.term
			how := fmt.Sprintf("status %d", t.ExitCode)
			if t.Reason != "" && t.Reason != "Error" && t.Reason != "Completed" {
				how += ", " + t.Reason
			}
			if l := engine.LastLine([]string{t.Message}); l != "" && t.Reason != "OOMKilled" {
				how += ": " + l
			}
			e := engine.Exit{Code: int(t.ExitCode), What: "container exited (" + how + ")"}
			if t.Reason == "OOMKilled" {
				e.Killed = "killed for memory (OOMKilled)"
			}
			h.lc.Exited(e)
		} else {
			h.lc.Exited(engine.Exit{Code: -1, What: "pod failed (" + st.podFailed + ")"})
		}
		h.endPod()
	}
}

// endPod deletes the pod of a server that failed or ended by itself.
func (h *handle) endPod() {
	h.cancelFw()
	if !h.deleted.IsZero() {
		return
	}
	h.deleted = time.Now()
	if err := h.deletePod(0); err != nil {
		h.note("perflab: " + err.Error())
	}
}

// readEvents logs the pod's new events (scheduling, pulls, mounts), which
// count as progress, and follows image pulls: during one the log is
// silent, so the stall timer waits for it.
func (h *handle) readEvents(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sel := fields.Set{"involvedObject.name": h.sp.pod.Name, "involvedObject.kind": "Pod"}.AsSelector().String()
	list, err := h.cli.CoreV1().Events(h.ns).List(rctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return
	}
	evs := list.Items
	// Oldest first, by when each was last seen.
	sortEvents(evs)
	for _, ev := range evs {
		if ev.InvolvedObject.Name != h.sp.pod.Name || h.seenEvents[string(ev.UID)+ev.Name] {
			continue
		}
		h.seenEvents[string(ev.UID)+ev.Name] = true
		h.logLine(fmt.Sprintf("perflab: event %s %s: %s", ev.Type, ev.Reason, strings.TrimSpace(ev.Message)))
		h.mu.Lock()
		switch ev.Reason {
		case "Pulling":
			h.pullingSince = time.Now()
		case "Pulled", "Failed", "BackOff", "ErrImageNeverPull", "InspectFailed", "Created", "Started":
			h.pullingSince = time.Time{}
		}
		h.mu.Unlock()
	}
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func sortEvents(evs []corev1.Event) {
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && eventTime(evs[j]).Before(eventTime(evs[j-1])); j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
}

// startLog starts the reader of the container's log, once.
func (h *handle) startLog() {
	if h.logStarted {
		return
	}
	h.logStarted = true
	go h.streamLog()
}

// streamLog follows the container's log into the log file and the ring,
// line by line. A stream that ends while the container still runs (a
// dropped connection) is opened again from the last line's time stamp.
func (h *handle) streamLog() {
	defer close(h.readerDone)
	var last time.Time
	for try := 0; ; try++ {
		opts := &corev1.PodLogOptions{Container: containerName, Follow: true, Timestamps: true}
		if !last.IsZero() {
			opts.SinceTime = &metav1.Time{Time: last}
		}
		rc, err := h.cli.CoreV1().Pods(h.ns).GetLogs(h.sp.pod.Name, opts).Stream(h.bg)
		stamped := false
		if err == nil {
			stamped = h.readLog(rc, &last)
			rc.Close()
		} else if try == 0 && h.bg.Err() == nil {
			h.note("perflab: read pod log: " + err.Error())
		}
		h.mu.Lock()
		ended := h.ended
		h.mu.Unlock()
		// Without time stamps a second stream would repeat the log.
		if ended || (err == nil && !stamped) || try > 100 {
			return
		}
		select {
		case <-h.bg.Done():
			return
		case <-h.endedCh:
			// The stream that just ended had the container's last lines.
			return
		case <-time.After(time.Second):
		}
	}
}

// readLog copies one log stream; lines at or before last (a stream opened
// again) are skipped. It says whether the lines carried time stamps.
func (h *handle) readLog(rc io.Reader, last *time.Time) bool {
	resumed := !last.IsZero()
	stamped := false
	br := bufio.NewReaderSize(engine.WatchRedraws(rc, h.lc.Touch), 64<<10)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			s := strings.TrimRight(line, "\r\n")
			if ts, rest, ok := strings.Cut(s, " "); ok {
				if t, perr := time.Parse(time.RFC3339Nano, ts); perr == nil {
					stamped = true
					if resumed && !t.After(*last) {
						continue
					}
					*last = t
					s = rest
				}
			}
			h.lc.Output(s + "\n")
		}
		if err != nil {
			return stamped
		}
	}
}

// startAccess opens the path to the server once the pod runs: its IP, or
// a port-forward.
func (h *handle) startAccess(st podState) {
	if h.upDone {
		return
	}
	h.upDone = true
	h.mu.Lock()
	h.node, h.podIP = st.node, st.ip
	h.mu.Unlock()
	if h.access == PodIP {
		base := "http://" + net.JoinHostPort(st.ip, strconv.Itoa(h.rt.port()))
		h.mu.Lock()
		h.baseURL = base
		h.mu.Unlock()
		h.logLine(fmt.Sprintf("perflab: pod %s runs on node %s at %s; server at %s", h.sp.pod.Name, st.node, st.ip, base))
		h.setUp()
		return
	}
	h.logLine(fmt.Sprintf("perflab: pod %s runs on node %s at %s; forwarding %s to its port %d", h.sp.pod.Name, st.node, st.ip, h.baseURL, h.rt.port()))
	go h.forward()
}

func (h *handle) setUp() { h.upOnce.Do(func() { close(h.up) }) }

// Stop implements engine.Handle: it deletes the pod (SIGTERM, then SIGKILL
// after the grace period), closes the port-forward and waits until the
// pod is gone. Idempotent; later calls wait for the first one's result.
// A pod still pending or pulling goes as well.
func (h *handle) Stop(ctx context.Context) error {
	h.stopOnce.Do(func() { h.stopErr = h.stop(ctx) })
	return h.stopErr
}

func (h *handle) stop(ctx context.Context) error {
	h.lc.BeginStop()
	select {
	case <-h.done:
		// Ended by itself and deleted already; make sure.
		return h.deletePod(0)
	case <-h.launched:
	}
	h.cancelFw() // the log reader goes on until the container ends
	grace := stopGrace(h.launch)
	h.mu.Lock()
	started := h.started
	h.mu.Unlock()
	if ctx.Err() != nil || !started {
		// The lab shutting down, or a pod whose container never ran
		// (pending, pulling): no grace, but the pod still goes. A pod on
		// a node goes at once only so (without a kubelet, never else).
		grace = 0
	}
	err := h.deletePod(int64(grace / time.Second))
	force := time.NewTimer(grace + 10*time.Second)
	defer force.Stop()
	giveUp := time.NewTimer(grace + 40*time.Second)
	defer giveUp.Stop()
	for {
		select {
		case <-h.done:
			h.deleteFiles(ctx)
			return err
		case <-force.C:
			h.note(fmt.Sprintf("perflab: pod %s still there %v after its deletion; deleting it with no grace", h.sp.pod.Name, grace+10*time.Second))
			if ferr := h.deletePod(0); ferr != nil && err == nil {
				err = ferr
			}
		case <-giveUp.C:
			h.deleteFiles(ctx)
			if err != nil {
				return err
			}
			return fmt.Errorf("kubernetes: pod %s/%s did not go in %v", h.ns, h.sp.pod.Name, grace+40*time.Second)
		}
	}
}

// Ready implements engine.Handle: engine.WaitReady over the pod's state,
// events and log (see ReadyPlan).
func (h *handle) Ready(ctx context.Context) error { return engine.WaitReady(ctx, h) }
