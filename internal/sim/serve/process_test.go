package serve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/testbin"
)

// syncBuffer is a bytes.Buffer safe for a child's output and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// perflabBinary returns the perflab binary: PERFLAB_BIN when CI built it
// once, else built once per test binary (testbin).
func perflabBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the perflab binary; skipped with -short")
	}
	bin, err := testbin.Perflab()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestProcess runs `perflab sim serve` as a real process: it becomes ready,
// streams a request, and exits cleanly on SIGTERM.
func TestProcess(t *testing.T) {
	bin := perflabBinary(t)
	port := freePort(t)
	var logs syncBuffer
	cmd := exec.Command(bin, "sim", "serve", "--engine", "vllm", "--engine-version", "0.11.0", "--gpu", "H100",
		"--time-scale", "20", "--startup-delay", "2s", "--", "vllm", "serve", "Qwen/Qwen3-14B", "--port", fmt.Sprint(port), "--max-num-seqs", "64")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("process exited before ready: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after 30s:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"model":"Qwen/Qwen3-14B","messages":[{"role":"user","content":"hello"}],"max_tokens":20,"stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	chunks, done := readSSE(t, resp.Body)
	resp.Body.Close()
	if !done || len(chunks) != 22 {
		t.Fatalf("stream: done=%v, %d chunks", done, len(chunks))
	}
	// SIGTERM with a stream in flight: the server stops, the stream ends.
	long, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(
		`{"model":"Qwen/Qwen3-14B","prompt":"hello","max_tokens":30000,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer long.Body.Close()
	if _, err := bufio.NewReader(long.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	streamEnded := make(chan struct{})
	go func() { io.Copy(io.Discard, long.Body); close(streamEnded) }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10s after SIGTERM:\n%s", logs.String())
	}
	select {
	case <-streamEnded:
	case <-time.After(5 * time.Second):
		t.Error("in-flight stream still open after the server exited")
	}
	out := logs.String()
	for _, want := range []string{"vLLM API server version 0.11.0", "Loading safetensors checkpoint shards: 100% Completed", "Application startup complete.", "Application shutdown complete."} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// TestProcessFailures checks the engine-like failures: a bad flag exits 2
// with argparse's message, a model that does not fit exits 1 with the OOM line.
func TestProcessFailures(t *testing.T) {
	bin := perflabBinary(t)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad flag", []string{"--engine", "vllm", "--engine-version", "0.11.0", "--", "vllm", "serve", "Qwen/Qwen3-14B", "--foo"}, 2,
			"vllm serve: error: unrecognized arguments: --foo"},
		{"oom", []string{"--engine", "vllm", "--gpu", "H100", "--startup-delay", "0s", "--", "vllm", "serve", "Qwen/Qwen3-235B-A22B", "--port", fmt.Sprint(freePort(t))}, 1,
			"torch.OutOfMemoryError: CUDA out of memory"},
		{"sglang oom", []string{"--engine", "sglang", "--gpu", "L40S", "--startup-delay", "0s", "--", "python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-32B", "--port", fmt.Sprint(freePort(t))}, 1,
			"torch.OutOfMemoryError: CUDA out of memory"},
		{"trtllm click error", []string{"--engine", "trtllm", "--", "trtllm-serve", "Qwen/Qwen3-14B", "--max-batch-size", "8"}, 2,
			"Error: No such option: --max-batch-size"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"sim", "serve"}, tc.args...)...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
				t.Fatalf("exit: %v, want code %d\n%s", err, tc.code, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}
