package bench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/bench/benchtest"
)

// rawServer answers request i (by the trailing digits of x-request-id)
// with the bytes resp(i) and then closes the connection when closeAfter(i),
// else keeps it for the next request. It counts accepted connections.
type rawServer struct {
	ln    net.Listener
	conns atomic.Int32
	wg    sync.WaitGroup
	// hold, when set, makes the server stop at holdMark in a response,
	// count the stream in held, and go on once hold is closed.
	hold chan struct{}
	held atomic.Int32
}

const holdMark = "\x00hold\x00"

var trailingDigits = regexp.MustCompile(`(\d+)$`)

func newRawServer(t *testing.T, resp func(i int) string, closeAfter func(i int) bool) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, hold: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = bufio.NewReader(req.Body).WriteTo(discard{})
					i, _ := strconv.Atoi(trailingDigits.FindString(req.Header.Get("X-Request-Id")))
					raw := resp(i)
					if closeAfter(i) && !strings.HasPrefix(raw, "HTTP/1.1 100") {
						// Say so, as a real server does: otherwise a client
						// may send its next request on this connection as
						// the server closes it, and read a reset.
						raw = strings.Replace(raw, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)
					}
					first, rest, held := strings.Cut(raw, holdMark)
					if _, err := c.Write([]byte(first)); err != nil {
						return
					}
					if held {
						s.held.Add(1)
						<-s.hold
						if _, err := c.Write([]byte(rest)); err != nil {
							return
						}
					}
					if closeAfter(i) {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() }

func chunked(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(p), p)
	}
	return b.String() + "0\r\n\r\n"
}

const sseOK = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

// TestTransportsAgree: both transports turn the same raw answers (every
// body framing, interim responses, long error bodies, broken framing, cut
// connections) into the same records.
func TestTransportsAgree(t *testing.T) {
	long := strings.Repeat("e", 2000)
	noDone := ev(cmplChunk) + ev(cmplChunk) + ev(usageOnly)
	events := noDone + ev("[DONE]")
	cases := []struct {
		name  string
		raw   string
		class string
		toks  int
	}{
		{"chunked", sseOK + chunked(ev(cmplChunk), ev(cmplChunk)+ev(usageOnly), ev("[DONE]")), "", 3},
		{"content-length without [DONE]", fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(noDone), noDone), "", 3},
		{"close-delimited", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + events, "", 3},
		{"interim 100", "HTTP/1.1 100 Continue\r\n\r\n" + sseOK + chunked(events), "", 3},
		{"503 with a long body", fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n%s", len(long)+2, " "+long+" "), ClassHTTPStatus, 0},
		{"not HTTP", "HELLO\r\n\r\n", ClassReset, 0},
		{"bad chunk length", sseOK + "7b\r\n" + ev(cmplChunk) + "\r\nzz\r\n", ClassReset, 0},
		{"cut mid-stream", sseOK + fmt.Sprintf("%x\r\n", len(ev(cmplChunk))) + ev(cmplChunk) + "\r\n", ClassReset, 0},
		{"no choices", sseOK + chunked(ev(usageOnly), ev("[DONE]")), ClassNoChoices, 0},
		{"bad event", sseOK + chunked(ev(`{"choices": [ nope`)), ClassBadStream, 0},
	}
	srv := newRawServer(t, func(i int) string { return cases[i].raw }, func(i int) bool { return cases[i].class != "" || i == 2 })
	recs := map[string][]string{}
	for _, tr := range transports() {
		t.Run(strings.ReplaceAll(tr, "/", ""), func(t *testing.T) {
			out, err := Run(context.Background(), Config{Transport: tr, BaseURL: srv.url(), Model: "m",
				Requests: requests(len(cases), 1, 3), MaxConcurrency: 1, RequestIDPrefix: "r-"})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range out.Records {
				c := cases[i]
				if r.ErrorClass != c.class || r.Success != (c.class == "") {
					t.Errorf("%s: class %q (%s), want %q", c.name, r.ErrorClass, r.Error, c.class)
				}
				if r.Success && (r.OutputLen != c.toks || len(r.ChunkTokens) != 2 || r.TTFT <= 0 || r.Latency < r.TTFT) {
					t.Errorf("%s: output %d, chunks %v, ttft %v latency %v", c.name, r.OutputLen, r.ChunkTokens, r.TTFT, r.Latency)
				}
				if c.class == ClassHTTPStatus {
					want := "HTTP 503 Service Unavailable: " + long[:errBodyMax-1]
					if r.Error != want {
						t.Errorf("%s: reason %.60q..., want the status and the first 1 KiB of the body", c.name, r.Error)
					}
				}
				recs[c.name] = append(recs[c.name], fmt.Sprintf("%v %s %v %d", r.Success, r.ErrorClass, r.ChunkTokens, r.OutputLen))
				if c.class == ClassHTTPStatus || c.class == ClassBadStream || c.class == ClassNoChoices {
					recs[c.name] = append(recs[c.name], r.Error)
				}
			}
		})
	}
	if len(transports()) == 2 {
		for name, v := range recs {
			if h := len(v) / 2; strings.Join(v[:h], "|") != strings.Join(v[h:], "|") {
				t.Errorf("%s: net/http %q, epoll %q", name, v[:h], v[h:])
			}
		}
	}
}

