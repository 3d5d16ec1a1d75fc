package tokenizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// tinyTokenizerJSON is a byte-level BPE over the 256 byte characters with a
// few merges, in the Qwen layout: enough to tell files apart in tests.
func tinyTokenizerJSON(t testing.TB, merges ...[2]string) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToChar[b])] = b
	}
	var ms [][2]string
	for _, m := range merges {
		vocab[m[0]+m[1]] = len(vocab)
		ms = append(ms, m)
	}
	doc := map[string]any{
		"version": "1.0",
		"added_tokens": []map[string]any{
			{"id": len(vocab), "content": "<|endoftext|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
		},
		"normalizer": map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": patQwen2}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel"},
		"model":   map[string]any{"type": "BPE", "vocab": vocab, "merges": ms},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// clearHFEnv keeps the developer's own Hugging Face settings out of a test.
func clearHFEnv(t *testing.T) {
	for _, k := range []string{"HF_HUB_CACHE", "HF_HOME", "HF_ENDPOINT", "HF_TOKEN", "HF_HUB_OFFLINE", "XDG_CACHE_HOME"} {
		t.Setenv(k, "")
	}
}

// hub is a fake Hugging Face Hub serving repo -> file -> content.
type hub struct {
	mu       sync.Mutex
	files    map[string]map[string][]byte
	token    string // required bearer token, "" for none
	requests []string
}

func (h *hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requests = append(h.requests, r.URL.Path)
	h.mu.Unlock()
	if h.token != "" && r.Header.Get("Authorization") != "Bearer "+h.token {
		http.Error(w, "gated", http.StatusUnauthorized)
		return
	}
	// /{org}/{name}/resolve/{rev}/{file}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if len(parts) != 5 || parts[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	data, ok := h.files[parts[0]+"/"+parts[1]][parts[4]]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("X-Repo-Commit", "0123456789abcdef0123456789abcdef01234567")
	w.Write(data)
}

func TestResolve(t *testing.T) {
	tokA := tinyTokenizerJSON(t, [2]string{"a", "b"})
	tokB := tinyTokenizerJSON(t, [2]string{"x", "y"})
	cfg := []byte(`{"eos_token": "<|endoftext|>", "chat_template": "{{ messages[0].content }}"}`)
	// abIDs is what tokA gives "ab": one merged token (id 256).
	abIDs := []int{256}

	t.Run("explicit path", func(t *testing.T) {
		clearHFEnv(t)
		dir := t.TempDir()
		writeFiles(t, dir, map[string][]byte{"tokenizer.json": tokA, "tokenizer_config.json": cfg})
		for _, p := range []string{dir, filepath.Join(dir, "tokenizer.json")} {
			tok, err := Resolve(context.Background(), "Org/Whatever", ResolveOptions{Path: p, Offline: true})
			if err != nil {
				t.Fatal(err)
			}
			if got := tok.Encode("ab"); !slices.Equal(got, abIDs) {
				t.Errorf("%s: Encode(ab) = %v, want %v", p, got, abIDs)
			}
			if got := tok.SpecialIDs(); !slices.Equal(got, []int{257}) {
				t.Errorf("%s: SpecialIDs = %v, want [257] from the config", p, got)
			}
		}
	})

	t.Run("cache via refs/main", func(t *testing.T) {
		clearHFEnv(t)
		home := t.TempDir()
		t.Setenv("HF_HOME", home)
		root := filepath.Join(home, "hub", "models--Org--Model")
		writeFiles(t, filepath.Join(root, "refs"), map[string][]byte{"main": []byte("abc123\n")})
		writeFiles(t, filepath.Join(root, "snapshots", "abc123"), map[string][]byte{"tokenizer.json": tokA})
		tok, err := Resolve(context.Background(), "Org/Model", ResolveOptions{Offline: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Encode("ab"); !slices.Equal(got, abIDs) {
			t.Errorf("Encode(ab) = %v, want %v", got, abIDs)
		}
		// HF_HUB_CACHE wins over HF_HOME.
		other := t.TempDir()
		t.Setenv("HF_HUB_CACHE", other)
		if _, err := Resolve(context.Background(), "Org/Model", ResolveOptions{Offline: true}); err == nil || !strings.Contains(err.Error(), other) {
			t.Errorf("with HF_HUB_CACHE set: err = %v, want a miss naming %s", err, other)
		}
	})

	t.Run("hub download into cache", func(t *testing.T) {
		clearHFEnv(t)
		h := &hub{files: map[string]map[string][]byte{"Org/Model": {"tokenizer.json": tokA, "tokenizer_config.json": cfg}}, token: "secret"}
		srv := httptest.NewServer(h)
		defer srv.Close()
		cache := t.TempDir()
		t.Setenv("HF_HUB_CACHE", cache)
		t.Setenv("HF_ENDPOINT", srv.URL)
		t.Setenv("HF_TOKEN", "secret")
		tok, err := Resolve(context.Background(), "Org/Model", ResolveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Encode("ab"); !slices.Equal(got, abIDs) {
			t.Errorf("Encode(ab) = %v, want %v", got, abIDs)
		}
		if _, err := tok.ApplyChatTemplate([]Message{{Role: "user", Content: "hi"}}, false); err != nil {
			t.Errorf("chat template from the downloaded config: %v", err)
		}
		// Saved in the cache layout: a second, offline resolve finds it.
		snap := filepath.Join(cache, "models--Org--Model", "snapshots", "0123456789abcdef0123456789abcdef01234567", "tokenizer.json")
		if _, err := os.Stat(snap); err != nil {
			t.Errorf("not saved in the cache layout: %v", err)
		}
		t.Setenv("HF_HUB_OFFLINE", "1")
		n := len(h.requests)
		if _, err := Resolve(context.Background(), "Org/Model", ResolveOptions{}); err != nil {
			t.Errorf("offline after download: %v", err)
		}
		if len(h.requests) != n {
			t.Errorf("offline resolve made %d requests", len(h.requests)-n)
		}
	})

	t.Run("gated without token", func(t *testing.T) {
		clearHFEnv(t)
		srv := httptest.NewServer(&hub{files: map[string]map[string][]byte{"Org/Model": {"tokenizer.json": tokA}}, token: "secret"})
		defer srv.Close()
		_, err := Resolve(context.Background(), "Org/Model", ResolveOptions{CacheDir: t.TempDir(), Endpoint: srv.URL})
		if err == nil || !strings.Contains(err.Error(), "HF_TOKEN") || !strings.Contains(err.Error(), "401") {
			t.Errorf("err = %v, want a 401 naming HF_TOKEN", err)
		}
	})

	t.Run("fp8 falls back to the base model", func(t *testing.T) {
		clearHFEnv(t)
		h := &hub{files: map[string]map[string][]byte{"Qwen/Qwen3-14B": {"tokenizer.json": tokB}}}
		srv := httptest.NewServer(h)
		defer srv.Close()
		var logs []string
		tok, err := Resolve(context.Background(), "Qwen/Qwen3-14B-FP8", ResolveOptions{
			CacheDir: t.TempDir(), Endpoint: srv.URL,
			Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Encode("xy"); !slices.Equal(got, []int{256}) {
			t.Errorf("Encode(xy) = %v, want the base model's merge [256]", got)
		}
		if !slices.ContainsFunc(logs, func(s string) bool { return strings.Contains(s, "base model Qwen/Qwen3-14B") }) {
			t.Errorf("fallback not reported; logs: %q", logs)
		}
	})

	t.Run("error lists every place tried", func(t *testing.T) {
		clearHFEnv(t)
		srv := httptest.NewServer(&hub{files: map[string]map[string][]byte{}})
		defer srv.Close()
		cache := t.TempDir()
		_, err := Resolve(context.Background(), "Qwen/Qwen3-14B-FP8", ResolveOptions{CacheDir: cache, Endpoint: srv.URL})
		if err == nil {
			t.Fatal("no error")
		}
		for _, want := range []string{"models--Qwen--Qwen3-14B-FP8", "models--Qwen--Qwen3-14B", srv.URL + "/Qwen/Qwen3-14B-FP8/resolve/main/tokenizer.json", srv.URL + "/Qwen/Qwen3-14B/resolve/main/tokenizer.json", "404"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error does not mention %q:\n%v", want, err)
			}
		}
		_, err = Resolve(context.Background(), "Org/Model", ResolveOptions{CacheDir: cache, Offline: true})
		if err == nil || !strings.Contains(err.Error(), "offline") {
			t.Errorf("offline miss: err = %v, want it to say downloads were skipped", err)
		}
	})

	// Issue 11, defect 9: the error said "no tokenizer" without what was
	// tried; a typed NotFoundError lists the local look, the cache and the
	// Hub, says "tokenizer:" once, and a name that can only be a path is
	// not looked up on the Hub.
	t.Run("not found says what was tried", func(t *testing.T) {
		clearHFEnv(t)
		h := &hub{files: map[string]map[string][]byte{}}
		srv := httptest.NewServer(h)
		defer srv.Close()
		cache := t.TempDir()
		missing := filepath.Join(t.TempDir(), "tok")
		for _, tc := range []struct {
			name, model, path string
			want              []string
		}{
			{"hub id offline", "Qwen/Qwen3-14B", "", []string{"local: no directory", "cache: " + filepath.Join(cache, "models--Qwen--Qwen3-14B"), "skipped (offline"}},
			{"path-like name", missing, "", []string{"path: stat " + missing + ": no such file"}},
			{"explicit path", "Qwen/Qwen3-14B", missing, []string{"path: stat " + missing + ": no such file"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := Resolve(context.Background(), tc.model, ResolveOptions{Path: tc.path, CacheDir: cache, Endpoint: srv.URL, Offline: tc.path == "" && tc.model == "Qwen/Qwen3-14B"})
				var nf *NotFoundError
				if !errors.As(err, &nf) {
					t.Fatalf("err = %v, want a *NotFoundError", err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not mention %q:\n%v", w, err)
					}
				}
				if n := strings.Count(err.Error(), "tokenizer:"); n != 1 {
					t.Errorf("\"tokenizer:\" said %d times:\n%v", n, err)
				}
			})
		}
		if len(h.requests) != 0 {
			t.Errorf("the Hub was asked for %v", h.requests)
		}
	})
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, content, want string
	}{
		{"syntax.json", "{\n  \"model\": {,\n}", "line 2"},
		{"wordpiece.json", `{"model": {"type": "WordPiece", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "BertPreTokenizer"}}`, `type "WordPiece" is not supported`},
		{"unigram.json", `{"model": {"type": "Unigram", "vocab": [["a", 0]]}}`, `type "Unigram" is not supported`},
		{"metaspace.json", strings.Replace(string(tinyTokenizerJSON(t)), `"type":"Sequence"`, `"type":"Metaspace"`, 1), `"Metaspace" is not supported`},
		{"regex.json", strings.Replace(string(tinyTokenizerJSON(t)), `\\p{N}|`, `\\p{N}{1,2}|`, 1), "Split regex"},
		{"merge.json", strings.Replace(string(tinyTokenizerJSON(t, [2]string{"a", "b"})), `"ab":256`, `"zz":256`, 1), "not in vocab"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := write(tc.name, tc.content)
			_, err := LoadFile(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("err = %v, want it to name %s and say %q", err, p, tc.want)
			}
		})
	}
	if _, err := Load(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing dir: err = %v", err)
	}
}
