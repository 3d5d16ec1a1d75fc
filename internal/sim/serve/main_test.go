package serve

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the perflab binary the process tests build (about
// 40 MB in a temporary directory), so a test run leaves nothing in /tmp.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
