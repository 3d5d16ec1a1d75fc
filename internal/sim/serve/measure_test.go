package serve

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/sim"
)

// TestMeasureServeProcess is the real-time measurement behind
// docs/bench-notes/sim-serve.md: a `perflab sim serve` process limited to
// one core (GOMAXPROCS=1) serves 1,000 concurrent streams of 200 tokens
// through the real simulated engine at about 20,000 tokens/s of wall time.
// It reports token lateness (from the server's own histogram), throughput
// and the server's CPU use, in two cases:
//
//   - compressed: Qwen3-14B on an H100, whose engine makes about 6,600
//     tokens/s, run ×3 faster than real time to reach 20,000 tokens/s (so
//     the API server's modelled output spacing, 20 µs, shrinks to 6.6 µs);
//   - realtime: Qwen3-30B-A3B on a B200, which makes about 19,500 tokens/s
//     at time scale 1.
//
// Opt-in: PERFLAB_SIM_SERVE_MEASURE=1, or =rt to pin the server to one core
// at real-time priority (root; for shared machines). About 15 s a case.
func TestMeasureServeProcess(t *testing.T) {
	if os.Getenv("PERFLAB_SIM_SERVE_MEASURE") == "" {
		t.Skip("set PERFLAB_SIM_SERVE_MEASURE=1 to run the serve measurement")
	}
	for _, tc := range []struct {
		name, model, gpu string
		scale            float64 // 0: whatever gives 20,000 tokens/s
	}{
		{"compressed", "Qwen/Qwen3-14B", "H100", 0},
		{"realtime", "Qwen/Qwen3-30B-A3B", "B200", 1},
	} {
		t.Run(tc.name, func(t *testing.T) { measureServe(t, tc.model, tc.gpu, tc.scale) })
	}
}

