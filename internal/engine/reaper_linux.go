package engine

// The reaper: a small supervisor that leads the engine's process group so
// that the whole group dies with perflab.
//
// A parent-death signal (PR_SET_PDEATHSIG) reaches only the one process it
// was set on. Set on the engine's main process, it kills that process when
// perflab is SIGKILLed, but real engines (vLLM's engine core, SGLang's and
// TensorRT-LLM's TP workers) fork workers that hold GPU memory and would
// survive as orphans. So the group leader is perflab's own binary re-executed
// as a reaper (/proc/self/exe, gated by reaperEnv): it gets SIGUSR1 as its
// parent-death signal and answers it with kill(0, SIGKILL), which takes the
// whole group. Being Go, it needs no shell and reports the engine's exact
// wait status to perflab over a pipe (fd 3), so exit classes and codes are
// the engine's, not the reaper's.

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// reaperEnv, when set (to perflab's pid), turns this binary into the reaper
// for the argv that follows: [resolved engine path, engine argv...].
const reaperEnv = "PERFLAB_ENGINE_REAPER"

// reaperRmdirEnv names a working directory the reaper removes when perflab
// dies: perflab removes it after a normal stop, but a perflab killed with
// -9 cannot, and the directory would outlive it.
const reaperRmdirEnv = "PERFLAB_ENGINE_REAPER_RMDIR"

// reaperName is the reaper's argv[0], so `ps` shows what it is.
const reaperName = "perflab-engine-reaper"

// statusFD is the reaper's end of the status pipe (first of ExtraFiles).
const statusFD = 3

// init runs the reaper before anything else of the program when this binary
// was started as one. It is in init, not main, so that every binary that
// starts engines (perflab, the tests) can serve as its own reaper.
func init() {
	if parent := os.Getenv(reaperEnv); parent != "" {
		os.Exit(runReaper(parent, os.Args[1:]))
	}
}

// groupCommand returns the command that runs argv as a new process group
// led by a reaper, and the read end of the pipe on which the reaper reports
// the engine's wait status. The caller adds the engine's environment in
// front of c.Env and closes c.ExtraFiles after Start.
func groupCommand(argv []string, dir, removeDir string) (*exec.Cmd, *os.File, error) {
	path, err := resolveEngine(argv[0], dir)
	if err != nil {
		return nil, nil, err
	}
	self := "/proc/self/exe" // still valid if the binary was replaced on disk
	if _, err := os.Stat(self); err != nil {
		if self, err = os.Executable(); err != nil {
			return nil, nil, fmt.Errorf("engine: find own binary for the reaper: %w", err)
		}
	}
	sr, sw, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("engine: status pipe: %w", err)
	}
	c := &exec.Cmd{Path: self, Args: append([]string{reaperName, path}, argv...)}
	// Only the reaper's own variable: the caller puts the engine's
	// environment in front of it.
	c.Env = []string{reaperEnv + "=" + strconv.Itoa(os.Getpid())}
	if removeDir != "" {
		c.Env = append(c.Env, reaperRmdirEnv+"="+removeDir)
	}
	c.ExtraFiles = []*os.File{sw}
	// Own group so one signal reaches every worker. SIGUSR1 (not SIGKILL)
	// as the parent-death signal, so the reaper can pass the death on to
	// the group. Pdeathsig fires when the forking OS thread exits; Go
	// keeps its threads unless a goroutine exits while locked to one,
	// which perflab does not do.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGUSR1}
	return c, sr, nil
}

// resolveEngine finds the engine binary now, so that a missing one fails
// Start at once as it did before the reaper, instead of surfacing later as
// a startup crash. A bare name is looked up in PATH; a relative path is
// taken relative to dir, as exec.Cmd does with Dir.
func resolveEngine(name, dir string) (string, error) {
	if !strings.ContainsRune(name, os.PathSeparator) {
		p, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("engine: start %s: %w", name, err)
		}
		return filepath.Abs(p)
	}
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("engine: start %s: %w", name, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("engine: start %s: not an executable file", name)
	}
	return p, nil
}

// runReaper starts the engine (args[0] is its path, args[1:] its argv),
// waits for it, reports its wait status on fd 3 and then kills whatever is
// left of the group, itself included. If perflab dies first (SIGUSR1), it
// kills the group at once. It returns an exit code only when it could not
// do its job.
func runReaper(parent string, args []string) int {
	// Watch for perflab's death before checking it is still alive: a
	// death in between is then caught by one or the other.
	died := make(chan os.Signal, 1)
	signal.Notify(died, syscall.SIGUSR1)
	if strconv.Itoa(os.Getppid()) != parent {
		fmt.Fprintln(os.Stderr, "perflab reaper: perflab exited before the engine started")
		return 1
	}
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "perflab reaper: no engine command")
		return 2
	}
	status := os.NewFile(statusFD, "status")
	syscall.CloseOnExec(statusFD) // the engine must not hold the pipe open
	// Stop's SIGTERM (and a stray SIGINT/SIGHUP) goes to the whole group:
	// the engine acts on it, the reaper must outlive the engine's graceful
	// shutdown to report its status. Caught, not ignored, so the engine
	// starts with default dispositions; one already ignored stays so.
	soft := make(chan os.Signal, 8) // never read: Notify drops, never blocks
	for _, s := range []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		if !signal.Ignored(s) {
			signal.Notify(soft, s)
		}
	}
	os.Unsetenv(reaperEnv)
	rmdir := os.Getenv(reaperRmdirEnv)
	os.Unsetenv(reaperRmdirEnv)

	c := &exec.Cmd{Path: args[0], Args: args[1:], Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	// Should the reaper itself be SIGKILLed, the engine goes with it;
	// perflab then sees the reaper exit and kills the rest of the group.
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "perflab reaper: start %s: %v\n", args[0], err)
		fmt.Fprintf(status, "%d\n", uint32(127<<8)) // "exited with status 127", as a shell says
		return 127
	}
	exited := make(chan struct{})
	go func() {
		_ = c.Wait()
		close(exited)
	}()
	select {
	case <-died:
		if rmdir != "" {
			// Unlinked under the running engine, which dies next.
			_ = os.RemoveAll(rmdir)
		}
		_ = syscall.Kill(0, syscall.SIGKILL)
		select {} // the SIGKILL above is ours too
	case <-exited:
	}
	if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); ok {
		fmt.Fprintf(status, "%d\n", uint32(ws))
	}
	status.Close()
	// Workers the engine left behind go now, while the group id is still
	// held by this leader and whatever happens to perflab.
	_ = syscall.Kill(0, syscall.SIGKILL)
	select {}
}
