package serve

import (
	"context"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/sim"
)

// drainModel submits n requests at t=0 and runs m to the end; it returns
// the generated tokens per second of model time.
func drainModel(t *testing.T, m Model, n, prompt, output int) float64 {
	t.Helper()
	for i := 0; i < n; i++ {
		m.Submit(sim.Req{ID: strconv.Itoa(i), PromptLen: prompt, OutputLen: output})
	}
	tokens, end, done := 0, 0.0, 0
	for steps := 0; done < n; steps++ {
		next, ok := m.NextEventTime()
		if !ok || steps > 1e6 {
			t.Fatalf("model stalled with %d of %d done", done, n)
		}
		for _, ev := range m.Advance(next) {
			if ev.Err != nil {
				t.Fatalf("request %s: %v", ev.ReqID, ev.Err)
			}
			tokens += ev.Tokens
			end = math.Max(end, ev.Time)
			if ev.Done {
				done++
			}
		}
	}
	if tokens != n*output {
		t.Fatalf("generated %d tokens, want %d", tokens, n*output)
	}
	return float64(tokens) / end
}

// TestReplicasThroughput: on a load that saturates one replica (batch cap
// 8, 64 requests), two data-parallel replicas generate about twice the
// tokens per second of model time, and each is given half the requests.
func TestReplicasThroughput(t *testing.T) {
	for _, tc := range []struct {
		engine, version string
		route           Route
	}{
		{"vllm", "0.11.0", RouteLeastLoaded},
		{"sglang", "", RouteRoundRobin},
		{"sglang", "", RouteShortestQueue},
	} {
		t.Run(tc.engine+"/"+tc.route.String(), func(t *testing.T) {
			const n, prompt, output = 64, 200, 100
			p := sim.Params{Engine: tc.engine, Version: tc.version, Model: "Qwen/Qwen3-14B", GPU: "H100", MaxNumSeqs: 8}
			one, err := sim.New(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			single := drainModel(t, one, n, prompt, output)
			p.DP = 2
			var engines []Model
			for range 2 {
				e, err := sim.New(p, nil)
				if err != nil {
					t.Fatal(err)
				}
				engines = append(engines, e)
			}
			rs, err := NewReplicas(engines, tc.route)
			if err != nil {
				t.Fatal(err)
			}
			dual := drainModel(t, rs, n, prompt, output)
			routed := rs.Routed()
			t.Logf("DP=1 %.0f tok/s, DP=2 %.0f tok/s of model time (×%.2f); routed %v", single, dual, dual/single, routed)
			if r := dual / single; r < 1.8 || r > 2.2 {
				t.Errorf("DP=2 throughput is %.2f× DP=1, want about 2×", r)
			}
			for k, c := range routed {
				if c < n/2-2 || c > n/2+2 {
					t.Errorf("replica %d got %d of %d requests, want about half", k, c, n)
				}
			}
			if st := rs.Stats(); st.GenerationTokens != n*output || st.Running != 0 || st.Waiting != 0 {
				t.Errorf("aggregate stats after the run: %+v", st)
			}
		})
	}
}

// loadModel is a Model whose load the test sets, to check routing.
type loadModel struct {
	st   sim.Stats
	reqs []string
	gone []string
}

func (m *loadModel) Submit(r sim.Req)               { m.reqs = append(m.reqs, r.ID); m.st.Waiting++ }
func (m *loadModel) NextEventTime() (float64, bool) { return 0, false }
func (m *loadModel) Advance(to float64) []sim.Event { return nil }
func (m *loadModel) Stats() sim.Stats               { return m.st }
func (m *loadModel) Cancel(id string) bool          { m.gone = append(m.gone, id); return true }
func (m *loadModel) load(waiting, running int) Model {
	m.st = sim.Stats{Waiting: waiting, Running: running}
	return m
}

// TestReplicasRouting checks each policy's choice against set loads.
func TestReplicasRouting(t *testing.T) {
	cases := []struct {
		name  string
		route Route
		loads [][2]int // waiting, running per replica
		at    []float64
		want  []int
	}{
		// waiting counts 4× running: 1 waiting (4) loses to 3 running (3).
		{"vllm score", RouteLeastLoaded, [][2]int{{1, 0}, {0, 3}}, []float64{0}, []int{1}},
		// Between publications each routed request adds to its replica's
		// waiting count, so a burst alternates...
		{"vllm burst", RouteLeastLoaded, [][2]int{{0, 0}, {0, 0}}, []float64{0, 0, 0, 0}, []int{0, 1, 0, 1}},
		// ...until the next publication, 100 ms on, replaces the estimate
		// with live counts: replica 1 got both earlier requests (the fake
		// keeps them waiting: score 8) and replica 0 runs 5 (score 5).
		{"vllm publication", RouteLeastLoaded, [][2]int{{0, 5}, {0, 0}}, []float64{0, 0.05, 0.2}, []int{1, 1, 0}},
		{"sglang round robin", RouteRoundRobin, [][2]int{{0, 9}, {0, 0}, {0, 0}}, []float64{0, 0, 0, 0}, []int{0, 1, 2, 0}},
		// Live counts: 4 against 3, then 4 against 4 (ties to the lowest rank).
		{"sglang shortest queue", RouteShortestQueue, [][2]int{{2, 2}, {0, 3}}, []float64{0, 0}, []int{1, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ms []*loadModel
			var engines []Model
			for _, l := range tc.loads {
				m := &loadModel{}
				ms = append(ms, m)
				engines = append(engines, m.load(l[0], l[1]))
			}
			rs, err := NewReplicas(engines, tc.route)
			if err != nil {
				t.Fatal(err)
			}
			for i, at := range tc.at {
				id := "r" + strconv.Itoa(i)
				rs.Submit(sim.Req{ID: id, Arrival: at})
				got := -1
				for k, m := range ms {
					if len(m.reqs) > 0 && m.reqs[len(m.reqs)-1] == id {
						got = k
					}
				}
				if got != tc.want[i] {
					t.Errorf("request %d at %g went to replica %d, want %d", i, at, got, tc.want[i])
				}
			}
			// Cancel reaches the replica that has the request.
			rs.Cancel("r0")
			if k := tc.want[0]; len(ms[k].gone) != 1 || ms[k].gone[0] != "r0" {
				t.Errorf("cancel of r0 reached %v", ms)
			}
		})
	}
	if _, err := NewReplicas(nil, RouteRoundRobin); err == nil {
		t.Error("NewReplicas with no engines: no error")
	}
}

func TestRouteFor(t *testing.T) {
	for _, tc := range []struct {
		engine string
		argv   string
		want   Route
	}{
		{"vllm", "vllm serve m --data-parallel-size 2", RouteLeastLoaded},
		{"sglang", "python3 -m sglang.launch_server --model-path m --dp-size 2", RouteRoundRobin},
		{"sglang", "python3 -m sglang.launch_server --dp 2 --load-balance-method shortest_queue", RouteShortestQueue},
		{"sglang", "python3 -m sglang.launch_server --dp 2 --load-balance-method=round_robin", RouteRoundRobin},
	} {
		if got := RouteFor(tc.engine, strings.Fields(tc.argv)); got != tc.want {
			t.Errorf("RouteFor(%s, %q) = %v, want %v", tc.engine, tc.argv, got, tc.want)
		}
	}
}

// TestRunDataParallel serves through Run with the engine's own DP flag:
// /metrics has one series per replica, both replicas serve requests, and a
// DP=1 command line keeps the single engine's series.
func TestRunDataParallel(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		dp   int
		// gen and ok are the engine's names for generated tokens and
		// finished requests.
		gen, ok string
	}{
		{"vllm dp1", []string{"vllm", "serve", "Qwen/Qwen3-14B", "--max-num-seqs", "4"}, 1, "vllm:generation_tokens_total", "vllm:request_success_total"},
		{"vllm dp2", []string{"vllm", "serve", "Qwen/Qwen3-14B", "--max-num-seqs", "4", "--data-parallel-size", "2"}, 2, "vllm:generation_tokens_total", "vllm:request_success_total"},
		{"sglang dp2", []string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-14B", "--max-running-requests", "4", "--dp-size", "2", "--enable-metrics"}, 2,
			"sglang:generation_tokens_total", "sglang:num_requests_total"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			engine := strings.Fields(tc.name)[0]
			ctx, cancel := context.WithCancel(context.Background())
			ready := make(chan string, 1)
			errc := make(chan error, 1)
			argv := append(append([]string(nil), tc.argv...), "--port", "0")
			go func() {
				// Requests last ~0.1 s of wall time at this scale, so all 16
				// are in flight together even on a loaded machine and the
				// load balancer sees them (vLLM's counts are published every
				// 100 ms of model time).
				errc <- Run(ctx, Options{Engine: engine, Argv: argv, GPU: "H100", TimeScale: 10, StartupDelay: 0,
					Stderr: io.Discard, Ready: func(addr string) { ready <- addr }})
			}()
			var base string
			select {
			case addr := <-ready:
				base = "http://" + addr
			case err := <-errc:
				t.Fatalf("Run: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("not ready after 30 s")
			}
			defer func() {
				cancel()
				if err := <-errc; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()
			const n = 16
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"Qwen/Qwen3-14B","prompt":"hello there","max_tokens":40,"stream":true}`))
					if err != nil {
						t.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}()
			}
			wg.Wait()
			var text string
			for deadline := time.Now().Add(5 * time.Second); ; {
				resp, err := http.Get(base + "/metrics")
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				text = string(b)
				// The success counter moves after the last write, which the
				// client may see first: wait for both.
				if (sumSeries(text, tc.gen) == n*40 && sumSeries(text, tc.ok) == n) || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			gen := seriesByEngine(text, tc.gen)
			ok := seriesByEngine(text, tc.ok)
			if len(gen) != tc.dp || len(ok) != tc.dp {
				t.Fatalf("%d generation series and %d success series, want %d each:\n%s", len(gen), len(ok), tc.dp, text)
			}
			if sumSeries(text, tc.gen) != n*40 || sumSeries(text, tc.ok) != n {
				t.Errorf("totals: %v generated, %v succeeded; want %d and %d", gen, ok, n*40, n)
			}
			for k, v := range ok {
				if tc.dp > 1 && (v < n/2-3 || v > n/2+3) {
					t.Errorf("replica %s finished %v of %d requests, want about half", k, v, n)
				}
			}
		})
	}
}

var seriesRe = regexp.MustCompile(`(?m)^([a-z_:]+)\{engine="(\d+)"[^}]*\} (\S+)$`)

// seriesByEngine maps engine label to value for one metric.
func seriesByEngine(text, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range seriesRe.FindAllStringSubmatch(text, -1) {
		if m[1] == name {
			v, _ := strconv.ParseFloat(m[3], 64)
			out[m[2]] = v
		}
	}
	return out
}

func sumSeries(text, name string) float64 {
	s := 0.0
	for _, v := range seriesByEngine(text, name) {
		s += v
	}
	return s
}
