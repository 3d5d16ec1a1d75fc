// Command fakeengine is a tiny stand-in for an inference server, used by the
// engine package's runtime tests. FAKE_MODE picks its behaviour: serve,
// slowload, crash, oom, gpubusy, hang, unhealthy, wrongmodel.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func arg(name string) string {
	for i, a := range os.Args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(os.Args) {
			return os.Args[i+1]
		}
	}
	return ""
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

func main() {
	if os.Getenv("FAKE_IGNORE_TERM") == "1" {
		signal.Ignore(syscall.SIGTERM)
	}
	fmt.Println("fakeengine argv:", strings.Join(os.Args[1:], " "))
	fmt.Println("CUDA_VISIBLE_DEVICES=" + os.Getenv("CUDA_VISIBLE_DEVICES"))
	if f := os.Getenv("FAKE_EXPECT_FILE"); f != "" {
		b, err := os.ReadFile(f)
		fmt.Printf("file %s: %q %v\n", f, b, err)
	}
	if pf := os.Getenv("FAKE_PIDFILE"); pf != "" {
		os.WriteFile(pf+".leader", []byte(strconv.Itoa(os.Getpid())), 0o644)
		// A grandchild in the same group, like an engine's worker process.
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), "FAKE_MODE=hang", "FAKE_PIDFILE=")
		if err := c.Start(); err != nil {
			fmt.Println("spawn:", err)
			os.Exit(3)
		}
		os.WriteFile(pf, []byte(strconv.Itoa(c.Process.Pid)), 0o644)
	}
	model := os.Getenv("FAKE_MODEL")
	if model == "" {
		model = "fake-model"
	}
	switch mode := os.Getenv("FAKE_MODE"); mode {
	case "crash":
		fmt.Println("Traceback (most recent call last):")
		fmt.Fprintln(os.Stderr, "RuntimeError: engine core initialization failed")
		os.Exit(1)
	case "oom":
		fmt.Println("Loading weights took 3.2 seconds")
		fmt.Fprintln(os.Stderr, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
		os.Exit(1)
	case "gpubusy":
		// vLLM's start-up memory guard (vllm/v1/worker/gpu_worker.py),
		// before any weight is loaded.
		fmt.Fprintln(os.Stderr, "(EngineCore_DP0 pid=1) ValueError: Free memory on device (3.25/79.19 GiB) on startup is less than desired GPU memory utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
		fmt.Fprintln(os.Stderr, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
		os.Exit(1)
	case "hang":
		fmt.Println("Loading safetensors checkpoint shards:   0% Completed | 0/8")
		select {}
	case "slowload":
		n := envInt("FAKE_LOAD_STEPS", 10)
		for i := 1; i <= n; i++ {
			time.Sleep(time.Duration(envInt("FAKE_STEP_MS", 100)) * time.Millisecond)
			fmt.Printf("Loading safetensors checkpoint shards: %d/%d\n", i, n)
		}
	case "unhealthy":
		model = "" // serve, but /health says 503
	case "wrongmodel":
		model = "some-other-model"
	}
	host, port := arg("--host"), arg("--port")
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if model == "" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, model)
	})
	stream := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := 0; i < envInt("FAKE_TOKENS", 5); i++ {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"text\":\"t%d\"}]}\n\n", i)
			fl.Flush()
			time.Sleep(time.Duration(envInt("FAKE_TOKEN_MS", 10)) * time.Millisecond)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
	mux.HandleFunc("/v1/completions", stream)
	mux.HandleFunc("/v1/chat/completions", stream)
	fmt.Println("INFO:     Application startup complete.")
	http.Serve(ln, mux)
}
