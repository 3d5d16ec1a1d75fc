package serve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/sim"
)

// lockedBuffer is an io.Writer the engine log and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunReproducesEngineCrash: vLLM 0.17 with MTP on Qwen3.5 under 300
// concurrent requests hits the reproduced illegal-memory-access bug, and
// Run dies the way the engine process does: the log ends with the CUDA
// error, every client loses its request, and Run returns an exit code of
// 1. With NoFaults the same load is served.
func TestRunReproducesEngineCrash(t *testing.T) {
	for _, noFaults := range []bool{false, true} {
		name := "faults"
		if noFaults {
			name = "no-faults"
		}
		t.Run(name, func(t *testing.T) {
			argv := []string{"vllm", "serve", "Qwen/Qwen3.5-9B", "--max-model-len", "32768", "--port", "0",
				"--speculative-config", `{"method":"mtp","num_speculative_tokens":4}`}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var log lockedBuffer
			ready := make(chan string, 1)
			errc := make(chan error, 1)
			go func() {
				errc <- Run(ctx, Options{Engine: "vllm", Version: "0.17.1", Argv: argv, GPU: "H100", TimeScale: 20,
					StartupDelay: 0, NoFaults: noFaults, Stderr: &log, Ready: func(addr string) { ready <- addr }})
			}()
			var base string
			select {
			case addr := <-ready:
				base = "http://" + addr
			case err := <-errc:
				t.Fatalf("Run: %v\n%s", err, log.String())
			case <-time.After(30 * time.Second):
				t.Fatal("not ready after 30 s")
			}
			// Non-streamed requests long enough to keep 300 running for
			// the fault's 10 s of engine time (0.5 s of wall time here):
			// none can finish before the crash, however the arrivals fall.
			const n = 300
			tr := &http.Transport{MaxConnsPerHost: n, MaxIdleConnsPerHost: n}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr, Timeout: 60 * time.Second}
			var wg sync.WaitGroup
			var mu sync.Mutex
			okN, failN := 0, 0
			maxTokens := "20000" // far longer than the engine lives
			if noFaults {
				maxTokens = "40" // the same batch, short enough to finish quickly
			}
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					body := `{"model":"Qwen/Qwen3.5-9B","prompt":"hello there","max_tokens":` + maxTokens + `}`
					resp, err := hc.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
					good := err == nil && resp.StatusCode == http.StatusOK
					if err == nil {
						_, rerr := io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						good = good && rerr == nil
					}
					mu.Lock()
					if good {
						okN++
					} else {
						failN++
					}
					mu.Unlock()
				}()
			}
			if noFaults {
				wg.Wait()
				if okN != n {
					t.Errorf("no faults: %d of %d served", okN, n)
				}
				cancel()
				if err := <-errc; err != nil {
					t.Errorf("Run: %v", err)
				}
				return
			}
			var err error
			select {
			case err = <-errc:
			case <-time.After(60 * time.Second):
				t.Fatal("the simulated engine did not crash within 60 s")
			}
			wg.Wait()
			var ee *ExitError
			if !errors.As(err, &ee) || ee.Code != 1 || !errors.Is(err, sim.ErrCrashed) {
				t.Errorf("Run returned %v, want an exit code of 1 wrapping sim.ErrCrashed", err)
			}
			if !strings.Contains(log.String(), "CUDA error: an illegal memory access was encountered") {
				t.Errorf("log does not end with the engine's CUDA error:\n%s", log.String())
			}
			if okN != 0 || failN != n {
				t.Errorf("%d served and %d failed, want all %d requests lost with the engine", okN, failN, n)
			}
		})
	}
}
