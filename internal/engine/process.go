package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process runs the rendered command as a local process in its own process
// group. On Linux the group is led by a reaper (see reaper_linux.go) that
// kills the whole group, workers included, if perflab dies; Pid is the
// group id either way.
type Process struct {
	// LogLines is the size of the in-memory ring of recent log lines
	// (0 = 2000).
	LogLines int
	// PollInterval is how often Ready probes the server (0 = 250 ms).
	PollInterval time.Duration
}

var _ Runtime = (*Process)(nil)

// Start implements Runtime.
func (p *Process) Start(ctx context.Context, l Launch) (Handle, error) {
	return startProcess(ctx, l, nil, p.LogLines, p.PollInterval)
}

// freePort asks the kernel for an unused TCP port on host.
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("engine: find free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// wrapFunc turns the server's argv (with host and port) into what is
// actually executed; Sim uses it to put `perflab sim serve` in front.
type wrapFunc func(l Launch, argv []string) []string

func startProcess(ctx context.Context, l Launch, wrap wrapFunc, ringSize int, poll time.Duration) (Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("engine: start: %w", err)
	}
	if l.Host == "" {
		l.Host = "127.0.0.1"
	}
	if l.Port == 0 {
		port, err := freePort(l.Host)
		if err != nil {
			return nil, err
		}
		l.Port = port
	}
	cmd := l.Command
	if len(cmd.Argv) == 0 {
		var err error
		if cmd, err = Render(l.Config); err != nil {
			return nil, err
		}
	}
	argv := append(append([]string(nil), cmd.Argv...), "--host="+l.Host, "--port="+strconv.Itoa(l.Port))
	if wrap != nil {
		argv = wrap(l, argv)
	}
	// A working directory made here is the server's own: it goes when the
	// server has exited (and now, if the start fails), unless kept.
	removeDir := ""
	if l.WorkDir == "" {
		dir, err := os.MkdirTemp("", "perflab-engine-")
		if err != nil {
			return nil, fmt.Errorf("engine: work dir: %w", err)
		}
		l.WorkDir = dir
		if !l.KeepWorkDir {
			removeDir = dir
		}
	} else if err := os.MkdirAll(l.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("engine: work dir: %w", err)
	}
	started := false
	defer func() {
		if !started && removeDir != "" {
			os.RemoveAll(removeDir)
		}
	}()
	for name, content := range cmd.Files {
		if filepath.IsAbs(name) || strings.Contains(name, "..") {
			return nil, fmt.Errorf("engine: file name %q must be relative to the work dir", name)
		}
		if err := os.WriteFile(filepath.Join(l.WorkDir, name), []byte(content), 0o644); err != nil {
			return nil, fmt.Errorf("engine: write %s: %w", name, err)
		}
	}
	if l.LogPath == "" {
		l.LogPath = filepath.Join(l.WorkDir, "engine.log")
	}
	logf, err := os.OpenFile(l.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("engine: open log: %w", err)
	}
	// An *os.File pipe (not an io.Writer) so that Wait returns when the
	// leader exits even if a grandchild still holds the pipe open.
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("engine: pipe: %w", err)
	}

	c, status, err := groupCommand(argv, l.WorkDir, removeDir)
	if err != nil {
		pr.Close()
		pw.Close()
		logf.Close()
		return nil, err
	}
	c.Dir = l.WorkDir
	c.Stdout, c.Stderr = pw, pw
	env := os.Environ()
	for k, v := range cmd.Env {
		env = append(env, k+"="+v)
	}
	if l.GPUs != nil {
		ids := make([]string, len(l.GPUs))
		for i, g := range l.GPUs {
			ids[i] = strconv.Itoa(g)
		}
		env = append(env, "CUDA_VISIBLE_DEVICES="+strings.Join(ids, ","))
	}
	// groupCommand's own variables last, so the engine's cannot override them.
	c.Env = append(env, c.Env...)
	if ringSize <= 0 {
		ringSize = 2000
	}
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	h := &procHandle{
		launch:     l,
		argv:       argv,
		baseURL:    "http://" + net.JoinHostPort(l.Host, strconv.Itoa(l.Port)),
		lc:         NewLifecycle(ringSize, logf),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
		poll:       poll,
		started:    time.Now(),
	}
	err = c.Start()
	// The child has its copies; ours would keep the pipes from ever
	// reaching EOF.
	pw.Close()
	for _, f := range c.ExtraFiles {
		f.Close()
	}
	if err != nil {
		pr.Close()
		logf.Close()
		if status != nil {
			status.Close()
		}
		return nil, fmt.Errorf("engine: start %s: %w", argv[0], err)
	}
	started = true
	h.removeDir = removeDir
	// The group leader (the reaper on Linux): its pid is the group id.
	h.pid = c.Process.Pid
	register(h.pid)
	go h.readLog(pr)
	go h.wait(c, status)
	return h, nil
}

