package docker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/perflab/perflab/internal/engine"
)

// handle is one server in a container. Its life: run pulls the image if
// needed, creates and starts the container, streams its log and waits for
// it to exit, classes the exit, removes the container and closes done.
type handle struct {
	rt     *Runtime
	cli    client.APIClient
	launch engine.Launch
	sp     spec
	lc     *engine.Lifecycle
	poll   time.Duration

	// launchCtx bounds the pull, create and start; Stop cancels it.
	launchCtx    context.Context
	cancelLaunch context.CancelFunc
	// launched is closed when the pull/create/start phase has ended, one
	// way or the other; containerUp when the container has started.
	launched    chan struct{}
	containerUp chan struct{}
	done        chan struct{}
	readerDone  chan struct{}
	removeDir   string

	mu       sync.Mutex
	id       string
	upAt     time.Time
	exitCode int

	stopOnce sync.Once
	stopErr  error
}

var (
	_ engine.Handle          = (*handle)(nil)
	_ engine.Benchmarker     = (*handle)(nil)
	_ engine.ReadinessSource = (*handle)(nil)
)

func newHandle(rt *Runtime, cli client.APIClient, l engine.Launch, sp spec, logf *os.File, removeDir string) *handle {
	size := rt.LogLines
	if size <= 0 {
		size = 2000
	}
	poll := rt.PollInterval
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &handle{
		rt: rt, cli: cli, launch: l, sp: sp, lc: engine.NewLifecycle(size, logf), poll: poll,
		launchCtx: ctx, cancelLaunch: cancel,
		launched: make(chan struct{}), containerUp: make(chan struct{}),
		done: make(chan struct{}), readerDone: make(chan struct{}),
		removeDir: removeDir, exitCode: -1,
	}
	return h
}

func (h *handle) BaseURL() string        { return h.sp.baseURL }
func (h *handle) Done() <-chan struct{}  { return h.done }
func (h *handle) LogTail(n int) []string { return h.lc.Tail(n) }

// Image is the image the container runs.
func (h *handle) Image() string { return h.sp.image }

// ContainerName is the name the container is created under.
func (h *handle) ContainerName() string { return h.sp.name }

// ContainerID is the container's id, "" before it was created.
func (h *handle) ContainerID() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.id
}

// Argv is the command the container runs, program first.
func (h *handle) Argv() []string {
	c := h.sp.create.Config
	return append(append([]string(nil), c.Entrypoint...), c.Cmd...)
}

// MarkBenchmarking implements engine.Benchmarker.
func (h *handle) MarkBenchmarking() { h.lc.MarkBenchmarking() }

// Failure implements engine.Handle.
func (h *handle) Failure() *engine.Failure { return h.lc.Failure() }

// Lifecycle implements engine.ReadinessSource.
func (h *handle) Lifecycle() *engine.Lifecycle { return h.lc }

// Up implements engine.ReadinessSource: closed once the container has
// started, so that an image pull does not eat into the ready timeout.
func (h *handle) Up() <-chan struct{} { return h.containerUp }

// ReadyPlan implements engine.ReadinessSource: the stall timer runs from
// the start (pull progress resets it).
func (h *handle) ReadyPlan() engine.ReadyPlan {
	return engine.ReadyPlan{Model: h.launch.Config.ServedName(), ReadyTimeout: h.launch.ReadyTimeout,
		StallTimeout: h.launch.StallTimeout, Poll: h.poll,
		Started: "the container started", BeforeUp: "pull or start"}
}

// logLine writes one line of perflab's own (pull progress, container
// events) to the log and the ring, as progress.
func (h *handle) logLine(s string) { h.lc.Line(s) }

// run is the container's whole life, in the background.
func (h *handle) run() {
	defer close(h.done)
	defer h.lc.CloseLog()
	id, out, fail := h.launchContainer()
	close(h.launched)
	if fail != nil {
		h.lc.Fail(fail)
		h.removeFiles()
		return
	}
	go h.streamLog(id, out)
	h.waitExit(id)
	if out != nil {
		// Ends the reader if the stream outlived the container.
		out.Close()
	}
	h.removeFiles()
}

