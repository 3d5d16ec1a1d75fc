package docker_test

// Tests on a real Docker API: podman's, which .ci/podman.sh starts and
// names in DOCKER_HOST, with PERFLAB_TEST_DOCKER=1. They build the
// simulated engine image from a static perflab binary and run the engines'
// own commands in it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/engine/docker"
	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/simimage"
	"github.com/perflab/perflab/internal/testbin"
)

var (
	imageOnce sync.Once
	imageTag  string
	imageErr  error
	// imageShared is set when imageTag is CI's image, which TestMain leaves.
	imageShared bool
	apiOnce     sync.Once
	api         client.APIClient
)

// needDocker skips without PERFLAB_TEST_DOCKER=1, except under CI=true,
// where a missing daemon is a failure.
func needDocker(t *testing.T) client.APIClient {
	t.Helper()
	if os.Getenv("PERFLAB_TEST_DOCKER") != "1" {
		if os.Getenv("CI") == "true" {
			t.Fatal("PERFLAB_TEST_DOCKER is not 1 under CI=true: .ci/run must start podman (.ci/podman.sh)")
		}
		t.Skip("PERFLAB_TEST_DOCKER=1 not set: the Docker API tests are skipped (.ci/podman.sh starts podman)")
	}
	apiOnce.Do(func() {
		c, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			t.Fatalf("docker client: %v", err)
		}
		api = c
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := api.Ping(ctx, client.PingOptions{}); err != nil {
		t.Fatalf("no Docker API at DOCKER_HOST=%q: %v", os.Getenv("DOCKER_HOST"), err)
	}
	return api
}

// simImage builds the simulated engine image once per test binary, from a
// static perflab built here, and removes both when the tests end.
func simImage(t *testing.T) string {
	t.Helper()
	imageOnce.Do(func() {
		// CI's one image (PERFLAB_SIM_IMAGE), used and left in place.
		if shared := testbin.SimImage(); shared != "" {
			imageTag, imageShared = shared, true
			return
		}
		dir, err := os.MkdirTemp("", "perflab-simimage-test-")
		if err != nil {
			imageErr = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "perflab")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/perflab/perflab/cmd/perflab")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			imageErr = fmt.Errorf("build perflab: %v\n%s", err, out)
			return
		}
		imageTag = fmt.Sprintf("localhost/perflab-sim-test:%d", os.Getpid())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		_, imageErr = simimage.Build(ctx, simimage.BuildOptions{Tag: imageTag, Binary: bin})
	})
	if imageErr != nil {
		t.Fatalf("simulated engine image: %v", imageErr)
	}
	return imageTag
}

func TestMain(m *testing.M) {
	code := m.Run()
	if imageTag != "" && !imageShared && api != nil {
		_, _ = api.ImageRemove(context.Background(), imageTag, client.ImageRemoveOptions{Force: true})
	}
	os.Exit(code)
}

