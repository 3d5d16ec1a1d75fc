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
	h := newLatency()
	h.trace = newLateTrace(time.Now().Add(-25 * time.Millisecond)) // writes land in the 20 ms bin
	h.add(200*time.Microsecond, 3)
	h.add(4*time.Millisecond, 2)
	if err := h.trace.write(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[1] != "20 5 2 4.000" {
		t.Errorf("trace:\n%s\nwant the header and \"20 5 2 4.000\"", b)
	}
	t.Setenv(lateTraceEnv, "")
	if newLateTrace(time.Now()) != nil {
		t.Error("a trace without the environment variable")
	}
}
