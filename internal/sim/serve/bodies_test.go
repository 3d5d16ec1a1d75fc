package serve

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/sim"
)

// rawPost opens a connection to addr and sends a chat request's headers
// announcing length bytes of body, then the first sent bytes of it.
func rawPost(t *testing.T, addr string, length, sent int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", length)
	if _, err := c.Write([]byte(strings.Repeat(" ", sent))); err != nil {
		t.Fatal(err)
	}
	return c
}

// status reads the HTTP status of the response on c.
func status(t *testing.T, c net.Conn, within time.Duration) int {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response within %s: %v", within, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestBodyBounds (issue 11, defect 20: 2,000 connections that never
// finished their bodies stayed open, and 8 bodies of 60 MB took 1.2 GB):
// a stalled body is answered 408 when its time is up, a body over the cap
// 413, and a body beyond the in-flight budget 503, both before a byte of
// it is read when its Content-Length says so; the budget comes back when
// the stalled body is given up.
func TestBodyBounds(t *testing.T) {
	// Each body is charged three times its size (buffer, raw JSON, text).
	_, ts := newTestServer(t, Config{Model: newFake(0.001, 0.001), BodyTimeout: 400 * time.Millisecond,
		MaxBodyBytes: 2000, MaxInflightBodyBytes: 9000})
	addr := strings.TrimPrefix(ts.URL, "http://")

	stalled := rawPost(t, addr, 1900, 1800) // holds 5,700 of the 9,000-byte budget
	time.Sleep(100 * time.Millisecond)
	over := rawPost(t, addr, 1500, 1500)
	if got := status(t, over, 5*time.Second); got != http.StatusServiceUnavailable {
		t.Errorf("a body beyond the in-flight budget: %d, want 503", got)
	}
	// Refused on its headers alone: the old server waited for the body
	// and answered 408.
	unsent := rawPost(t, addr, 1500, 0)
	if got := status(t, unsent, 5*time.Second); got != http.StatusServiceUnavailable {
		t.Errorf("an unsent body beyond the in-flight budget: %d, want 503", got)
	}
	huge := rawPost(t, addr, 60<<20, 0)
	if got := status(t, huge, 5*time.Second); got != http.StatusRequestEntityTooLarge {
		t.Errorf("an unsent body announced over the cap: %d, want 413", got)
	}
	start := time.Now()
	if got := status(t, stalled, 5*time.Second); got != http.StatusRequestTimeout {
		t.Errorf("a stalled body: %d, want 408", got)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the stalled body was given up after %s", d)
	}
	big := rawPost(t, addr, 2500, 2500)
	if got := status(t, big, 5*time.Second); got != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the cap: %d, want 413", got)
	}
	// The stalled body's bytes are back in the budget: a normal request
	// goes through.
	resp := post(t, ts.URL+"/v1/chat/completions", `{"model":"Qwen/Qwen3-14B","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a normal request after the stalled one: %d", resp.StatusCode)
	}
}

// TestBodyChargedForDecoding: a body is charged what decoding it holds
// (three times its size), not its size alone, so the budget bounds the
// memory the bodies take; a body that fits goes through.
func TestBodyChargedForDecoding(t *testing.T) {
	_, ts := newTestServer(t, Config{Model: newFake(0.001, 0.001), MaxBodyBytes: 2000, MaxInflightBodyBytes: 3000})
	body := `{"model":"Qwen/Qwen3-14B","max_tokens":2,"prompt":"` + strings.Repeat("a", 1100) + `"}`
	resp := post(t, ts.URL+"/v1/completions", body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a %d-byte body under a 3,000-byte budget: %d, want 503", len(body), resp.StatusCode)
	}
	body = `{"model":"Qwen/Qwen3-14B","max_tokens":2,"prompt":"` + strings.Repeat("a", 900) + `"}`
	resp = post(t, ts.URL+"/v1/completions", body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a %d-byte body under a 3,000-byte budget: %d, want 200", len(body), resp.StatusCode)
	}
	// Chunked bodies (no Content-Length) are charged as they arrive.
	for _, tc := range []struct {
		n    int
		want int
	}{{900, http.StatusOK}, {1100, http.StatusServiceUnavailable}} {
		body := `{"model":"Qwen/Qwen3-14B","max_tokens":2,"prompt":"` + strings.Repeat("a", tc.n) + `"}`
		resp, err := http.Post(ts.URL+"/v1/completions", "application/json", io.MultiReader(strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("a chunked %d-byte body: %d, want %d", len(body), resp.StatusCode, tc.want)
		}
	}
}

// TestPrefixCacheReset: sim serve has the engines' reset endpoints where
// the engine has one (vLLM's only in its dev mode, SGLang's flush_cache,
// none for TensorRT-LLM), so a reused server of the sim runtime is reset
// between measurements as a real one is.
func TestPrefixCacheReset(t *testing.T) {
	for _, tc := range []struct {
		engine  string
		devMode bool
		path    string
		want    int
	}{
		{sim.EngineVLLM, true, "/reset_prefix_cache", http.StatusOK},
		{sim.EngineVLLM, false, "/reset_prefix_cache", http.StatusNotFound},
		{sim.EngineSGLang, false, "/flush_cache", http.StatusOK},
		{sim.EngineTRTLLM, false, "/flush_cache", http.StatusNotFound},
	} {
		t.Run(fmt.Sprintf("%s dev=%v %s", tc.engine, tc.devMode, tc.path), func(t *testing.T) {
			version := map[string]string{sim.EngineVLLM: "0.11.0", sim.EngineSGLang: "0.5.5.post1", sim.EngineTRTLLM: "1.2.0rc1"}[tc.engine]
			eng, err := sim.New(sim.Params{Engine: tc.engine, Version: version, Model: "Qwen/Qwen3-14B", GPU: "H100"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, ts := newTestServer(t, Config{Engine: tc.engine, Model: eng, MaxModelLen: eng.Params().MaxModelLen, DevMode: tc.devMode})
			resp, err := http.Post(ts.URL+tc.path, "application/json", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("POST %s: %d, want %d", tc.path, resp.StatusCode, tc.want)
			}
		})
	}
}
