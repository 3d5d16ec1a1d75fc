package server

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/store"
)

// smallSpec is a lab the analytic stand-in model runs in well under a
// second: no dataset file, no tokenizer.
const smallSpec = `name: small
model: Qwen/Qwen3-14B
fp8_model: Qwen/Qwen3-14B-FP8
hardware: {gpu: H100-SXM-80GB, count: 1}
engines:
  - {name: vllm, version: 0.11.0}
  - {name: sglang, version: 0.5.5.post1}
runtime: sim-predict
tuning: {name: rnd, dataset: random, input_len: 512, output_len: 128, num_prompts: 200, seed: 42}
generalization:
  - {name: short, dataset: random, input_len: 128, output_len: 4, num_prompts: 100, seed: 42}
stages:
  - name: engine
  - name: quantization
    values: [fp8-checkpoint]
search:
  knobs: [engine, quantization, max_num_seqs]
  max_trials: 6
repeats: 2
`

// stores returns a fresh store per available backend: SQLite always,
// PostgreSQL through PERFLAB_TEST_POSTGRES (a schema per test); under
// CI=true its absence is a failure.
func stores(t *testing.T) map[string]func(t *testing.T) *store.Store {
	t.Helper()
	out := map[string]func(t *testing.T) *store.Store{
		"sqlite": func(t *testing.T) *store.Store {
			st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "perflab.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
	dsn := os.Getenv("PERFLAB_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("PERFLAB_TEST_POSTGRES is not set under CI=true: .ci/run must start PostgreSQL")
		}
		t.Log("PERFLAB_TEST_POSTGRES not set: PostgreSQL cases skipped")
		return out
	}
	out["postgres"] = func(t *testing.T) *store.Store {
		ctx := context.Background()
		admin, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		schema := fmt.Sprintf("serve%d", time.Now().UnixNano())
		if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
			t.Fatal(err)
		}
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		st, err := store.Open(ctx, dsn+sep+"search_path="+schema)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			st.Close()
			if a, err := sql.Open("pgx", dsn); err == nil {
				a.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE")
				a.Close()
			}
		})
		return st
	}
	return out
}

// testServer is a server on a loopback port.
type testServer struct {
	*Server
	url   string
	token string
}

