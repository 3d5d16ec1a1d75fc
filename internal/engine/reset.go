package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
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
	// Check, when set, is how a reset is proven: the endpoint's answer is
	// not enough (vLLM answers 200 even when blocks were still held and
	// nothing was reset).
	Check *CacheCheck
}

// CacheCheck names an engine's Prometheus counters of prefix-cache
// lookups and hits, in tokens: a prompt cached before a reset and sent
// again after it must be looked up (Queries grows) and not found (Hits
// stays), or the reset did not happen.
type CacheCheck struct {
	MetricsPath, Queries, Hits string
}

// ResetFor returns how a server of cfg's engine resets its prefix cache:
// its Kind's Reset, salted from the Kind's SaltSince on. An engine that is
// not registered has neither an endpoint nor salts.
func ResetFor(cfg Config) CacheReset {
	k, ok := KindOf(cfg.Engine)
	if !ok {
		return CacheReset{}
	}
	c := k.Reset
	// The Kind's map is shared by every caller: each gets its own.
	c.Env = maps.Clone(c.Env)
	if k.SaltSince != "" {
		if v, err := parseVersion(cfg.EffectiveVersion()); err == nil && v.atLeast(k.SaltSince) {
			c.Salt = true
		}
	}
	return c
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
		return fmt.Errorf("engine: reset prefix cache: %w", &ResetRefused{Method: c.Method, Path: c.Path, Code: resp.StatusCode,
			Status: resp.Status, Body: strings.TrimSpace(string(body))})
	}
	return nil
}

// ResetRefused is a reset endpoint's non-2xx answer: 404 when the server
// does not serve the endpoint (vLLM outside its development mode), 400
// when it could not reset now (SGLang while requests run).
type ResetRefused struct {
	Method, Path string
	Code         int
	Status, Body string
}

func (e *ResetRefused) Error() string {
	return fmt.Sprintf("%s %s: %s: %s", e.Method, e.Path, e.Status, e.Body)
}

// Busy says the server refused for now, not for good: another try once
// its requests are done may succeed.
func (e *ResetRefused) Busy() bool {
	return e.Code == http.StatusBadRequest || e.Code == http.StatusConflict || e.Code == http.StatusServiceUnavailable
}

// ErrResetUnproven is wrapped when a reset answered but could not be shown
// to have emptied the prefix cache: the counters are missing or did not
// move, or the probe found its prompt still cached. A server whose reset
// is unproven is restarted rather than measured warm.
var ErrResetUnproven = errors.New("prefix-cache reset not proven")

// probePrompt is the probe's prompt: long enough to fill several KV blocks
// (vLLM's are 16 tokens), and unlike any workload's prompts, so that the
// blocks it leaves match none of a measurement's.
var probePrompt = strings.Repeat("perflab prefix-cache probe, not a workload prompt. ", 8)

// DoVerified resets the prefix cache of the server at baseURL, serving
// model, and, where the engine's answer proves nothing (Check), proves it:
// the probe prompt is sent (so it is cached), the cache reset, the
// counters read, the prompt sent again and the counters read again. It
// returns whether the reset was proven by the counters (false where the
// endpoint's own answer stands); an unproven reset is an error wrapping
// ErrResetUnproven.
func (c CacheReset) DoVerified(ctx context.Context, baseURL, model string) (bool, error) {
	if c.Check == nil {
		return false, c.Do(ctx, baseURL)
	}
	base := strings.TrimRight(baseURL, "/")
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := probeCompletion(ctx, base, model); err != nil {
		return false, fmt.Errorf("engine: reset prefix cache: probe before: %w", err)
	}
	if err := c.Do(ctx, base); err != nil {
		return false, err
	}
	q0, h0, err := c.Check.read(ctx, base)
	if err != nil {
		return false, err
	}
	if err := probeCompletion(ctx, base, model); err != nil {
		return false, fmt.Errorf("engine: reset prefix cache: probe after: %w", err)
	}
	q1, h1, err := c.Check.read(ctx, base)
	if err != nil {
		return false, err
	}
	switch {
	case q1 <= q0:
		return false, fmt.Errorf("engine: reset prefix cache: %s did not move (%g) over the probe: %w", c.Check.Queries, q1, ErrResetUnproven)
	case h1 > h0:
		return false, fmt.Errorf("engine: reset prefix cache: %s %s succeeded, but the probe still hit %g cached tokens: %w",
			c.Method, c.Path, h1-h0, ErrResetUnproven)
	}
	return true, nil
}

// read returns the lookups and hits counters, each summed over its series
// (data-parallel engines label one per engine).
func (cc *CacheCheck) read(ctx context.Context, base string) (queries, hits float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+cc.MetricsPath, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("engine: reset prefix cache: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("engine: reset prefix cache: read %s: %w", cc.MetricsPath, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("engine: reset prefix cache: GET %s: %s: %w", cc.MetricsPath, resp.Status, ErrResetUnproven)
	}
	var seenQ, seenH bool
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
		}
		if name != cc.Queries && name != cc.Hits {
			continue
		}
		f := strings.Fields(line[strings.LastIndexByte(line, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		if name == cc.Queries {
			queries, seenQ = queries+v, true
		} else {
			hits, seenH = hits+v, true
		}
	}
	if !seenQ || !seenH {
		return 0, 0, fmt.Errorf("engine: reset prefix cache: %s lacks %s and %s: %w", cc.MetricsPath, cc.Queries, cc.Hits, ErrResetUnproven)
	}
	return queries, hits, nil
}

// probeCompletion sends the probe prompt for one token.
func probeCompletion(ctx context.Context, base, model string) error {
	status, msg, err := postJSON(ctx, base+"/v1/completions",
		map[string]any{"model": model, "prompt": probePrompt, "max_tokens": 1, "temperature": 0}, 512)
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return fmt.Errorf("POST /v1/completions: %d %s: %s", status, http.StatusText(status), strings.TrimSpace(string(msg)))
	}
	return nil
}

// postJSON posts body as JSON to url and returns the answer's status and up
// to limit bytes of its body (the rest is drained so the connection can be
// reused). err is set only when no answer came.
func postJSON(ctx context.Context, url string, body any, limit int64) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, fmt.Errorf("engine: encode %s: %w", url, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, msg, nil
}
