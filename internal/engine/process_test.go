package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/testbin"
)

// fakeEngine is the path of testdata/fakeengine, built once in TestMain.
var fakeEngine string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "engine-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeEngine = filepath.Join(dir, "fakeengine")
	out, err := exec.Command("go", "build", "-o", fakeEngine, "./testdata/fakeengine").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build fakeengine: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	KillAll(time.Second) // belt and braces: no test leaves a process behind
	os.RemoveAll(dir)
	testbin.Cleanup() // the perflab the integration tests built, not PERFLAB_BIN
	os.Exit(code)
}

// alive reports whether pid still exists (and is not a zombie we own).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	// A zombie still answers kill 0; read its state.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) < 3 || fields[2] != "Z"
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still alive", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
			pid, err := strconv.Atoi(string(b))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fakeLaunch starts the fake engine with the given mode and env.
func fakeLaunch(t *testing.T, env map[string]string) Launch {
	t.Helper()
	if env == nil {
		env = map[string]string{}
	}
	if _, ok := env["FAKE_MODEL"]; !ok {
		env["FAKE_MODEL"] = "fake-model"
	}
	return Launch{
		Config:       Config{Engine: VLLM, Model: "fake-model"},
		Command:      Command{Argv: []string{fakeEngine, "serve", "fake-model"}, Env: env},
		WorkDir:      t.TempDir(),
		StallTimeout: 5 * time.Second,
		ReadyTimeout: 20 * time.Second,
		StopGrace:    2 * time.Second,
	}
}

func start(t *testing.T, rt Runtime, l Launch) Handle {
	t.Helper()
	h, err := rt.Start(context.Background(), l)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { h.Stop(context.Background()) })
	return h
}

