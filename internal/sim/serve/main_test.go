package serve

import (
	"os"
	"testing"

	"github.com/perflab/perflab/internal/testbin"
)

// TestMain removes the perflab binary the process tests build (about
// 40 MB in a temporary directory), so a test run leaves nothing in /tmp.
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup() // not PERFLAB_BIN, which is CI's
	os.Exit(code)
}