// newRuntime is the docker runtime on the simulated image for every
// engine, with a run label of its own; whatever a test leaves behind is
// removed by that label, and counted as a failure.
func newRuntime(t *testing.T) (*docker.Runtime, map[string]string) {
	t.Helper()
	cli := needDocker(t)
	img := simImage(t)
	run := map[string]string{docker.LabelRun: fmt.Sprintf("test-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())}
	r := &docker.Runtime{
		Client: cli,
		Images: map[string]string{engine.VLLM: img, engine.SGLang: img, engine.TRTLLM: img},
		Labels: run,
		Env:    map[string]string{simimage.EnvStartupDelay: "300ms"},
		NoGPU:  true,
		HFHome: t.TempDir(),
		// This machine's daemon runs without CAP_SYS_RESOURCE: any
		// --ulimit fails the start (the unit test checks they are asked).
		NoUlimits: os.Getenv("PERFLAB_TEST_DOCKER_ULIMITS") != "1",
	}
	t.Cleanup(func() {
		left, err := r.Cleanup(context.Background(), run)
		if err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if len(left) > 0 {
			t.Errorf("containers left behind: %q", left)
		}
	})
	return r, run
}

func start(t *testing.T, r *docker.Runtime, cfg engine.Config) engine.Handle {
	t.Helper()
	cmd, err := engine.Render(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := r.Start(t.Context(), engine.Launch{Config: cfg, Command: cmd, ReadyTimeout: 2 * time.Minute, StopGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop(context.Background()) })
	return h
}

func ready(t *testing.T, h engine.Handle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if err := h.Ready(ctx); err != nil {
		t.Fatalf("not ready: %v\nlog:\n%s", err, strings.Join(h.LogTail(30), "\n"))
	}
}

func waitDone(t *testing.T, h engine.Handle, d time.Duration) {
	t.Helper()
	select {
	case <-h.Done():
	case <-time.After(d):
		t.Fatalf("the container did not end within %v; log:\n%s", d, strings.Join(h.LogTail(20), "\n"))
	}
}

// containers lists the containers carrying labels.
func containers(t *testing.T, labels map[string]string) []string {
	t.Helper()
	f := make(client.Filters).Add("label", docker.LabelManaged+"=true")
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	list, err := docker.ListContainers(t.Context(), api, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range list.Items {
		names = append(names, strings.Join(c.Names, ","))
	}
	return names
}

type named interface{ ContainerName() string }

func gone(t *testing.T, h engine.Handle) {
	t.Helper()
	name := h.(named).ContainerName()
	if _, err := api.ContainerInspect(t.Context(), name, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("container %s still there (inspect: %v)", name, err)
	}
}

func completion(t *testing.T, base, model string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": "Say hello to the lab.", "max_tokens": 8})
	resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/completions: %d %s", resp.StatusCode, b)
	}
	var out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) != 1 || out.Usage.CompletionTokens != 8 {
		t.Fatalf("completion %s (%v): want one choice of 8 tokens", b, err)
	}
	return out.Choices[0].Text
}

// The engines' own commands run in the simulated image, answer a request,
// and Stop leaves no container.
func TestDockerServeAndStop(t *testing.T) {
	r, _ := newRuntime(t)
	for _, cfg := range []engine.Config{
		{Engine: engine.VLLM, Model: "Qwen/Qwen3-14B", MaxNumSeqs: 64},
		{Engine: engine.SGLang, Version: "0.5.5.post1", Model: "Qwen/Qwen3-14B"},
		// TensorRT-LLM's KV-cache dtype is in a rendered YAML file the
		// argv names by relative path: it must reach the container.
		{Engine: engine.TRTLLM, Model: "Qwen/Qwen3-14B", KVCacheDtype: "fp8"},
	} {
		t.Run(cfg.Engine, func(t *testing.T) {
			t0 := time.Now()
			h := start(t, r, cfg)
			ready(t, h)
			t.Logf("%s ready in %v at %s", cfg.Engine, time.Since(t0).Round(time.Millisecond), h.BaseURL())
			completion(t, h.BaseURL(), cfg.ServedName())
			if sim, err := r.Simulated(t.Context(), cfg); err != nil || !sim {
				t.Errorf("Simulated = %v, %v on the simulated image", sim, err)
			}
			log := strings.Join(h.LogTail(0), "\n")
			if !strings.Contains(log, "started from "+r.Images[cfg.Engine]) {
				t.Errorf("the log does not say which image ran:\n%s", log)
			}
			if cfg.Engine == engine.TRTLLM {
				// The simulated trtllm-serve exits with FileNotFoundError
				// when the file its argv names is missing, as the real
				// one does: being ready says it read it.
				argv := h.(interface{ Argv() []string }).Argv()
				if !slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "--extra_llm_api_options=extra_llm_api_options") }) {
					t.Errorf("argv %q names no relative options file", argv)
				}
			}
			t0 = time.Now()
			if err := h.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Logf("stopped in %v", time.Since(t0).Round(time.Millisecond))
			waitDone(t, h, 10*time.Second)
			if f := h.Failure(); f != nil {
				t.Errorf("a stopped server failed: %v", f)
			}
			gone(t, h)
			if err := h.Stop(t.Context()); err != nil {
				t.Errorf("second Stop: %v", err)
			}
		})
	}
}

