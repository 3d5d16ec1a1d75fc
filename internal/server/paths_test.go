package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/app"
)

// TestDataRootConfinement: every host path a spec or a benchmark body
// names resolves under the data root, or is refused with a 400 that names
// it as written and tells nothing of the host outside the root: not its
// home directory, not whether a file outside exists.
func TestDataRootConfinement(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil || home == "/" {
		t.Skip("no home directory")
	}
	t.Setenv("HF_HUB_OFFLINE", "1")
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	root := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "exists.json"), []byte("[]"), 0o644)
	os.Symlink(outside, filepath.Join(root, "link"))
	// The server's working directory holds a "private" tree that is not
	// under the data root.
	wd := t.TempDir()
	t.Chdir(wd)
	os.MkdirAll(filepath.Join(wd, "private", "tok"), 0o755)
	os.WriteFile(filepath.Join(wd, "private", "tok", "tokenizer.json"), []byte("{}"), 0o644)
	ts := newTestServer(t, stores(t)["sqlite"](t), Config{DataRoot: root, Options: app.Options{Analytic: true}})

	post := func(path, ctype, body string) (int, apiError) {
		t.Helper()
		code, b := ts.do(t, "POST", path, ctype, strings.NewReader(body))
		var e apiError
		json.Unmarshal(b, &e)
		return code, e
	}
	withTok := func(tok string) string {
		return strings.Replace(smallSpec, "model: Qwen/Qwen3-14B\n", "model: Qwen/Qwen3-14B\ntokenizer: "+tok+"\n", 1)
	}
	bench := func(field, v string) string {
		b, _ := json.Marshal(map[string]string{"base_url": "http://127.0.0.1:1", "model": "m", "profile": "short", field: v})
		return string(b)
	}
	for _, tc := range []struct{ name, path, ctype, body, field string }{
		{"lab tokenizer ./private/tok", "/api/v1/labs", "application/yaml", withTok("./private/tok"), "tokenizer"},
		{"lab tokenizer ~/x", "/api/v1/labs", "application/yaml", withTok("~/x"), "tokenizer"},
		{"lab tokenizer ~", "/api/v1/labs", "application/yaml", withTok("'~'"), "tokenizer"},
		{"lab dataset ~/d.json", "/api/v1/labs", "application/yaml", strings.Replace(smallSpec, "dataset: random,", "dataset: sharegpt, path: ~/d.json,", 1), "tuning.path"},
		{"lab tokenizer through a link, missing", "/api/v1/labs", "application/yaml", withTok("link/missing"), "tokenizer"},
		{"lab tokenizer not a hub id", "/api/v1/labs", "application/yaml", withTok("private/a/b"), "tokenizer"},
		{"bench tokenizer ./private/tok", "/api/v1/benchmarks", "application/json", bench("tokenizer", "./private/tok"), "tokenizer"},
		{"bench tokenizer ~/x", "/api/v1/benchmarks", "application/json", bench("tokenizer", "~/x"), "tokenizer"},
		{"bench dataset outside", "/api/v1/benchmarks", "application/json", bench("dataset_path", filepath.Join(outside, "exists.json")), "dataset_path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, e := post(tc.path, tc.ctype, tc.body)
			if code != 400 || e.Field != tc.field {
				t.Fatalf("%d %+v, want 400 on %s", code, e, tc.field)
			}
			if strings.Contains(e.Error+e.Path, home) {
				t.Errorf("the error reveals the home directory %s: %+v", home, e)
			}
		})
	}
	// Outside the root, a file that exists and one that does not are
	// refused alike: the answer is no oracle of the host.
	norm := func(e apiError, v string) string { return strings.ReplaceAll(e.Error, v, "PATH") }
	for _, pair := range [][2]string{
		{filepath.Join(outside, "exists.json"), filepath.Join(outside, "missing.json")},
		{"link/exists.json", "link/missing.json"},
	} {
		_, a := post("/api/v1/labs", "application/yaml", withTok(pair[0]))
		_, b := post("/api/v1/labs", "application/yaml", withTok(pair[1]))
		if norm(a, pair[0]) != norm(b, pair[1]) || a.Error == "" {
			t.Errorf("outside the root, existing and missing differ:\n%s\n%s", a.Error, b.Error)
		}
	}
	// A name that is not a file under the root is a Hub id, whatever the
	// working directory holds: private/tok (there) and private/nope (not)
	// are answered alike.
	ends := map[string]string{}
	for _, tok := range []string{"private/tok", "private/nope"} {
		code, b := ts.do(t, "POST", "/api/v1/benchmarks", "application/json", strings.NewReader(bench("tokenizer", tok)))
		if code != 202 {
			t.Fatalf("bench tokenizer %s: %d %s, want 202 (a Hub id)", tok, code, b)
		}
		var st started
		json.Unmarshal(b, &st)
		evs := ts.follow(t, st.ID, 0, nil)
		end := evs[len(evs)-1].data
		// Offline, with an empty cache: not found, and the error names
		// neither the working directory's file nor the cache's directory.
		if end.Error == "" || strings.Contains(end.Error, cache) || strings.Contains(end.Error, wd) {
			t.Errorf("bench tokenizer %s ended %q: %s", tok, end.Status, end.Error)
		}
		ends[tok] = strings.ReplaceAll(strings.ReplaceAll(end.Error, tok, "NAME"), strings.ReplaceAll(tok, "/", "--"), "NAME")
	}
	if ends["private/tok"] != ends["private/nope"] {
		t.Errorf("the benchmarks' errors tell the working directory's private/tok from a missing name:\n%s\n%s", ends["private/tok"], ends["private/nope"])
	}
	// Under the root, relative names resolve there as before.
	os.MkdirAll(filepath.Join(root, "toks", "q"), 0o755)
	if code, e := post("/api/v1/labs", "application/yaml", withTok("toks/q")); code != 202 {
		t.Errorf("a tokenizer under the root: %d %+v, want 202", code, e)
	}
}
