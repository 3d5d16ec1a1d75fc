package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/labspec"
)

// TestWorkloadCommandsRunAsPrinted: the bench commands a report prints for
// a dataset under a directory with a space in its name pass the path as
// one argument. Run through bash (a real shell), with each program
// replaced by a function that prints its arguments one per line; they used
// to be joined with spaces and split the path in two.
func TestWorkloadCommandsRunAsPrinted(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	path := filepath.Join(t.TempDir(), "new user", "it's here", "sg.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	w := labspec.Workload{Name: "sg", Dataset: "sharegpt", Path: path, NumPrompts: 10}
	info := workloadInfo(w, "Qwen/Qwen3-14B")
	for _, line := range []string{info.Perflab, info.VLLM} {
		script := `perflab() { printf '%s\n' "$@"; }; vllm() { printf '%s\n' "$@"; }; ` + line
		out, err := exec.Command(bash, "-c", script).Output()
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		i := slices.Index(got, "--dataset-path")
		if i < 0 || i+1 >= len(got) || got[i+1] != path {
			t.Errorf("%s\nreads as %q, want --dataset-path %q", line, got, path)
		}
	}
}
