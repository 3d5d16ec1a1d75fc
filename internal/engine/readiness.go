package engine

// What every runtime shares in waiting for a server and reading its log:
// the readiness probe, the ring of recent log lines, and which lines are
// the probe's own echo. (The wait itself and the failure rules are in
// lifecycle.go; OOM lines and failure classes in runtime.go.)

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// IsProbeLine is true for access-log lines our own polling causes; they
// must not count as loading progress.
func IsProbeLine(s string) bool {
	return strings.Contains(s, "/health") || strings.Contains(s, "/v1/models")
}

// Probe is one readiness check of a server at base, the same for every
// runtime: true when /health is 200 and /v1/models lists want (any model
// when want is ""); note describes an HTTP answer that was not ready, to
// tell an unhealthy server from a silent one.
func Probe(ctx context.Context, client *http.Client, base, want string) (bool, string) {
	get := func(path string) (int, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return 0, nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, body, err
	}
	code, _, err := get("/health")
	if err != nil {
		return false, ""
	}
	if code != http.StatusOK {
		return false, fmt.Sprintf("GET /health: %d", code)
	}
	code, body, err := get("/v1/models")
	if err != nil {
		return false, "GET /v1/models: " + err.Error()
	}
	if code != http.StatusOK {
		return false, fmt.Sprintf("GET /v1/models: %d", code)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return false, "GET /v1/models: bad JSON: " + err.Error()
	}
	var ids []string
	for _, m := range list.Data {
		if want == "" || m.ID == want {
			return true, ""
		}
		ids = append(ids, m.ID)
	}
	return false, fmt.Sprintf("GET /v1/models lists %q, not %q", ids, want)
}

// LogRing keeps a server's last n log lines, for its LogTail and the
// failure classification; every runtime streams its server's output into
// one.
type LogRing struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

// NewLogRing keeps the last n lines.
func NewLogRing(n int) *LogRing { return &LogRing{lines: make([]string, n)} }

// Add appends a line, dropping the oldest when full.
func (r *LogRing) Add(s string) {
	r.mu.Lock()
	r.lines[r.next] = s
	r.next = (r.next + 1) % len(r.lines)
	if r.next == 0 {
		r.full = true
	}
	r.mu.Unlock()
}

// Tail returns the last n lines, oldest first (all when n <= 0).
func (r *LogRing) Tail(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	size := r.next
	if r.full {
		size = len(r.lines)
	}
	if n > size || n <= 0 {
		n = size
	}
	out := make([]string, 0, n)
	for i := size - n; i < size; i++ {
		idx := i
		if r.full {
			idx = (r.next + i) % len(r.lines)
		}
		out = append(out, r.lines[idx])
	}
	return out
}

// NotReady classes a wait for readiness that timed out, the same way for
// every runtime: a server that answered HTTP (answered is its last answer)
// but never became ready is unhealthy; one that never answered is hung.
// The reason ends with the log's last line, and the failure carries the
// log's tail.
func NotReady(answered, why string, log *LogRing) *Failure {
	f := &Failure{Class: ClassHung, Reason: why}
	if answered != "" {
		f = &Failure{Class: ClassUnhealthy, Reason: why + "; last answer: " + answered}
	}
	if l := LastLine(log.Tail(20)); l != "" {
		f.Reason += "; last log line: " + l
	}
	f.LogTail = log.Tail(50)
	return f
}
