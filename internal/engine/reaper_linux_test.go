package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testRoleEnv makes the test binary play a part in these tests instead of
// running them: "perflab" (a stand-in perflab that starts a fake engine
// through the Process runtime and waits to be killed) or "graceful" (an
// engine that shuts down cleanly on SIGTERM).
const testRoleEnv = "PERFLAB_TEST_ROLE"

func init() {
	if os.Getenv(reaperEnv) != "" {
		return // this process is a reaper; reaper_linux.go's init runs it
	}
	switch os.Getenv(testRoleEnv) {
	case "perflab":
		os.Exit(standInPerflab())
	case "graceful":
		os.Exit(gracefulEngine())
	}
}

// standInPerflab starts the fake engine (PERFLAB_TEST_FAKE) with a worker
// child, writes the group id to $PERFLAB_TEST_DIR/group.pid and waits to be
// SIGKILLed.
func standInPerflab() int {
	os.Unsetenv(testRoleEnv)
	dir := os.Getenv("PERFLAB_TEST_DIR")
	h, err := (&Process{}).Start(context.Background(), Launch{
		Config: Config{Engine: VLLM, Model: "fake-model"},
		Command: Command{Argv: []string{os.Getenv("PERFLAB_TEST_FAKE"), "serve", "fake-model"},
			Env: map[string]string{"FAKE_MODE": "hang", "FAKE_PIDFILE": filepath.Join(dir, "child.pid")}},
		// A working directory of its own (under the test's TMPDIR), which
		// the reaper must remove when this stand-in is killed.
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "stand-in perflab:", err)
		return 1
	}
	if err := os.WriteFile(filepath.Join(dir, "group.pid"), []byte(strconv.Itoa(PidOf(h))), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "stand-in perflab:", err)
		return 1
	}
	select {}
}

// gracefulEngine waits for SIGTERM, then takes a while to shut down (as an
// engine draining requests and freeing GPUs does) and exits 0.
func gracefulEngine() int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	fmt.Println("waiting for SIGTERM")
	<-term
	fmt.Println("got SIGTERM, shutting down")
	time.Sleep(300 * time.Millisecond)
	fmt.Println("clean shutdown done")
	return 0
}

// pgrp returns the process group of pid, from /proc.
func pgrp(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("pgrp of %d: %v", pid, err)
	}
	// "pid (comm) state ppid pgrp ...": comm may hold spaces.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	g, err := strconv.Atoi(fields[2])
	if err != nil {
		t.Fatalf("pgrp of %d: %v in %q", pid, err, s)
	}
	return g
}

