package main

import (
	"os"
	"testing"

	"github.com/perflab/perflab/internal/testbin"
)

// TestMain removes the perflab binary the newcomer tests built, if they
// built one (not PERFLAB_BIN, which is CI's).
func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}
