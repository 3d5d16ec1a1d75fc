package simimage

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImageScript runs .ci/image.sh, which builds perflab's image and the
// simulated engine image with podman from the checkout alone (no
// registry), on throwaway podman storage, and checks both images answered.
// It builds perflab twice and needs podman: behind
// PERFLAB_TEST_IMAGE_SCRIPT=1.
func TestImageScript(t *testing.T) {
	if os.Getenv("PERFLAB_TEST_IMAGE_SCRIPT") != "1" {
		t.Skip("set PERFLAB_TEST_IMAGE_SCRIPT=1 to build the images with podman (minutes)")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is not installed")
	}
	dir := t.TempDir()
	// As .ci/podman.sh configures it: runc with cgroupfs, ulimits an
	// unprivileged podman may set.
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = [\"nofile=4096:4096\", \"nproc=4096:4096\"]\n\n[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, "podman")
	t.Cleanup(func() {
		// The storage holds files owned by the user namespace's ids.
		_ = exec.Command("podman", "--root", pdir+"/storage", "--runroot", pdir+"/run", "system", "reset", "-f").Run()
	})
	cmd := exec.Command("bash", "../../.ci/image.sh")
	cmd.Env = append(os.Environ(), "PODMAN_DIR="+pdir, "CONTAINERS_CONF="+conf, "DOCKER_HOST=",
		"PERFLAB_IMAGE=localhost/perflab:test", "PERFLAB_SIM_IMAGE=localhost/perflab-sim:test")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("image.sh: %v\n%s", err, out)
	}
	for _, want := range []string{"localhost/perflab:test runs: perflab ", "localhost/perflab-sim:test runs"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	images, err := exec.Command("podman", "--root", pdir+"/storage", "--runroot", pdir+"/run", "images", "--format", "{{.Repository}}:{{.Tag}}").CombinedOutput()
	if err != nil {
		t.Fatalf("podman images: %v\n%s", err, images)
	}
	for _, want := range []string{"localhost/perflab:test", "localhost/perflab-sim:test"} {
		if !strings.Contains(string(images), want) {
			t.Errorf("podman images lacks %s:\n%s", want, images)
		}
	}
}
