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
}

// ResetFor returns how a server of cfg's engine resets its prefix cache.
//   - vLLM: POST /reset_prefix_cache, served when VLLM_SERVER_DEV_MODE=1.
//   - SGLang: POST /flush_cache (it refuses while requests are running;
//     between two measurements none are).
//   - TensorRT-LLM's trtllm-serve has no such endpoint.
func ResetFor(cfg Config) CacheReset {
	switch cfg.Engine {
	case VLLM:
		return CacheReset{Method: http.MethodPost, Path: "/reset_prefix_cache", Env: map[string]string{"VLLM_SERVER_DEV_MODE": "1"}}
	case SGLang:
		return CacheReset{Method: http.MethodPost, Path: "/flush_cache"}
	}
	return CacheReset{}
}

// Reusable says whether a server of cfg may serve a second measurement:
// its engine can reset the prefix cache, or the config turns prefix
// caching off (nothing to reset).
func Reusable(cfg Config) bool {
	if ResetFor(cfg).Path != "" {
		return true
	}
	return cfg.PrefixCaching != nil && !*cfg.PrefixCaching
}

// Do resets the prefix cache of the server at baseURL; with no endpoint
// it does nothing.
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