func measureServe(t *testing.T, model, gpu string, scale float64) {
	const n, outLen, target = 1000, 200, 20000.0
	p := sim.Params{Engine: "vllm", Version: "0.11.0", Model: model, GPU: gpu, MaxNumSeqs: 1024}
	// Model-time token rate of this workload, to pick the time scale.
	eng, err := sim.New(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		eng.Submit(sim.Req{ID: strconv.Itoa(i), PromptLen: 2, OutputLen: outLen})
	}
	var end float64
	for {
		next, ok := eng.NextEventTime()
		if !ok {
			break
		}
		for _, ev := range eng.Advance(next) {
			end = math.Max(end, ev.Time)
		}
	}
	if scale == 0 {
		scale = target / (float64(n*outLen) / end)
	}
	t.Logf("model: %d tokens in %.2f s of model time; time scale %.3f for %.0f tok/s", n*outLen, end, scale, float64(n*outLen)/end*scale)

	bin := perflabBinary(t)
	port := freePort(t)
	args := []string{bin}
	if os.Getenv("PERFLAB_SIM_SERVE_MEASURE") == "rt" {
		// On a shared machine, run the server at real-time priority pinned
		// to one core, so the figure measures this code rather than the
		// machine's other load (it sleeps between events, so it cannot hog).
		args = append([]string{"taskset", "-c", "1", "chrt", "-f", "10"}, args...)
	}
	cmd := exec.Command(args[0], append(args[1:], "sim", "serve", "--engine", "vllm", "--engine-version", "0.11.0", "--gpu", gpu,
		"--time-scale", fmt.Sprint(scale), "--startup-delay", "0s", "--", "vllm", "serve", model, "--port", fmt.Sprint(port), "--max-num-seqs", "1024")...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stderr = io.Discard
	if path := os.Getenv("PERFLAB_SIM_SERVE_STDERR"); path != "" {
		// For diagnosis, e.g. with GODEBUG=schedtrace=5 in the environment.
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stderr = f
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// SIGTERM first: a server asked for a late trace writes it when it
		// stops.
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
		}
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for i := 0; ; i++ {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			break
		}
		if i > 300 {
			t.Fatal("server not ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cpu0 := procCPU(t, cmd.Process.Pid)
	tokens, wall := streamLoad(t, base, model, n, outLen)
	cpu := procCPU(t, cmd.Process.Pid) - cpu0
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metric := func(name string) float64 {
		m := regexp.MustCompile(regexp.QuoteMeta(name) + `\{[^}]*\} (\S+)`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("no %s in /metrics", name)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("received %d tokens in %.2f s = %.0f tok/s; server CPU %.2f s = %.2f cores; token lateness p50 %.2f ms p99 %.2f ms max %.2f ms, loop handoff p99 %.2f ms; loadavg %s",
		tokens, wall.Seconds(), float64(tokens)/wall.Seconds(), cpu.Seconds(), cpu.Seconds()/wall.Seconds(),
		metric("perflab:sim_token_lateness_p50_seconds")*1000, metric("perflab:sim_token_lateness_p99_seconds")*1000, metric("perflab:sim_token_lateness_max_seconds")*1000,
		metric("perflab:sim_token_handoff_lateness_p99_seconds")*1000, strings.TrimSpace(string(load)))
	if tokens != n*outLen {
		t.Errorf("received %d tokens, want %d", tokens, n*outLen)
	}
}

// TestMeasureWriteFloor replays the engine's schedule for the two cases of
// TestMeasureServeProcess through one ideal writer that costs c per write
// (one write per stream per moment, in deadline order) and logs the token
// lateness it would reach: the floor a single core can do at that cost.
// Opt-in with PERFLAB_SIM_SERVE_MEASURE, like the measurement it explains.
func TestMeasureWriteFloor(t *testing.T) {
	if os.Getenv("PERFLAB_SIM_SERVE_MEASURE") == "" {
		t.Skip("set PERFLAB_SIM_SERVE_MEASURE=1 to run the serve measurement")
	}
	for _, tc := range []struct {
		name, model, gpu string
		scale            float64
	}{
		{"compressed", "Qwen/Qwen3-14B", "H100", 0},
		{"realtime", "Qwen/Qwen3-30B-A3B", "B200", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n, outLen = 1000, 200
			eng, err := sim.New(sim.Params{Engine: "vllm", Version: "0.11.0", Model: tc.model, GPU: tc.gpu, MaxNumSeqs: 1024}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				eng.Submit(sim.Req{ID: strconv.Itoa(i), PromptLen: 2, OutputLen: outLen})
			}
			type out struct {
				t      float64
				id     string
				tokens int
			}
			var outs []out
			for {
				next, ok := eng.NextEventTime()
				if !ok {
					break
				}
				for _, ev := range eng.Advance(next) {
					if ev.Tokens > 0 {
						outs = append(outs, out{ev.Time, ev.ReqID, ev.Tokens})
					}
				}
			}
			sort.SliceStable(outs, func(i, j int) bool { return outs[i].t < outs[j].t })
			scale := tc.scale
			if scale == 0 {
				scale = 20000 / (float64(n*outLen) / outs[len(outs)-1].t)
			}
			for _, us := range []float64{6, 7, 8, 9, 10, 12} {
				c := us / 1e6
				h := newLatency()
				now := 0.0
				for i := 0; i < len(outs); {
					now = math.Max(now, outs[i].t/scale)
					j := i
					for j < len(outs) && outs[j].t/scale <= now {
						j++
					}
					written := map[string]bool{}
					for k := i; k < j; k++ {
						if !written[outs[k].id] {
							written[outs[k].id] = true
							now += c
						}
						h.add(time.Duration((now-outs[k].t/scale)*1e9), outs[k].tokens)
					}
					i = j
				}
				l := h.summary()
				t.Logf("scale %.3f, %2.0f µs a write: lateness p50 %v p99 %v", scale, us, l.P50, l.P99)
			}
		})
	}
}

// procCPU is a process's user+system CPU time from /proc.
func procCPU(t *testing.T, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}
