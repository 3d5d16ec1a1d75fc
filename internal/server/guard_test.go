package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/store"
)

// TestOpenAPIMatchesRoutes: every route the server registers is in the
// OpenAPI document it serves, every documented route is registered, and
// the mux sends a request for each documented path to that route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	ts := newTestServer(t, stores(t)["sqlite"](t), Config{})
	var doc struct {
		Paths map[string]map[string]json.RawMessage
	}
	code, b := ts.do(t, "GET", "/api/v1/openapi.json", "", nil)
	if code != 200 {
		t.Fatalf("openapi.json: %d", code)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for m := range ops {
			if m == "parameters" || m == "summary" {
				continue
			}
			documented[strings.ToUpper(m)+" "+path] = true
		}
	}
	registered := map[string]bool{}
	for _, r := range ts.routes {
		registered[r.pattern()] = true
		if !documented[r.pattern()] {
			t.Errorf("route %s is not in openapi.json", r.pattern())
		}
	}
	fill := strings.NewReplacer("{id}", "7", "{key}", "baseline%2Fabc%2Fr0", "{chart}", "pareto.svg")
	for p := range documented {
		if !registered[p] {
			t.Errorf("openapi.json documents %s, which the server does not register", p)
			continue
		}
		method, path, _ := strings.Cut(p, " ")
		req := httptest.NewRequest(method, fill.Replace(path), nil)
		if _, pattern := ts.mux.Handler(req); pattern != p {
			t.Errorf("%s %s reaches %q, want %q", method, fill.Replace(path), pattern, p)
		}
	}
	if len(documented) == 0 {
		t.Fatal("no paths in openapi.json")
	}
}

