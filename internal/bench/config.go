package bench

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/metrics"
)

// Backends accepted by Config.Backend, spelled as vLLM's --backend.
const (
	BackendOpenAI     = "openai"      // /v1/completions
	BackendOpenAIChat = "openai-chat" // /v1/chat/completions
	BackendVLLM       = "vllm"        // /v1/completions (vLLM's alias)
)

// DefaultTimeout is vLLM's aiohttp total timeout (6 hours) per request.
const DefaultTimeout = 6 * time.Hour

// deadServerAfter is how many consecutive connection failures, with no
// success in between, end a run with ErrServerDown.
const deadServerAfter = 5

// Config describes one benchmark run. Zero values take vLLM's defaults.
type Config struct {
	// BaseURL is the server root, e.g. "http://127.0.0.1:8000".
	BaseURL string
	// Endpoint is the API path; default "/v1/completions", or
	// "/v1/chat/completions" for the openai-chat backend.
	Endpoint string
	// Backend is "openai" (default), "openai-chat" or "vllm".
	Backend string
	// Model is the model id; empty asks the server's /v1/models for the
	// first one, as vLLM does.
	Model string
	// ServedModelName, when set, is the name sent in the payload instead of
	// Model.
	ServedModelName string
	// Requests are sent in order.
	Requests []dataset.Request

	// RequestRate is requests/s; 0 or +Inf sends everything at once.
	RequestRate float64
	// Burstiness is the gamma shape of inter-arrival gaps; 0 means 1.
	Burstiness float64
	// RampUpStrategy ("linear"|"exponential") with RampUpStartRPS and
	// RampUpEndRPS replaces RequestRate, as vLLM's --ramp-up-* flags do.
	RampUpStrategy string
	RampUpStartRPS float64
	RampUpEndRPS   float64
	// Schedule, when non-nil, overrides the computed send offsets (seconds
	// from the start); it must have one entry per request.
	Schedule []float64
	// MaxConcurrency caps in-flight requests; 0 means no cap.
	MaxConcurrency int
	// Seed seeds the arrival schedule (np.random.seed semantics).
	Seed int64

	// IgnoreEOS sets ignore_eos on every request (a request's own
	// IgnoreEOS also sets it for that request).
	IgnoreEOS bool
	// Sampling parameters; nil leaves them to the server, as vLLM does.
	Temperature *float64
	TopP        *float64
	TopK        *int
	MinP        *float64
	// ExtraBody is merged into every payload last (vLLM's --extra-body).
	ExtraBody map[string]any
	// Headers are added to every request (vLLM's --header).
	Headers map[string]string
	// ChatContentString sends chat content as a plain string instead of
	// vLLM's [{"type":"text","text":...}] parts list.
	ChatContentString bool

	// NumWarmups requests (copies of the first request) run before the
	// measured run and are not recorded.
	NumWarmups int
	// ReadyCheckTimeout > 0 retries the first request until it succeeds or
	// the timeout passes before anything is measured.
	ReadyCheckTimeout time.Duration
	// RequestIDPrefix prefixes the x-request-id of request i ("<prefix><i>");
	// default "bench-<8 hex>-".
	RequestIDPrefix string
	// Timeout bounds each request; default DefaultTimeout.
	Timeout time.Duration

	// Stop conditions; zero disables each. MaxSeconds stops dispatching and
	// cancels what is in flight after that long; MaxErrors and MaxErrorRate
	// (failed/finished, judged once 10 requests have finished) end the run
	// early. A stopped run returns its partial Outcome and an error wrapping
	// ErrStopped.
	MaxSeconds   float64 // at most MaxStopSeconds
	MaxErrors    int
	MaxErrorRate float64

	// APIKey is sent as a bearer token; empty falls back to OPENAI_API_KEY.
	APIKey string
	// Tokenizer counts output tokens when the server reports no usage, and
	// splits them over chunks; may be nil.
	Tokenizer dataset.Tokenizer
	// KeepText keeps each record's generated text.
	KeepText bool
	// Metrics are the options passed to metrics.Compute.
	Metrics metrics.Options
	// Progress, when non-nil, gets a progress bar.
	Progress io.Writer
	// OnRecord, when non-nil, is called (from one goroutine at a time) as
	// each request finishes.
	OnRecord func(metrics.Record)
	// Client overrides the tuned HTTP client Run builds (and implies the
	// net/http transport).
	Client *http.Client
	// Transport picks the streaming client: TransportAuto (default, epoll
	// for http:// on Linux), TransportEpoll or TransportNetHTTP.
	Transport string
	// Log, when non-nil, receives vLLM's informational lines ("Starting
	// main benchmark run...", warm-up and ready-check notes).
	Log io.Writer
}