func TestDockerMissingImage(t *testing.T) {
	for _, pull := range []string{"missing", "never"} {
		t.Run(pull, func(t *testing.T) {
			r, run := newRuntime(t)
			img := "localhost/perflab-no-such-image:v0"
			r.Images = map[string]string{engine.VLLM: img}
			r.Pull = pull
			t0 := time.Now()
			h := start(t, r, engine.Config{Engine: engine.VLLM, Model: "Qwen/Qwen3-14B"})
			err := h.Ready(t.Context())
			var f *engine.Failure
			if !errors.As(err, &f) || f.Class != engine.ClassImageUnavailable {
				t.Fatalf("Ready: %v, want an image_unavailable failure", err)
			}
			if !strings.Contains(f.Reason, img) {
				t.Errorf("reason %q does not name the image", f.Reason)
			}
			if d := time.Since(t0); d > 30*time.Second {
				t.Errorf("took %v to find the image missing", d)
			}
			t.Logf("%v after %v", f, time.Since(t0).Round(time.Millisecond))
			waitDone(t, h, 5*time.Second)
			if n := containers(t, run); len(n) > 0 {
				t.Errorf("containers made without an image: %q", n)
			}
		})
	}
}

func TestDockerStartupCrash(t *testing.T) {
	r, _ := newRuntime(t)
	h := start(t, r, engine.Config{Engine: engine.VLLM, Model: "Qwen/Qwen3-14B", ExtraArgs: []string{"--no-such-flag"}})
	err := h.Ready(t.Context())
	var f *engine.Failure
	if !errors.As(err, &f) || f.Class != engine.ClassStartupCrash {
		t.Fatalf("Ready: %v, want startup_crash", err)
	}
	if f.ExitCode == 0 || !slices.ContainsFunc(f.LogTail, func(s string) bool { return strings.Contains(s, "--no-such-flag") }) {
		t.Errorf("exit %d, log tail %q: want the engine's own complaint", f.ExitCode, f.LogTail)
	}
	waitDone(t, h, 10*time.Second)
	// An exited container is removed at once, not only on Stop.
	gone(t, h)
}

