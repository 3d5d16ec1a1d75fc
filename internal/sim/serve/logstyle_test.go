package serve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/sim"
)

// TestStartupLogFromFace: a server's start-up log is its face's style,
// whatever the engine is called. An engine no code names, registered with
// SGLang's style, logs SGLang's lines at every stage and none of vLLM's
// (before the faces held the style, an unknown name fell to vLLM's words
// in every stage).
func TestStartupLogFromFace(t *testing.T) {
	saved := faces
	t.Cleanup(func() { faces = saved })
	twin := faceFor("sglang")
	twin.name = "toyengine"
	faces = append(append([]face(nil), saved...), twin)

	var b strings.Builder
	l := newStartupLog(&b, sim.Params{Engine: "toyengine", Version: "9.9", Model: "M", GPU: "H100", TP: 2}, nil)
	l.begin()
	if last := l.distributed(0); last == "" {
		t.Error("NCCL did not fail on an empty /dev/shm")
	}
	l.distributed(-1)
	l.loaded(sim.Params{Model: "M", MaxModelLen: 4096}, 1000)
	l.serving("127.0.0.1:1")
	l.oom(errors.New("CUDA out of memory. Tried to allocate 2.00 GiB"))
	out := b.String()
	for _, want := range []string{
		"] server_args=ServerArgs(model_path='M', tp_size=2, ...) (perflab sim, SGLang 9.9 on H100)",
		" TP1] Init torch distributed begin.",
		" TP1] Scheduler hit an exception",
		" TP1] Init torch distributed ends.",
		"] KV Cache is allocated. #tokens: 1000",
		"INFO:     Uvicorn running on http://127.0.0.1:1",
		"] The server is fired up and ready to roll!",
		"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	for _, vllm := range []string{"APIServer", "Worker_TP", "vLLM", "Engine core initialization failed"} {
		if strings.Contains(out, vllm) {
			t.Errorf("log has vLLM's %q:\n%s", vllm, out)
		}
	}
}

// TestFacesHaveStyles: every registered face logs in a style of its own.
func TestFacesHaveStyles(t *testing.T) {
	for _, f := range faces {
		if f.name == "" || f.log == nil {
			t.Errorf("face %q: no name or no log style", f.name)
		}
	}
}

// TestSGLangLogsDerivedMaxRunning: SGLang logs the max_running_requests it
// derived, not the unset flag's 0: for the hybrid Qwen3.5-9B on one H100,
// the state pool's third (sim.Engine.MaxSeqs), as SGLang v0.5.9 logs it.
func TestSGLangLogsDerivedMaxRunning(t *testing.T) {
	e, err := sim.New(sim.Params{Engine: "sglang", Version: "0.5.9", Model: "Qwen/Qwen3.5-9B", GPU: "H100", MaxModelLen: 32768}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log lockedBuffer
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	argv := []string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3.5-9B", "--context-length", "32768", "--port", "0"}
	go func() {
		errc <- Run(ctx, Options{Engine: "sglang", Version: "0.5.9", Argv: argv, GPU: "H100", TimeScale: 20,
			Stderr: &log, Ready: func(addr string) { ready <- addr }})
	}()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("Run: %v\n%s", err, log.String())
	case <-time.After(30 * time.Second):
		t.Fatal("not ready after 30 s")
	}
	cancel()
	<-errc
	want := fmt.Sprintf("max_running_requests=%d, context_len=32768", e.MaxSeqs())
	if e.MaxSeqs() <= 0 || e.MaxSeqs() >= 2048 || !strings.Contains(log.String(), want) {
		t.Errorf("log lacks %q (the state pool's cap, under the pool-derived 2048):\n%s", want, log.String())
	}
}
