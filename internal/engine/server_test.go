package engine

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// urlHandle is a Handle at a URL, for Server's tests: the server behind it
// is an httptest one.
type urlHandle struct{ url string }

func (h urlHandle) BaseURL() string             { return h.url }
func (h urlHandle) Ready(context.Context) error { return nil }
func (h urlHandle) Done() <-chan struct{}       { return nil }
func (h urlHandle) LogTail(int) []string        { return nil }
func (h urlHandle) Stop(context.Context) error  { return nil }
func (h urlHandle) Failure() *Failure           { return nil }
func serverAt(t *testing.T, mux *http.ServeMux) string {
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

var _ Handle = urlHandle{}

func TestServerOpenSalt(t *testing.T) {
	salty := Config{Engine: TRTLLM, Version: "1.2.0rc1", Model: "m"}
	for _, tc := range []struct {
		name   string
		cfg    Config
		status int
		salted bool
		keep   bool
	}{
		{"trtllm takes the salt", salty, http.StatusOK, true, true},
		{"trtllm refuses the field", salty, http.StatusBadRequest, false, false},
		{"vllm is reset, never salted", Config{Engine: VLLM, Model: "m"}, http.StatusOK, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				w.WriteHeader(tc.status)
			})
			s := NewServer(urlHandle{serverAt(t, mux)}, tc.cfg)
			if got := s.Open(t.Context()); got != ReuseFresh {
				t.Errorf("Open: %q", got)
			}
			if s.Salted() != tc.salted || s.Keepable() != tc.keep {
				t.Errorf("salted %v keepable %v, want %v %v", s.Salted(), s.Keepable(), tc.salted, tc.keep)
			}
			if !ResetFor(tc.cfg).Salt && asked.Load() != 0 {
				t.Error("a server that resets was asked for a salt")
			}
			salt := s.Salt("trial-1")
			if (salt != nil) != tc.salted {
				t.Fatalf("salt %v", salt)
			}
			if tc.salted && (s.Salt("trial-1")["cache_salt"] != salt["cache_salt"] || s.Salt("trial-2")["cache_salt"] == salt["cache_salt"]) {
				t.Error("a measurement's salt must be its own, and the same each time")
			}
		})
	}
}

func TestServerReset(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		want   string
		fails  bool
	}{
		{"sglang flushed", http.StatusOK, ReuseReset, false},
		{"sglang refused", http.StatusBadRequest, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.HandleFunc("POST /flush_cache", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(tc.status) })
			s := NewServer(urlHandle{serverAt(t, mux)}, Config{Engine: SGLang, Model: "m"})
			got, err := s.Reset(t.Context())
			if got != tc.want || (err != nil) != tc.fails {
				t.Fatalf("Reset: %q, %v", got, err)
			}
			if tc.fails && !errors.Is(err, ErrResetFailed) {
				t.Errorf("%v does not wrap ErrResetFailed", err)
			}
		})
	}
}

func TestServerMetrics(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("# HELP x\nvllm:num_requests_running{engine=\"0\"} 2\nvllm:num_requests_running{engine=\"1\"} 3\n"))
	})
	mux.HandleFunc("GET /prometheus/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`[{"x":1}]`))
	})
	base := serverAt(t, mux)
	m := NewServer(urlHandle{base}, Config{Engine: VLLM, Model: "m"}).Metrics(t.Context())
	if m["vllm:num_requests_running"] != 5 || m[`vllm:num_requests_running{engine="1"}`] != 3 {
		t.Errorf("vllm metrics %v", m)
	}
	if m := NewServer(urlHandle{base}, Config{Engine: TRTLLM, Model: "m"}).Metrics(t.Context()); m != nil {
		t.Errorf("JSON at the metrics path read as Prometheus: %v", m)
	}
}

func TestParsePrometheus(t *testing.T) {
	m := ParsePrometheus(bufio.NewScanner(strings.NewReader(strings.Join([]string{
		`a_perc{engine="0"} 0.5`, `a_perc{engine="1"} 0.7`,
		`h_bucket{le="1",x="le=2"} 4`, `c 9`, `c{engine="0"} 1`, `bad{x="y"} notanumber`,
	}, "\n"))))
	for k, want := range map[string]float64{"a_perc": 0.6, "c": 9, `h_bucket{le="1",x="le=2"}`: 4} {
		if got := m[k]; got < want-1e-9 || got > want+1e-9 {
			t.Errorf("%s = %g, want %g", k, got, want)
		}
	}
	if _, ok := m["h_bucket"]; ok {
		t.Error("a histogram's buckets got a bare name")
	}
	if _, ok := m["bad"]; ok {
		t.Error("a sample that is not a number was kept")
	}
}
