package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/perflab/perflab/internal/loadsearch"
	"github.com/perflab/perflab/internal/sim"
	"github.com/perflab/perflab/internal/sim/serve"
)

// simServer serves a simulated vLLM (Qwen3-14B on one H100) in process,
// timeScale times faster than real time.
func simServer(t *testing.T, timeScale float64) string {
	t.Helper()
	eng, err := sim.New(sim.Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen/Qwen3-14B", GPU: "H100"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := serve.New(serve.Config{Model: eng, Root: "Qwen/Qwen3-14B", MaxModelLen: eng.Params().MaxModelLen, TimeScale: timeScale})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); s.Close() })
	return hs.URL
}

var sustainableLine = regexp.MustCompile(`sustainable load: ([0-9.e+]+) (req/s|concurrent requests)`)

// TestBenchSLOSearch runs `perflab bench --slo --search` against the
// simulator over HTTP, on both axes: it finds a load, prints the curve and
// vLLM's block at that load, and the load it names meets the SLO while the
// next one measured above it does not.
func TestBenchSLOSearch(t *testing.T) {
	tok := sharedTokenizer(t)
	url := simServer(t, 50)
	for _, tc := range []struct{ axis, slo string }{
		{"rate", "ttft_p90<=50ms,success>=99%"}, // wall time: a loaded 2-core machine alone adds 15–30 ms at low rates
		{"concurrency", "tpot_p90<=1ms"},
	} {
		t.Run(tc.axis, func(t *testing.T) {
			stdout, stderr, err := runBenchCmd(t, "--base-url", url, "--model", "Qwen/Qwen3-14B", "--tokenizer", tok,
				"--dataset-name", "random", "--random-input-len", "256", "--random-output-len", "64", "--num-prompts", "200",
				"--slo", tc.slo, "--search", tc.axis, "--search-start", "32", "--disable-tqdm")
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			if err != nil {
				t.Fatalf("bench --slo: %v", err)
			}
			m := sustainableLine.FindStringSubmatch(stdout)
			if m == nil {
				t.Fatalf("no sustainable load printed")
			}
			load, _ := strconv.ParseFloat(m[1], 64)
			if !(load > 0) {
				t.Fatalf("sustainable load %v", load)
			}
			// Above the sustainable load the search saw a point that broke
			// the SLO or that the client could not deliver (this machine
			// is shared: a late client is flagged, not scored).
			if !strings.Contains(stdout, "<- sustainable") || !strings.Contains(stdout, "breaks:") && !strings.Contains(stdout, "FLAGGED") {
				t.Errorf("the curve lacks the sustainable point or one above it")
			}
			if !strings.Contains(stdout, "============ Serving Benchmark Result") {
				t.Errorf("no vLLM block at the sustainable load")
			}
			if !strings.Contains(stdout, "requests counted after 20 warm-up") {
				t.Errorf("the points do not say how many requests were counted after the warm-up")
			}
		})
	}
}

// TestBenchSLOClientBehind asks for 20,000 req/s, more than this client
// delivers on a 2-core machine against the simulator in the same process
// (or, when it does keep up, more than 600 requests can decide): that
// point is flagged and not scored, and the search goes on below it.
func TestBenchSLOClientBehind(t *testing.T) {
	tok := sharedTokenizer(t)
	url := simServer(t, 1000)
	stdout, stderr, err := runBenchCmd(t, "--base-url", url, "--model", "Qwen/Qwen3-14B", "--tokenizer", tok,
		"--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "4", "--num-prompts", "600",
		"--slo", "e2el_p99<=10s", "--search", "rate", "--search-start", "20000", "--search-max", "20000", "--disable-tqdm")
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	var row string
	for _, l := range strings.Split(stdout, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "20000" {
			row = l
		}
	}
	if row == "" {
		t.Fatalf("no row for 20000 req/s (err %v)", err)
	}
	// Mostly the client falls behind there; when the machine lets it keep
	// up, 600 requests at 20,000 req/s are too few to decide the point
	// (seen once in a cold CI run, 2026-11-27): flagged either way.
	if !strings.Contains(row, "FLAGGED (not scored): client fell behind") && !strings.Contains(row, "FLAGGED (not scored): undecided") || strings.Contains(row, "meets") {
		t.Errorf("the 20000 req/s point was scored:\n%s", row)
	}
	if m := sustainableLine.FindStringSubmatch(stdout); m != nil {
		if load, _ := strconv.ParseFloat(m[1], 64); load >= 20000 {
			t.Errorf("sustainable load %v: the flagged point counted", load)
		}
	}
}

// TestBenchSLONothingSustainable: an SLO below the server's unloaded
// latency ends after a few points and says so, with --max-seconds cutting
// each run (it used to abort the search at its first point, printing
// none), and every point measured is in the table.
func TestBenchSLONothingSustainable(t *testing.T) {
	tok := sharedTokenizer(t)
	url := simServer(t, 50)
	stdout, stderr, err := runBenchCmd(t, "--base-url", url, "--model", "Qwen/Qwen3-14B", "--tokenizer", tok,
		"--dataset-name", "random", "--random-input-len", "256", "--random-output-len", "16", "--num-prompts", "40",
		"--slo", "ttft_p50<=1ms", "--search", "rate", "--search-start", "8", "--max-seconds", "10", "--disable-tqdm")
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if !errors.Is(err, loadsearch.ErrNotFound) {
		t.Fatalf("err %v, want ErrNotFound", err)
	}
	// Either end says why the search stopped short. On a busy machine the
	// simulated server's TTFT falls with its load (3.6, 3.2, 2.8 ms from 8
	// down to 2 req/s, seen 2026-11-28 beside other test binaries), more
	// than the tenth per halving the floor rule allows, so the search goes
	// on down to a point that --max-seconds leaves undecided.
	if !strings.Contains(stdout, "no lower load can meet the SLO") && !strings.Contains(stdout, "a lower load's points last longer") {
		t.Errorf("the search does not say why it stopped: neither that no lower load can meet the SLO nor that a lower load's points last longer")
	}
	rows := 0
	for _, l := range strings.Split(stdout, "\n") {
		if strings.Contains(l, "breaks: ttft p50") {
			rows++
		}
	}
	if rows == 0 || rows > 3 {
		t.Errorf("%d points printed: want the few measured before the search gave up", rows)
	}
}

// TestBenchSLOConcurrencyUnreachable: 100 prompts cannot keep 512
// requests in flight; the search must not print 512 sustainable.
func TestBenchSLOConcurrencyUnreachable(t *testing.T) {
	tok := sharedTokenizer(t)
	url := simServer(t, 100)
	stdout, stderr, err := runBenchCmd(t, "--base-url", url, "--model", "Qwen/Qwen3-14B", "--tokenizer", tok,
		"--dataset-name", "random", "--random-input-len", "64", "--random-output-len", "16", "--num-prompts", "100",
		"--slo", "tpot_p90<=10s", "--search", "concurrency", "--search-start", "64", "--search-max", "512", "--disable-tqdm")
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if err != nil {
		t.Fatal(err)
	}
	m := sustainableLine.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatal("no sustainable load printed")
	}
	if load, _ := strconv.ParseFloat(m[1], 64); load > 100 {
		t.Errorf("sustainable %v concurrent requests with 100 prompts", load)
	}
	if !strings.Contains(stdout, "not reached") {
		t.Errorf("the unreachable concurrency is not flagged")
	}
}

