// Package server is perflab serve: the REST API under /api/v1 (labs, runs,
// trials, reports, live progress as server-sent events), /healthz and
// /metrics, and the embedded dashboard, over the same store and the same
// lab wiring (internal/app) as the CLI. It listens on loopback without a
// token; anywhere else it requires one.
package server

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/store"
)

//go:embed openapi.json
var openAPI []byte

// DefaultAddr is where perflab serve listens by default: loopback only.
const DefaultAddr = "127.0.0.1:8088"

// DefaultMaxBody is the largest request body accepted (a spec or an
// imported result file).
const DefaultMaxBody = 4 << 20

// Config is what a Server serves and how.
type Config struct {
	// Store is the results database the CLI uses too.
	Store *store.Store
	// Token, when set, is required on every API call (Bearer). Empty is
	// allowed only on a loopback address (CheckAddr).
	Token string
	// DataRoot is the one directory whose files a spec submitted over the
	// API may name (relative paths resolve against it).
	DataRoot string
	// MaxBody limits request bodies (0: DefaultMaxBody).
	MaxBody int64
	// Dashboard serves "/" (nil: none).
	Dashboard http.Handler
	// Log receives each lab's progress lines, from the same events as
	// the API's stream (nil: none).
	Log io.Writer
	// Options are the command line's overrides applied to every spec
	// (zero: the specs' own choices).
	Options app.Options
	// Limits are the HTTP server's timeouts and caps (zero fields: the
	// defaults, DefaultLimits).
	Limits Limits
	// MaxLabs is how many labs run at once (0: DefaultMaxLabs); more wait
	// in a queue, listed as queued.
	MaxLabs int
	// KeepEnded and KeepEndedFor bound the ended labs and benchmarks whose
	// event streams and errors stay in memory (0: DefaultKeepEnded,
	// DefaultKeepEndedFor); the store keeps every run.
	KeepEnded    int
	KeepEndedFor time.Duration
}

// labMemory is the memory set aside per lab: a lab of a small spec on the
// simulator peaked at about 230 MiB (50 posted at once, two running: 505
// MiB RSS; docs/benchmarks.md), and larger workloads take more.
const labMemory = 512 << 20

// DefaultMaxLabs is how many labs a server runs at once by default: one
// per CPU, since a lab on the simulator keeps a CPU busy and more at once
// only slows each, and no more than the memory holds at labMemory each.
func DefaultMaxLabs() int {
	n := runtime.NumCPU()
	if mem := memTotal(); mem > 0 {
		n = min(n, int(mem/labMemory))
	}
	return max(n, 1)
}

// memTotal is the machine's memory from /proc/meminfo (0 when unknown).
func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var kb int64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// Limits are what one client may hold of the server: time to send its
// headers and body, idle keep-alive time, time to take a response, and
// connections. A server reachable by others needs every one of them: a
// client that opens connections and sends nothing would otherwise hold a
// goroutine and a file descriptor each, for ever.
type Limits struct {
	// HeaderTimeout bounds reading a request's headers.
	HeaderTimeout time.Duration
	// BodyTimeout bounds reading a request's body, from the end of its
	// headers; a request that declares a body and does not send it is
	// cut when it passes.
	BodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout time.Duration
	// WriteTimeout bounds each response of an ordinary call, and each
	// event write of a stream (a stream itself lasts as long as its lab:
	// a server-wide write timeout would cut it).
	WriteTimeout time.Duration
	// MaxConns caps the open connections; more wait to be accepted.
	MaxConns int
	// MaxHeaderBytes caps a request's header block.
	MaxHeaderBytes int
}

// DefaultLimits are the limits of perflab serve. The API's bodies are
// specs and result files (MaxBody, 4 MiB): 30 s reads one on a slow link;
// the connection cap leaves room for a team's dashboards, each of which
// keeps one event stream open per followed run.
var DefaultLimits = Limits{HeaderTimeout: 10 * time.Second, BodyTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
	WriteTimeout: 2 * time.Minute, MaxConns: 256, MaxHeaderBytes: 64 << 10}

// withDefaults fills the zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.HeaderTimeout <= 0 {
		l.HeaderTimeout = d.HeaderTimeout
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = d.BodyTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = d.WriteTimeout
	}
	if l.MaxConns <= 0 {
		l.MaxConns = d.MaxConns
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	return l
}

// Server serves the API. Close stops its labs.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	routes  []route
	metrics *apiMetrics
	reports *reportCache
	// figures caches the latest stored trials' list figures (figureKey
	// → figures), figureCacheSize at most.
	figures *figureCache

	// base is canceled by Close: every lab's context and every event
	// stream derive from it.
	base   context.Context
	cancel context.CancelFunc

	// jobs are the labs and benchmarks this server started.
	jobs *jobs
	wg   sync.WaitGroup
	// slots holds one token per running lab (Config.MaxLabs).
	slots chan struct{}
}

