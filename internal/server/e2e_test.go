package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/store"
)

// example14B is examples/qwen3-14b-h100.yaml with its data paths written
// relative to the data root (the shared data directory) instead of to the
// examples directory, as a client of the server writes them.
func example14B(t testing.TB) (spec, root, file string) {
	t.Helper()
	root = shareddata.Path(t, "data")
	file = filepath.Join(shareddata.RepoRoot(t), "examples", "qwen3-14b-h100.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	spec = strings.ReplaceAll(string(b), "../../shared/data/", "")
	if strings.Count(string(b), "../../shared/data/") != 2 {
		t.Fatalf("%s: expected its tokenizer and dataset under ../../shared/data/", file)
	}
	return spec, root, file
}

// TestE2E14B submits the 14B example on the simulator, follows its events
// to the end, fetches every report format, and checks that the lab ran
// exactly as perflab lab runs it: the same run key, trials and winner as
// the CLI's wiring (app.Spec, app.Setup.Run) on the example file itself.
// It takes minutes on a small machine, so it runs only with
//
//	PERFLAB_SERVE_E2E=1 go test ./internal/server -run E2E -v
func TestE2E14B(t *testing.T) {
	if os.Getenv("PERFLAB_SERVE_E2E") != "1" {
		t.Skip("PERFLAB_SERVE_E2E=1 runs the 14B example through the server")
	}
	text, root, file := example14B(t)
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			ts := newTestServer(t, st, Config{DataRoot: root})
			s := ts.submit(t, text)
			evs := ts.follow(t, s.ID, 0, nil)
			checkStream(t, evs)
			end := evs[len(evs)-1]
			if end.data.Status != "done" {
				t.Fatalf("lab ended %s: %s", end.data.Status, end.data.Error)
			}
			var run runDetail
			ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d", s.ID), &run)
			checkReports(t, ts, s.ID, run.Winner)

			// The CLI's path on the example file, into a store of its own.
			ctx := context.Background()
			spec, coef, err := app.Spec(file, app.Options{})
			if err != nil {
				t.Fatal(err)
			}
			su, err := app.NewSetup(ctx, spec, coef, app.Options{})
			if err != nil {
				t.Fatal(err)
			}
			cli, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "cli.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			sum, cliRun, err := su.Run(ctx, spec, cli, app.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cliTrials, _ := cli.Trials(ctx, cliRun.ID)
			if cliRun.Key != run.Key || len(cliTrials) != run.Trials || run.Winner == nil || sum.Winner.Name != *run.Winner || sum.Winner.Score != *run.WinnerScore {
				t.Errorf("server: key %s, %d trials, winner %v %v; CLI: key %s, %d trials, winner %s %v",
					run.Key, run.Trials, deref(run.Winner), deref(run.WinnerScore), cliRun.Key, len(cliTrials), sum.Winner.Name, sum.Winner.Score)
			}
		})
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// BenchmarkAPILatencyDuringLab measures the API's latency while the 14B
// example runs on the simulator in the same server: four clients, 10
// requests a second each on an absolute schedule, read the run list, the
// run, its trials, /healthz and /metrics, and an event stream follows the
// lab, until the lab ends. It
// reports the p50, p99 and max of the JSON calls (report rendering, which
// draws charts, is reported apart: report_ms is its first, uncached call).
//
//	go test ./internal/server -run '^$' -bench APILatencyDuringLab -benchtime 1x
func BenchmarkAPILatencyDuringLab(b *testing.B) {
	text, root, _ := example14B(b)
	ShareCPU() // as perflab serve does
	for range b.N {
		st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(b.TempDir(), "perflab.db"))
		if err != nil {
			b.Fatal(err)
		}
		srv, err := New(Config{Store: st, DataRoot: root})
		if err != nil {
			b.Fatal(err)
		}
		url := newLoopback(b, srv)
		resp, err := http.Post(url+"/api/v1/labs", "application/yaml", strings.NewReader(text))
		if err != nil {
			b.Fatal(err)
		}
		var s started
		json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			b.Fatalf("POST /labs: %d", resp.StatusCode)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := http.Get(fmt.Sprintf("%s/api/v1/runs/%d/events", url, s.ID))
			if err == nil {
				readAll(resp)
			}
		}()
		var (
			mu        sync.Mutex
			latencies []time.Duration
			byPath    = map[string][]time.Duration{}
			late      []time.Duration
			wg        sync.WaitGroup
		)
		paths := []string{"/api/v1/runs", fmt.Sprintf("/api/v1/runs/%d", s.ID), fmt.Sprintf("/api/v1/runs/%d/trials", s.ID), "/healthz", "/metrics"}
		// A load on an absolute schedule: each client sends a request
		// every 1/perClient s (the next one as soon as the last answered
		// when late). Latency counts from the send; how late the clients
		// sent (late_p99_ms) measures the machine's own contention, which
		// delays the clients' timers as much as the server.
		const clients, perClient = 4, 10
		interval := time.Second / perClient
		start := time.Now()
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					due := start.Add(time.Duration(i)*interval + time.Duration(c)*interval/clients)
					select {
					case <-done:
						return
					case <-time.After(time.Until(due)):
					}
					path := paths[(i+c)%len(paths)]
					t0 := time.Now()
					resp, err := http.Get(url + path)
					if err != nil {
						b.Error(err)
						return
					}
					body, _ := readAll(resp)
					d := time.Since(t0)
					if resp.StatusCode != 200 {
						b.Errorf("%s: %d %s", path, resp.StatusCode, body)
						return
					}
					mu.Lock()
					latencies = append(latencies, d)
					late = append(late, t0.Sub(due))
					byPath[path] = append(byPath[path], d)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		labTime := time.Since(start)
		t0 := time.Now()
		r, err := http.Get(fmt.Sprintf("%s/api/v1/runs/%d/report.html", url, s.ID))
		if err != nil || r.StatusCode != 200 {
			b.Fatalf("report: %v", err)
		}
		readAll(r)
		reportTime := time.Since(t0)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		srv.Close(ctx)
		cancel()
		st.Close()
		slices.Sort(latencies)
		q := func(p float64) float64 {
			return float64(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))]) / 1e6
		}
		for p, ds := range byPath {
			slices.Sort(ds)
			b.Logf("%-24s %5d requests, p50 %v, p99 %v, max %v", p, len(ds), ds[len(ds)/2], ds[min(len(ds)-1, len(ds)*99/100)], ds[len(ds)-1])
		}
		// The server's own view: its latency histogram over the same
		// routes (handler entry to first byte; the bucket bound that
		// holds 99% of the calls).
		var counts []uint64
		var total uint64
		srv.metrics.mu.Lock()
		for _, p := range []string{"/api/v1/runs", "/api/v1/runs/{id}", "/api/v1/runs/{id}/trials", "/healthz", "/metrics"} {
			for pattern, h := range srv.metrics.routes {
				if pattern == "GET "+p {
					if counts == nil {
						counts = make([]uint64, len(h.counts))
					}
					for i, c := range h.counts {
						counts[i] += c
						total += c
					}
				}
			}
		}
		srv.metrics.mu.Unlock()
		var cum uint64
		for i, c := range counts {
			cum += c
			if float64(cum) >= 0.99*float64(total) {
				le := 1e4
				if i < len(latencyBuckets) {
					le = latencyBuckets[i] * 1000
				}
				b.ReportMetric(le, "server_p99_le_ms")
				break
			}
		}
		slices.Sort(late)
		b.ReportMetric(float64(late[len(late)*99/100])/1e6, "late_p99_ms")
		b.ReportMetric(q(0.50), "p50_ms")
		b.ReportMetric(q(0.99), "p99_ms")
		b.ReportMetric(float64(latencies[len(latencies)-1])/1e6, "max_ms")
		b.ReportMetric(float64(len(latencies)), "requests")
		b.ReportMetric(labTime.Seconds(), "lab_s")
		b.ReportMetric(float64(reportTime)/1e6, "report_ms")
	}
}

func readAll(r *http.Response) ([]byte, error) {
	defer r.Body.Close()
	return io.ReadAll(r.Body)
}
