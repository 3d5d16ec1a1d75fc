package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/metrics"
)

// Error classes written to metrics.Record.ErrorClass.
const (
	ClassHTTPStatus  = "http_status"
	ClassTimeout     = "timeout"
	ClassReset       = "reset"
	ClassNoChoices   = "no_choices"
	ClassConnect     = "connect"
	ClassBadStream   = "bad_stream"
	ClassCanceled    = "canceled"
	ClassServerError = "server_error"
)

// payload builds the JSON body vLLM's request function sends for backend.
func (c *Config) payload(r *dataset.Request) ([]byte, error) {
	model := c.Model
	if c.ServedModelName != "" {
		model = c.ServedModelName
	}
	p := make(map[string]any, 12)
	p["model"] = model
	p["stream"] = true
	p["stream_options"] = map[string]bool{"include_usage": true}
	if c.Backend == BackendOpenAIChat {
		var content any = []map[string]string{{"type": "text", "text": r.Prompt}}
		if c.ChatContentString {
			content = r.Prompt
		}
		p["messages"] = []map[string]any{{"role": "user", "content": content}}
		p["max_completion_tokens"] = r.OutputLen
	} else {
		p["prompt"] = r.Prompt
		p["repetition_penalty"] = 1.0
		p["max_tokens"] = r.OutputLen
		// vLLM's completions client always sends its --logprobs (None).
		p["logprobs"] = nil
	}
	if c.IgnoreEOS || r.IgnoreEOS {
		p["ignore_eos"] = true
	}
	if c.Temperature != nil {
		p["temperature"] = *c.Temperature
	}
	if c.TopP != nil {
		p["top_p"] = *c.TopP
	}
	if c.TopK != nil {
		p["top_k"] = *c.TopK
	}
	if c.MinP != nil {
		p["min_p"] = *c.MinP
	}
	for k, v := range c.ExtraBody {
		p[k] = v
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("bench: encode payload: %w", err)
	}
	return b, nil
}

// client holds what every request of a run shares.
type client struct {
	cfg  *Config
	url  string
	http *http.Client // the net/http transport's client
	snd  sender
	// base is the client's monotonic origin; the run clock reads seconds
	// since start, kept as an offset from base so that the epoll loop can
	// read it while Run moves t=0.
	base    time.Time
	start   time.Time
	startNs atomic.Int64
}

func newClient(cfg *Config, url string) *client {
	cl := &client{cfg: cfg, url: url, base: time.Now()}
	cl.setStart(cl.base)
	return cl
}

// setStart moves the run clock's origin to t.
func (cl *client) setStart(t time.Time) {
	cl.start = t
	cl.startNs.Store(int64(t.Sub(cl.base)))
}

// now reads the run clock (monotonic), in seconds.
func (cl *client) now() float64 {
	return (time.Since(cl.base) - time.Duration(cl.startNs.Load())).Seconds()
}

// newTransport is tuned for many long-lived HTTP/1.1 streams to one host:
// one idle connection kept per possible in-flight request, no compression
// (it would add a gzip reader per stream), no HTTP/2.
func newTransport(maxInFlight int) *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   max(maxInFlight, 16),
		IdleConnTimeout:       60 * time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
		TLSNextProto:          map[string]func(string, *tls.Conn) http.RoundTripper{},
		TLSHandshakeTimeout:   30 * time.Second,
		ExpectContinueTimeout: 0,
		ReadBufferSize:        4 << 10,
		WriteBufferSize:       4 << 10,
	}
}

// do sends one request through the run's transport and waits for it; see
// doHTTP for what it fills.
func (cl *client) do(ctx context.Context, r *dataset.Request, rec *metrics.Record) []int32 {
	ch := make(chan []int32, 1)
	cl.snd.start(ctx, r, rec, func(ends []int32) { ch <- ends })
	return <-ch
}

// doHTTP sends one request over net/http and fills rec. rec.Scheduled, ID
// and PromptLen are set by the caller. Failures land in rec. It returns
// the text offsets that end each choices chunk when the server gave no
// per-chunk usage (for splitting the output tokens over chunks after the
// run), else nil.
func (cl *client) doHTTP(ctx context.Context, r *dataset.Request, rec *metrics.Record) (ends []int32) {
	cfg := cl.cfg
	body, err := cfg.payload(r)
	if err != nil {
		fail(rec, ClassBadStream, err.Error())
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, cl.url, bytes.NewReader(body))
	if err != nil {
		fail(rec, ClassConnect, err.Error())
		return nil
	}
	h := req.Header
	for k, v := range cfg.Headers {
		h.Set(k, v)
	}
	h.Set("Content-Type", "application/json")
	if cfg.APIKey != "" {
		h.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	if rec.ID != "" {
		h.Set("X-Request-Id", rec.ID)
	}

	st := streamState{}
	st.sent = cl.now()
	rec.Sent = st.sent
	resp, err := cl.http.Do(req)
	if err != nil {
		failErr(rec, ctx, rctx, err, "send")
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, errBodyMax))
		failStatus(rec, resp.Status, head)
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil
	}
	rerr := readStream(resp.Body, &st, cl.now)
	if rerr == nil && st.done {
		// Read the terminating chunk so the connection goes back to the pool.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	}
	return cl.settle(rec, &st, rerr, func(err error) { failErr(rec, ctx, rctx, err, "read stream") })
}

