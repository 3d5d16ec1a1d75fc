package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/bench"
	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/testbin"
)

func requests(n, outLen int) []dataset.Request {
	out := make([]dataset.Request, n)
	for i := range out {
		out[i] = dataset.Request{Prompt: fmt.Sprintf("hello %d", i), PromptLen: 2, OutputLen: outLen}
	}
	return out
}

// TestBenchAgainstProcess runs a real benchmark (bench.Run) against a
// server started by the Process runtime, then kills it with SIGKILL half
// way: the death is classed crash_during_bench and the partial results
// survive.
func TestBenchAgainstProcess(t *testing.T) {
	l := fakeLaunch(t, map[string]string{"FAKE_MODE": "serve", "FAKE_TOKENS": "20", "FAKE_TOKEN_MS": "10"})
	h := start(t, &Process{PollInterval: 20 * time.Millisecond}, l)
	if err := h.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := bench.Config{BaseURL: h.BaseURL(), Backend: bench.BackendOpenAI, Model: "fake-model",
		Requests: requests(6, 20), RequestRate: math.Inf(1), MaxConcurrency: 2}

	t.Run("complete run", func(t *testing.T) {
		MarkBenchmarking(h)
		out, err := bench.Run(context.Background(), cfg)
		if err != nil {
			t.Fatalf("bench: %v", err)
		}
		if out.Result.Completed != 6 {
			t.Errorf("completed %d of 6", out.Result.Completed)
		}
	})

	t.Run("kill -9 mid-benchmark", func(t *testing.T) {
		cfg := cfg
		cfg.Requests = requests(40, 20)
		var out *bench.Outcome
		var err error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err = bench.Run(context.Background(), cfg)
		}()
		time.Sleep(700 * time.Millisecond)
		if kerr := syscall.Kill(PidOf(h), syscall.SIGKILL); kerr != nil {
			t.Fatal(kerr)
		}
		wg.Wait()
		<-h.Done()
		f := h.Failure()
		if f == nil || f.Class != ClassCrashDuringBench {
			t.Fatalf("failure = %+v, want crash_during_bench", f)
		}
		if out == nil {
			t.Fatalf("no partial outcome (err %v)", err)
		}
		ok := 0
		for _, r := range out.Records {
			if r.Success {
				ok++
			}
		}
		if ok == 0 || ok >= 40 {
			t.Errorf("partial results: %d successful of %d records (err %v)", ok, len(out.Records), err)
		}
		t.Logf("kept %d successful records of %d, bench err: %v", ok, len(out.Records), err)
	})
}

// buildPerflab returns the perflab binary: PERFLAB_BIN when CI built it
// once, else built once per test binary (testbin).
func buildPerflab(t *testing.T) string {
	t.Helper()
	bin, err := testbin.Perflab()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestSIGINTMidLaunchLeavesNothing starts `perflab engine launch` as a
// subprocess (its server is the fake engine in place of `perflab sim
// serve`, with a worker child), interrupts perflab while the server is
// still loading, and checks by pid that the server and its worker are gone.
func TestSIGINTMidLaunchLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the perflab binary")
	}
	bin := buildPerflab(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "cfg.yaml")
	os.WriteFile(cfgPath, []byte("engine: vllm\nmodel: fake-model\n"), 0o644)
	pidFile, childFile := filepath.Join(dir, "engine.pid"), filepath.Join(dir, "child.pid")
	cmd := exec.Command(bin, "engine", "launch", cfgPath, "--runtime", "sim", "--perflab-binary", fakeEngine,
		"--pid-file", pidFile, "--workdir", dir)
	cmd.Env = append(os.Environ(), "FAKE_MODE=hang", "FAKE_PIDFILE="+childFile)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	enginePid := readPid(t, pidFile)
	childPid := readPid(t, childFile)
	if !alive(enginePid) || !alive(childPid) {
		t.Fatal("server not running before the interrupt")
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("perflab did not exit after SIGINT:\n%s", out.String())
	}
	waitGone(t, enginePid)
	waitGone(t, childPid)
	if !strings.Contains(out.String(), "started pid") {
		t.Errorf("output:\n%s", out.String())
	}
}

// simServeAvailable reports whether this perflab build has `sim serve`.
func simServeAvailable(t *testing.T, bin string) bool {
	t.Helper()
	return exec.Command(bin, "sim", "serve", "--help").Run() == nil
}

