package server

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// latencyBuckets are the API latency histogram's upper bounds, in seconds.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// histogram is one route's latencies, Prometheus-style (cumulative on
// output).
type histogram struct {
	counts []uint64 // per bucket, not cumulative; last is +Inf
	sum    float64
	n      uint64
}

// apiMetrics counts what /metrics reports about the API itself.
type apiMetrics struct {
	mu     sync.Mutex
	routes map[string]*histogram
}

func newMetrics() *apiMetrics { return &apiMetrics{routes: map[string]*histogram{}} }

func (m *apiMetrics) observe(route string, d time.Duration) {
	sec := d.Seconds()
	i := sort.SearchFloat64s(latencyBuckets, sec)
	m.mu.Lock()
	h := m.routes[route]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(latencyBuckets)+1)}
		m.routes[route] = h
	}
	h.counts[i]++
	h.sum += sec
	h.n++
	m.mu.Unlock()
}

// measure times each call of h under route. An event stream is timed to
// its first byte, not its end: its length is the lab's, not the API's.
func (m *apiMetrics) measure(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		fw := &firstWrite{ResponseWriter: w}
		h.ServeHTTP(fw, r)
		end := fw.at
		if end.IsZero() {
			end = time.Now()
		}
		m.observe(route, end.Sub(t0))
	})
}

// firstWrite notes when the response's header went out.
type firstWrite struct {
	http.ResponseWriter
	at time.Time
}

func (f *firstWrite) WriteHeader(code int) {
	if f.at.IsZero() {
		f.at = time.Now()
	}
	f.ResponseWriter.WriteHeader(code)
}

func (f *firstWrite) Write(b []byte) (int, error) {
	if f.at.IsZero() {
		f.at = time.Now()
	}
	return f.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (Flush).
func (f *firstWrite) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// serveMetrics writes the Prometheus text format: labs running, trials in
// the store by status, and the API's latency by route.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	infos, err := s.cfg.Store.RunInfos(r.Context())
	if err != nil {
		writeStoreError(w, err)
		return
	}
	var ok, failed int
	runs := map[string]int{}
	for _, ri := range infos {
		ok += ri.Trials - ri.Failed
		failed += ri.Failed
		runs[ri.Status]++
	}
	var b strings.Builder
	running, queued := s.labsRunning()
	fmt.Fprintf(&b, "# HELP perflab_labs_running Labs this server is running.\n# TYPE perflab_labs_running gauge\nperflab_labs_running %d\n", running)
	fmt.Fprintf(&b, "# HELP perflab_labs_queued Labs waiting for a slot (--max-labs).\n# TYPE perflab_labs_queued gauge\nperflab_labs_queued %d\n", queued)
	fmt.Fprintf(&b, "# HELP perflab_trials Trials in the store, by status.\n# TYPE perflab_trials gauge\nperflab_trials{status=\"ok\"} %d\nperflab_trials{status=\"failed\"} %d\n", ok, failed)
	fmt.Fprintf(&b, "# HELP perflab_runs Runs in the store, by status.\n# TYPE perflab_runs gauge\n")
	for _, st := range []string{"running", "done", "failed", "interrupted"} {
		fmt.Fprintf(&b, "perflab_runs{status=%q} %d\n", st, runs[st])
	}
	b.WriteString("# HELP perflab_api_request_duration_seconds API latency by route (event streams: to their first byte).\n# TYPE perflab_api_request_duration_seconds histogram\n")
	s.metrics.mu.Lock()
	names := make([]string, 0, len(s.metrics.routes))
	for n := range s.metrics.routes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := s.metrics.routes[n]
		var cum uint64
		for i, le := range latencyBuckets {
			cum += h.counts[i]
			fmt.Fprintf(&b, "perflab_api_request_duration_seconds_bucket{route=%q,le=\"%g\"} %d\n", n, le, cum)
		}
		cum += h.counts[len(latencyBuckets)]
		fmt.Fprintf(&b, "perflab_api_request_duration_seconds_bucket{route=%q,le=\"+Inf\"} %d\n", n, cum)
		fmt.Fprintf(&b, "perflab_api_request_duration_seconds_sum{route=%q} %g\n", n, h.sum)
		fmt.Fprintf(&b, "perflab_api_request_duration_seconds_count{route=%q} %d\n", n, h.n)
	}
	s.metrics.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}
