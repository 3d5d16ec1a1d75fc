package serve

import (
	"bufio"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/engine"
)

// TestRunColdCacheDownloadRedraws: asked for a cold-cache download, the
// simulated engine prints huggingface_hub's per-file bars as tqdm draws
// them, frames redrawn with '\r' and a '\n' only when a file is done, then
// vLLM's "Time spent downloading weights" line, before it loads. Read the
// way perflab's log readers read (bufio.Reader.ReadString('\n')), a whole
// file's download is one silent stretch; through engine.WatchRedraws each
// frame is output, so a stall detector sees progress all along.
func TestRunColdCacheDownloadRedraws(t *testing.T) {
	pr, pw := io.Pipe()
	var mu sync.Mutex
	var lineAt, outAt []time.Time // when the old reader / the hooked one saw output
	var log strings.Builder
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		br := bufio.NewReaderSize(engine.WatchRedraws(pr, func() {
			mu.Lock()
			outAt = append(outAt, time.Now())
			mu.Unlock()
		}), 64<<10)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				mu.Lock()
				lineAt = append(lineAt, time.Now())
				outAt = append(outAt, time.Now())
				log.WriteString(line)
				mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	// 40 s of model time at 10×: 4 s on the wall clock, 1 s per file.
	go func() {
		errc <- Run(ctx, Options{Engine: "vllm", Version: "0.11.0", Argv: []string{"vllm", "serve", "Qwen/Qwen3-14B", "--port", "0"},
			Env: map[string]string{DownloadEnv: "40"}, GPU: "H100", TimeScale: 10, StartupDelay: 0, Stderr: pw,
			Ready: func(addr string) { ready <- addr }})
	}()
	select {
	case <-ready:
	case err := <-errc:
		pw.Close()
		<-readDone
		t.Fatalf("Run: %v\n%s", err, log.String())
	case <-time.After(60 * time.Second):
		t.Fatal("not ready after 60 s")
	}
	cancel()
	<-errc
	pw.Close()
	<-readDone

	text := log.String()
	for _, want := range []string{
		"Using model weights format ['*.safetensors']",
		"\rmodel-00001-of-00004.safetensors:   0%|          | 0.00/3.96G [00:00<?, ?B/s]",
		"\rmodel-00002-of-00004.safetensors:  50%|█████     | 1.98G/3.96G [00:05<00:05, 396MB/s]",
		"\rmodel-00004-of-00004.safetensors: 100%|██████████| 3.96G/3.96G [00:10<00:00, 396MB/s]\n",
		"Time spent downloading weights for Qwen/Qwen3-14B: 40.000000 seconds",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("log lacks %q:\n%s", want, text)
		}
	}
	if i, j := strings.Index(text, "Time spent downloading"), strings.Index(text, "Loading safetensors checkpoint shards"); i < 0 || j < i {
		t.Errorf("the download does not come before the load:\n%s", text)
	}
	// Every frame is a line of its own to engine.ScanLogLines.
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Split(engine.ScanLogLines)
	frames := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "model-00002-of-00004.safetensors: ") {
			frames++
		}
	}
	if frames < 5 {
		t.Errorf("%d frames of the second file's bar, want one per 0.1 s of its 1 s", frames)
	}

	gap := func(ts []time.Time) time.Duration {
		var g time.Duration
		for i := 1; i < len(ts); i++ {
			g = max(g, ts[i].Sub(ts[i-1]))
		}
		return g
	}
	mu.Lock()
	oldGap, newGap := gap(lineAt), gap(outAt)
	mu.Unlock()
	t.Logf("longest silence: %v counting '\\n' lines, %v counting redraws too", oldGap, newGap)
	if oldGap < 900*time.Millisecond {
		t.Errorf("a '\\n' reader's longest silence %v, want a whole file's 1 s", oldGap)
	}
	if newGap > 500*time.Millisecond {
		t.Errorf("with redraws counted the longest silence is %v, want about tqdm's 0.1 s", newGap)
	}
}

// TestDownloadEnvRefusesGarbage: a malformed download time is an error
// that names the variable and the value.
func TestDownloadEnvRefusesGarbage(t *testing.T) {
	for _, v := range []string{"soon", "-1", "NaN", "1e9"} {
		_, err := downloadFor(Options{Env: map[string]string{DownloadEnv: v}})
		if err == nil || !strings.Contains(err.Error(), DownloadEnv) || !strings.Contains(err.Error(), v) {
			t.Errorf("%s=%q: err %v", DownloadEnv, v, err)
		}
	}
	if d, err := downloadFor(Options{Env: map[string]string{DownloadEnv: "2.5"}}); err != nil || d != 2500*time.Millisecond {
		t.Errorf("2.5: %v, %v", d, err)
	}
}

func TestTqdmFrame(t *testing.T) {
	for _, tc := range []struct {
		frac float64
		el   time.Duration
		want string
	}{
		{0, 0, "f: 0%|          | 0.00/3.96G [00:00<?, ?B/s]"},
		{0.45, 9 * time.Second, "f: 45%|████▌     | 1.78G/3.96G [00:09<00:11, 198MB/s]"},
		{1, 20 * time.Second, "f: 100%|██████████| 3.96G/3.96G [00:20<00:00, 198MB/s]"},
	} {
		got := strings.Replace(tqdmFrame("f", tc.frac, 3.96e9, tc.el), "f:   0%", "f: 0%", 1)
		got = strings.Replace(got, "f:  45%", "f: 45%", 1)
		if got != tc.want {
			t.Errorf("frame(%g, %v) = %q, want %q", tc.frac, tc.el, got, tc.want)
		}
	}
}