func TestProcessServeAndStop(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	l := fakeLaunch(t, map[string]string{"FAKE_MODE": "serve", "FAKE_PIDFILE": pidfile, "FAKE_EXPECT_FILE": "opts.yaml"})
	l.Command.Files = map[string]string{"opts.yaml": "attn_backend: TRTLLM\n"}
	l.GPUs = []int{2, 3}
	h := start(t, &Process{PollInterval: 20 * time.Millisecond}, l)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Ready(ctx); err != nil {
		t.Fatalf("ready: %v\n%s", err, strings.Join(h.LogTail(20), "\n"))
	}
	resp, err := http.Post(h.BaseURL()+"/v1/completions", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	var events int
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
		}
	}
	resp.Body.Close()
	if events != 6 {
		t.Errorf("got %d SSE events, want 6", events)
	}
	log := strings.Join(h.LogTail(0), "\n")
	for _, want := range []string{"CUDA_VISIBLE_DEVICES=2,3", `file opts.yaml: "attn_backend: TRTLLM\n" <nil>`, "--host=127.0.0.1 --port="} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if b, err := os.ReadFile(filepath.Join(l.WorkDir, "engine.log")); err != nil || !strings.Contains(string(b), "Application startup complete") {
		t.Errorf("log file: %v %q", err, b)
	}
	child := readPid(t, pidfile)
	leader := PidOf(h)
	if err := h.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-h.Done()
	waitGone(t, leader)
	waitGone(t, child)
	if f := h.Failure(); f != nil {
		t.Errorf("stopped server has failure %v", f)
	}
	if err := h.Stop(context.Background()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestProcessFailureClasses(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		tweak func(*Launch)
		class FailureClass
		// within bounds how long Ready may take: exits must fail at once.
		within time.Duration
		reason string
	}{
		{name: "startup crash", env: map[string]string{"FAKE_MODE": "crash"}, class: ClassStartupCrash, within: 3 * time.Second, reason: "RuntimeError: engine core initialization failed"},
		{name: "oom", env: map[string]string{"FAKE_MODE": "oom"}, class: ClassOOM, within: 3 * time.Second, reason: "CUDA out of memory"},
		// vLLM's start-up memory guard: the GPU not yet free is a wait,
		// not a crash of the config.
		{name: "gpu busy", env: map[string]string{"FAKE_MODE": "gpubusy"}, class: ClassGPUBusy, within: 3 * time.Second, reason: "GPU not yet free at start"},
		{name: "hung", env: map[string]string{"FAKE_MODE": "hang"}, tweak: func(l *Launch) { l.StallTimeout = 600 * time.Millisecond },
			class: ClassHung, within: 4 * time.Second, reason: "no log progress"},
		{name: "hard timeout", env: map[string]string{"FAKE_MODE": "slowload", "FAKE_LOAD_STEPS": "100"},
			tweak: func(l *Launch) { l.ReadyTimeout = 800 * time.Millisecond; l.StallTimeout = time.Second },
			class: ClassHung, within: 4 * time.Second, reason: "not ready after"},
		{name: "unhealthy", env: map[string]string{"FAKE_MODE": "unhealthy"}, tweak: func(l *Launch) { l.StallTimeout = 600 * time.Millisecond },
			class: ClassUnhealthy, within: 4 * time.Second, reason: "GET /health: 503"},
		{name: "wrong model", env: map[string]string{"FAKE_MODE": "wrongmodel"}, tweak: func(l *Launch) { l.StallTimeout = 600 * time.Millisecond },
			class: ClassUnhealthy, within: 4 * time.Second, reason: `not "fake-model"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := fakeLaunch(t, tt.env)
			if tt.tweak != nil {
				tt.tweak(&l)
			}
			h := start(t, &Process{PollInterval: 20 * time.Millisecond}, l)
			begin := time.Now()
			err := h.Ready(context.Background())
			took := time.Since(begin)
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("Ready = %v, want a *Failure", err)
			}
			if f.Class != tt.class || !strings.Contains(f.Reason, tt.reason) {
				t.Errorf("failure = %s %q, want %s containing %q", f.Class, f.Reason, tt.class, tt.reason)
			}
			if took > tt.within {
				t.Errorf("Ready took %v, want under %v", took, tt.within)
			}
			if len(f.LogTail) == 0 {
				t.Error("failure carries no log tail")
			}
			if got := h.Failure(); got == nil || got.Class != tt.class {
				t.Errorf("Handle.Failure() = %v", got)
			}
		})
	}
}

// TestProcessStallReset: a load that takes longer than the stall timeout
// but keeps logging progress must become ready.
func TestProcessStallReset(t *testing.T) {
	l := fakeLaunch(t, map[string]string{"FAKE_MODE": "slowload", "FAKE_LOAD_STEPS": "12", "FAKE_STEP_MS": "100"})
	l.StallTimeout = 500 * time.Millisecond
	h := start(t, &Process{PollInterval: 20 * time.Millisecond}, l)
	begin := time.Now()
	if err := h.Ready(context.Background()); err != nil {
		t.Fatalf("ready: %v", err)
	}
	if took := time.Since(begin); took < time.Second {
		t.Errorf("ready after %v; the fake loads for 1.2 s", took)
	}
}

// waitDone fails the test unless h's Done closes within d.
func waitDone(t *testing.T, h Handle, d time.Duration, what string) {
	t.Helper()
	select {
	case <-h.Done():
	case <-time.After(d):
		t.Fatal("Done not closed " + what)
	}
}

func TestProcessCrashDuringBench(t *testing.T) {
	l := fakeLaunch(t, map[string]string{"FAKE_MODE": "serve"})
	h := start(t, &Process{PollInterval: 20 * time.Millisecond}, l)
	if err := h.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	MarkBenchmarking(h)
	if err := syscall.Kill(PidOf(h), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDone(t, h, 5*time.Second, "after kill -9")
	f := h.Failure()
	if f == nil || f.Class != ClassCrashDuringBench || !strings.Contains(f.Reason, "killed") {
		t.Fatalf("failure = %+v, want crash_during_bench", f)
	}
}

func TestProcessDiesAfterReady(t *testing.T) {
	l := fakeLaunch(t, map[string]string{"FAKE_MODE": "serve"})
	h := start(t, &Process{PollInterval: 20 * time.Millisecond}, l)
	if err := h.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(PidOf(h), syscall.SIGKILL)
	<-h.Done()
	if f := h.Failure(); f == nil || f.Class != ClassUnhealthy {
		t.Fatalf("failure = %+v, want unhealthy", f)
	}
}

// TestProcessStopEscalates: a server that ignores SIGTERM is SIGKILLed
// after the grace period, grandchildren included.
func TestProcessStopEscalates(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	l := fakeLaunch(t, map[string]string{"FAKE_MODE": "serve", "FAKE_IGNORE_TERM": "1", "FAKE_PIDFILE": pidfile})
	l.StopGrace = 300 * time.Millisecond
	h := start(t, &Process{PollInterval: 20 * time.Millisecond}, l)
	if err := h.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	child := readPid(t, pidfile)
	begin := time.Now()
	if err := h.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took < 300*time.Millisecond {
		t.Errorf("stopped after %v: SIGTERM should have been ignored", took)
	}
	waitGone(t, PidOf(h))
	waitGone(t, child)
}

// TestProcessLeaderExitKillsGroup: when the engine's main process dies, its
// workers must not be orphaned.
func TestProcessLeaderExitKillsGroup(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	l := fakeLaunch(t, map[string]string{"FAKE_MODE": "serve", "FAKE_PIDFILE": pidfile})
	h := start(t, &Process{PollInterval: 20 * time.Millisecond}, l)
	child := readPid(t, pidfile)
	syscall.Kill(PidOf(h), syscall.SIGKILL)
	<-h.Done()
	waitGone(t, child)
}

func TestKillAll(t *testing.T) {
	l := fakeLaunch(t, map[string]string{"FAKE_MODE": "hang"})
	h, err := (&Process{}).Start(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	defer shuttingDown.Store(false)
	KillAll(time.Second)
	waitDone(t, h, 5*time.Second, "after KillAll: the group is still running")
	if f := h.Failure(); f != nil {
		t.Errorf("KillAll death recorded as failure %v", f)
	}
	for _, g := range LiveGroups() {
		if g == PidOf(h) {
			t.Error("group still registered")
		}
	}
}

func TestProcessStartErrors(t *testing.T) {
	l := fakeLaunch(t, nil)
	l.Command.Argv = []string{filepath.Join(t.TempDir(), "no-such-binary")}
	if _, err := (&Process{}).Start(context.Background(), l); err == nil {
		t.Error("start of a missing binary succeeded")
	}
	l = fakeLaunch(t, nil)
	l.Command.Files = map[string]string{"../escape": "x"}
	if _, err := (&Process{}).Start(context.Background(), l); err == nil {
		t.Error("file outside the work dir accepted")
	}
	// An empty Command is rendered from the Config; unsupported knobs
	// fail before anything starts.
	l = fakeLaunch(t, nil)
	l.Command = Command{}
	l.Config = Config{Engine: SGLang, Model: "m", PerformanceMode: "throughput"}
	if _, err := (&Process{}).Start(context.Background(), l); !errors.Is(err, ErrUnsupported) {
		t.Errorf("err = %v, want ErrUnsupported", err)
	}
}

func TestRing(t *testing.T) {
	r := NewLogRing(3)
	if got := r.Tail(5); len(got) != 0 {
		t.Errorf("empty ring tail = %q", got)
	}
	for i := 1; i <= 5; i++ {
		r.Add(strconv.Itoa(i))
	}
	if got := strings.Join(r.Tail(2), ","); got != "4,5" {
		t.Errorf("tail(2) = %s", got)
	}
	if got := strings.Join(r.Tail(0), ","); got != "3,4,5" {
		t.Errorf("tail(0) = %s", got)
	}
}

func TestSimPrefix(t *testing.T) {
	s := &Sim{GPU: "H100", TimeScale: 50, StartupDelay: 2 * time.Second, Tokenizer: "/tok", Coefficients: "/c.json"}
	got := strings.Join(s.prefix("/bin/perflab", Launch{Config: Config{Engine: SGLang, Model: "m", TensorParallel: 2}}), " ")
	want := "/bin/perflab sim serve --engine sglang --engine-version 0.5.9 --gpu H100 --gpus 2 --time-scale 50 --startup-delay 2s --tokenizer /tok --coefficients /c.json"
	if got != want {
		t.Errorf("prefix = %s\nwant     %s", got, want)
	}
}

// TestProcessRemovesItsWorkDir (issue 11, defect 11: 40
// /tmp/perflab-engine-* folders were left behind): a working directory the
// runtime made goes when the server stops, and when it crashes; one the
// caller named, or asked to keep, stays.
func TestProcessRemovesItsWorkDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, tc := range []struct {
		name  string
		mode  string
		keep  bool
		given bool
		gone  bool
	}{
		{"stopped", "serve", false, false, true},
		{"crashed", "crash", false, false, true},
		{"kept", "serve", true, false, false},
		{"named by the caller", "serve", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := fakeLaunch(t, map[string]string{"FAKE_MODE": tc.mode})
			l.Command.Files = map[string]string{"opts.yaml": "x: 1\n"}
			if !tc.given {
				l.WorkDir = ""
			}
			l.KeepWorkDir = tc.keep
			before, _ := filepath.Glob(filepath.Join(tmp, "perflab-engine-*"))
			h := start(t, &Process{PollInterval: 20 * time.Millisecond}, l)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = h.Ready(ctx)
			if err := h.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			<-h.Done()
			after, _ := filepath.Glob(filepath.Join(tmp, "perflab-engine-*"))
			made := len(after) - len(before)
			if tc.given {
				if _, err := os.Stat(filepath.Join(l.WorkDir, "opts.yaml")); err != nil {
					t.Errorf("the caller's work dir lost its files: %v", err)
				}
				return
			}
			if tc.gone && made != 0 {
				t.Errorf("%d work dirs left: %v", made, after)
			}
			if !tc.gone && made != 1 {
				t.Errorf("%d work dirs kept, want 1", made)
			}
			if len(h.LogTail(5)) == 0 {
				t.Error("the log tail went with the work dir")
			}
		})
	}
}
