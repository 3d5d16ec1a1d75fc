package fakekubelet

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/perflab/perflab/internal/engine"
)

// TestLinkPrograms: the node runs the command of every registered engine:
// each Kind's programs, and the interpreter of each Kind started as a
// module, are links to the perflab binary.
func TestLinkPrograms(t *testing.T) {
	dir := t.TempDir()
	if err := linkPrograms(dir, "/usr/local/bin/perflab"); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"perflab": true}
	for _, k := range engine.Kinds() {
		for _, p := range k.Programs {
			want[p] = true
		}
		if len(k.Modules) > 0 {
			want["python3"] = true
		}
	}
	for p := range want {
		if l, err := os.Readlink(filepath.Join(dir, p)); err != nil || l != "/usr/local/bin/perflab" {
			t.Errorf("%s: link %q, %v; want one to the perflab binary", p, l, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(engine.ServerPrograms())+1 {
		t.Errorf("linked %d programs, want engine.ServerPrograms' %d and perflab", len(entries), len(engine.ServerPrograms()))
	}
}