// TestBenchSLOResetCache: every --slo point sends the same prompts, so a
// prefix-caching server must forget the previous point's first. With
// --reset-cache vllm the search resets a simulated vLLM (started in its
// development mode, where vLLM serves the endpoint) before every point,
// each reset proven by vLLM's prefix-cache counters; without the dev mode
// the endpoint is absent and the search stops saying so; an engine with
// no endpoint is refused before anything is sent; and without the flag a
// note says what a warm server does to the search.
func TestBenchSLOResetCache(t *testing.T) {
	tok := sharedTokenizer(t)
	server := func(devMode bool) (string, *atomic.Int32) {
		eng, err := sim.New(sim.Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen/Qwen3-14B", GPU: "H100"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := serve.New(serve.Config{Model: eng, Root: "Qwen/Qwen3-14B", MaxModelLen: eng.Params().MaxModelLen, TimeScale: 50, DevMode: devMode})
		if err != nil {
			t.Fatal(err)
		}
		var resets atomic.Int32
		h := s.Handler()
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/reset_prefix_cache" {
				resets.Add(1)
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(func() { hs.Close(); s.Close() })
		return hs.URL, &resets
	}
	args := func(url string, extra ...string) []string {
		return append([]string{"--base-url", url, "--model", "Qwen/Qwen3-14B", "--tokenizer", tok,
			"--dataset-name", "random", "--random-input-len", "256", "--random-output-len", "16", "--num-prompts", "60",
			"--slo", "ttft_p90<=50ms", "--search", "rate", "--search-start", "16", "--search-max", "64", "--disable-tqdm"}, extra...)
	}
	note := "--reset-cache ENGINE resets it before each point"

	url, resets := server(true)
	stdout, stderr, err := runBenchCmd(t, args(url, "--reset-cache", "vllm")...)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if err != nil && !errors.Is(err, loadsearch.ErrNotFound) {
		t.Fatalf("bench --reset-cache vllm: %v", err)
	}
	points := strings.Count(stdout, "measured rate ")
	if points == 0 || int(resets.Load()) < points {
		t.Errorf("%d resets for %d points: want one before each", resets.Load(), points)
	}
	if strings.Contains(stderr, note) {
		t.Error("the warm-server note printed although the cache is reset")
	}

	url, resets = server(false)
	stdout, _, err = runBenchCmd(t, args(url, "--reset-cache", "vllm")...)
	if err == nil || !strings.Contains(err.Error(), "before the point at 16 req/s") || !strings.Contains(err.Error(), "VLLM_SERVER_DEV_MODE=1") {
		t.Errorf("without vLLM's dev mode: %v, want the missing endpoint named with the setting that serves it", err)
	}
	if strings.Contains(stdout, "measured rate ") {
		t.Error("a point was measured on a server whose cache could not be reset")
	}

	if _, _, err := runBenchCmd(t, args(url, "--reset-cache", "trtllm")...); err == nil || !strings.Contains(err.Error(), "has no endpoint") {
		t.Errorf("--reset-cache trtllm: %v, want it refused", err)
	}
	if resets.Load() == 0 {
		t.Error("no reset reached the server without dev mode: the refusal was not the server's")
	}

	if _, _, err := runBenchCmd(t, "--base-url", url, "--model", "Qwen/Qwen3-14B", "--tokenizer", tok, "--dataset-name", "random",
		"--num-prompts", "4", "--reset-cache", "vllm", "--disable-tqdm"); err == nil || !strings.Contains(err.Error(), "between --slo points") {
		t.Errorf("--reset-cache without --slo: %v, want it refused", err)
	}
	_, stderr, _ = runBenchCmd(t, args(url, "--search-start", "64")...)
	if !strings.Contains(stderr, note) {
		t.Errorf("without --reset-cache no note about a warm server:\n%s", stderr)
	}
}
