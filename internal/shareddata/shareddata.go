// Package shareddata locates the project's shared test data — the ShareGPT
// sample, the tokenizer files and the reference reports in ../shared beside
// the repository root — for tests in every package. The data is read in
// place, never copied into the repository.
//
// When the data is missing a test is skipped, except under CI=true, where
// it always exists and its absence is a failure.
package shareddata

import (
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot returns the directory holding go.mod, walking up from the
// current directory (a package test runs in its package's directory).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("shareddata: go.mod not found above the test directory")
		}
		dir = parent
	}
}

// Dir returns the shared directory (../shared from the repository root).
func Dir(t testing.TB) string {
	t.Helper()
	return Path(t)
}

// Path returns elem joined under the shared directory, checking it exists.
func Path(t testing.TB, elem ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{RepoRoot(t), "..", "shared"}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("shared test data missing under CI=true: %v", err)
		}
		t.Skipf("shared test data missing: %v", err)
	}
	return p
}
