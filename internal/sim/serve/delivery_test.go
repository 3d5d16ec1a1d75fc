package serve

import (
	"bufio"
	"context"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/sim"
)

// aheadModel reports a request's whole output at once, with event times
// spread into the future, as the engine does for outputs its API server
// has yet to send: the first token ttft after arrival, then one every gap.
type aheadModel struct {
	ttft, gap float64
	pending   []sim.Req
}

func (m *aheadModel) Submit(r sim.Req) { m.pending = append(m.pending, r) }
func (m *aheadModel) NextEventTime() (float64, bool) {
	if len(m.pending) == 0 {
		return 0, false
	}
	return m.pending[0].Arrival, true
}
func (m *aheadModel) Advance(to float64) []sim.Event {
	var evs []sim.Event
	for _, r := range m.pending {
		for k := 0; k < r.OutputLen; k++ {
			evs = append(evs, sim.Event{ReqID: r.ID, Time: r.Arrival + m.ttft + float64(k)*m.gap, Tokens: 1, Done: k == r.OutputLen-1})
		}
	}
	m.pending = m.pending[:0]
	return evs
}
func (m *aheadModel) Stats() sim.Stats { return sim.Stats{} }

// TestTokensNotEarly: events the model reports ahead of time reach the
// client no earlier than their model times. The bound is one-sided (a
// loaded machine only makes tokens later), so it cannot flake.
func TestTokensNotEarly(t *testing.T) {
	const ttft, gap, n = 0.02, 0.015, 6
	_, ts := newTestServer(t, Config{Model: &aheadModel{ttft: ttft, gap: gap}})
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		t.Run(path, func(t *testing.T) {
			body := `{"model":"Qwen/Qwen3-14B","prompt":"x","messages":[{"role":"user","content":"x"}],"max_tokens":6,"stream":true}`
			sent := time.Now()
			resp := post(t, ts.URL+path, body)
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			k := 0
			for {
				line, err := br.ReadString('\n')
				if strings.HasPrefix(line, "data: {") && !strings.Contains(line, `"role":"assistant"`) {
					want := time.Duration((ttft + float64(k)*gap) * float64(time.Second))
					if got := time.Since(sent); got < want {
						t.Errorf("token %d arrived %v after the request, before its model time %v", k, got, want)
					}
					k++
				}
				if err != nil {
					break
				}
			}
			if k != n {
				t.Errorf("got %d tokens, want %d", k, n)
			}
		})
	}
}

// TestSameTimeOneChunk: outputs the model gives one time (the engine's API
// server merging a lagging stream's outputs) reach the client as one chunk
// carrying all their tokens, as vLLM sends them.
func TestSameTimeOneChunk(t *testing.T) {
	_, ts := newTestServer(t, Config{Model: &aheadModel{ttft: 0.01, gap: 0}})
	resp := post(t, ts.URL+"/v1/completions", `{"model":"Qwen/Qwen3-14B","prompt":"x","max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`)
	defer resp.Body.Close()
	chunks, done := readSSE(t, resp.Body)
	if !done || len(chunks) != 2 {
		t.Fatalf("done %v, %d chunks, want one token chunk and the usage: %v", done, len(chunks), chunks)
	}
	ch := chunks[0]["choices"].([]any)[0].(map[string]any)
	if ch["text"] != " the of and to" || ch["finish_reason"] != "length" {
		t.Errorf("merged chunk = %v", ch)
	}
	if u := chunks[1]["usage"].(map[string]any); u["completion_tokens"] != 4.0 {
		t.Errorf("usage %v", u)
	}
}

