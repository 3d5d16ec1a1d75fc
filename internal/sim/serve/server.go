// Package serve is the simulator's live face: an OpenAI-compatible HTTP
// server (chat and text completions, streamed or not, /v1/models, /health,
// Prometheus /metrics with vLLM's names) whose tokens come out at the times
// the simulated engine produces them, in real time scaled by a time factor.
//
// One event-loop goroutine owns the model; handlers only exchange messages
// with it, so thousands of concurrent streams cost one model and one timer.
// Model time is wall time since start × TimeScale, and every token's wall
// deadline is computed from that origin (absolute deadlines, no drift).
// Tokens wait until their deadline (the engine reports its API server's
// output times, which can lie ahead) and are never sent early. A streamed
// response on HTTP/1.1 is written by the loop itself: the handler hijacks
// the connection, and each token is one non-blocking write of a raw HTTP
// chunk, the connection closing after the response (Connection: close).
// Data-parallel deployments run one engine per replica behind a router
// (Replicas), as the engines' own front ends do.
//
// Simplifications, on purpose:
//   - Output length is max_tokens (max_completion_tokens) exactly, as with
//     ignore_eos: the simulator has no EOS. A completions request without
//     max_tokens gets 16 (the OpenAI default vLLM keeps); a chat request
//     without it gets Config.DefaultChatMaxTokens (256), capped by the
//     context, where vLLM would run to EOS or the context.
//   - The text is filler: common English words, one token each.
//   - Prompt tokens come from a tokenizer when one is given (chat prompts
//     through its chat template), else from EstimateCounter (4 bytes a token
//     plus the chat framing). A list of token ids counts as its length.
//   - n must be 1 and a prompt list may hold one prompt.
//   - A client that disconnects is canceled in the model when the model
//     implements Canceler; otherwise its request runs on unseen.
package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/perflab/perflab/internal/sim"
)

// Message is one chat message as the OpenAI API sends it (content already
// flattened to text).
type Message struct {
	Role    string
	Content string
}

// Counter counts prompt tokens. A real tokenizer gives exact counts; without
// one the server estimates (see EstimateCounter).
type Counter interface {
	// CountText counts a completions prompt.
	CountText(text string) int
	// CountChat counts a chat prompt after the chat template.
	CountChat(msgs []Message) (int, error)
}

// EstimateCounter is the tokenizer-free estimate: one token per 4 bytes
// of text (English BPE averages about 4.2 characters a token), plus the
// chat template's framing: 4 tokens per message
// ("<|im_start|>", role, "\n", "<|im_end|>") and 3 for the assistant prompt.
type EstimateCounter struct{}

// CountText estimates a completion prompt's tokens.
func (EstimateCounter) CountText(text string) int { return max(1, (len(text)+3)/4) }

// CountChat estimates a chat prompt's tokens.
func (EstimateCounter) CountChat(msgs []Message) (int, error) {
	n := 3
	for _, m := range msgs {
		n += 4 + (len(m.Content)+3)/4
	}
	return n, nil
}

var _ Counter = EstimateCounter{}

// Config configures a Server.
type Config struct {
	// Engine is "vllm", "sglang" or "trtllm" (the /v1/models owner).
	Engine string
	// Model is the simulated engine.
	Model Model
	// Root is the model argument (HF id or path); ServedModelNames are the
	// names requests may use (default Root). The first is listed.
	Root             string
	ServedModelNames []string
	// MaxModelLen is the context length checked before submitting.
	MaxModelLen int
	// TimeScale runs the model K× faster than real time (default 1).
	TimeScale float64
	// Counter counts prompt tokens (default EstimateCounter).
	Counter Counter
	// APIKey, when set, must be sent as "Authorization: Bearer KEY".
	APIKey string
	// DefaultChatMaxTokens is the output length of a chat request without
	// max_tokens (vLLM would generate up to the context or EOS; the
	// simulator has no EOS). Default 256.
	DefaultChatMaxTokens int
	// OnCrash, when set, is called once (from the event loop; it must not
	// block) when the simulated engine crashes, with the wall time of the
	// crash: a reproduced engine bug (sim.ErrCrashed). Run exits then, as
	// the engine process would.
	OnCrash func(err error, at time.Time)
	// BodyTimeout bounds the read of a request body (default 30 s): a
	// client that stops sending mid-body gets 408 and its connection
	// back. MaxBodyBytes caps one body (default 16 MiB: 413, before
	// reading when its Content-Length says so), and MaxInflightBodyBytes
	// the memory of all the bodies being read and decoded at once, each
	// charged three times its size (default 256 MiB: 503, retry later).
	BodyTimeout          time.Duration
	MaxBodyBytes         int64
	MaxInflightBodyBytes int64
	// DevMode is vLLM's VLLM_SERVER_DEV_MODE=1: it serves
	// POST /reset_prefix_cache.
	DevMode bool
	// Metrics is the engine started with its Prometheus metrics on
	// (SGLang --enable-metrics; trtllm-serve return_perf_metrics): without
	// it, those engines serve none. vLLM serves them always.
	Metrics bool
	// NoHealthGeneration is SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION off:
	// SGLang's /health answers without generating.
	NoHealthGeneration bool
}