// TestBadRequests: bad specs (400 with line and field), paths outside the
// data root (400 naming the path), oversized bodies (413), other content
// types (415) and cross-site writes (403) start nothing.
func TestBadRequests(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "d.json"), []byte("[]"), 0o644)
	os.Mkdir(filepath.Join(root, "tok"), 0o755)
	os.Symlink(outside, filepath.Join(root, "link"))
	ts := newTestServer(t, stores(t)["sqlite"](t), Config{DataRoot: root, MaxBody: 64 << 10, Options: app.Options{Analytic: true}})
	bad := []struct {
		name, ctype, body string
		code              int
		line              int
		field, has        string
	}{
		{"unknown field", "application/yaml", strings.Replace(smallSpec, "repeats: 2", "repeats: 2\nrepeatz: 3", 1), 400, 20, "repeatz", "repeatz"},
		{"bad knob", "application/yaml", strings.Replace(smallSpec, "name: quantization", "name: quantisation", 1), 400, 14, "stages[1].name", "quantisation"},
		{"not yaml", "application/yaml", "name: [", 400, 1, "", ""},
		{"json spec error", "application/json", `{"name": "j", "model": "m", "hardware": {"gpu": "H100", "count": -1}}`, 400, 0, "", "count"},
		{"dataset outside root", "application/yaml", strings.Replace(smallSpec, "tuning: {name: rnd, dataset: random,", "tuning: {name: rnd, dataset: sharegpt, path: "+filepath.Join(outside, "d.json")+",", 1), 400, 0, "tuning.path", filepath.Join(outside, "d.json")},
		{"relative path out", "application/yaml", strings.Replace(smallSpec, "model: Qwen/Qwen3-14B\n", "model: ../"+filepath.Base(outside)+"\n", 1), 400, 0, "model", "../" + filepath.Base(outside)},
		{"symlink out", "application/yaml", strings.Replace(smallSpec, "model: Qwen/Qwen3-14B\n", "model: ./link\n", 1), 400, 0, "model", "./link"},
		{"default dataset outside root", "application/yaml", strings.Replace(smallSpec, "tuning: {name: rnd, dataset: random, input_len: 512, output_len: 128, num_prompts: 200, seed: 42}\n", "", 1), 400, 0, "tuning.path", "sharegpt"},
		{"too large", "application/yaml", smallSpec + "#" + strings.Repeat("x", 70<<10) + "\n", 413, 0, "", "limit"},
		{"form post", "application/x-www-form-urlencoded", "a=b", 415, 0, "", "content type"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			code, b := ts.do(t, "POST", "/api/v1/labs", tc.ctype, strings.NewReader(tc.body))
			var e apiError
			json.Unmarshal(b, &e)
			if code != tc.code || !strings.Contains(e.Error+e.Path, tc.has) || e.Error == "" {
				t.Fatalf("%d %s, want %d naming %q", code, b, tc.code, tc.has)
			}
			if tc.line > 0 && e.Line != tc.line {
				t.Errorf("line %d, want %d: %s", e.Line, tc.line, b)
			}
			if tc.field != "" && e.Field != tc.field {
				t.Errorf("field %q, want %q: %s", e.Field, tc.field, b)
			}
			if tc.has != "" && strings.HasPrefix(tc.has, "/") && e.Path == "" {
				t.Errorf("no path in %s", b)
			}
		})
	}
	// A body without a length, cut at the limit while read.
	req, _ := http.NewRequest("POST", ts.url+"/api/v1/labs", io.MultiReader(strings.NewReader(smallSpec), strings.NewReader("#"+strings.Repeat("y", 80<<10))))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("chunked oversized body: %d, want 413", resp.StatusCode)
	}
	// A form on another site posting to the loopback API.
	code, b := ts.do(t, "POST", "/api/v1/labs", "application/yaml", strings.NewReader(smallSpec), "Origin", "https://evil.example")
	if code != 403 {
		t.Errorf("cross-origin POST: %d %s, want 403", code, b)
	}
	code, _ = ts.do(t, "GET", "/api/v1/runs", "", nil, "Host", "evil.example:8088")
	if code != 403 {
		t.Errorf("GET with a non-loopback Host on a server without a token: %d, want 403", code)
	}
	var page runPage
	ts.getJSON(t, "/api/v1/runs", &page)
	if page.Total != 0 {
		t.Errorf("%d runs stored after only bad requests", page.Total)
	}
	for path, want := range map[string]int{"/api/v1/runs/99": 404, "/api/v1/runs/x": 404, "/api/v1/runs/99/trials": 404, "/api/v1/runs/99/report.md": 404, "/api/v1/runs?limit=0": 400, "/api/v1/runs?status=weird": 400} {
		if code, b := ts.do(t, "GET", path, "", nil); code != want {
			t.Errorf("GET %s: %d %s, want %d", path, code, b, want)
		}
	}
	if code, _ := ts.do(t, "DELETE", "/api/v1/runs/99", "", nil); code != 404 {
		t.Errorf("DELETE a missing run: %d, want 404", code)
	}
}

// TestToken: with a token, every API call without it or with a wrong one
// is 401; the right one passes, on the event stream too; a token in the
// query string is refused everywhere (it would land in access logs);
// /healthz needs none.
func TestToken(t *testing.T) {
	const tok = "s3cret-token"
	ts := newTestServer(t, stores(t)["sqlite"](t), Config{Token: tok, Options: app.Options{Analytic: true}})
	for _, hdr := range []string{"", "Bearer wrong", "Bearer s3cret-toke", "Bearer s3cret-token2", "Basic " + tok, tok} {
		for _, p := range []string{"/api/v1/runs", "/metrics", "/api/v1/openapi.json", "/api/v1/runs/1/events"} {
			req, _ := http.NewRequest("GET", ts.url+p, nil)
			if hdr != "" {
				req.Header.Set("Authorization", hdr)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 401 {
				t.Errorf("GET %s with Authorization %q: %d, want 401", p, hdr, resp.StatusCode)
			}
		}
	}
	req, _ := http.NewRequest("POST", ts.url+"/api/v1/labs", strings.NewReader(smallSpec))
	req.Header.Set("Authorization", "Bearer nope")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("POST /labs with a wrong token: %d, want 401", resp.StatusCode)
	}
	// The right token.
	st := ts.submit(t, smallSpec)
	ts.follow(t, st.ID, 0, nil)
	for p, want := range map[string]int{
		"/healthz": 200,
		fmt.Sprintf("/api/v1/runs/%d/events?token=%s", st.ID, tok): 401,
		fmt.Sprintf("/api/v1/runs/%d/events?token=x", st.ID):       401,
		"/api/v1/runs?token=" + tok:                                401,
	} {
		resp, err := http.Get(ts.url + p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s without a header: %d, want %d", p, resp.StatusCode, want)
		}
	}
	// A token server answers on any Host (it is meant to be reached).
	code, _ := ts.do(t, "GET", "/api/v1/runs", "", nil, "Host", "lab.example:8088")
	if code != 200 {
		t.Errorf("token server, other Host: %d, want 200", code)
	}
}