// TestStreamWithoutHijack serves a stream through a ResponseWriter that
// cannot be hijacked (HTTP/2 or a recorder): the handler-goroutine path.
func TestStreamWithoutHijack(t *testing.T) {
	s, err := New(Config{Model: newFake(0.001, 0.001), Root: "Qwen/Qwen3-14B", MaxModelLen: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"model":"Qwen/Qwen3-14B","prompt":"x","max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`))
	s.Handler().ServeHTTP(rec, req)
	chunks, done := readSSE(t, rec.Body)
	if rec.Code != 200 || !done || len(chunks) != 5 {
		t.Fatalf("status %d, done %v, %d chunks: %v", rec.Code, done, len(chunks), chunks)
	}
	if u := chunks[4]["usage"].(map[string]any); u["completion_tokens"] != 4.0 {
		t.Errorf("usage %v", u)
	}
	if got := s.Lateness().Tokens; got != 4 {
		t.Errorf("lateness histogram has %d tokens, want 4", got)
	}
}

// TestSlowClient: a client that stops reading fills its socket; the loop
// hands its bytes to a writer goroutine and keeps serving the others on
// time, and the stalled client, once it reads, gets every token in order.
func TestSlowClient(t *testing.T) {
	// 20,000 tokens of ~120 bytes in 0.2 s of model time, against a
	// server socket buffer of a few kB: the socket fills while the client
	// reads nothing. (A tiny buffer on the client instead can stall loopback
	// TCP in zero-window probes, which tests the kernel, not the server.)
	const total = 20000
	s, err := New(Config{Model: newFake(0.001, 0.00001), Root: "Qwen/Qwen3-14B", MaxModelLen: 100000})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Listener = smallSendBuffer{ts.Listener}
	ts.Start()
	t.Cleanup(func() { ts.Close(); s.Close() })
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"Qwen/Qwen3-14B","prompt":"x","max_tokens":` + strconv.Itoa(total) + `,"stream":true}`
	io.WriteString(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	for deadline := time.Now().Add(10 * time.Second); s.loop.slow.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if s.loop.slow.Load() == 0 {
		t.Fatal("the stalled stream never went to its writer goroutine")
	}
	// While the slow client reads nothing, another stream is served.
	start := time.Now()
	resp := post(t, ts.URL+"/v1/completions", `{"model":"Qwen/Qwen3-14B","prompt":"x","max_tokens":5,"stream":true}`)
	chunks, done := readSSE(t, resp.Body)
	resp.Body.Close()
	if took := time.Since(start); !done || len(chunks) != 5 || took > 5*time.Second {
		t.Errorf("other stream: done %v, %d chunks, %v", done, len(chunks), took)
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	r, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	br := bufio.NewReaderSize(r.Body, 1<<16)
	k := 0
	for {
		line, err := br.ReadString('\n')
		if strings.HasPrefix(line, "data: {") {
			if want := `"text":"` + filler[k%len(filler)] + `"`; !strings.Contains(line, want) {
				t.Fatalf("token %d out of order: %s", k, line)
			}
			k++
		}
		if err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
	}
	if k != total {
		t.Errorf("slow client got %d tokens, want %d", k, total)
	}
}

// smallSendBuffer gives accepted connections a small socket send buffer.
type smallSendBuffer struct{ net.Listener }

func (l smallSendBuffer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestCancelWhileQueued: a client that leaves before its first token (the
// request still queued in the model) is canceled in the model.
func TestCancelWhileQueued(t *testing.T) {
	fake := newFake(30, 0.01) // first token after 30 s
	_, ts := newTestServer(t, Config{Model: fake})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions", strings.NewReader(`{"model":"Qwen/Qwen3-14B","prompt":"x","max_tokens":10,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); fake.running() != 1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	resp.Body.Close()
	for deadline := time.Now().Add(5 * time.Second); fake.running() != 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if fake.running() != 0 {
		t.Errorf("after the disconnect: running %d, canceled %v", fake.running(), fake.canceled)
	}
}

// TestWakeupHeap checks the delivery queue pops by deadline, ties in push
// order.
func TestWakeupHeap(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var h wakeupHeap
	for i := 0; i < 2000; i++ {
		h.push(wakeup{at: int64(rng.Intn(50)), seq: uint64(i)})
	}
	prev := h.pop()
	for len(h) > 0 {
		w := h.pop()
		if w.at < prev.at || (w.at == prev.at && w.seq < prev.seq) {
			t.Fatalf("popped (%d, %d) after (%d, %d)", w.at, w.seq, prev.at, prev.seq)
		}
		prev = w
	}
}