// launchContainer pulls the image if needed, then creates and starts the
// container. It returns the container's output stream (nil: read it from
// the log API). A nil Failure with an empty id means Stop came first.
func (h *handle) launchContainer() (string, io.ReadCloser, *engine.Failure) {
	ctx := h.launchCtx
	if f := h.ensureImage(ctx); f != nil {
		return "", nil, f
	}
	// Not canceled by Stop: a create canceled in flight can still finish
	// on the daemon (podman's does), making a container after Stop looked
	// for it by name and found none. It takes well under a second; Stop,
	// which waits for it, then removes the container by its id.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	res, err := h.cli.ContainerCreate(cctx, h.sp.create)
	ccancel()
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			// Removed between the pull and the create (a prune).
			return "", nil, h.unavailable(fmt.Sprintf("image %s is not on the host: %v", h.sp.image, err))
		}
		return "", nil, &engine.Failure{Class: engine.ClassStartupCrash, Reason: fmt.Sprintf("create container from %s: %v", h.sp.image, err)}
	}
	for _, w := range res.Warnings {
		h.logLine("perflab: docker: " + w)
	}
	h.mu.Lock()
	h.id = res.ID
	h.mu.Unlock()
	if h.lc.Stopping() {
		return "", nil, nil
	}
	// Attached before the start, as `docker run` does, the output comes
	// whole and as it is written; a log stream opened after the start
	// (podman) can end at once or lag.
	var out io.ReadCloser
	if att, err := h.cli.ContainerAttach(context.Background(), res.ID, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true, Logs: true}); err == nil {
		out = hijacked{att.HijackedResponse}
	} else {
		h.logLine("perflab: docker: attach: " + err.Error() + "; reading the container's log instead")
	}
	if _, err := h.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		if out != nil {
			out.Close()
		}
		h.remove(res.ID)
		return "", nil, &engine.Failure{Class: engine.ClassStartupCrash, Reason: fmt.Sprintf("start container %s from %s: %v", h.sp.name, h.sp.image, err)}
	}
	h.mu.Lock()
	h.upAt = time.Now()
	h.mu.Unlock()
	close(h.containerUp)
	h.logLine(fmt.Sprintf("perflab: container %s (%.12s) started from %s", h.sp.name, res.ID, h.sp.image))
	return res.ID, out, nil
}

// hijacked is an attach stream as an io.ReadCloser.
type hijacked struct{ r client.HijackedResponse }

func (h hijacked) Read(p []byte) (int, error) { return h.r.Reader.Read(p) }
func (h hijacked) Close() error               { h.r.Close(); return nil }

func (h *handle) unavailable(reason string) *engine.Failure {
	return &engine.Failure{Class: engine.ClassImageUnavailable, Reason: reason}
}

// ensureImage pulls the image when the host lacks it, with its progress in
// the log. An image that cannot be had is image_unavailable.
func (h *handle) ensureImage(ctx context.Context) *engine.Failure {
	img := h.sp.image
	_, err := h.cli.ImageInspect(ctx, img)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return &engine.Failure{Class: engine.ClassStartupCrash, Reason: fmt.Sprintf("inspect image %s: %v", img, err)}
	}
	if h.rt.Pull == "never" {
		return h.unavailable(fmt.Sprintf("image %s is not on the host, and pulling is off", img))
	}
	h.logLine("perflab: pulling " + img)
	resp, err := h.cli.ImagePull(ctx, img, client.ImagePullOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return h.unavailable(fmt.Sprintf("pull %s: %v", img, err))
	}
	perr := h.followPull(ctx, resp)
	resp.Close()
	if ctx.Err() != nil {
		return nil
	}
	if perr != nil {
		return h.unavailable(fmt.Sprintf("pull %s: %v", img, perr))
	}
	if _, err := h.cli.ImageInspect(ctx, img); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return h.unavailable(fmt.Sprintf("image %s is still not on the host after its pull: %v", img, err))
	}
	h.logLine("perflab: pulled " + img)
	return nil
}