// TestCheckAddr: off loopback a token is required, and the refusal says
// why.
func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8088", "", true},
		{"[::1]:8088", "", true},
		{"localhost:8088", "", true},
		{"0.0.0.0:8088", "", false},
		{":8088", "", false},
		{"10.1.2.3:8088", "", false},
		{"[::]:8088", "", false},
		{"lab.example:8088", "", false},
		{"0.0.0.0:8088", "t", true},
		{"0.0.0.0:8088", "  \t", false},
		{"nonsense", "", false},
	} {
		err := CheckAddr(tc.addr, tc.token)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%q, %q) = %v, want ok %v", tc.addr, tc.token, err, tc.ok)
		}
		if err != nil && tc.addr != "nonsense" && !strings.Contains(err.Error(), "token is required") {
			t.Errorf("CheckAddr(%q): %v does not say a token is required", tc.addr, err)
		}
	}
}

// TestBlankTokenEnv: a PERFLAB_TOKEN of blanks is no token, so a server
// off loopback refuses to start rather than accept a token any client
// could send.
func TestBlankTokenEnv(t *testing.T) {
	for _, v := range []string{"", " ", "\t\n"} {
		t.Setenv("PERFLAB_TOKEN", v)
		tok, err := ReadToken("")
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckAddr("0.0.0.0:8088", tok); err == nil {
			t.Errorf("PERFLAB_TOKEN=%q off loopback: accepted", v)
		}
	}
	t.Setenv("PERFLAB_TOKEN", " s3cret \n")
	if tok, _ := ReadToken(""); tok != "s3cret" {
		t.Errorf("PERFLAB_TOKEN with blanks around: token %q, want s3cret", tok)
	}
}

// TestImport stores a vLLM result through the API as report import does.
func TestImport(t *testing.T) {
	ts := newTestServer(t, stores(t)["sqlite"](t), Config{})
	// vLLM's printed result block, as `vllm bench serve` prints it.
	data, err := os.ReadFile(filepath.Join("..", "metrics", "testdata", "text_default.txt"))
	if err != nil {
		t.Fatal(err)
	}
	code, b := ts.do(t, "POST", "/api/v1/imports?run=imp&filename=r.txt", "text/plain", bytes.NewReader(data))
	if code != 201 {
		t.Fatalf("import: %d %s", code, b)
	}
	var im imported
	json.Unmarshal(b, &im)
	var trials struct{ Trials []trialInfo }
	ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d/trials", im.ID), &trials)
	if im.Name != "imp" || im.Trials == 0 || len(trials.Trials) != im.Trials || trials.Trials[0].TotalThroughput <= 0 {
		t.Errorf("imported %+v, trials %+v", im, trials.Trials)
	}
	if code, b := ts.do(t, "POST", "/api/v1/imports", "application/json", strings.NewReader(`{"x": 1}`)); code != 400 {
		t.Errorf("import of nonsense: %d %s, want 400", code, b)
	}
	// A chart name the file system refuses is no chart: 404, and the
	// answer names no path of the server's.
	if code, b := ts.do(t, "GET", fmt.Sprintf("/api/v1/runs/%d/report.md", im.ID), "", nil); code != 200 {
		t.Fatalf("report.md of the import: %d %s", code, b)
	}
	for _, name := range []string{"a%00.svg", "a%00b.png", "%2e%2e.svg"} {
		code, b := ts.do(t, "GET", fmt.Sprintf("/api/v1/runs/%d/charts/%s", im.ID, name), "", nil)
		if code != 404 || strings.Contains(string(b), os.TempDir()) {
			t.Errorf("GET charts/%s: %d %s, want 404 naming no server path", name, code, b)
		}
	}
}