// errBodyMax is how much of a non-200 body the failure reason keeps.
const errBodyMax = 1024

// failStatus records a non-200 answer: the status ("500 Internal Server
// Error") and the start of the body.
func failStatus(rec *metrics.Record, status string, head []byte) {
	fail(rec, ClassHTTPStatus, fmt.Sprintf("HTTP %s: %s", status, bytes.TrimSpace(head)))
}

// settle copies a finished stream into rec and classifies how it ended,
// the same way for every transport; failRead classifies a transport error
// met while reading the body. It returns the chunk text offsets (see
// doHTTP).
func (cl *client) settle(rec *metrics.Record, st *streamState, rerr error, failRead func(error)) (ends []int32) {
	cl.finish(rec, st)
	if !st.usagePerChunk && len(st.textEnds) > 1 {
		ends = st.textEnds
	}
	switch {
	case rerr != nil && errors.Is(rerr, errSyntax):
		fail(rec, ClassBadStream, fmt.Sprintf("request %s: bad stream event: %v", rec.ID, rerr))
	case rerr != nil:
		failRead(rerr)
	case st.serverErr != "" && st.first:
		fail(rec, ClassServerError, "server error mid-stream: "+st.serverErr)
	case !st.first:
		msg := "Never received a valid chunk to calculate TTFT. This response will be marked as failed!"
		if st.serverErr != "" {
			msg += " Server error: " + st.serverErr
		}
		fail(rec, ClassNoChoices, msg)
	}
	return ends
}

// finish copies the stream's timings into rec; output token counts that
// need the tokenizer are settled after the run (see settleOutput).
func (cl *client) finish(rec *metrics.Record, st *streamState) {
	rec.Success = st.first
	if st.first {
		rec.TTFT = st.ttft
		rec.Latency = st.last - st.sent
	}
	rec.ITL = st.itl
	rec.ChunkTokens = st.chunkTok
	rec.ReasoningTokens = st.reasoning
	rec.TTFC = st.ttfc
	if st.hasPrompt {
		rec.PromptLen = st.promptTokens
	}
	if st.usageSeen && st.usageTokens > 0 {
		rec.OutputLen = st.usageTokens
		rec.OutputLenSource = "usage"
	}
	rec.GeneratedText = string(st.text)
}

func fail(rec *metrics.Record, class, msg string) {
	rec.Success = false
	rec.ErrorClass = class
	rec.Error = msg
}

// failErr classifies a transport error.
func failErr(rec *metrics.Record, parent, rctx context.Context, err error, during string) {
	var ne net.Error
	var op *net.OpError
	switch {
	case parent.Err() != nil:
		fail(rec, ClassCanceled, fmt.Sprintf("%s: canceled: %v", during, err))
	case errors.Is(rctx.Err(), context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		fail(rec, ClassTimeout, fmt.Sprintf("%s: timeout: %v", during, err))
	case errors.As(err, &op) && op.Op == "dial", errors.Is(err, syscall.ECONNREFUSED):
		fail(rec, ClassConnect, fmt.Sprintf("%s: %v", during, err))
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.EPIPE):
		fail(rec, ClassReset, fmt.Sprintf("%s: connection closed mid-stream: %v", during, err))
	default:
		fail(rec, ClassReset, fmt.Sprintf("%s: %v", during, err))
	}
}

// FirstModel asks the server at base for the id of its first model (GET
// /v1/models), as vLLM does when --model is not given. hc may be nil.
func FirstModel(ctx context.Context, hc *http.Client, base, apiKey string) (string, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return "", fmt.Errorf("bench: models: %w", err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("bench: fetch models: %w", err) // a *url.Error: it names the URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("bench: fetch models from %s: HTTP %s", base, resp.Status)
	}
	var m struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&m); err != nil {
		return "", fmt.Errorf("bench: decode %s/v1/models: %w", base, err)
	}
	if len(m.Data) == 0 || m.Data[0].ID == "" {
		return "", fmt.Errorf("bench: no models found on the server at %s", base)
	}
	return m.Data[0].ID, nil
}
