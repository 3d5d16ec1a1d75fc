package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteKeepsOldOnError: a write that fails midway leaves the old file
// whole and no temporary file behind; a good write replaces it.
func TestWriteKeepsOldOnError(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "report.json")
	if err := WriteFile(p, []byte(`{"old":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("json: unsupported value: NaN")
	err := Write(p, 0o644, func(w io.Writer) error {
		if _, err := w.Write([]byte(`{"new":`)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want it to wrap the writer's", err)
	}
	if b, _ := os.ReadFile(p); string(b) != `{"old":1}` {
		t.Errorf("after a failed write the file holds %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries in the directory, want only the file (no temporary left)", len(ents))
	}
	if err := WriteFile(p, []byte(`{"new":2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if b, _ := os.ReadFile(p); string(b) != `{"new":2}` || err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("after a good write: %q, mode %v, %v", b, fi.Mode(), err)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x"), nil, 0o644); err == nil {
		t.Error("a write into a missing directory succeeded")
	}
}
