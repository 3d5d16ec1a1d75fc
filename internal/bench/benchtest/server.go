// Package benchtest is a deterministic OpenAI-compatible streaming server
// for testing and measuring the benchmark client: every request follows a
// Plan (time to first chunk, gaps between chunks, tokens per chunk, usage
// style, faults), chunks are written at absolute times measured from the
// moment the request arrived, and the server records when each chunk was
// actually written so a client's timings can be checked against it.
package benchtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// Faults a Plan can inject.
const (
	FaultNone       = ""
	FaultStatus     = "status"      // answer Plan.Status with a JSON error body
	FaultGarbage    = "garbage"     // 200, then a data line that is not JSON
	FaultCloseMid   = "close-mid"   // 200, Plan.Chunks/2 chunks, then drop the connection
	FaultNoChoices  = "no-choices"  // 200, only a usage chunk and [DONE]
	FaultStall      = "stall"       // 200, first chunk, then never another byte
	FaultErrorEvent = "error-event" // 200, some chunks, then a data {"error":...}
)

// Plan is what the server does for one request.
type Plan struct {
	// TTFT is when the first choices chunk is written, after the request
	// arrived; ITL[k] is the gap before choices chunk k+1. With ITL empty,
	// Chunks chunks are written Gap apart.
	TTFT   time.Duration
	ITL    []time.Duration
	Chunks int
	Gap    time.Duration
	// TokensPerChunk is how many tokens each chunk carries (default 1).
	TokensPerChunk int
	// ContinuousUsage adds cumulative usage to every choices chunk (vLLM's
	// continuous_usage_stats); NoUsage omits the final usage chunk.
	ContinuousUsage bool
	NoUsage         bool
	// PromptTokens is reported in usage (default 0 → not reported).
	PromptTokens int
	// Reasoning chunks come first as reasoning_content deltas (chat only).
	Reasoning int
	// Comments adds a ": ping" comment line before every chunk.
	Comments bool
	// Fault and Status inject failures.
	Fault  string
	Status int
	// Text is each token's text (default "tok ").
	Text string
}

func (p Plan) gaps() []time.Duration {
	if len(p.ITL) > 0 {
		return p.ITL
	}
	g := make([]time.Duration, max(p.Chunks-1, 0))
	for i := range g {
		g[i] = p.Gap
	}
	return g
}

// Server is the fake. Create with New; it is an http.Handler.
type Server struct {
	// PlanFor returns the plan of request index i (parsed from the trailing
	// digits of x-request-id, -1 when absent) and its decoded body.
	PlanFor func(i int, body map[string]any) Plan
	// Clock is the time origin of Sent/Written; defaults to New's time.
	Clock time.Time
	// KeepLogs keeps a Log per request (default true); a long-running
	// measurement server turns it off to stay flat in memory.
	KeepLogs bool

	mu   sync.Mutex
	logs map[int]*Log
	seen int
}

// Log is what the server did for one request.
type Log struct {
	ID      string
	Arrived time.Duration // since Clock
	// Began and Written hold, per write, when the write started and when
	// it returned: a client cannot see the bytes before Began, and may see
	// them before Written.
	Began    []time.Duration
	Written  []time.Duration
	Body     map[string]any
	Header   http.Header
	Finished bool

	done chan struct{} // closed when the handler returns
}

// New returns a server following planFor.
func New(planFor func(i int, body map[string]any) Plan) *Server {
	return &Server{PlanFor: planFor, Clock: time.Now(), KeepLogs: true, logs: map[int]*Log{}}
}

var idDigits = regexp.MustCompile(`(\d+)$`)

// Logs returns the log of request i, once its handler has returned (a
// client may finish at [DONE] while the handler is still recording), or
// nil. It waits at most 10 s.
func (s *Server) Logs(i int) *Log {
	s.mu.Lock()
	lg := s.logs[i]
	s.mu.Unlock()
	if lg != nil {
		select {
		case <-lg.done:
		case <-time.After(10 * time.Second):
		}
	}
	return lg
}

