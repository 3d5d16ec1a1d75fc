package runtimes

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLabAndReportLinkNoRuntimeClient: the lab and the reports reach the
// docker and kubernetes runtimes only through this package's registry, so
// neither links the Docker client nor client-go (nor moby's API types):
// a change that imports them back makes every test binary and server of
// those packages carry both clients again.
func TestLabAndReportLinkNoRuntimeClient(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "../lab", "../report", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var bad []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "k8s.io/") || strings.HasPrefix(p, "github.com/moby/") || strings.HasPrefix(p, "github.com/docker/") ||
			strings.HasSuffix(p, "/internal/engine/docker") || strings.HasSuffix(p, "/internal/engine/kubernetes") {
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		t.Errorf("lab, report or runtimes link %d runtime client packages, e.g. %s", len(bad), strings.Join(bad[:min(len(bad), 5)], ", "))
	}
}