// Errors returned (wrapped) by Run with a partial Outcome.
var (
	// ErrStopped: a stop condition (MaxSeconds, MaxErrors, MaxErrorRate)
	// ended the run.
	// Like every sentinel here it carries no "bench:" prefix: the error
	// that wraps it says where it came from, once.
	ErrStopped = errors.New("run stopped")
	// ErrServerDown: the server refused connections repeatedly.
	ErrServerDown = errors.New("server is not accepting connections")
)

// normalize fills defaults and checks c, returning the full request URL.
// MaxStopSeconds bounds Config.MaxSeconds (--max-seconds, a benchmark's
// max_seconds): a week, far beyond any benchmark.
const MaxStopSeconds = 7 * 86_400

func (c *Config) normalize() (string, error) {
	if c.Backend == "" {
		c.Backend = BackendOpenAI
	}
	switch c.Backend {
	case BackendOpenAI, BackendVLLM:
		if c.Endpoint == "" {
			c.Endpoint = "/v1/completions"
		}
		if !strings.HasSuffix(c.Endpoint, "completions") && !strings.HasSuffix(c.Endpoint, "profile") {
			return "", fmt.Errorf("bench: backend %s: endpoint %q must end with \"completions\"", c.Backend, c.Endpoint)
		}
	case BackendOpenAIChat:
		if c.Endpoint == "" {
			c.Endpoint = "/v1/chat/completions"
		}
		if !strings.HasSuffix(c.Endpoint, "chat/completions") {
			return "", fmt.Errorf("bench: backend openai-chat: endpoint %q must end with \"chat/completions\"", c.Endpoint)
		}
	default:
		return "", fmt.Errorf("bench: unknown backend %q (want openai, openai-chat or vllm)", c.Backend)
	}
	if c.BaseURL == "" {
		return "", errors.New("bench: no base URL")
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	u, err := url.Parse(c.BaseURL + c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("bench: bad base URL %q + endpoint %q", c.BaseURL, c.Endpoint)
	}
	if len(c.Requests) == 0 {
		return "", errors.New("bench: no requests")
	}
	if c.RequestRate == 0 {
		c.RequestRate = math.Inf(1)
	}
	if c.Burstiness == 0 {
		c.Burstiness = 1
	}
	if c.MaxConcurrency < 0 {
		return "", fmt.Errorf("bench: max concurrency must be positive, got %d", c.MaxConcurrency)
	}
	// Written so that NaN fails too; past the limit the timer's duration
	// would overflow (1e308 s became a negative duration: an immediate stop).
	if !(c.MaxSeconds >= 0 && c.MaxSeconds <= MaxStopSeconds) {
		return "", fmt.Errorf("bench: max seconds %v is out of range: want 0 (no limit) to %d", c.MaxSeconds, MaxStopSeconds)
	}
	if c.Schedule != nil && len(c.Schedule) != len(c.Requests) {
		return "", fmt.Errorf("bench: schedule has %d offsets for %d requests", len(c.Schedule), len(c.Requests))
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.RequestIDPrefix == "" {
		c.RequestIDPrefix = DefaultRequestIDPrefix()
	}
	if c.APIKey == "" {
		c.APIKey = os.Getenv("OPENAI_API_KEY")
	}
	if err := checkHeaders(c.Headers); err != nil {
		return "", err
	}
	if c.Transport, err = c.resolveTransport(u); err != nil {
		return "", err
	}
	if c.MaxErrorRate < 0 || c.MaxErrorRate > 1 {
		return "", fmt.Errorf("bench: max error rate %v is not a fraction in [0,1]", c.MaxErrorRate)
	}
	return u.String(), nil
}

// DefaultRequestIDPrefix is vLLM's default --request-id-prefix:
// "bench-" and 8 random hex digits and "-".
func DefaultRequestIDPrefix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "bench-" + hex.EncodeToString(b[:]) + "-"
}

// scheduleOptions is the load part of c.
func (c *Config) scheduleOptions() ScheduleOptions {
	rate := c.RequestRate
	if c.RampUpStrategy != "" {
		rate = math.Inf(1)
	}
	return ScheduleOptions{N: len(c.Requests), Rate: rate, Burstiness: c.Burstiness, Seed: c.Seed,
		RampUpStrategy: c.RampUpStrategy, RampUpStartRPS: c.RampUpStartRPS, RampUpEndRPS: c.RampUpEndRPS}
}