// Server is the OpenAI-compatible HTTP face of a simulated engine.
type Server struct {
	cfg     Config
	loop    *loop
	mux     *http.ServeMux
	created int64
	seq     atomic.Int64
	ok      atomic.Int64 // finished requests
	closing chan struct{}
	bodies  budget
	face    face
	prefix  prefixCounter
}

// New builds a server and starts its event loop; Close stops it.
func New(cfg Config) (*Server, error) {
	if cfg.Model == nil {
		return nil, errors.New("serve: no model")
	}
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 1
	}
	if !(cfg.TimeScale > 0) {
		return nil, fmt.Errorf("serve: time scale %g must be positive", cfg.TimeScale)
	}
	if cfg.Counter == nil {
		cfg.Counter = EstimateCounter{}
	}
	if len(cfg.ServedModelNames) == 0 {
		cfg.ServedModelNames = []string{cfg.Root}
	}
	if cfg.DefaultChatMaxTokens == 0 {
		cfg.DefaultChatMaxTokens = 256
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = defaultBodyTimeout
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = defaultMaxBodyBytes
	}
	if cfg.MaxInflightBodyBytes <= 0 {
		cfg.MaxInflightBodyBytes = defaultMaxInflightBodyBytes
	}
	if cfg.Engine == "" {
		cfg.Engine = sim.EngineVLLM
	}
	s := &Server{cfg: cfg, loop: newLoop(cfg.Model, cfg.TimeScale), created: time.Now().Unix(), closing: make(chan struct{}), face: faceFor(cfg.Engine)}
	s.loop.onCrash = cfg.OnCrash
	s.bodies.limit = cfg.MaxInflightBodyBytes
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/chat/completions", s.auth(s.chat))
	s.mux.HandleFunc("POST /v1/completions", s.auth(s.completions))
	s.mux.HandleFunc("GET /v1/models", s.auth(s.models))
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.HandleFunc("GET /version", s.version)
	// Metrics only where and as the engine serves them (see faces).
	if (cfg.Metrics || s.face.metricsAlways) && s.face.promPath != "" {
		s.mux.HandleFunc("GET "+s.face.promPath, s.metrics)
	}
	if s.face.statsPath != "" {
		s.mux.HandleFunc("GET "+s.face.statsPath, s.iterationStats)
	}
	// The engine's prefix-cache reset, where it has one (vLLM's only in
	// its development mode; TensorRT-LLM's server has none).
	if s.face.reset != "" && (!s.face.resetDevMode || cfg.DevMode) {
		s.mux.HandleFunc(s.face.reset, s.resetPrefixCache)
	}
	go s.loop.run()
	return s, nil
}

// Handler is the HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Close stops the event loop and ends every open stream.
func (s *Server) Close() {
	select {
	case <-s.closing:
		return
	default:
		close(s.closing)
	}
	s.loop.stop()
}

// Lateness reports how late tokens were written relative to the model's
// times for them (the real-time fidelity of the server).
func (s *Server) Lateness() Lateness { return s.loop.late.summary() }

