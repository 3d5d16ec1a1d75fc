package engine

import (
	"bufio"
	"context"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestScanLogLines(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"lines", "a\nb\n", []string{"a", "b"}},
		{"crlf is one end", "a\r\nb\r\n", []string{"a", "b"}},
		{"redraws", "\rbar 10%\rbar 50%\rbar 100%\n", []string{"", "bar 10%", "bar 50%", "bar 100%"}},
		{"no final newline", "a\nlast", []string{"a", "last"}},
		{"ends on a redraw", "x\ry\r", []string{"x", "y"}},
		{"empty lines kept", "a\n\nb\n", []string{"a", "", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One byte at a time as well: a '\r' at the end of a read
			// must wait for the next byte.
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				sc := bufio.NewScanner(r)
				sc.Split(ScanLogLines)
				var got []string
				for sc.Scan() {
					got = append(got, sc.Text())
				}
				if err := sc.Err(); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
				}
			}
		})
	}
}

func TestWatchRedraws(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		redraws  int
	}{
		{"plain lines", "a\nb\n", 0},
		{"crlf lines", "a\r\nb\r\n", 0},
		{"three frames then close", "\rbar 10%\rbar 50%\rbar 100%\n", 3},
		{"ends on a redraw", "x\ry\r", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				n := 0
				b, err := io.ReadAll(WatchRedraws(r, func() { n++ }))
				if err != nil {
					t.Fatal(err)
				}
				if string(b) != tc.in {
					t.Errorf("bytes changed: %q, want %q", b, tc.in)
				}
				if n != tc.redraws {
					t.Errorf("%q: %d redraws, want %d", tc.in, n, tc.redraws)
				}
			}
		})
	}
}

// TestSimRuntimeColdDownloadNotHung: a vLLM server whose weights are
// downloaded first (the simulator's cold cache: huggingface_hub's bars,
// redrawn with '\r' every 0.1 s, one '\n' per file of 3 s here) is not
// called hung by a stall timeout shorter than a file's download.
func TestSimRuntimeColdDownloadNotHung(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the perflab binary")
	}
	// Each log reader (process.go, docker/handle.go, kubernetes/handle.go)
	// wraps its source with WatchRedraws, so a \r-redrawn bar is progress
	// (docs/protocols.md, row 8).
	bin := buildPerflab(t)
	if !simServeAvailable(t, bin) {
		t.Skip("perflab sim serve not built")
	}
	cfg := Config{Engine: VLLM, Version: "0.11.0", Model: "Qwen/Qwen3-14B",
		Env: map[string]string{"PERFLAB_SIM_DOWNLOAD_S": "120"}} // 4 files of 3 s at 10×
	rt := &Sim{Binary: bin, GPU: "H100", TimeScale: 10, StartupDelay: 200 * time.Millisecond, PollInterval: 50 * time.Millisecond}
	// No tokenizer: loading one takes seconds on a busy machine, before
	// the first line.
	h, err := rt.Start(context.Background(), Launch{Config: cfg, WorkDir: t.TempDir(), ReadyTimeout: 60 * time.Second, StallTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop(context.Background())
	if err := h.Ready(context.Background()); err != nil {
		t.Fatalf("ready: %v\n%s", err, strings.Join(h.LogTail(30), "\n"))
	}
	if !strings.Contains(strings.Join(h.LogTail(100), "\n"), "Time spent downloading weights") {
		t.Errorf("no download in the log:\n%s", strings.Join(h.LogTail(100), "\n"))
	}
}
