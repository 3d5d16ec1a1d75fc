package metrics

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/perflab/perflab/internal/shareddata"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden %s (run with -update to create): %v", path, err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w []byte
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if !bytes.Equal(g, w) {
			t.Fatalf("%s: line %d differs\n got: %q\nwant: %q", path, i+1, g, w)
		}
	}
	t.Fatalf("%s differs", path)
}

// repoRoot walks up from the package directory to the directory holding go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	return shareddata.RepoRoot(t)
}

// sharedPath returns ../shared/rel from the repo root, skipping (or failing
// under CI=true) when it is missing.
func sharedPath(t testing.TB, rel string) string {
	t.Helper()
	return shareddata.Path(t, rel)
}