// HandoffLateness reports how late the event loop handed tokens to their
// streams (the loop's own timing accuracy, before socket writes).
func (s *Server) HandoffLateness() Lateness { return s.loop.handoff.summary() }

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	if s.cfg.APIKey == "" {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+s.cfg.APIKey {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"Unauthorized"}`)
			return
		}
		h(w, r)
	}
}

// apiError writes vLLM's error body.
func apiError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
	w.Write(b)
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	owner := s.face.owner
	data := []map[string]any{}
	for _, name := range s.cfg.ServedModelNames {
		data = append(data, map[string]any{
			"id": name, "object": "model", "created": s.created, "owned_by": owner,
			"root": s.cfg.Root, "parent": nil, "max_model_len": s.cfg.MaxModelLen,
		})
	}
	writeJSON(w, map[string]any{"object": "list", "data": data})
}

func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{"version": "perflab-sim"})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// request is the union of the chat and completions request fields the
// simulator reads.
type request struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N *int `json:"n"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text flattens a message's content: a string, or a list of parts whose
// text parts are joined.
func (m chatMessage) text() (string, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", fmt.Errorf("content must be a string or a list of parts: %v", err)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// resetPrefixCache answers the engines' cache-reset endpoints: 200 when the
// cache was reset, 400 while requests are running (nothing is reset then).
func (s *Server) resetPrefixCache(w http.ResponseWriter, r *http.Request) {
	ok := s.loop.resetPrefixCache()
	if ok {
		s.prefix.reset()
	}
	if !ok && !s.face.resetBlind {
		apiError(w, http.StatusBadRequest, "BadRequestError", "the prefix cache was not reset: requests are running")
		return
	}
	// vLLM answers 200 either way: its API server does not check what the
	// scheduler did.
	w.WriteHeader(http.StatusOK)
}

// readBody decodes the request body within the body bounds (see
// bodies.go), answering the client itself when it cannot. A body whose
// Content-Length is over the cap, or whose cost does not fit the budget,
// is refused before a byte of it is read. The body's charge stays taken
// until release, which the caller calls once the prompt is counted (the
// decoded prompt is garbage then); release may be called more than once.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, req *request) (release func(), ok bool) {
	release = func() {}
	refuse := func(code int, typ, msg string) (func(), bool) {
		// The body is left unread: the connection cannot carry another
		// request.
		w.Header().Set("Connection", "close")
		apiError(w, code, typ, msg)
		return release, false
	}
	limit := s.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		return refuse(http.StatusRequestEntityTooLarge, "BadRequestError",
			fmt.Sprintf("request body of %d bytes is over the %d MiB limit", r.ContentLength, limit>>20))
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	var data []byte
	var err error
	if r.ContentLength >= 0 {
		charge := bodyCostFactor * r.ContentLength
		if !s.bodies.take(charge) {
			w.Header().Set("Retry-After", "1")
			return refuse(http.StatusServiceUnavailable, "ServiceUnavailableError",
				fmt.Sprintf("%v (%d MiB); retry later", errBodyBudget, s.bodies.limit>>20))
		}
		release = func() { s.bodies.give(charge); charge = 0 }
		// One buffer of the announced size: reading into a growing one
		// would hold up to twice the body.
		data = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, data)
	} else {
		br := s.bodies.reader(http.MaxBytesReader(w, r.Body, limit))
		release = br.release
		data, err = io.ReadAll(br)
	}
	// The stream that follows may outlast any read deadline.
	_ = rc.SetReadDeadline(time.Time{})
	if err == nil {
		err = json.Unmarshal(data, req)
	}
	if err == nil {
		if f := s.face.unknownField(data); f != "" {
			data = nil
			release()
			apiError(w, http.StatusBadRequest, "BadRequestError",
				fmt.Sprintf("1 validation error for request\n%s\n  Extra inputs are not permitted [type=extra_forbidden]", f))
			return release, false
		}
	}
	data = nil
	if err == nil {
		return release, true
	}
	release()
	var tooBig *http.MaxBytesError
	var nerr net.Error
	switch {
	case errors.As(err, &tooBig):
		return refuse(http.StatusRequestEntityTooLarge, "BadRequestError",
			fmt.Sprintf("request body over the %d MiB limit", limit>>20))
	case errors.Is(err, errBodyBudget):
		w.Header().Set("Retry-After", "1")
		return refuse(http.StatusServiceUnavailable, "ServiceUnavailableError", err.Error()+"; retry later")
	case errors.As(err, &nerr) && nerr.Timeout():
		return refuse(http.StatusRequestTimeout, "BadRequestError",
			fmt.Sprintf("request body not received within %s", s.cfg.BodyTimeout))
	default:
		apiError(w, http.StatusBadRequest, "BadRequestError", "invalid JSON body: "+err.Error())
	}
	return release, false
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) { s.generate(w, r, true) }

func (s *Server) completions(w http.ResponseWriter, r *http.Request) { s.generate(w, r, false) }