// Requests returns how many requests reached the handler.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	if r.URL.Path == "/v1/models" {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"fake-model","object":"model","root":"fake-model"}]}`)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
		return
	}
	id := r.Header.Get("X-Request-Id")
	idx := -1
	if m := idDigits.FindString(id); m != "" {
		idx, _ = strconv.Atoi(m)
	}
	plan := s.PlanFor(idx, body)
	lg := &Log{ID: id, Arrived: arrived.Sub(s.Clock), Body: body, Header: r.Header.Clone(), done: make(chan struct{})}
	defer close(lg.done)
	s.mu.Lock()
	s.seen++
	if idx >= 0 && s.KeepLogs {
		s.logs[idx] = lg
	}
	s.mu.Unlock()

	if plan.Fault == FaultStatus {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(plan.Status)
		fmt.Fprintf(w, `{"error":{"message":"fake failure %d","type":"fake","code":%d}}`, plan.Status, plan.Status)
		return
	}
	_, chat := body["messages"]
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if fl != nil {
		fl.Flush()
	}
	tpc := max(plan.TokensPerChunk, 1)
	text := plan.Text
	if text == "" {
		text = "tok "
	}
	var buf []byte
	write := func(at time.Duration, payload []byte) bool {
		if d := time.Until(arrived.Add(at)); d > 0 {
			time.Sleep(d)
		}
		if plan.Comments {
			buf = append(buf[:0], ": ping\n\n"...)
		} else {
			buf = buf[:0]
		}
		buf = append(buf, "data: "...)
		buf = append(buf, payload...)
		buf = append(buf, "\n\n"...)
		lg.Began = append(lg.Began, time.Since(s.Clock))
		_, err := w.Write(buf)
		if fl != nil {
			fl.Flush()
		}
		lg.Written = append(lg.Written, time.Since(s.Clock))
		return err == nil
	}
	gaps := plan.gaps()
	n := len(gaps) + 1
	if plan.Chunks == 0 && len(plan.ITL) == 0 {
		n = 1
	}
	at := plan.TTFT
	completion := 0
	if plan.Fault == FaultNoChoices {
		write(at, usageChunk(tpc*n, plan.PromptTokens))
		write(at, []byte("[DONE]"))
		lg.Finished = true
		return
	}
	for k := 0; k < n; k++ {
		if k > 0 {
			at += gaps[k-1]
		}
		switch {
		case plan.Fault == FaultGarbage && k == 1:
			write(at, []byte(`{"choices": [ this is not json`))
			return
		case plan.Fault == FaultCloseMid && k == n/2:
			if hj, ok := w.(http.Hijacker); ok {
				conn, _, err := hj.Hijack()
				if err == nil {
					// Reset rather than FIN so the client sees a broken stream.
					if tc, ok := conn.(*net.TCPConn); ok {
						_ = tc.SetLinger(0)
					}
					conn.Close()
				}
			}
			return
		case plan.Fault == FaultStall && k == 1:
			<-r.Context().Done()
			return
		case plan.Fault == FaultErrorEvent && k == n/2:
			write(at, []byte(`{"error":{"message":"fake engine died","type":"InternalServerError","code":500}}`))
			write(at, []byte("[DONE]"))
			return
		}
		completion += tpc
		var p []byte
		switch {
		case chat && k < plan.Reasoning:
			p = chatChunk("", repeat(text, tpc), k == 0)
		case chat:
			p = chatChunk(repeat(text, tpc), "", k == 0 && plan.Reasoning == 0)
		default:
			p = completionChunk(repeat(text, tpc))
		}
		if plan.ContinuousUsage {
			p = withUsage(p, completion, plan.PromptTokens)
		}
		if !write(at, p) {
			return
		}
	}
	if !plan.NoUsage {
		write(at, usageChunk(completion, plan.PromptTokens))
	}
	write(at, []byte("[DONE]"))
	lg.Finished = true
}

func repeat(s string, n int) string {
	out := s
	for i := 1; i < n; i++ {
		out += s
	}
	return out
}

func completionChunk(text string) []byte {
	t, _ := json.Marshal(text)
	return fmt.Appendf(nil, `{"id":"cmpl-fake","object":"text_completion","created":1,"model":"fake-model","choices":[{"index":0,"text":%s,"logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}`, t)
}

func chatChunk(content, reasoning string, role bool) []byte {
	c, _ := json.Marshal(content)
	r, _ := json.Marshal(reasoning)
	roleField := ""
	if role {
		roleField = `"role":"assistant",`
	}
	if reasoning != "" {
		return fmt.Appendf(nil, `{"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1,"model":"fake-model","choices":[{"index":0,"delta":{%s"reasoning_content":%s},"logprobs":null,"finish_reason":null}]}`, roleField, r)
	}
	return fmt.Appendf(nil, `{"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1,"model":"fake-model","choices":[{"index":0,"delta":{%s"content":%s},"logprobs":null,"finish_reason":null}]}`, roleField, c)
}

func usageChunk(completion, prompt int) []byte {
	return fmt.Appendf(nil, `{"id":"cmpl-fake","object":null,"created":1,"model":"fake-model","choices":[],"usage":{%s"total_tokens":%d,"completion_tokens":%d}}`, promptField(prompt), prompt+completion, completion)
}

// promptField reports prompt_tokens only when the plan set it, so a test
// can keep the dataset's prompt length.
func promptField(prompt int) string {
	if prompt == 0 {
		return ""
	}
	return fmt.Sprintf(`"prompt_tokens":%d,`, prompt)
}

func withUsage(p []byte, completion, prompt int) []byte {
	// Replace the trailing "}" with a usage member.
	p = p[:len(p)-1]
	if i := len(`,"usage":null`); len(p) > i && string(p[len(p)-i:]) == `,"usage":null` {
		p = p[:len(p)-i]
	}
	return fmt.Appendf(p, `,"usage":{%s"total_tokens":%d,"completion_tokens":%d}}`, promptField(prompt), prompt+completion, completion)
}