// A container over its memory limit is killed: oom, although podman
// leaves State.OOMKilled false, and although a benchmark ran.
func TestDockerOOM(t *testing.T) {
	r, _ := newRuntime(t)
	r.Memory = 48 << 20
	h := start(t, r, engine.Config{Engine: engine.VLLM, Model: "Qwen/Qwen3-14B"})
	ready(t, h)
	engine.MarkBenchmarking(h)
	// Eight 9 MB prompts at once: each within the server's body cap, all
	// together well over the container's 48 MiB.
	body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen3-14B", "prompt": strings.Repeat("hello ", 1_500_000), "max_tokens": 1})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			resp, err := http.Post(h.BaseURL()+"/v1/completions", "application/json", bytes.NewReader(body))
			if err == nil {
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	waitDone(t, h, 60*time.Second)
	f := h.Failure()
	if f == nil || f.Class != engine.ClassOOM {
		t.Fatalf("failure %v, want oom", f)
	}
	t.Logf("%v (exit %d)", f, f.ExitCode)
	gone(t, h)
}

func TestDockerCrashDuringBench(t *testing.T) {
	r, _ := newRuntime(t)
	h := start(t, r, engine.Config{Engine: engine.VLLM, Model: "Qwen/Qwen3-14B"})
	ready(t, h)
	completion(t, h.BaseURL(), "Qwen/Qwen3-14B")
	engine.MarkBenchmarking(h)
	if _, err := api.ContainerKill(t.Context(), h.(named).ContainerName(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	waitDone(t, h, 30*time.Second)
	f := h.Failure()
	if f == nil || f.Class != engine.ClassCrashDuringBench {
		t.Fatalf("failure %v, want crash_during_bench", f)
	}
	if f.ExitCode != 137 {
		t.Errorf("exit code %d, want 137", f.ExitCode)
	}
	gone(t, h)
}

// Stop at every stage of a start leaves nothing: before the create, during
// it, while the container starts, while the engine loads.
func TestDockerStopWhileStarting(t *testing.T) {
	r, run := newRuntime(t)
	r.Env = map[string]string{simimage.EnvStartupDelay: "20s"}
	for _, after := range []time.Duration{0, 10 * time.Millisecond, 50 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond, 2 * time.Second} {
		h := start(t, r, engine.Config{Engine: engine.VLLM, Model: "Qwen/Qwen3-14B"})
		time.Sleep(after)
		t0 := time.Now()
		if err := h.Stop(t.Context()); err != nil {
			t.Fatalf("Stop %v after Start: %v", after, err)
		}
		waitDone(t, h, 5*time.Second)
		if f := h.Failure(); f != nil {
			t.Errorf("Stop %v after Start: failure %v", after, f)
		}
		if n := containers(t, run); len(n) > 0 {
			t.Fatalf("Stop %v after Start left %q", after, n)
		}
		t.Logf("Stop %v after Start took %v", after, time.Since(t0).Round(time.Millisecond))
	}
}

// A pull that hangs (a registry that accepts and never answers) is
// canceled by Stop.
func TestDockerStopWhilePulling(t *testing.T) {
	r, run := newRuntime(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	img := ln.Addr().String() + "/perflab/hang:v1"
	r.Images = map[string]string{engine.VLLM: img}
	h := start(t, r, engine.Config{Engine: engine.VLLM, Model: "Qwen/Qwen3-14B"})
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(h.LogTail(0), func(s string) bool { return strings.Contains(s, "pulling "+img) }) {
		if time.Now().After(deadline) {
			t.Fatalf("no pull began; log %q", h.LogTail(0))
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	select {
	case <-h.Done():
		t.Fatalf("the pull ended by itself: %v", h.Failure())
	default:
	}
	t0 := time.Now()
	if err := h.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitDone(t, h, 5*time.Second)
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("Stop during a pull took %v", d)
	}
	if f := h.Failure(); f != nil {
		t.Errorf("a stopped pull failed: %v", f)
	}
	if n := containers(t, run); len(n) > 0 {
		t.Errorf("left %q", n)
	}
}

// Cleanup removes the containers of one run, running or not, and only
// those.
func TestDockerCleanup(t *testing.T) {
	a, runA := newRuntime(t)
	b, runB := newRuntime(t)
	cfg := engine.Config{Engine: engine.VLLM, Model: "Qwen/Qwen3-14B"}
	ha1, ha2, hb := start(t, a, cfg), start(t, a, cfg), start(t, b, cfg)
	// A trial's own label, from StartLabeled, sits beside the run's.
	trial, err := a.StartLabeled(t.Context(), engine.Launch{Config: cfg}, map[string]string{docker.LabelTrial: "t-42"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = trial.Stop(context.Background()) })
	ready(t, trial)
	if n := containers(t, map[string]string{docker.LabelTrial: "t-42", docker.LabelRun: runA[docker.LabelRun]}); len(n) != 1 {
		t.Errorf("containers of trial t-42: %q, want its one", n)
	}
	for _, h := range []engine.Handle{ha1, ha2, hb} {
		ready(t, h)
	}
	removed, err := a.Cleanup(t.Context(), runA)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ha1.(named).ContainerName(), ha2.(named).ContainerName(), trial.(named).ContainerName()}
	slices.Sort(removed)
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	if n := containers(t, runA); len(n) > 0 {
		t.Errorf("run A still has %q", n)
	}
	if n := containers(t, runB); len(n) != 1 {
		t.Errorf("run B has %q, want its one container untouched", n)
	}
	waitDone(t, ha1, 10*time.Second)
	waitDone(t, ha2, 10*time.Second)
	if err := hb.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The simulator's settings reach the container: the host's tokenizer,
// mounted read-only, counts the prompt exactly, and the time scale and GPU
// model are the ones asked for.
func TestDockerSimSettings(t *testing.T) {
	r, _ := newRuntime(t)
	tok := shareddata.Path(t, "data", "tokenizers", "qwen3")
	env, vols := simimage.Settings{GPU: "H200", TimeScale: 10, StartupDelay: time.Second, Tokenizer: tok}.Container()
	r.Env, r.Volumes = env, vols
	h := start(t, r, engine.Config{Engine: engine.VLLM, Model: "Qwen/Qwen3-14B"})
	ready(t, h)
	body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen3-14B", "prompt": "Hello, world", "max_tokens": 2})
	resp, err := http.Post(h.BaseURL()+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	// Qwen3's tokenizer: "Hello", ",", " world"; the estimate without
	// one (4 bytes a token) would say 3 as well, so the log says which.
	log := strings.Join(h.LogTail(0), "\n")
	if out.Usage.PromptTokens != 3 {
		t.Errorf("prompt tokens %d, want 3", out.Usage.PromptTokens)
	}
	if !strings.Contains(log, "H200") {
		t.Errorf("the log does not simulate an H200:\n%s", log)
	}
	t.Logf("log:\n%s", log)
}
