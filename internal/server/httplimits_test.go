package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/app"
)

// serveLoopback runs a server the way perflab serve does (Serve, its listener,
// timeouts and caps) on a loopback port, and returns its address.
func serveLoopback(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	cfg.Store = stores(t)["sqlite"](t)
	if cfg.DataRoot == "" {
		cfg.DataRoot = t.TempDir()
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, 10*time.Second) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return srv, ln.Addr().String()
}

// rawRequest writes head (and nothing more) on a new connection and
// returns the status line read within wait ("" when none came) and the
// connection.
func rawRequest(t *testing.T, addr, head string, wait time.Duration) (string, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	if wait == 0 {
		return "", c
	}
	c.SetReadDeadline(time.Now().Add(wait))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), c
}

// closedWithin says whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return err == nil // EOF: closed by the server; a timeout is an error
}

// TestAuthBeforeBody: a POST without the token that declares a body and
// never sends it gets its 401 at once, and the connection is closed; the
// body is not waited for.
func TestAuthBeforeBody(t *testing.T) {
	_, addr := serveLoopback(t, Config{Token: "s3cret-token", Limits: Limits{BodyTimeout: time.Minute}, Options: app.Options{Analytic: true}})
	start := time.Now()
	line, c := rawRequest(t, addr, "POST /api/v1/labs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/yaml\r\nContent-Length: 10\r\n\r\n", 3*time.Second)
	if !strings.Contains(line, " 401 ") {
		t.Fatalf("unauthenticated POST with a body never sent: %q after %s, want 401 at once", line, time.Since(start).Round(time.Millisecond))
	}
	if !closedWithin(c, 3*time.Second) {
		t.Error("the connection stays open after the 401")
	}
}

// TestBodyTimeout: an authorised request that declares a body and does not
// send it is cut at the body timeout, whether its handler reads the body
// (POST) or not (a GET with a declared body).
func TestBodyTimeout(t *testing.T) {
	_, addr := serveLoopback(t, Config{Token: "s3cret-token", Limits: Limits{BodyTimeout: 300 * time.Millisecond}, Options: app.Options{Analytic: true}})
	auth := "Authorization: Bearer s3cret-token\r\n"
	for _, head := range []string{
		"POST /api/v1/labs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/yaml\r\n" + auth + "Content-Length: 10\r\n\r\n",
		"GET /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + "Content-Length: 10\r\n\r\n",
	} {
		start := time.Now()
		_, c := rawRequest(t, addr, head, 3*time.Second)
		if !closedWithin(c, 3*time.Second) {
			t.Errorf("%s: still open %s after a body that never came", strings.SplitN(head, "\r\n", 2)[0], time.Since(start).Round(time.Millisecond))
		}
	}
}

// TestHeaderLimits: headers never finished are cut at the header timeout;
// a header block over MaxHeaderBytes is refused with 431.
func TestHeaderLimits(t *testing.T) {
	_, addr := serveLoopback(t, Config{Limits: Limits{HeaderTimeout: 200 * time.Millisecond, MaxHeaderBytes: 4 << 10}})
	_, c := rawRequest(t, addr, "GET /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n", 0)
	if !closedWithin(c, 3*time.Second) {
		t.Error("a request whose headers never end stays open past the header timeout")
	}
	line, _ := rawRequest(t, addr, "GET /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "+strings.Repeat("a", 64<<10)+"\r\n\r\n", 3*time.Second)
	if !strings.Contains(line, " 431 ") {
		t.Errorf("64 KiB of headers: %q, want 431", line)
	}
}

// TestConnectionCap: with MaxConns open connections, the next one is not
// served until one of them closes.
func TestConnectionCap(t *testing.T) {
	_, addr := serveLoopback(t, Config{Limits: Limits{MaxConns: 2}})
	var held []net.Conn
	for range 2 {
		line, c := rawRequest(t, addr, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 3*time.Second)
		if !strings.Contains(line, " 200 ") {
			t.Fatalf("healthz: %q", line)
		}
		held = append(held, c) // kept alive
	}
	line, third := rawRequest(t, addr, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 500*time.Millisecond)
	if line != "" {
		t.Fatalf("a third connection over a cap of 2 was served: %q", line)
	}
	held[0].Close()
	third.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the third connection once one closed: %v %v", resp, err)
	}
}

// TestStreamOutlivesDeadlines: an event stream is not cut by the body or
// write timeouts: a queued lab's stream stays open three times longer than
// both, then follows the lab to its end.
func TestStreamOutlivesDeadlines(t *testing.T) {
	srv, addr := serveLoopback(t, Config{MaxLabs: 1, Limits: Limits{BodyTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond},
		Options: app.Options{Analytic: true}})
	srv.slots <- struct{}{} // the only slot, taken: the lab waits
	resp, err := http.Post("http://"+addr+"/api/v1/labs", "application/yaml", strings.NewReader(smallSpec))
	if err != nil {
		t.Fatal(err)
	}
	var st started
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st.Status != StatusQueued {
		t.Fatalf("submitted: %+v, want queued", st)
	}
	ev, err := http.Get(fmt.Sprintf("http://%s/api/v1/runs/%d/events", addr, st.ID))
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Body.Close()
	time.AfterFunc(time.Second, func() { <-srv.slots })
	b, err := io.ReadAll(ev.Body)
	if err != nil {
		t.Fatalf("stream cut after %d bytes: %v", len(b), err)
	}
	if !strings.Contains(string(b), "event: queued") || !strings.Contains(string(b), `"status":"done"`) {
		t.Errorf("stream: %.300s … %.300s", b, b[max(0, len(b)-300):])
	}
}