// TestKeepAlive: sequential requests share one connection, and (epoll
// only) a request sent on a kept connection that the server has since
// closed is retried on a fresh one rather than failed. net/http retries
// only when it knows nothing was written, so it fails some of those.
func TestKeepAlive(t *testing.T) {
	resp := sseOK + chunked(ev(cmplChunk), ev("[DONE]"))
	for _, tr := range transports() {
		t.Run(strings.ReplaceAll(tr, "/", ""), func(t *testing.T) {
			for _, tc := range []struct {
				name      string
				closeEach bool
				maxConns  int32
			}{{"reuse", false, 1}, {"server closes idle", true, 12}} {
				if tc.closeEach && tr != TransportEpoll {
					continue
				}
				srv := newRawServer(t, func(int) string { return resp }, func(int) bool { return tc.closeEach })
				out, err := Run(context.Background(), Config{Transport: tr, BaseURL: srv.url(), Model: "m",
					Requests: requests(12, 1, 1), MaxConcurrency: 1, RequestRate: math.Inf(1)})
				if err != nil {
					t.Fatal(err)
				}
				if out.Result.Completed != 12 {
					for _, r := range out.Records {
						t.Logf("%s: %s %s", r.ID, r.ErrorClass, r.Error)
					}
					t.Errorf("%s: %d of 12 completed", tc.name, out.Result.Completed)
				}
				if n := srv.conns.Load(); n > tc.maxConns {
					t.Errorf("%s: %d connections for 12 sequential requests, want at most %d", tc.name, n, tc.maxConns)
				}
			}
		})
	}
}

