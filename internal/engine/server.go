package engine

// A started server as the lab measures on it: what it takes to serve a
// second measurement as the first (reset or salt its prefix cache), and
// what it says about itself (its Prometheus metrics). Everything the lab
// needs from a running engine over HTTP is asked here, so the lab never
// speaks the engine's protocol itself; the benchmark traffic is bench's.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Server is one started engine server of one config, as a lab keeps it
// between measurements.
type Server struct {
	// Handle is the runtime's handle on it.
	Handle Handle
	// Config is the config it serves (its only one).
	Config Config
	// salted says it took a cache_salt when asked at start (see Open):
	// only then are its measurements salted and it reused.
	salted bool

	// What a Fleet keeps of it: its config's hash, the GPUs it holds,
	// its process group (0 when it has none), the measurements it served
	// and since when it is idle.
	key    string
	gpus   []int
	pid    int
	used   int
	idleAt time.Time
}

// GPUs are the device indices the server holds (nil without an
// allocator).
func (s *Server) GPUs() []int { return s.gpus }

// Used is how many measurements the server has served.
func (s *Server) Used() int { return s.used }

// NewServer wraps a started, ready server of cfg.
func NewServer(h Handle, cfg Config) *Server { return &Server{Handle: h, Config: cfg} }

// How a measurement's server came to it without an earlier measurement's
// prefix cache (store.Trial.Cache).
const (
	// ReuseFresh: a server started for the measurement.
	ReuseFresh = "fresh"
	// ReuseResetVerified: a reused server, reset, and the engine's
	// counters showed the probe prompt missed after the reset.
	ReuseResetVerified = "reset_verified"
	// ReuseReset: a reused server, reset by an endpoint that refuses
	// when it cannot reset (SGLang's /flush_cache).
	ReuseReset = "reset"
	// ReuseSalted: a reused server; the measurement's requests carry
	// their own cache_salt.
	ReuseSalted = "salted"
	// ReuseOff: a reused server of a config that caches no prefixes.
	ReuseOff = "off"
)

// ErrResetFailed is wrapped when a reused server's prefix cache could not
// be reset (or the reset not proven: ErrResetUnproven): it must not serve
// the measurement.
var ErrResetFailed = errors.New("engine: reset the prefix cache of a reused server")

// ReuseEnv adds what a server of cfg must be started with to be reused
// (its engine's cache-reset endpoint) to cmd's environment.
func ReuseEnv(cfg Config, cmd Command) Command {
	env := ResetFor(cfg).Env
	if len(env) == 0 {
		return cmd
	}
	merged := make(map[string]string, len(cmd.Env)+len(env))
	for k, v := range cmd.Env {
		merged[k] = v
	}
	for k, v := range env {
		merged[k] = v
	}
	cmd.Env = merged
	return cmd
}

// Open readies a server just started for its first measurement and says
// how it came to it (ReuseFresh). On an engine that salts its prefix cache
// rather than resets it (CacheReset.Salt), it asks whether the server
// takes a cache_salt: one request of one token, salted apart from every
// measurement. The version gate says it should; a server that refuses the
// field (a 4xx) is measured without salts and started again for each
// measurement, rather than failing every request of every trial.
func (s *Server) Open(ctx context.Context) string {
	s.salted = ResetFor(s.Config).Salt && s.probeSalt(ctx)
	return ReuseFresh
}

func (s *Server) probeSalt(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	status, _, err := postJSON(ctx, strings.TrimRight(s.Handle.BaseURL(), "/")+"/v1/chat/completions", map[string]any{
		"model": s.Config.ServedName(), "max_tokens": 1, "cache_salt": "perflab-probe",
		"messages": []map[string]string{{"role": "user", "content": "Hi"}},
	}, 0)
	return err == nil && status/100 == 2
}

// Salted says whether the server's measurements carry a cache_salt.
func (s *Server) Salted() bool { return s.salted }