func newTestServer(t *testing.T, st *store.Store, cfg Config) *testServer {
	t.Helper()
	cfg.Store = st
	if cfg.DataRoot == "" {
		cfg.DataRoot = t.TempDir()
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return &testServer{Server: srv, url: newLoopback(t, srv), token: cfg.Token}
}

// newLoopback serves h on a loopback port until the test ends.
func newLoopback(t testing.TB, h http.Handler) string {
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

// do sends a request and returns the status and body.
func (ts *testServer) do(t *testing.T, method, path, ctype string, body io.Reader, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.url+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if ts.token != "" {
		req.Header.Set("Authorization", "Bearer "+ts.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// getJSON GETs path, wants 200 and decodes into v.
func (ts *testServer) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	code, b := ts.do(t, "GET", path, "", nil)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, b)
	}
}

// submit POSTs a spec and wants 202.
func (ts *testServer) submit(t *testing.T, spec string) started {
	t.Helper()
	code, b := ts.do(t, "POST", "/api/v1/labs", "application/yaml", strings.NewReader(spec))
	if code != http.StatusAccepted {
		t.Fatalf("POST /labs: %d %s", code, b)
	}
	var s started
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// sseEvent is one message of the stream as read off the wire.
type sseEvent struct {
	id   int64
	typ  string
	data wireEvent
}

// follow reads the run's event stream from after lastID, calling each
// (false stops) until the stream ends.
func (ts *testServer) follow(t *testing.T, id int64, lastID int64, each func(sseEvent) bool) []sseEvent {
	t.Helper()
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/runs/%d/events", ts.url, id), nil)
	if lastID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	if ts.token != "" {
		req.Header.Set("Authorization", "Bearer "+ts.token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("events: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			cur.id, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			cur.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &cur.data); err != nil {
				t.Fatalf("event data %s: %v", line, err)
			}
		case line == "" && cur.typ != "":
			out = append(out, cur)
			if each != nil && !each(cur) {
				return out
			}
			cur = sseEvent{}
		}
	}
	return out
}

func types(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.typ)
	}
	return out
}

// TestLab submits a lab, follows its events to the end, and reads the run,
// its trials, one trial and every report format, on each store.
func TestLab(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			var lines lockedBuffer
			ts := newTestServer(t, open(t), Config{Options: app.Options{Analytic: true}, Log: &lines})
			st := ts.submit(t, smallSpec)
			evs := ts.follow(t, st.ID, 0, nil)
			checkStream(t, evs)
			checkSameAsTerminal(t, evs, lines.String())
			last := evs[len(evs)-1]
			if last.typ != "end" || last.data.Status != "done" || last.data.Error != "" {
				t.Fatalf("last event %s status %q error %q, want end done", last.typ, last.data.Status, last.data.Error)
			}
			var run runDetail
			ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d", st.ID), &run)
			if run.Status != "done" || run.Active || run.Winner == nil || len(run.Decisions) == 0 || !strings.Contains(run.Spec, "name: small") {
				t.Fatalf("run: status %s active %v winner %v decisions %d", run.Status, run.Active, run.Winner, len(run.Decisions))
			}
			var trials struct{ Trials []trialInfo }
			ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d/trials", st.ID), &trials)
			ended := 0
			for _, e := range evs {
				if e.typ == "trial_ended" {
					ended++
				}
			}
			if len(trials.Trials) != ended || ended == 0 || last.data.Done != ended {
				t.Errorf("%d trials stored, %d trial_ended events, the end counts %d", len(trials.Trials), ended, last.data.Done)
			}
			// The terminal lines are a sink of the same events.
			var tr trialDetail
			key := trials.Trials[0].Key
			ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d/trials/%s", st.ID, url.PathEscape(key)), &tr)
			if tr.Key != key || tr.Command == "" || len(tr.Result) == 0 || !strings.Contains(tr.ResultText, "Serving Benchmark Result") || tr.TotalThroughput <= 0 {
				t.Errorf("trial %s: command %q result %d bytes, text %q, throughput %v", key, tr.Command, len(tr.Result), tr.ResultText, tr.TotalThroughput)
			}
			if code, _ := ts.do(t, "GET", fmt.Sprintf("/api/v1/runs/%d/trials/nope", st.ID), "", nil); code != 404 {
				t.Errorf("missing trial: %d, want 404", code)
			}
			checkReports(t, ts, st.ID, run.Winner)
			// A reconnecting client gets what followed its last event.
			again := ts.follow(t, st.ID, 5, nil)
			if len(again) != len(evs)-5 || again[0].id != 6 {
				t.Errorf("after Last-Event-ID 5: %d events from id %d, want %d from 6", len(again), again[0].id, len(evs)-5)
			}
		})
	}
}

// checkStream checks a whole lab's stream: ids 1, 2, 3…, the lab's
// outline in order, and the state the events carry.
func checkStream(t *testing.T, evs []sseEvent) {
	t.Helper()
	if len(evs) < 6 {
		t.Fatalf("only %d events: %v", len(evs), types(evs))
	}
	for i, e := range evs {
		if e.id != int64(i+1) || e.data.ID != e.id || e.data.Type == "" || string(e.data.Type) != e.typ {
			t.Fatalf("event %d: id %d (data %d), type %s/%s", i, e.id, e.data.ID, e.typ, e.data.Type)
		}
	}
	ts := types(evs)
	if ts[0] != "start" || ts[len(ts)-2] != "done" || ts[len(ts)-1] != "end" {
		t.Errorf("stream %v: want start … done, end", ts)
	}
	for _, want := range []string{"stage", "trial_started", "trial_ended", "best"} {
		if !slices.Contains(ts, want) {
			t.Errorf("no %s event in %v", want, ts)
		}
	}
	done := 0
	for _, e := range evs {
		if e.typ == "trial_ended" {
			done++
			if e.data.Done != done || e.data.Trial == nil || e.data.Trial.Key == "" {
				t.Fatalf("trial_ended %d says done %d, trial %+v", done, e.data.Done, e.data.Trial)
			}
		}
	}
	var done0 *sseEvent
	for i := range evs {
		if evs[i].typ == "done" {
			done0 = &evs[i]
		}
	}
	if done0.data.Winner == nil || done0.data.Incumbent == nil || done0.data.Winner.Name != done0.data.Incumbent.Name {
		t.Errorf("done: winner %+v, incumbent %+v", done0.data.Winner, done0.data.Incumbent)
	}
}

