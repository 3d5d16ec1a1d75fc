// Package browsertest finds the headless Chromium the browser tests drive
// (the report's HTML and perflab serve's pages). .ci/run installs it, so
// under CI=true its absence fails the test; elsewhere the test is skipped.
package browsertest

import (
	"os"
	"os/exec"
	"testing"
)

// Chromium returns the path of the browser binary.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found under CI=true: .ci/run must install it")
	}
	t.Skip("chromium not installed")
	return ""
}