// pullMessage is one line of a pull's JSON stream. Podman fills "error",
// Docker "errorDetail"; both are read.
type pullMessage struct {
	Status      string `json:"status"`
	ID          string `json:"id"`
	Progress    string `json:"progress"`
	Stream      string `json:"stream"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// followPull logs each layer's status as it changes (not every byte
// count, which would drown the log) and returns the pull's own error.
func (h *handle) followPull(ctx context.Context, r io.Reader) error {
	dec := json.NewDecoder(r)
	last := map[string]string{}
	for {
		var m pullMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read progress: %w", err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
		// Byte counts are progress for the stall timer, not log lines.
		h.lc.Touch()
		text := strings.TrimSpace(m.Status)
		if text == "" {
			text = strings.TrimSpace(m.Stream)
		}
		if text == "" || last[m.ID] == text {
			continue
		}
		last[m.ID] = text
		line := "perflab: pull " + h.sp.image + ": "
		if m.ID != "" {
			line += m.ID + ": "
		}
		h.logLine(line + text)
	}
}

// streamLog copies the container's stdout and stderr (rc, or the log API's
// when rc is nil) into the log file and the ring, line by line.
func (h *handle) streamLog(id string, rc io.ReadCloser) {
	defer close(h.readerDone)
	if rc == nil {
		var err error
		rc, err = h.cli.ContainerLogs(context.Background(), id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
		if err != nil {
			h.logLine("perflab: docker: read container log: " + err.Error())
			return
		}
	}
	defer rc.Close()
	pr, pw := io.Pipe()
	go func() {
		// Without a TTY the stream is multiplexed (stdout and stderr
		// frames); both go to one log, as a process's pipe would.
		_, err := stdcopy.StdCopy(pw, pw, rc)
		pw.CloseWithError(err)
	}()
	br := bufio.NewReaderSize(engine.WatchRedraws(pr, h.lc.Touch), 64<<10)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			h.lc.Output(line)
		}
		if err != nil {
			return
		}
	}
}

// waitExit waits for the container to stop, classes how it ended, and
// removes it.
func (h *handle) waitExit(id string) {
	wr := h.cli.ContainerWait(context.Background(), id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	code := -1
	var waitErr error
	select {
	case res := <-wr.Result:
		code = int(res.StatusCode)
		if res.Error != nil && res.Error.Message != "" {
			waitErr = errors.New(res.Error.Message)
		}
	case waitErr = <-wr.Error:
	}
	ictx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var oomKilled bool
	var memLimit int64
	if ins, err := h.cli.ContainerInspect(ictx, id, client.ContainerInspectOptions{}); err == nil {
		if st := ins.Container.State; st != nil {
			code, oomKilled = st.ExitCode, st.OOMKilled
		}
		if hc := ins.Container.HostConfig; hc != nil {
			memLimit = hc.Memory
		}
	} else if waitErr == nil {
		waitErr = err
	}
	// Let the log reader drain what the container wrote last.
	select {
	case <-h.readerDone:
	case <-time.After(2 * time.Second):
	}
	h.mu.Lock()
	h.exitCode = code
	h.mu.Unlock()
	h.lc.Exited(exitOf(code, oomKilled, memLimit, waitErr))
	h.remove(id)
}

// exitOf is how a container ended, for the lifecycle's classification.
// A container killed for memory is oom: Docker sets State.OOMKilled, but
// podman (runc, cgroupfs) only reports exit 137, so 137 under a memory
// limit counts too (a Stop would have been asked for otherwise).
func exitOf(code int, oomKilled bool, memLimit int64, waitErr error) engine.Exit {
	how := fmt.Sprintf("status %d", code)
	if code < 0 {
		how = fmt.Sprintf("unknown status: %v", waitErr)
	}
	e := engine.Exit{Code: code, What: "container exited (" + how + ")"}
	switch {
	case oomKilled || (code == 137 && memLimit > 0):
		e.Killed = fmt.Sprintf("killed for memory (limit %d MiB)", memLimit>>20)
		if memLimit == 0 {
			e.Killed = "killed for memory (the host ran out)"
		}
	}
	return e
}

// remove deletes the container, killing it if it still runs. A container
// already gone is not an error.
func (h *handle) remove(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := h.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: remove container %s: %w", h.sp.name, err)
	}
	return nil
}

func (h *handle) removeFiles() {
	if h.removeDir != "" {
		// The log lives on in the ring (LogTail) and the trial's record.
		os.RemoveAll(h.removeDir)
	}
}

// Stop implements engine.Handle: it cancels a pull or start under way,
// stops the container (SIGTERM, then SIGKILL after the grace period) and
// removes it. Idempotent; later calls wait for the first one's result.
func (h *handle) Stop(ctx context.Context) error {
	h.stopOnce.Do(func() { h.stopErr = h.stop(ctx) })
	return h.stopErr
}

func (h *handle) stop(ctx context.Context) error {
	h.lc.BeginStop()
	h.cancelLaunch()
	select {
	case <-h.done:
		// Ended by itself and already removed; make sure of the name too.
		return h.remove(h.sp.name)
	case <-h.launched:
	}
	grace := h.launch.StopGrace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	// The API calls must go through even when ctx is canceled (the lab
	// shutting down): a canceled ctx only skips the grace period.
	api, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace+30*time.Second)
	defer cancel()
	ref := h.ContainerID()
	if ref == "" {
		// A create canceled in flight may still have made it; its name is
		// known.
		ref = h.sp.name
	}
	if ctx.Err() == nil {
		secs := int((grace + time.Second - 1) / time.Second)
		_, err := h.cli.ContainerStop(api, ref, client.ContainerStopOptions{Timeout: &secs})
		if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsNotModified(err) {
			h.logLine("perflab: docker: stop " + h.sp.name + ": " + err.Error())
		}
	}
	err := h.remove(ref)
	select {
	case <-h.done:
	case <-api.Done():
		return fmt.Errorf("docker: container %s did not go: %w", h.sp.name, api.Err())
	}
	if err != nil {
		return err
	}
	// The run goroutine removed it by id; a container made under the name
	// but never reported (create canceled mid-flight) goes here.
	return h.remove(h.sp.name)
}

// Ready implements engine.Handle: engine.WaitReady over the container's
// start (Up) and log. The ready timeout counts from the container's start,
// so an image pull does not eat into it; the stall timer runs from the
// start (pull progress resets it).
func (h *handle) Ready(ctx context.Context) error { return engine.WaitReady(ctx, h) }
