package serve

import (
	"bufio"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// lateTraceEnv names a file that receives a timeline of token lateness
// when the server stops: for diagnosing where late tokens come from (the
// histogram says how many, not when). Off unless set.
const lateTraceEnv = "PERFLAB_SIM_SERVE_LATE_TRACE"

const (
	traceBin  = 10 * time.Millisecond
	traceBins = 60000 // ten minutes
)

// lateTrace bins tokens by when they were written (since t0): how many,
// how many more than 1 ms late, and the worst lateness in the bin.
type lateTrace struct {
	t0   time.Time
	path string
	bins [traceBins]struct{ n, late, maxNs atomic.Int64 }
}

func newLateTrace(t0 time.Time) *lateTrace {
	path := os.Getenv(lateTraceEnv)
	if path == "" {
		return nil
	}
	return &lateTrace{t0: t0, path: path}
}

func (t *lateTrace) add(d time.Duration, n int) { t.addAt(time.Now(), d, n) }

// addAt counts n tokens written at now, d late.
func (t *lateTrace) addAt(now time.Time, d time.Duration, n int) {
	i := int(now.Sub(t.t0) / traceBin)
	if i < 0 || i >= traceBins {
		return
	}
	b := &t.bins[i]
	b.n.Add(int64(n))
	if d > time.Millisecond {
		b.late.Add(int64(n))
	}
	for {
		m := b.maxNs.Load()
		if int64(d) <= m || b.maxNs.CompareAndSwap(m, int64(d)) {
			break
		}
	}
}

// flush writes the trace, reporting a failure on stderr (the server is
// stopping; there is nobody else to tell).
func (t *lateTrace) flush() {
	if err := t.write(); err != nil {
		fmt.Fprintln(os.Stderr, "perflab sim serve:", err)
	}
}

// write saves the non-empty bins as "ms tokens late>1ms max_ms" lines.
func (t *lateTrace) write() error {
	f, err := os.Create(t.path)
	if err != nil {
		return fmt.Errorf("serve: late trace: %w", err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "# ms_since_start tokens late_over_1ms max_ms")
	for i := range t.bins {
		b := &t.bins[i]
		if n := b.n.Load(); n > 0 {
			fmt.Fprintf(w, "%d %d %d %.3f\n", i*int(traceBin/time.Millisecond), n, b.late.Load(), float64(b.maxNs.Load())/1e6)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("serve: late trace: %w", err)
	}
	return f.Close()
}