// New builds a server on cfg; its labs run until Close.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("server: no store")
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.DataRoot == "" {
		return nil, errors.New("server: no data root (--data-root)")
	}
	root, err := filepath.Abs(cfg.DataRoot)
	if err != nil {
		return nil, fmt.Errorf("server: data root %s: %w", cfg.DataRoot, err)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("server: data root %s: not a directory", root)
	}
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	cfg.DataRoot = root
	cfg.Limits = cfg.Limits.withDefaults()
	cfg.Options.HidePaths = true
	if cfg.MaxLabs <= 0 {
		cfg.MaxLabs = DefaultMaxLabs()
	}
	cache, err := newReportCache()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), metrics: newMetrics(), reports: cache,
		jobs: newJobs(cfg.KeepEnded, cfg.KeepEndedFor), figures: newFigureCache(figureCacheSize),
		slots: make(chan struct{}, cfg.MaxLabs)}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.routes = s.apiRoutes()
	for _, r := range s.routes {
		s.mux.Handle(r.pattern(), s.wrap(r))
	}
	if cfg.Dashboard != nil {
		s.mux.Handle("GET /", s.guardHost(cfg.Dashboard))
	}
	return s, nil
}

// MaxLabs is how many labs run at once.
func (s *Server) MaxLabs() int { return s.cfg.MaxLabs }

// DataRoot is the absolute data root specs may name files under.
func (s *Server) DataRoot() string { return s.cfg.DataRoot }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

var _ http.Handler = (*Server)(nil)

// Close stops every lab this server runs: their engines are stopped and
// their runs marked interrupted, finished trials kept; event streams end.
// It waits for the labs until ctx ends.
func (s *Server) Close(ctx context.Context) error {
	s.cancel()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("server: labs still stopping: %w", ctx.Err())
	}
	s.reports.close()
	return err
}

// CheckAddr refuses to listen off loopback without a token: the API
// starts labs and reads results, and anyone who reaches the port could.
func CheckAddr(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("server: --addr %s: %w", addr, err)
	}
	if strings.TrimSpace(token) != "" || loopbackHost(host) {
		return nil
	}
	if host == "" {
		host = "every interface"
	}
	return fmt.Errorf("server: --addr %s listens on %s, not loopback only: anyone who reaches it could start labs and read results, so a token is required (--token-file FILE or PERFLAB_TOKEN); or listen on 127.0.0.1", addr, host)
}

// loopbackHost says whether host names this machine's loopback only.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ReadToken reads the token from a file, else PERFLAB_TOKEN, trimmed: a
// blank one is no token (which CheckAddr refuses off loopback), never a
// token of spaces that any client could send.
func ReadToken(file string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv("PERFLAB_TOKEN")), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("server: --token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("server: --token-file %s is empty", file)
	}
	return tok, nil
}

// Serve serves on ln until ctx ends (SIGTERM), then stops the labs (runs
// interrupted, engines stopped) and the listener, within grace.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	lim := s.cfg.Limits
	// No ReadTimeout or WriteTimeout: both are deadlines on the whole
	// connection, and would cut an event stream that outlives them (a
	// ReadTimeout through the background read that cancels the request's
	// context). The body and write deadlines are set per request instead
	// (deadlines).
	hs := &http.Server{Handler: s, ReadHeaderTimeout: lim.HeaderTimeout, IdleTimeout: lim.IdleTimeout,
		MaxHeaderBytes: lim.MaxHeaderBytes}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(limitListener(ln, lim.MaxConns)) }()
	select {
	case err := <-errc:
		s.Close(context.Background())
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	slog.Info("stopping: labs are interrupted, their engines stopped")
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	// The labs first: their event streams end with them, so the HTTP
	// server's shutdown is not held by open streams.
	cerr := s.Close(sctx)
	herr := hs.Shutdown(sctx)
	return errors.Join(cerr, herr)
}

// minProcs is the fewest Ps ShareCPU leaves the Go scheduler.
const minProcs = 8

// ShareCPU gives the process more Ps than CPUs when it has few. A lab on
// the simulator keeps every P busy with CPU-bound goroutines, which Go
// preempts only every 10 ms, so on 2 CPUs an API call queued behind them
// several times per request; with spare Ps its goroutines run on threads
// of their own, which the kernel shares the CPUs with at a finer grain.
// Measured during the 14B lab on 2 shared vCPUs: p50 API latency 40 ms
// with 2 Ps, 7 ms with 8 (docs/benchmarks.md). perflab serve calls it at
// start.
func ShareCPU() {
	if runtime.GOMAXPROCS(0) < minProcs {
		runtime.GOMAXPROCS(minProcs)
	}
}