// TestSimRuntime starts real `perflab sim serve` engines for each engine's
// rendered command: they become ready, serve a benchmark, and are torn
// down; then one is SIGKILLed mid-benchmark.
func TestSimRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the perflab binary")
	}
	bin := buildPerflab(t)
	if !simServeAvailable(t, bin) {
		if os.Getenv("CI") == "true" {
			t.Fatal("perflab sim serve is not available")
		}
		t.Skip("perflab sim serve not built into cmd/perflab yet")
	}
	tok := filepath.Join(sharedDir(t), "data", "tokenizers", "qwen3")
	// A model given as a local directory: trtllm-serve lists only its last
	// component, which readiness must wait for and the benchmark send.
	local := filepath.Join(t.TempDir(), "Qwen3-14B")
	hfConfig, err := os.ReadFile("../sim/models/Qwen3-14B.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(local, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(local, "config.json"), hfConfig, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []Config{
		{Engine: VLLM, Version: "0.17.1", Model: "Qwen/Qwen3-14B", MaxNumSeqs: 64},
		{Engine: SGLang, Version: "0.5.5.post1", Model: "Qwen/Qwen3-14B", Quantization: QuantFP8Checkpoint},
		{Engine: TRTLLM, Version: "1.2.0rc1", Model: "Qwen/Qwen3-14B", ChunkedPrefill: bp(true), PrefixCaching: bp(false)},
		{Engine: TRTLLM, Version: "1.2.0rc1", Model: local, KVCacheDtype: "fp8", GPUMemoryFraction: 0.8},
	} {
		t.Run(cfg.Engine, func(t *testing.T) {
			rt := &Sim{Binary: bin, GPU: "H100", TimeScale: 20, StartupDelay: 200 * time.Millisecond, Tokenizer: tok, PollInterval: 50 * time.Millisecond}
			h, err := rt.Start(context.Background(), Launch{Config: cfg, WorkDir: t.TempDir(), ReadyTimeout: 60 * time.Second, StallTimeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Stop(context.Background())
			if err := h.Ready(context.Background()); err != nil {
				t.Fatalf("ready: %v\n%s", err, strings.Join(h.LogTail(30), "\n"))
			}
			MarkBenchmarking(h)
			out, err := bench.Run(context.Background(), bench.Config{BaseURL: h.BaseURL(), Backend: bench.BackendOpenAI,
				Model: cfg.ServedName(), Requests: requests(8, 16), RequestRate: math.Inf(1)})
			if err != nil {
				t.Fatalf("bench: %v\n%s", err, strings.Join(h.LogTail(30), "\n"))
			}
			if out.Result.Completed != 8 {
				t.Errorf("completed %d of 8", out.Result.Completed)
			}
			pid := PidOf(h)
			if err := h.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			waitGone(t, pid)
			if f := h.Failure(); f != nil {
				t.Errorf("failure after a clean stop: %v", f)
			}
		})
	}

	t.Run("kill -9 mid-benchmark", func(t *testing.T) {
		cfg := Config{Engine: VLLM, Version: "0.17.1", Model: "Qwen/Qwen3-14B"}
		rt := &Sim{Binary: bin, GPU: "H100", TimeScale: 1, Tokenizer: tok, PollInterval: 50 * time.Millisecond}
		h, err := rt.Start(context.Background(), Launch{Config: cfg, WorkDir: t.TempDir(), ReadyTimeout: 60 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Stop(context.Background())
		if err := h.Ready(context.Background()); err != nil {
			t.Fatalf("ready: %v\n%s", err, strings.Join(h.LogTail(30), "\n"))
		}
		MarkBenchmarking(h)
		var out *bench.Outcome
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, _ = bench.Run(context.Background(), bench.Config{BaseURL: h.BaseURL(), Backend: bench.BackendOpenAI,
				Model: cfg.ServedName(), Requests: requests(200, 64), RequestRate: 100})
		}()
		time.Sleep(1500 * time.Millisecond)
		syscall.Kill(PidOf(h), syscall.SIGKILL)
		wg.Wait()
		<-h.Done()
		if f := h.Failure(); f == nil || f.Class != ClassCrashDuringBench {
			t.Fatalf("failure = %+v, want crash_during_bench", f)
		}
		if out == nil || len(out.Records) == 0 {
			t.Fatal("partial results lost")
		}
	})
}

// TestFailureIsError: a *Failure travels as an error.
func TestFailureIsError(t *testing.T) {
	var err error = &Failure{Class: ClassOOM, Reason: "x"}
	var f *Failure
	if !errors.As(fmt.Errorf("wrap: %w", err), &f) || f.Class != ClassOOM {
		t.Error("Failure does not unwrap")
	}
}