type procHandle struct {
	launch  Launch
	argv    []string
	baseURL string
	pid     int
	lc      *Lifecycle
	poll    time.Duration
	started time.Time

	done       chan struct{}
	readerDone chan struct{}

	// removeDir is the working directory to delete once the server has
	// exited ("" to keep it).
	removeDir string

	mu       sync.Mutex
	exitErr  error
	exitCode int
}

var (
	_ Handle          = (*procHandle)(nil)
	_ Benchmarker     = (*procHandle)(nil)
	_ PIDer           = (*procHandle)(nil)
	_ ReadinessSource = (*procHandle)(nil)
)

func (h *procHandle) BaseURL() string        { return h.baseURL }
func (h *procHandle) Done() <-chan struct{}  { return h.done }
func (h *procHandle) LogTail(n int) []string { return h.lc.Tail(n) }
func (h *procHandle) Pid() int               { return h.pid }

// Argv is the command line actually executed (with host and port).
func (h *procHandle) Argv() []string { return append([]string(nil), h.argv...) }

// MarkBenchmarking implements Benchmarker.
func (h *procHandle) MarkBenchmarking() { h.lc.MarkBenchmarking() }

// Failure implements Handle.
func (h *procHandle) Failure() *Failure { return h.lc.Failure() }

// Lifecycle implements ReadinessSource.
func (h *procHandle) Lifecycle() *Lifecycle { return h.lc }

// Up implements ReadinessSource: a local process is probed from its
// start.
func (h *procHandle) Up() <-chan struct{} { return nil }

// ReadyPlan implements ReadinessSource.
func (h *procHandle) ReadyPlan() ReadyPlan {
	return ReadyPlan{Model: h.launch.Config.ServedName(), ReadyTimeout: h.launch.ReadyTimeout,
		StallTimeout: h.launch.StallTimeout, Poll: h.poll, Begun: h.started}
}

func (h *procHandle) readLog(r io.ReadCloser) {
	defer close(h.readerDone)
	defer h.lc.CloseLog()
	defer r.Close()
	br := bufio.NewReaderSize(WatchRedraws(r, h.lc.Touch), 64<<10)
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

// wait waits for the group leader and records how the engine ended. status
// is the reaper's report of the engine's own wait status (nil without a
// reaper); without a report the leader's status stands for the engine's.
func (h *procHandle) wait(c *exec.Cmd, status *os.File) {
	err := c.Wait()
	// The leader is gone; take the rest of its group with it so no worker
	// is orphaned (and nothing holds the status pipe), then let the log
	// reader drain.
	_ = syscall.Kill(-h.pid, syscall.SIGKILL)
	ws, known := readStatus(status)
	if !known && c.ProcessState != nil {
		ws, known = c.ProcessState.Sys().(syscall.WaitStatus)
	}
	select {
	case <-h.readerDone:
	case <-time.After(2 * time.Second):
	}
	unregister(h.pid)
	code := -1
	if known && ws.Exited() {
		code = ws.ExitStatus()
	}
	h.mu.Lock()
	h.exitErr, h.exitCode = err, code
	h.mu.Unlock()
	if shuttingDown.Load() {
		// perflab itself is going: the engine was ended with it.
		h.lc.BeginStop()
	}
	h.lc.Exited(Exit{Code: code, What: fmt.Sprintf("exited (%v)", describeExit(ws, known, err))})
	if h.removeDir != "" {
		// The log lives on in the ring (LogTail) and in the trial's record.
		os.RemoveAll(h.removeDir)
	}
	close(h.done)
}

// readStatus reads the wait status the reaper reported and closes f. It
// reports false when there is no reaper or it died before reporting (it was
// SIGKILLed itself).
func readStatus(f *os.File) (syscall.WaitStatus, bool) {
	if f == nil {
		return 0, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 0, false
	}
	return syscall.WaitStatus(v), true
}

// describeExit says how the engine ended, for failure reasons.
func describeExit(ws syscall.WaitStatus, known bool, err error) string {
	switch {
	case !known:
		return fmt.Sprint(err)
	case ws.Signaled():
		// Signal.String is "killed" for SIGKILL, which read as "killed by
		// killed"; the signal's own name says which it was.
		return "killed by " + unix.SignalName(ws.Signal())
	default:
		return "status " + strconv.Itoa(ws.ExitStatus())
	}
}

// Ready implements Handle.
func (h *procHandle) Ready(ctx context.Context) error { return WaitReady(ctx, h) }

// Stop implements Handle.
func (h *procHandle) Stop(ctx context.Context) error {
	h.lc.BeginStop()
	select {
	case <-h.done:
		return nil
	default:
	}
	grace := h.launch.StopGrace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	if err := syscall.Kill(-h.pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("engine: stop pid %d: %w", h.pid, err)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-h.done:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	_ = syscall.Kill(-h.pid, syscall.SIGKILL)
	select {
	case <-h.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("engine: pid %d survived SIGKILL", h.pid)
	}
}
