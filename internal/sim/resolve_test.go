package sim

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/hfhub"
)

const tinyConfig = `{"hidden_size":2048,"num_hidden_layers":16,"num_attention_heads":16,"num_key_value_heads":4,"head_dim":128,"intermediate_size":8192,"vocab_size":32000,"max_position_embeddings":8192}`

// TestResolveModel (issue 11, defect 10: `vllm serve
// Qwen/Qwen3-235B-A22B-Instruct-2507` was refused as an unknown model): a
// model's architecture comes from a local directory, the HF cache, the
// catalog by name (the seeds' release names included), or the Hub (a
// stand-in server here: no network in tests), in that order, and the
// source is named; offline, an unknown model is an error listing what was
// tried.
func TestResolveModel(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	var hits int
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if r.URL.Path != "/acme/Remote-2B/resolve/main/config.json" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("X-Repo-Commit", strings.Repeat("a", 40))
		w.Write([]byte(tinyConfig))
	}))
	defer hub.Close()
	opt := hfhub.Options{CacheDir: cache, Endpoint: hub.URL, Token: "tok"}

	for _, name := range []string{"Qwen/Qwen3-235B-A22B-Instruct-2507", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
		"Qwen/Qwen3-235B-A22B-Thinking-2507", "Qwen/Qwen3-14B"} {
		src, err := ResolveModel(ctx, name, opt)
		if err != nil || src.ConfigPath != "" || !strings.HasPrefix(src.From, "catalog (") {
			t.Errorf("%s: %+v, %v; want the catalog", name, src, err)
		}
	}
	if a, err := LookupModel("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"); err != nil || !a.FP8Weights || a.NumLayers != 94 {
		t.Errorf("the FP8 release: %+v %v", a, err)
	}

	local := filepath.Join(t.TempDir(), "my-model")
	os.MkdirAll(local, 0o755)
	os.WriteFile(filepath.Join(local, "config.json"), []byte(tinyConfig), 0o644)
	if src, err := ResolveModel(ctx, local, opt); err != nil || src.From != "local directory" {
		t.Errorf("local directory: %+v %v", src, err)
	}

	snap := filepath.Join(hfhub.RepoDir(cache, "acme/Cached-1B"), "snapshots", "c0ffee")
	os.MkdirAll(snap, 0o755)
	os.WriteFile(filepath.Join(snap, "config.json"), []byte(tinyConfig), 0o644)
	os.MkdirAll(filepath.Join(hfhub.RepoDir(cache, "acme/Cached-1B"), "refs"), 0o755)
	os.WriteFile(filepath.Join(hfhub.RepoDir(cache, "acme/Cached-1B"), "refs", "main"), []byte("c0ffee"), 0o644)
	src, err := ResolveModel(ctx, "acme/Cached-1B", opt)
	if err != nil || src.From != "HF cache" {
		t.Fatalf("cached: %+v %v", src, err)
	}
	if _, err := New(Params{Engine: EngineVLLM, Model: "acme/Cached-1B", ModelConfig: src.ConfigPath, GPU: "H100"}, nil); err != nil {
		t.Errorf("simulating the cached model: %v", err)
	}

	src, err = ResolveModel(ctx, "acme/Remote-2B", opt)
	if err != nil || src.From != "Hub" || hits == 0 {
		t.Fatalf("from the Hub: %+v %v (%d requests)", src, err, hits)
	}
	if again, err := ResolveModel(ctx, "acme/Remote-2B", opt); err != nil || again.From != "HF cache" {
		t.Errorf("the download was not kept in the cache: %+v %v", again, err)
	}

	off := opt
	off.Offline = true
	_, err = ResolveModel(ctx, "acme/Unknown-3B", off)
	if err == nil || !strings.Contains(err.Error(), "HF_HUB_OFFLINE") || !strings.Contains(err.Error(), "cache:") {
		t.Errorf("offline, unknown: %v", err)
	}
	noTok := opt
	noTok.Token = "bad"
	if _, err := ResolveModel(ctx, "acme/Remote-9B", noTok); err == nil || errors.Is(err, hfhub.ErrOffline) {
		t.Errorf("a refused download: %v", err)
	}
}
