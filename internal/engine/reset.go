package engine

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// CacheReset is how a running server of a config forgets what earlier
// requests left in its prefix cache, so that a second measurement on the
// same server repeats the first instead of starting warm. A server is
// reused between measurements only when its engine can do this, or when
// the config caches no prefixes at all.
type CacheReset struct {
	// Method and Path are the engine's endpoint ("" when it has none).
	Method, Path string
	// Env is what the server must be started with for the endpoint to
	// exist (vLLM serves it only in its development mode).
	Env map[string]string
	// Salt says the engine has no endpoint but keeps measurements apart by
	// a cache_salt on every request: blocks cached under one salt are
	// never reused under another, so a measurement salted its own way
	// starts as cold as on a fresh server.
	Salt bool
}

// trtllmSaltSince is the first trtllm-serve release that reads a
// request's cache_salt into the KV cache's block keys (TensorRT-LLM PR
// #7106, merged to main in August 2025; 1.2.0rc0 is the first release cut
// from main after it).
const trtllmSaltSince = "1.2.0rc0"

// ResetFor returns how a server of cfg's engine resets its prefix cache.
//   - vLLM: POST /reset_prefix_cache, served when VLLM_SERVER_DEV_MODE=1.
//   - SGLang: POST /flush_cache (it refuses while requests are running;
//     between two measurements none are).
//   - TensorRT-LLM's trtllm-serve has no such endpoint; from 1.2.0rc0 it
//     salts the KV cache's block keys with a request's cache_salt.
func ResetFor(cfg Config) CacheReset {
	switch cfg.Engine {
	case TRTLLM:
		if v, err := parseVersion(cfg.EffectiveVersion()); err == nil && v.atLeast(trtllmSaltSince) {
			return CacheReset{Salt: true}
		}
	case VLLM:
		return CacheReset{Method: http.MethodPost, Path: "/reset_prefix_cache", Env: map[string]string{"VLLM_SERVER_DEV_MODE": "1"}}
	case SGLang:
		return CacheReset{Method: http.MethodPost, Path: "/flush_cache"}
	}
	return CacheReset{}
}

// Reusable says whether a server of cfg may serve a second measurement:
// its engine can reset the prefix cache or salt it per measurement, or the
// config turns prefix caching off (nothing to reset).
func Reusable(cfg Config) bool {
	if c := ResetFor(cfg); c.Path != "" || c.Salt {
		return true
	}
	return cfg.PrefixCaching != nil && !*cfg.PrefixCaching
}

// Do resets the prefix cache of the server at baseURL; with no endpoint
// it does nothing (a salted engine is kept apart by the requests instead).
func (c CacheReset) Do(ctx context.Context, baseURL string) error {
	if c.Path == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, c.Method, strings.TrimRight(baseURL, "/")+c.Path, nil)
	if err != nil {
		return fmt.Errorf("engine: reset prefix cache: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("engine: reset prefix cache: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("engine: reset prefix cache: %s %s: %s: %s", c.Method, c.Path, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