func TestResolveTransport(t *testing.T) {
	epollOK := runtime.GOOS == "linux"
	for _, tc := range []struct {
		name, transport, base string
		client, proxy         bool
		want, err             string
	}{
		{name: "auto http", base: "http://127.0.0.1:8000", want: map[bool]string{true: TransportEpoll, false: TransportNetHTTP}[epollOK]},
		{name: "auto https", transport: TransportAuto, base: "https://example.com", want: TransportNetHTTP},
		{name: "auto with a client", base: "http://127.0.0.1:8000", client: true, want: TransportNetHTTP},
		{name: "auto through a proxy", base: "http://10.1.2.3:8000", proxy: true, want: TransportNetHTTP},
		{name: "explicit net/http", transport: TransportNetHTTP, base: "http://127.0.0.1:8000", want: TransportNetHTTP},
		{name: "epoll over https", transport: TransportEpoll, base: "https://example.com", err: "plain http:// only"},
		{name: "epoll with a client", transport: TransportEpoll, base: "http://127.0.0.1:8000", client: true, err: "Config.Client is set"},
		{name: "unknown", transport: "quic", base: "http://127.0.0.1:8000", err: `unknown transport "quic"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.proxy {
				proxyFor = func(*http.Request) (*url.URL, error) { return url.Parse("http://127.0.0.1:3128") }
				defer func() { proxyFor = http.ProxyFromEnvironment }()
			}
			cfg := Config{BaseURL: tc.base, Transport: tc.transport, Requests: requests(1, 1, 1)}
			if tc.client {
				cfg.Client = &http.Client{}
			}
			_, err := cfg.normalize()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || cfg.Transport != tc.want {
				t.Fatalf("transport %q, err %v; want %q", cfg.Transport, err, tc.want)
			}
		})
	}
	cfg := Config{BaseURL: "http://127.0.0.1:1", Requests: requests(1, 1, 1), Headers: map[string]string{"X-Evil": "a\r\nInjected: 1"}}
	if _, err := cfg.normalize(); err == nil || !strings.Contains(err.Error(), "X-Evil") {
		t.Errorf("header with CRLF: err = %v", err)
	}
}

// TestNoGoroutinePerStream: with 200 streams held open mid-stream, the
// epoll transport runs a fixed handful of goroutines, where net/http runs
// a few per stream. Counted, not timed: the server holds every stream
// until the count is taken.
func TestNoGoroutinePerStream(t *testing.T) {
	const streams = 200
	resp := sseOK + fmt.Sprintf("%x\r\n%s\r\n", len(ev(cmplChunk)), ev(cmplChunk)) + holdMark + chunked(ev(cmplChunk), ev("[DONE]"))
	for _, tr := range transports() {
		t.Run(strings.ReplaceAll(tr, "/", ""), func(t *testing.T) {
			srv := newRawServer(t, func(int) string { return resp }, func(int) bool { return false })
			base := runtime.NumGoroutine()
			// The count, and whether every stream was in flight when it
			// was taken: the count itself can come out below zero when
			// goroutines counted in base (an earlier test's) exit
			// meanwhile, so it cannot double as the timeout's signal.
			type count struct {
				n        int
				inFlight bool
			}
			extra := make(chan count, 1)
			go func() {
				for give := time.Now().Add(30 * time.Second); srv.held.Load() < streams; time.Sleep(5 * time.Millisecond) {
					if time.Now().After(give) {
						extra <- count{}
						close(srv.hold)
						return
					}
				}
				// Every stream is mid-stream: its first chunk written, the
				// rest held back. Server goroutines: the accept loop and one
				// per connection; this goroutine is one more.
				extra <- count{runtime.NumGoroutine() - base - 1 - int(srv.conns.Load()) - 1, true}
				close(srv.hold)
			}()
			out, err := Run(context.Background(), Config{Transport: tr, BaseURL: srv.url(), Model: "m",
				Requests: requests(streams, 1, 2), MaxConcurrency: streams})
			if err != nil {
				t.Fatal(err)
			}
			c := <-extra
			n := c.n
			if !c.inFlight {
				t.Fatalf("the server never had all %d streams in flight (%d)", streams, srv.held.Load())
			}
			if out.Result.Completed != streams {
				t.Fatalf("%d of %d completed", out.Result.Completed, streams)
			}
			t.Logf("%s: %d client goroutines for %d streams in flight", tr, n, streams)
			switch {
			case tr == TransportEpoll && n > 10:
				t.Errorf("epoll: %d client goroutines for %d streams, want a fixed few", n, streams)
			case tr == TransportNetHTTP && n < streams:
				t.Errorf("net/http: %d client goroutines for %d streams; the count is broken", n, streams)
			}
		})
	}
}

// TestFastServer: benchtest.Fast, the measurement server, streams what it
// is asked for over both transports, batched at zero latency and one
// event per write on a schedule, with a write log for each request.
func TestFastServer(t *testing.T) {
	for _, tr := range transports() {
		t.Run(strings.ReplaceAll(tr, "/", ""), func(t *testing.T) {
			for _, f := range []*benchtest.Fast{
				{Batch: 16},
				{TTFT: 20 * time.Millisecond, Gap: 5 * time.Millisecond, KeepLogs: true},
			} {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				go func() { _ = f.Serve(ln) }()
				const n, chunks = 20, 37
				out, err := Run(context.Background(), Config{Transport: tr, BaseURL: "http://" + ln.Addr().String(),
					Requests: requests(n, 1, chunks), RequestIDPrefix: "f-"})
				ln.Close()
				if err != nil {
					t.Fatal(err)
				}
				if out.Model != "fake-model" || out.Result.Completed != n {
					t.Fatalf("model %q, %d of %d completed", out.Model, out.Result.Completed, n)
				}
				for i, r := range out.Records {
					if len(r.ChunkTokens) != chunks || r.OutputLen != chunks {
						t.Errorf("request %d: %d chunks, output %d, want %d", i, len(r.ChunkTokens), r.OutputLen, chunks)
					}
					if !f.KeepLogs {
						continue
					}
					lg := f.Logs(i)
					if lg == nil || len(lg.Written) != chunks || len(lg.Began) != chunks {
						t.Fatalf("request %d: log %+v", i, lg)
					}
					// The first chunk cannot reach the client before the
					// server began writing it.
					if began := (lg.Began[0] - lg.Arrived).Seconds(); r.TTFT < began || began < 0.02 {
						t.Errorf("request %d: TTFT %.4f, server began the first write %.4f after arrival (plan 0.020)", i, r.TTFT, began)
					}
				}
			}
		})
	}
}
