package serve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLateTrace: with the environment variable set, the socket histogram
// also bins tokens by write time, counting those over 1 ms late, and the
// file lists only the bins that saw tokens.
func TestLateTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "late.txt")
	t.Setenv(lateTraceEnv, path)
	t0 := time.Now()
	tr := newLateTrace(t0)
	at := t0.Add(5*time.Second + 5*time.Millisecond) // the 5,000 ms bin
	tr.addAt(at, 200*time.Microsecond, 3)
	tr.addAt(at, 4*time.Millisecond, 2)
	tr.addAt(t0.Add(-time.Second), time.Millisecond, 7) // before the start: not binned
	h := newLatency()
	h.trace = tr
	h.add(0, 1) // the histogram feeds the trace, at the current time (an early bin)
	if err := tr.write(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[1], " 1 0 0.000") || lines[2] != "5000 5 2 4.000" {
		t.Errorf("trace:\n%s\nwant the header, the histogram's token and \"5000 5 2 4.000\"", b)
	}
	t.Setenv(lateTraceEnv, "")
	if newLateTrace(time.Now()) != nil {
		t.Error("a trace without the environment variable")
	}
}