// TestReaperKillsGroupWhenPerflabDies is the orphan audit's case: perflab
// is SIGKILLed while its engine runs; the engine's main process and the
// worker it forked must both be gone within seconds.
func TestReaperKillsGroupWhenPerflabDies(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	perflab := exec.Command(self)
	tmp := t.TempDir()
	perflab.Env = append(os.Environ(), testRoleEnv+"=perflab", "PERFLAB_TEST_DIR="+dir, "PERFLAB_TEST_FAKE="+fakeEngine, "TMPDIR="+tmp)
	var out strings.Builder
	perflab.Stdout, perflab.Stderr = &out, &out
	if err := perflab.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { perflab.Wait(); close(exited) }()
	group := readPid(t, filepath.Join(dir, "group.pid"))
	engine := readPid(t, filepath.Join(dir, "child.pid.leader"))
	worker := readPid(t, filepath.Join(dir, "child.pid"))
	// Whatever happens below, nothing of this test outlives it.
	t.Cleanup(func() {
		perflab.Process.Kill()
		syscall.Kill(-group, syscall.SIGKILL)
	})
	for _, pid := range []int{engine, worker} {
		if !alive(pid) {
			t.Fatalf("pid %d not running before the kill; stand-in output:\n%s", pid, out.String())
		}
		if g := pgrp(t, pid); g != group {
			t.Fatalf("pid %d is in group %d, want Pid() = %d", pid, g, group)
		}
	}
	if engine == group {
		t.Fatal("the engine leads its group itself: no reaper in between")
	}

	if err := perflab.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	waitGone(t, engine)
	waitGone(t, worker)
	waitGone(t, group)
	// Its working directory went with it (issue 11: a lab killed with -9
	// left its engines' /tmp/perflab-engine-* folders behind).
	deadline := time.Now().Add(5 * time.Second)
	for {
		left, _ := filepath.Glob(filepath.Join(tmp, "perflab-engine-*"))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("work dirs left after perflab was killed: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReaperStopIsGraceful: Stop's SIGTERM reaches the engine, which gets
// its whole shutdown (well inside the grace period) and exits 0; the
// reaper must neither die on the SIGTERM (its death would SIGKILL the
// group mid-shutdown) nor hide the engine's status.
func TestReaperStopIsGraceful(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	l := fakeLaunch(t, map[string]string{testRoleEnv: "graceful"})
	l.Command.Argv = []string{self}
	l.StopGrace = 30 * time.Second
	h := start(t, &Process{PollInterval: 20 * time.Millisecond}, l)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(strings.Join(h.LogTail(0), "\n"), "waiting for SIGTERM") {
		if time.Now().After(deadline) {
			t.Fatalf("engine never got ready for SIGTERM:\n%s", strings.Join(h.LogTail(0), "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	begin := time.Now()
	if err := h.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Far below the grace period: the engine's own exit ended Stop, not
	// the SIGKILL after it.
	if took := time.Since(begin); took > 15*time.Second {
		t.Errorf("Stop took %v", took)
	}
	log := strings.Join(h.LogTail(0), "\n")
	for _, want := range []string{"got SIGTERM", "clean shutdown done"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	ph := h.(*procHandle)
	ph.mu.Lock()
	code := ph.exitCode
	ph.mu.Unlock()
	if code != 0 {
		t.Errorf("engine exit code %d, want 0 (its own clean exit)", code)
	}
	if f := h.Failure(); f != nil {
		t.Errorf("graceful stop recorded failure %v", f)
	}
	waitGone(t, PidOf(h))
}

// TestReaperReportsEngineStatus: failures carry the engine's own exit, not
// the reaper's: status 1 at startup is a startup_crash with code 1, and a
// kill -9 of the engine's main process (not the group leader) mid-benchmark
// is a crash_during_bench by SIGKILL that leaves no worker behind.
func TestReaperReportsEngineStatus(t *testing.T) {
	t.Run("status 1 at startup", func(t *testing.T) {
		h := start(t, &Process{PollInterval: 20 * time.Millisecond}, fakeLaunch(t, map[string]string{"FAKE_MODE": "crash"}))
		var f *Failure
		if err := h.Ready(context.Background()); !errors.As(err, &f) {
			t.Fatalf("Ready = %v, want a *Failure", err)
		}
		if f.Class != ClassStartupCrash || f.ExitCode != 1 || !strings.Contains(f.Reason, "exited (status 1)") {
			t.Errorf("failure = %s code %d %q, want startup_crash, code 1, status 1", f.Class, f.ExitCode, f.Reason)
		}
	})
	t.Run("engine main killed mid-benchmark", func(t *testing.T) {
		pidfile := filepath.Join(t.TempDir(), "child.pid")
		h := start(t, &Process{PollInterval: 20 * time.Millisecond}, fakeLaunch(t, map[string]string{"FAKE_MODE": "serve", "FAKE_PIDFILE": pidfile}))
		if err := h.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		engine, worker := readPid(t, pidfile+".leader"), readPid(t, pidfile)
		MarkBenchmarking(h)
		if err := syscall.Kill(engine, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitDone(t, h, 10*time.Second, "after the engine was killed")
		f := h.Failure()
		if f == nil || f.Class != ClassCrashDuringBench || !strings.Contains(f.Reason, "killed by SIGKILL") || f.ExitCode != -1 {
			t.Fatalf("failure = %+v, want crash_during_bench killed by SIGKILL", f)
		}
		waitGone(t, worker)
		waitGone(t, PidOf(h))
	})
}
