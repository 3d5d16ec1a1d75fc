// Package browsertest finds the headless Chromium the browser tests drive
// (the report's HTML and perflab serve's pages). .ci/run installs it, so
// under CI=true its absence fails the test; elsewhere the test is skipped.
package browsertest

import (
	"os"
	"os/exec"
	"path/filepath"
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

// TempDir is a directory under the test's own for the browser's TMPDIR:
// Chromium leaves empty org.chromium.Chromium.* directories in its
// TMPDIR when it exits (four a dashboard test), which under /tmp pile up
// run after run; under the test's directory they go with it.
func TempDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmp")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}
