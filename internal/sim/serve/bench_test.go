package serve

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/sim"
)

// batchModel steps like a real engine: every period of model time, one
// token for every running request, all at the same instant. New requests
// join at the next step. It is the worst case for burst delivery.
type batchModel struct {
	period float64
	reqs   map[string]int
	order  []string
	next   float64
	gen    int64
}

func (b *batchModel) Submit(r sim.Req) {
	if len(b.reqs) == 0 {
		b.next = math.Ceil(r.Arrival/b.period) * b.period
		if b.next <= r.Arrival {
			b.next += b.period
		}
	}
	b.reqs[r.ID] = r.OutputLen
	b.order = append(b.order, r.ID)
}

func (b *batchModel) NextEventTime() (float64, bool) { return b.next, len(b.reqs) > 0 }

func (b *batchModel) Advance(to float64) []sim.Event {
	var evs []sim.Event
	for len(b.reqs) > 0 && b.next <= to {
		keep := b.order[:0]
		for _, id := range b.order {
			left, ok := b.reqs[id]
			if !ok {
				continue
			}
			left--
			b.gen++
			evs = append(evs, sim.Event{ReqID: id, Time: b.next, Tokens: 1, Done: left == 0})
			if left == 0 {
				delete(b.reqs, id)
			} else {
				b.reqs[id] = left
				keep = append(keep, id)
			}
		}
		b.order = keep
		b.next += b.period
	}
	return evs
}

func (b *batchModel) Stats() sim.Stats {
	return sim.Stats{Running: len(b.reqs), GenerationTokens: b.gen}
}

// streamLoad runs n concurrent streaming completions of outLen tokens
// against base (serving model) and returns the tokens received and the
// wall time.
func streamLoad(tb testing.TB, base, model string, n, outLen int) (int64, time.Duration) {
	tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	body := fmt.Sprintf(`{"model":%q,"prompt":"hello","max_tokens":%d,"stream":true}`, model, outLen)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				tb.Error(err)
				return
			}
			defer resp.Body.Close()
			var got int64
			br := bufio.NewReaderSize(resp.Body, 4096)
			for {
				line, err := br.ReadSlice('\n')
				if len(line) > 6 && line[0] == 'd' && line[6] == '{' {
					got += chunkTokens(line)
				}
				if err != nil {
					if err != io.EOF {
						tb.Error(err)
					}
					break
				}
			}
			mu.Lock()
			total += got
			mu.Unlock()
		}()
	}
	wg.Wait()
	return total, time.Since(start)
}

// chunkTokens counts the filler tokens in one SSE data line (each word of
// the text is one token; a chunk may carry several).
func chunkTokens(line []byte) int64 {
	for _, key := range [][]byte{[]byte(`"text":"`), []byte(`"content":"`)} {
		if i := bytes.Index(line, key); i >= 0 {
			rest := line[i+len(key):]
			if j := bytes.IndexByte(rest, '"'); j >= 0 {
				return int64(bytes.Count(rest[:j], []byte(" ")))
			}
		}
	}
	return 0
}

// BenchmarkStreams1000 serves 1,000 concurrent streams at 20,000 tokens/s
// (a 50 ms batch step producing one token for each of 1,000 requests) and
// reports how late tokens reached the socket. Client and server share the
// process, so run it with GOMAXPROCS=2 for one core each.
func BenchmarkStreams1000(b *testing.B) {
	const n, outLen = 1000, 40 // 40 steps of 50 ms: 2 s per iteration
	for i := 0; i < b.N; i++ {
		s, err := New(Config{Model: &batchModel{period: 0.05, reqs: map[string]int{}}, Root: "Qwen/Qwen3-14B", MaxModelLen: 4096})
		if err != nil {
			b.Fatal(err)
		}
		ts := httptest.NewServer(s.Handler())
		tokens, wall := streamLoad(b, ts.URL, "Qwen/Qwen3-14B", n, outLen)
		ts.Close()
		s.Close()
		late, hand := s.Lateness(), s.HandoffLateness()
		if tokens != n*outLen {
			b.Fatalf("received %d tokens, want %d", tokens, n*outLen)
		}
		b.ReportMetric(float64(tokens)/wall.Seconds(), "tok/s")
		b.ReportMetric(float64(late.P50.Microseconds())/1000, "p50-late-ms")
		b.ReportMetric(float64(late.P99.Microseconds())/1000, "p99-late-ms")
		b.ReportMetric(float64(late.Max.Microseconds())/1000, "max-late-ms")
		b.ReportMetric(float64(hand.P99.Microseconds())/1000, "p99-handoff-ms")
	}
}
