// Command fakesse serves benchtest's deterministic OpenAI-compatible stream
// on a TCP address, for measuring benchmark clients (perflab bench, vLLM's
// own) against the same server: every request gets the same plan. -fast
// serves benchtest.Fast instead of the net/http handler, so that one core
// can feed 100k chunks/s.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/perflab/perflab/internal/bench/benchtest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8000", "listen address")
	ttft := flag.Duration("ttft", 0, "time to first chunk")
	gap := flag.Duration("gap", 0, "gap between chunks")
	chunks := flag.Int("chunks", 128, "choices chunks per request (0: the request's max_tokens)")
	tpc := flag.Int("tokens-per-chunk", 1, "tokens per chunk")
	fast := flag.Bool("fast", false, "serve with benchtest.Fast (pre-rendered chunks, -batch events per write at zero latency; one token per chunk)")
	batch := flag.Int("batch", 16, "with -fast and no -ttft/-gap: SSE events per write")
	logPath := flag.String("log", "", "with -fast: append each request's write times (Unix ns) to this file")
	flag.Parse()
	if *fast {
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "fakesse: fast server listening on %s\n", ln.Addr())
		f := &benchtest.Fast{Chunks: *chunks, Batch: *batch, TTFT: *ttft, Gap: *gap}
		if *logPath != "" {
			lf, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				log.Fatal(err)
			}
			f.LogTo = lf
		}
		log.Fatal(f.Serve(ln))
	}
	srv := benchtest.New(func(_ int, body map[string]any) benchtest.Plan {
		n := *chunks
		if n == 0 {
			for _, k := range []string{"max_tokens", "max_completion_tokens"} {
				if v, ok := body[k].(float64); ok {
					n = max(int(v) / *tpc, 1)
				}
			}
		}
		return benchtest.Plan{TTFT: *ttft, Gap: *gap, Chunks: n, TokensPerChunk: *tpc}
	})
	srv.KeepLogs = false
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "fakesse: listening on %s\n", ln.Addr())
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(hs.Serve(ln))
}