// checkReports fetches every report format and the charts report.json
// lists, and checks each is what its name says and names the winner.
func checkReports(t *testing.T, ts *testServer, id int64, winner *string) {
	t.Helper()
	for _, f := range []struct{ ext, ctype, has string }{
		{"md", "text/markdown", "# "},
		{"html", "text/html", "<!DOCTYPE html>"},
		{"json", "application/json", `"charts"`},
		{"csv", "text/csv", ","},
	} {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/runs/%d/report.%s", ts.url, id, f.ext), nil)
		if ts.token != "" {
			req.Header.Set("Authorization", "Bearer "+ts.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), f.ctype) || !strings.Contains(string(b), f.has) {
			t.Errorf("report.%s: %d %s, %d bytes", f.ext, resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
		}
		if f.ext != "csv" && winner != nil && !strings.Contains(string(b), strings.SplitN(*winner, " ", 2)[0]) {
			t.Errorf("report.%s does not name the winner %s", f.ext, *winner)
		}
	}
	var rep struct {
		Charts []struct{ SVG, PNG string }
	}
	ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d/report.json", id), &rep)
	if len(rep.Charts) == 0 {
		t.Fatal("report.json lists no charts")
	}
	for _, c := range rep.Charts {
		code, b := ts.do(t, "GET", fmt.Sprintf("/api/v1/runs/%d/charts/%s", id, c.SVG), "", nil)
		if code != 200 || !strings.Contains(string(b), "<svg") {
			t.Errorf("chart %s: %d, %d bytes", c.SVG, code, len(b))
		}
		code, b = ts.do(t, "GET", fmt.Sprintf("/api/v1/runs/%d/charts/%s", id, c.PNG), "", nil)
		if code != 200 || !strings.HasPrefix(string(b), "\x89PNG") {
			t.Errorf("chart %s: %d, %d bytes", c.PNG, code, len(b))
		}
	}
	for _, bad := range []string{"nope.svg", "pareto.gif", "..%2Fx.svg"} {
		if code, _ := ts.do(t, "GET", fmt.Sprintf("/api/v1/runs/%d/charts/%s", id, bad), "", nil); code != 404 {
			t.Errorf("chart %s: %d, want 404", bad, code)
		}
	}
}

// lockedBuffer is a bytes.Buffer written by a lab and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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

// checkSameAsTerminal: the terminal's progress lines, written from the
// same events, say for each trial what the stream says: the count, the
// plan, the trial, its incumbent and the ETA.
func checkSameAsTerminal(t *testing.T, evs []sseEvent, out string) {
	t.Helper()
	var trialLines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  [") {
			trialLines = append(trialLines, l)
		}
	}
	i := 0
	for _, e := range evs {
		if e.typ != "trial_ended" {
			continue
		}
		if i >= len(trialLines) {
			t.Fatalf("%d trial lines on the terminal, more trial_ended events", len(trialLines))
		}
		l := trialLines[i]
		i++
		eta := "-"
		if d, ok := e.data.ETA(); ok {
			eta = d.String()
		}
		want := []string{fmt.Sprintf("[%d/≤%d] ", e.data.Done, e.data.Planned), " " + e.data.Trial.Name + " (", "ETA " + eta}
		if e.data.Incumbent != nil {
			want = append(want, fmt.Sprintf("incumbent %s %.1f", e.data.Incumbent.Name, e.data.Incumbent.Score))
		}
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("terminal line %q lacks %q, which the stream says", l, w)
			}
		}
	}
	if i != len(trialLines) || i == 0 {
		t.Errorf("%d trial_ended events, %d trial lines", i, len(trialLines))
	}
}