func (s *Server) generate(w http.ResponseWriter, r *http.Request, chat bool) {
	var req request
	release, ok := s.readBody(w, r, &req)
	defer release()
	if !ok {
		return
	}
	if !s.served(req.Model) {
		apiError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.Model))
		return
	}
	if req.N != nil && *req.N != 1 {
		apiError(w, http.StatusBadRequest, "BadRequestError", "perflab sim serves n=1 only")
		return
	}
	promptLen, err := s.promptLen(&req, chat)
	if err == nil {
		s.prefix.observe(promptText(&req, chat), promptLen)
	}
	// The prompt is counted: its text is garbage now (a non-streamed
	// request holds this frame until it ends), and its charge comes back.
	req.Prompt, req.Messages = nil, nil
	release()
	if err != nil {
		apiError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	maxTokens := -1
	if req.MaxCompletionTokens != nil {
		maxTokens = *req.MaxCompletionTokens
	} else if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	ctxLen := s.cfg.MaxModelLen
	if ctxLen > 0 && promptLen > ctxLen {
		apiError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", ctxLen, promptLen))
		return
	}
	if maxTokens < 0 {
		switch {
		case !chat:
			maxTokens = 16 // the OpenAI completions default vLLM keeps
		default:
			maxTokens = s.cfg.DefaultChatMaxTokens
			if ctxLen > 0 {
				maxTokens = min(maxTokens, ctxLen-promptLen)
			}
		}
	}
	if maxTokens < 1 {
		apiError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("max_tokens must be at least 1, got %d.", maxTokens))
		return
	}
	if ctxLen > 0 && promptLen+maxTokens > ctxLen {
		apiError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf(
			"'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
			maxTokens, ctxLen, promptLen, maxTokens, ctxLen, promptLen))
		return
	}

	n := s.seq.Add(1)
	prefix := "cmpl-"
	if chat {
		prefix = "chatcmpl-"
	}
	id := prefix + strconv.FormatInt(s.created, 36) + strconv.FormatInt(n, 10)
	st := &stream{id: id, notify: make(chan struct{}, 1), whole: !req.Stream}
	out := &output{s: s, st: st, chat: chat, id: id, model: req.Model, promptLen: promptLen, maxTokens: maxTokens}
	out.setHead()
	out.usage = req.Stream && req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	sub := msg{kind: msgSubmit, req: sim.Req{ID: id, PromptLen: promptLen, OutputLen: maxTokens}, st: st}
	if req.Stream {
		// The fast path: the loop writes the chunks to the socket itself.
		if raw := hijackStream(w, r); raw != nil {
			if raw.failed != nil {
				return
			}
			st.out, st.raw = out, raw
			select {
			case s.loop.inbox <- sub:
			case <-s.closing:
				raw.finish()
				return
			}
			go raw.watch(func() { s.cancel(id) })
			return
		}
	}
	select {
	case s.loop.inbox <- sub:
	case <-r.Context().Done():
		return
	case <-s.closing:
		apiError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "server is shutting down")
		return
	}
	if req.Stream {
		out.streamResponse(w, r)
	} else {
		out.whole(w, r)
	}
}

func (s *Server) served(name string) bool {
	for _, n := range s.cfg.ServedModelNames {
		if n == name {
			return true
		}
	}
	return false
}

func (s *Server) promptLen(req *request, chat bool) (int, error) {
	if chat {
		if len(req.Messages) == 0 {
			return 0, errors.New("messages must be a non-empty list")
		}
		msgs := make([]Message, len(req.Messages))
		for i, m := range req.Messages {
			t, err := m.text()
			if err != nil {
				return 0, fmt.Errorf("messages[%d]: %v", i, err)
			}
			msgs[i] = Message{Role: m.Role, Content: t}
		}
		n, err := s.cfg.Counter.CountChat(msgs)
		if err != nil {
			return 0, fmt.Errorf("chat template: %v", err)
		}
		return n, nil
	}
	p := bytes.TrimSpace(req.Prompt)
	if len(p) == 0 {
		return 0, errors.New("prompt is required")
	}
	var text string
	if err := json.Unmarshal(p, &text); err == nil {
		return s.cfg.Counter.CountText(text), nil
	}
	var ids []int
	if err := json.Unmarshal(p, &ids); err == nil && len(ids) > 0 {
		return len(ids), nil
	}
	var texts []string
	if err := json.Unmarshal(p, &texts); err == nil && len(texts) == 1 {
		return s.cfg.Counter.CountText(texts[0]), nil
	}
	return 0, errors.New("prompt must be a string, a list of token ids or a list of one string (batched prompts are not simulated)")
}

// cancel tells the loop a client went away.
func (s *Server) cancel(id string) {
	select {
	case s.loop.inbox <- msg{kind: msgCancel, req: sim.Req{ID: id}}:
	case <-s.closing:
	}
}

// promptText is the text the prefix counter hashes: the messages' texts
// (roles included) or the prompt as sent.
func promptText(req *request, chat bool) string {
	if !chat {
		return string(bytes.TrimSpace(req.Prompt))
	}
	var b strings.Builder
	for _, m := range req.Messages {
		t, _ := m.text()
		b.WriteString(m.Role)
		b.WriteByte('\n')
		b.WriteString(t)
		b.WriteByte('\n')
	}
	return b.String()
}
