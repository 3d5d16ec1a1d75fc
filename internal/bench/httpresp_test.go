package bench

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// parseResp pushes raw through a respParser in pieces of step bytes (0:
// all at once) and returns the status, the body and the first error; eof
// says whether the connection ended after raw.
func parseResp(raw []byte, step int, eof bool) (status int, body []byte, done bool, err error) {
	var h respParser
	if step <= 0 {
		step = len(raw) + 1
	}
	for i := 0; i < len(raw) && !h.done(); i += step {
		p := raw[i:min(i+step, len(raw))]
		for len(p) > 0 && !h.done() {
			var seg []byte
			seg, p, err = h.next(p)
			if err != nil {
				return h.status, body, false, err
			}
			body = append(body, seg...)
		}
	}
	if eof && !h.done() {
		if err = h.eof(); err != nil {
			return h.status, body, false, err
		}
	}
	return h.status, body, h.done(), nil
}

func TestRespParser(t *testing.T) {
	for _, tc := range []struct {
		name   string
		raw    string
		eof    bool
		status int
		body   string
		done   bool
		keep   bool
		err    error // errors.Is target; nil: no error
		errStr string
	}{
		{name: "chunked", raw: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;ext=1\r\n!\r\n0\r\nX-Trailer: a\r\n\r\n",
			status: 200, body: "hello!", done: true, keep: true},
		{name: "chunked upper-case hex and bare LF", raw: "HTTP/1.1 200 OK\nTransfer-Encoding: Chunked\n\nA\n0123456789\r\n0\n\n",
			status: 200, body: "0123456789", done: true, keep: true},
		{name: "content-length", raw: "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboomEXTRA",
			status: 500, body: "boom", done: true, keep: true},
		{name: "close-delimited", raw: "HTTP/1.1 200 OK\r\n\r\nstream until close", eof: true,
			status: 200, body: "stream until close", done: true},
		{name: "connection close", raw: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
			status: 200, done: true},
		{name: "http/1.0 keep-alive", raw: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx",
			status: 200, body: "x", done: true, keep: true},
		{name: "interim 100 skipped", raw: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
			status: 200, body: "ok", done: true, keep: true},
		{name: "no bytes then EOF", raw: "", eof: true, err: io.EOF},
		{name: "cut in header", raw: "HTTP/1.1 200 OK\r\nTransfer-", eof: true, err: io.ErrUnexpectedEOF},
		{name: "cut in chunk", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc", eof: true,
			status: 200, body: "abc", err: io.ErrUnexpectedEOF},
		{name: "cut in content-length", raw: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", eof: true,
			status: 200, body: "abc", err: io.ErrUnexpectedEOF},
		{name: "bad chunk size", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", status: 200, err: errChunked},
		{name: "chunk without CRLF", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n", status: 200, body: "a", err: errChunked},
		{name: "huge chunk size", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", status: 200, err: errChunked},
		{name: "not HTTP", raw: "SSH-2.0-OpenSSH\r\n\r\n", errStr: "malformed HTTP response"},
		{name: "bad header line", raw: "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", errStr: "malformed MIME header line"},
		{name: "conflicting lengths", raw: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", errStr: "bad Content-Length"},
	} {
		for _, step := range []int{0, 1, 3, 7} {
			status, body, done, err := parseResp([]byte(tc.raw), step, tc.eof)
			switch {
			case tc.err != nil && !errors.Is(err, tc.err):
				t.Errorf("%s/step %d: err = %v, want %v", tc.name, step, err, tc.err)
			case tc.errStr != "" && (err == nil || !strings.Contains(err.Error(), tc.errStr)):
				t.Errorf("%s/step %d: err = %v, want %q", tc.name, step, err, tc.errStr)
			case tc.err == nil && tc.errStr == "" && err != nil:
				t.Errorf("%s/step %d: err = %v", tc.name, step, err)
			}
			if tc.errStr == "" && (status != tc.status || string(body) != tc.body || done != tc.done) {
				t.Errorf("%s/step %d: status %d body %q done %v, want %d %q %v", tc.name, step, status, body, done, tc.status, tc.body, tc.done)
			}
		}
		if tc.err == nil && tc.errStr == "" {
			var h respParser
			for p := []byte(tc.raw); len(p) > 0 && !h.done(); {
				_, p, _ = h.next(p)
			}
			if tc.eof {
				_ = h.eof()
			}
			if h.keepAlive != tc.keep {
				t.Errorf("%s: keep-alive %v, want %v", tc.name, h.keepAlive, tc.keep)
			}
		}
	}
}

// FuzzRespParser: no panics; the same bytes cut at any read boundaries
// parse the same; and where net/http reads the response without error,
// the status and body agree with it.
func FuzzRespParser(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), uint8(3))
	f.Add([]byte("HTTP/1.1 500 Oops\r\nContent-Length: 3\r\n\r\nabc"), uint8(1))
	f.Add([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\nrest"), uint8(9))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\n"), uint8(2))
	f.Add([]byte("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n1\nx\r\n0\n\n"), uint8(5))
	f.Fuzz(func(t *testing.T, raw []byte, cut uint8) {
		st1, b1, d1, e1 := parseResp(raw, 0, true)
		st2, b2, d2, e2 := parseResp(raw, int(cut)%17+1, true)
		if (e1 == nil) != (e2 == nil) || st1 != st2 || d1 != d2 || !bytes.Equal(b1, b2) {
			t.Fatalf("split reads disagree: %d %q %v %v / %d %q %v %v", st1, b1, d1, e1, st2, b2, d2, e2)
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
		if err != nil {
			return
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || e1 != nil || resp.StatusCode < 200 {
			// net/http and this parser differ in leniency at the edges, and
			// ReadResponse returns a 1xx that the Transport would skip.
			return
		}
		if resp.StatusCode != st1 || !bytes.Equal(body, b1) {
			t.Fatalf("net/http read %d %q, respParser %d %q", resp.StatusCode, body, st1, b1)
		}
	})
}
