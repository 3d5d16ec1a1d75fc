package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// route is one API endpoint: its method and path as the OpenAPI document
// writes them (which are also ServeMux patterns), and its handler. The
// document and this table are checked against each other by a test.
type route struct {
	method, path string
	h            http.HandlerFunc
	// open routes need no token (the health check).
	open bool
	// stream routes answer for as long as their lab runs (no overall
	// write deadline). Their token travels in the Authorization header
	// like every call's: a token in the URL would land in access logs,
	// browser history and Referer headers.
	stream bool
}

func (r route) pattern() string { return r.method + " " + r.path }

func (s *Server) apiRoutes() []route {
	return []route{
		{method: "GET", path: "/healthz", h: s.healthz, open: true},
		{method: "GET", path: "/metrics", h: s.serveMetrics},
		{method: "GET", path: "/api/v1/openapi.json", h: s.openapi},
		{method: "POST", path: "/api/v1/labs", h: s.postLab},
		{method: "POST", path: "/api/v1/imports", h: s.postImport},
		{method: "POST", path: "/api/v1/benchmarks", h: s.postBenchmark},
		{method: "GET", path: "/api/v1/runs", h: s.listRuns},
		{method: "GET", path: "/api/v1/runs/{id}", h: s.getRun},
		{method: "DELETE", path: "/api/v1/runs/{id}", h: s.cancelRun},
		{method: "POST", path: "/api/v1/runs/{id}/resume", h: s.resumeRun},
		{method: "GET", path: "/api/v1/runs/{id}/trials", h: s.listTrials},
		{method: "GET", path: "/api/v1/runs/{id}/trials/{key}", h: s.getTrial},
		{method: "GET", path: "/api/v1/runs/{id}/events", h: s.events, stream: true},
		{method: "GET", path: "/api/v1/runs/{id}/report.md", h: s.report("md")},
		{method: "GET", path: "/api/v1/runs/{id}/report.html", h: s.report("html")},
		{method: "GET", path: "/api/v1/runs/{id}/report.json", h: s.report("json")},
		{method: "GET", path: "/api/v1/runs/{id}/report.csv", h: s.report("csv")},
		{method: "GET", path: "/api/v1/runs/{id}/charts/{chart}", h: s.chart},
	}
}

// wrap puts the checks every call passes in front of a route's handler:
// latency measured, host and token checked, cross-site writes refused, the
// body limited.
func (s *Server) wrap(rt route) http.Handler {
	var h http.Handler = rt.h
	h = s.limitBody(h)
	h = refuseCrossSite(h)
	if !rt.open {
		h = s.requireToken(h)
	}
	h = s.guardHost(h)
	h = s.deadlines(h, rt.stream)
	return s.metrics.measure(rt.pattern(), h)
}

// deadlines sets the request's own read and write deadlines (Limits): the
// body must arrive within BodyTimeout, and an ordinary call's answer be
// taken within WriteTimeout. A stream sets its write deadline per event
// instead (events).
func (s *Server) deadlines(next http.Handler, stream bool) http.Handler {
	lim := s.cfg.Limits
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.ContentLength != 0 {
			// Errors only where the writer has no connection (a test's
			// recorder): nothing to bound there.
			_ = rc.SetReadDeadline(time.Now().Add(lim.BodyTimeout))
		}
		if !stream {
			_ = rc.SetWriteDeadline(time.Now().Add(lim.WriteTimeout))
		}
		next.ServeHTTP(w, r)
	})
}

// refuseGrace is how long a refused request's body may still take to
// arrive, to be discarded, before its connection is closed.
const refuseGrace = time.Second

// refuse answers an error before the body is read, and closes the
// connection after it: otherwise the server would first read (to discard)
// the body the request declared, and a client that never sends it would
// wait for the answer until the body timeout, then hold the connection
// as long again. A client that does send its body gets refuseGrace to
// finish, so that its connection is not reset under the answer.
func refuse(w http.ResponseWriter, r *http.Request, code int, e apiError) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(refuseGrace))
	}
	writeError(w, code, e)
}

// requireToken answers 401 unless the request carries the token. The
// comparison is of SHA-256 digests in constant time, so neither the
// token's bytes nor its length leak through timing.
func (s *Server) requireToken(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.cfg.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="perflab"`)
			refuse(w, r, http.StatusUnauthorized, apiError{Error: "missing or wrong token (Authorization: Bearer TOKEN)"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// guardHost refuses, on a server without a token, a request whose Host is
// not a loopback name: a web page on another site could otherwise reach
// the loopback API through DNS rebinding, with the browser's help.
func (s *Server) guardHost(next http.Handler) http.Handler {
	if s.cfg.Token != "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !loopbackHost(strings.Trim(host, "[]")) {
			refuse(w, r, http.StatusForbidden, apiError{Error: "host " + r.Host + " is not loopback: this server has no token and answers only on loopback names"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuseCrossSite refuses a state-changing request sent by a page of
// another origin (a form posted to the loopback API from any web site).
func refuseCrossSite(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if o := r.Header.Get("Origin"); o != "" {
				u, err := url.Parse(o)
				if err != nil || u.Host != r.Host {
					refuse(w, r, http.StatusForbidden, apiError{Error: "cross-origin " + r.Method + " from " + o + " refused"})
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// limitBody caps the request body; a handler reading past it gets an
// error that readBody turns into 413.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.cfg.MaxBody {
			refuse(w, r, http.StatusRequestEntityTooLarge, apiError{Error: tooLarge(s.cfg.MaxBody)})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
		next.ServeHTTP(w, r)
	})
}

func tooLarge(n int64) string {
	return "request body over the limit of " + itoa(n) + " bytes"
}

// readBody reads the whole (limited) body; on an error it has answered.
// Once it is read, the body's deadline is lifted: the connection's
// background read would otherwise hit it and cancel the request's context
// while the handler still works.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(r.Body)
	if err == nil {
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			refuse(w, r, http.StatusRequestTimeout, apiError{Error: fmt.Sprintf("request body not received within %s", s.cfg.Limits.BodyTimeout)})
			return nil, false
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, apiError{Error: tooLarge(mbe.Limit)})
			return nil, false
		}
		writeError(w, http.StatusBadRequest, apiError{Error: "read body: " + err.Error()})
		return nil, false
	}
	return b, true
}
