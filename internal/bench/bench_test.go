package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/bench/benchtest"
)

// BenchmarkReadStream is the client's per-chunk hot path: SSE framing and
// the chunk scanner on vLLM-shaped completion chunks, 64 per response.
func BenchmarkReadStream(b *testing.B) {
	var stream bytes.Buffer
	for range 64 {
		stream.WriteString(ev(cmplChunk))
	}
	stream.WriteString(ev(usageOnly) + ev("[DONE]"))
	data := stream.Bytes()
	s := &streamState{}
	r := bytes.NewReader(data)
	now := func() float64 { return 0 }
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r.Reset(data)
		*s = streamState{itl: s.itl[:0], chunkTok: s.chunkTok[:0], textEnds: s.textEnds[:0], text: s.text[:0], partial: s.partial[:0]}
		if err := readStream(r, s, now); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*65), "ns/chunk")
}

// fastServer starts f on a loopback port and returns its base URL.
func fastServer(b *testing.B, f *benchtest.Fast) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = f.Serve(ln) }()
	b.Cleanup(func() { ln.Close() })
	return "http://" + ln.Addr().String()
}

// BenchmarkLoopback: 1,000 concurrent streams from a zero-latency
// in-process benchtest.Fast server (16 events per write), 100 chunks each,
// per transport. Reports chunks/s for client and server together (they
// share the process; scripts/bench-client-perf.sh separates them to
// measure the client's own CPU).
func BenchmarkLoopback(b *testing.B) {
	for _, tr := range transports() {
		b.Run(strings.ReplaceAll(tr, "/", ""), func(b *testing.B) {
			url := fastServer(b, &benchtest.Fast{Chunks: 100})
			const streams = 1000
			reqs := requests(streams, 1, 100)
			b.ResetTimer()
			chunks := 0
			for range b.N {
				out, err := Run(context.Background(), Config{BaseURL: url, Model: "m", Requests: reqs, MaxConcurrency: streams, Transport: tr})
				if err != nil {
					b.Fatal(err)
				}
				if out.Result.Completed != streams {
					b.Fatalf("completed %d", out.Result.Completed)
				}
				for _, r := range out.Records {
					chunks += len(r.ChunkTokens)
				}
			}
			b.ReportMetric(float64(chunks)/b.Elapsed().Seconds(), "chunks/s")
		})
	}
}

// BenchmarkAccuracy: 100 or 1,000 concurrent streams, each a first chunk
// after 100 ms and then a chunk every 50 ms (20k chunks/s in all at 1,000
// streams), from an in-process benchtest.Fast, per transport. The client's
// TTFT and ITL are compared with the times the server's writes returned
// (same process, same clock); p50/p99 of the absolute error are reported
// in ms. The error against the nominal schedule (server lateness
// included) is reported too.
func BenchmarkAccuracy(b *testing.B) {
	for _, tr := range transports() {
		for _, streams := range []int{100, 1000} {
			b.Run(fmt.Sprintf("%s/streams=%d", strings.ReplaceAll(tr, "/", ""), streams), func(b *testing.B) { benchAccuracy(b, tr, streams) })
		}
	}
}

func benchAccuracy(b *testing.B, tr string, streams int) {
	const nchunks = 20
	gap := 50 * time.Millisecond
	srv := &benchtest.Fast{Chunks: nchunks, TTFT: 100 * time.Millisecond, Gap: gap, KeepLogs: true}
	url := fastServer(b, srv)
	reqs := requests(streams, 1, nchunks)
	b.ResetTimer()
	var ttftErr, itlErr, nomITL []float64
	for range b.N {
		out, err := Run(context.Background(), Config{BaseURL: url, Model: "m", Requests: reqs, MaxConcurrency: streams, Transport: tr})
		if err != nil {
			b.Fatal(err)
		}
		off := out.Start.Sub(srv.Clock)
		for i, r := range out.Records {
			lg := srv.Logs(i)
			if lg == nil || len(lg.Written) < nchunks || !r.Success {
				b.Fatalf("request %d: %s, log %v", i, r.Error, lg)
			}
			w := func(k int) float64 { return (lg.Written[k] - off).Seconds() }
			ttftErr = append(ttftErr, math.Abs(r.TTFT-(w(0)-r.Sent))*1000)
			for k, g := range r.ITL {
				itlErr = append(itlErr, math.Abs(g-(w(k+1)-w(k)))*1000)
				nomITL = append(nomITL, math.Abs(g-gap.Seconds())*1000)
			}
		}
	}
	b.ReportMetric(Percentile(ttftErr, 99), "ttft-err-p99-ms")
	b.ReportMetric(Percentile(itlErr, 99), "itl-err-p99-ms")
	b.ReportMetric(Percentile(itlErr, 50), "itl-err-p50-ms")
	b.ReportMetric(Percentile(nomITL, 99), "itl-vs-plan-p99-ms")
}