// TestStaleReportDirs: a server removes the report caches that servers
// killed before they could clean up left behind, and keeps those of
// servers still running.
func TestStaleReportDirs(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	stale := filepath.Join(tmp, fmt.Sprintf("%s%d-123", reportDirPrefix, dead.Process.Pid))
	live := filepath.Join(tmp, fmt.Sprintf("%s%d-456", reportDirPrefix, os.Getppid()))
	for _, d := range []string{stale, live} {
		if err := os.MkdirAll(filepath.Join(d, "1"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	srv := newTestServer(t, stores(t)["sqlite"](t), Config{})
	if _, err := os.Stat(stale); err == nil {
		t.Error("the report cache of a dead server is still there")
	}
	if _, err := os.Stat(live); err != nil {
		t.Error("the report cache of a running server was removed")
	}
	if !strings.HasPrefix(srv.reports.dir, filepath.Join(tmp, fmt.Sprintf("%s%d-", reportDirPrefix, os.Getpid()))) {
		t.Errorf("report cache %s: want the pid in its name", srv.reports.dir)
	}
}

// FuzzPostLab: whatever body POST /labs gets, the server answers with a
// client error or starts a lab; it never panics or answers 5xx.
func FuzzPostLab(f *testing.F) {
	for _, seed := range []string{smallSpec, "", "name: [", "{}", `{"name": "x"}`, "a: &a [*a, *a]\n", strings.Repeat("[", 1000),
		strings.Replace(smallSpec, "model: Qwen/Qwen3-14B\n", "model: /etc\n", 1)} {
		f.Add(seed)
	}
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(f.TempDir(), "perflab.db"))
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	srv, err := New(Config{Store: st, DataRoot: f.TempDir(), Options: app.Options{Analytic: true}})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close(context.Background())
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/api/v1/labs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/yaml")
		srv.ServeHTTP(rec, req)
		if rec.Code >= 500 || (rec.Code != 202 && rec.Code != 409 && rec.Code/100 != 4) {
			t.Fatalf("%d %s for %q", rec.Code, rec.Body, body)
		}
		if rec.Code/100 == 4 {
			var e apiError
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error == "" {
				t.Fatalf("%d without an error message: %s", rec.Code, rec.Body)
			}
		}
	})
}

// TestReportCacheBounded: the server keeps the reports of at most its
// limit of runs on disk, drops the one asked for least recently, and
// writes a dropped one again when it is asked for.
func TestReportCacheBounded(t *testing.T) {
	ts := newTestServer(t, stores(t)["sqlite"](t), Config{})
	ts.reports.max = 2
	data, err := os.ReadFile(filepath.Join("..", "metrics", "testdata", "text_default.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range 3 {
		code, b := ts.do(t, "POST", fmt.Sprintf("/api/v1/imports?run=imp%d&filename=r.txt", i), "text/plain", bytes.NewReader(data))
		if code != 201 {
			t.Fatalf("import %d: %d %s", i, code, b)
		}
		var im imported
		json.Unmarshal(b, &im)
		ids = append(ids, im.ID)
	}
	get := func(id int64) {
		t.Helper()
		if code, b := ts.do(t, "GET", fmt.Sprintf("/api/v1/runs/%d/report.md", id), "", nil); code != 200 || !strings.Contains(string(b), "# ") {
			t.Fatalf("report.md of run %d: %d %.200s", id, code, b)
		}
	}
	cached := func(want ...int64) {
		t.Helper()
		ents, _ := os.ReadDir(ts.reports.dir)
		var got []string
		for _, e := range ents {
			got = append(got, e.Name())
		}
		var w []string
		for _, id := range want {
			w = append(w, fmt.Sprint(id))
		}
		slices.Sort(got)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("runs with a report on disk: %v, want %v", got, w)
		}
	}
	get(ids[0])
	get(ids[1])
	get(ids[0]) // now ids[1] is the least recently asked for
	cached(ids[0], ids[1])
	get(ids[2])
	cached(ids[0], ids[2])
	get(ids[1]) // written again
	cached(ids[1], ids[2])
}
