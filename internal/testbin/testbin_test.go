package testbin

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// A PERFLAB_BIN that is not an executable file is refused with the
// variable and its value, before any test runs it; a relative one is made
// absolute, since the tests run it from other directories.
func TestGiven(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "perflab")
	plain := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, tc := range []struct {
		name, path, want string
		err              error
	}{
		{"absolute executable", exe, exe, nil},
		{"relative executable", "perflab", exe, nil},
		{"not executable", plain, "", errNotExecutable},
		{"directory", dir, "", errNotExecutable},
		{"missing", filepath.Join(dir, "nope"), "", fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := given(tc.path)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("given(%q) = %q, %v; want error %v", tc.path, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("given(%q) = %q, %v; want %q", tc.path, got, err, tc.want)
			}
		})
	}
}