// Salt is the request field that keeps a measurement's cached prefixes
// its own on an engine that salts rather than resets (see CacheReset): one
// salt per measurement (key names it), on every request of it, so its
// requests share prefixes among themselves as on a fresh server and never
// with an earlier measurement's. Every measurement of such an engine is
// salted, the first too, so that repeats send the same requests. The salt
// is a hash (engines refuse salts with '/' or over 128 characters). Nil
// for a server that takes no salt.
func (s *Server) Salt(key string) map[string]any {
	if !s.salted {
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	return map[string]any{"cache_salt": fmt.Sprintf("perflab-%016x", h.Sum64())}
}

// cachesNothing says the config turns prefix caching off.
func (s *Server) cachesNothing() bool {
	return s.Config.PrefixCaching != nil && !*s.Config.PrefixCaching
}

// Keepable says whether the server may serve its config's next
// measurement: its engine can reset or salt its prefix cache (Reusable),
// and, where the engine salts, the server took the salt at start or its
// config caches no prefixes at all.
func (s *Server) Keepable() bool {
	if !Reusable(s.Config) || s.Handle.Failure() != nil {
		return false
	}
	return !ResetFor(s.Config).Salt || s.salted || s.cachesNothing()
}

// Reset clears a reused server's prefix cache before a measurement the
// way its engine allows, and says which way it was (a Reuse* value). A
// reset that fails or cannot be proven (ErrResetUnproven) is an error
// wrapping ErrResetFailed: the caller starts a fresh server rather than
// measure on a warm one.
func (s *Server) Reset(ctx context.Context) (string, error) {
	off := s.cachesNothing()
	c := ResetFor(s.Config)
	if off {
		c.Check = nil // nothing cached, nothing to prove
	}
	verified, err := c.DoVerified(ctx, s.Handle.BaseURL(), s.Config.ServedName())
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrResetFailed, err)
	}
	switch {
	case off:
		return ReuseOff, nil
	case verified:
		return ReuseResetVerified, nil
	case c.Path != "":
		return ReuseReset, nil
	case s.salted:
		return ReuseSalted, nil
	}
	return ReuseOff, nil
}

// Metrics reads the server's Prometheus text at its engine's metrics path
// (Protocol.MetricsPath) into name → value (see ParsePrometheus); nil when
// there is none, or when what answers is not Prometheus text
// (trtllm-serve's /metrics is JSON). A canceled ctx still gets its few
// seconds: the metrics of a measurement just ended are part of its record.
func (s *Server) Metrics(ctx context.Context) map[string]float64 {
	path := ProtocolFor(s.Config.Engine).MetricsPath()
	if path == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.Handle.BaseURL(), "/")+path, nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return nil
	}
	return ParsePrometheus(bufio.NewScanner(resp.Body))
}

// ParsePrometheus reads the text exposition format's samples. Each sample is
// kept under its full series name (labels included, as exposed), and every
// metric is also stored under its bare name, aggregated over its series:
// vLLM (data-parallel engines, engine="0","1",…) and `perflab sim serve`
// label every sample, while the report looks metrics up by bare name.
// Counters and gauges are summed over the series (requests running, waiting,
// preemptions are fleet totals); usage fractions (names ending in "_perc",
// such as vllm:kv_cache_usage_perc) are averaged instead, because a sum of
// fractions can exceed 1 and, with equal-sized engines, the mean is the
// fleet's pooled KV-cache usage. Histogram buckets and summary quantiles
// (series with an "le" or "quantile" label) get no bare name: summing over
// their bounds means nothing. An unlabelled sample, when one is exposed,
// is its own bare value and is not overwritten.
func ParsePrometheus(sc *bufio.Scanner) map[string]float64 {
	out := map[string]float64{}
	type agg struct {
		sum float64
		n   int
	}
	bare := map[string]*agg{}
	var order []string
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// name{labels} value [timestamp]; label values may hold spaces.
		end := strings.LastIndexByte(line, '}')
		var series, rest string
		if end >= 0 {
			series, rest = line[:end+1], strings.TrimSpace(line[end+1:])
		} else {
			i := strings.IndexAny(line, " \t")
			if i < 0 {
				continue
			}
			series, rest = line[:i], strings.TrimSpace(line[i:])
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out[series] = v
		name, labels, labelled := strings.Cut(series, "{")
		if !labelled || name == "" {
			continue
		}
		if keys := labelKeys(labels); keys["le"] || keys["quantile"] {
			continue
		}
		a, ok := bare[name]
		if !ok {
			a = &agg{}
			bare[name] = a
			order = append(order, name)
		}
		a.sum += v
		a.n++
	}
	for _, name := range order {
		if _, ok := out[name]; ok {
			continue // exposed unlabelled: that value stands
		}
		a := bare[name]
		if strings.HasSuffix(name, "_perc") {
			out[name] = a.sum / float64(a.n)
		} else {
			out[name] = a.sum
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// labelKeys returns the label names of a `k="v",k2="v2"}` label set; the
// values are skipped with their escapes, so a value holding `le=` is not
// mistaken for a label.
func labelKeys(s string) map[string]bool {
	keys := map[string]bool{}
	for {
		s = strings.TrimLeft(s, " ,")
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return keys
		}
		keys[strings.TrimSpace(s[:eq])] = true
		s = strings.TrimLeft(s[eq+1:], " ")
		if s == "" || s[0] != '"' {
			return keys
		}
		i := 1
		for i < len(s) && s[i] != '"' {
			if s[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(s) {
			return keys
		}
		s = s[i+1:]
	}
}
