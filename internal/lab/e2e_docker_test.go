package lab_test

// The docker runtime end to end: the real perflab binary runs labs whose
// engines are containers of the simulated engine image (perflab sim image,
// built here, as no registry is reachable) on the Docker API that
// DOCKER_HOST names; .ci/run serves podman's. The image is the one stand-in:
// the engines' official images need GPUs.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/perflab/perflab/internal/engine/docker"
	"github.com/perflab/perflab/internal/lab"
	"github.com/perflab/perflab/internal/store"
	"github.com/perflab/perflab/internal/testbin"
)

// dockerE2E returns the Docker API client and a simulated engine image
// built for this test (removed when it ends); it skips without
// PERFLAB_TEST_DOCKER=1, and fails without it under CI=true.
func dockerE2E(t *testing.T) (client.APIClient, string) {
	t.Helper()
	e2eRoot(t)
	if os.Getenv("PERFLAB_TEST_DOCKER") != "1" {
		if os.Getenv("CI") == "true" {
			t.Fatal("PERFLAB_TEST_DOCKER is not 1 under CI=true: .ci/run must start podman (.ci/podman.sh)")
		}
		t.Skip("PERFLAB_TEST_DOCKER=1 not set (.ci/podman.sh starts podman)")
	}
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	b := make([]byte, 4)
	rand.Read(b)
	tag := "perflab-sim-e2e:" + hex.EncodeToString(b)
	// A tag of this test's own, on CI's one image (PERFLAB_SIM_IMAGE) or
	// on one built here: the tests count their containers by it.
	shared := testbin.SimImage()
	if shared != "" {
		if _, err := cli.ImageTag(t.Context(), client.ImageTagOptions{Source: shared, Target: tag}); err != nil {
			t.Fatalf("tag %s=%s as %s: %v", testbin.EnvSimImage, shared, tag, err)
		}
	} else {
		out, err := exec.Command(perflabBin, "sim", "image", "--tag", tag).CombinedOutput()
		if err != nil {
			t.Fatalf("perflab sim image: %v\n%s", err, out)
		}
	}
	t.Cleanup(func() {
		// A failed test may leave containers: they go with the image.
		for id := range containersOf(t, cli, tag) {
			cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
		}
		// Removing a tag of an image with others only untags it: the
		// shared image stays for the next test.
		cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: shared == ""})
	})
	return cli, tag
}

// containersOf lists the containers perflab started from image.
func containersOf(t *testing.T, cli client.APIClient, image string) map[string]string {
	t.Helper()
	f := make(client.Filters).Add("label", docker.LabelManaged+"=true")
	res, err := docker.ListContainers(context.Background(), cli, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range res.Items {
		if c.Image == image || strings.TrimPrefix(c.Image, "localhost/") == image || strings.TrimPrefix(c.Image, "docker.io/library/") == image {
			out[c.ID] = c.Labels[docker.LabelRun]
		}
	}
	return out
}

// workDirsOf lists the host work directories of image's containers.
func workDirsOf(t *testing.T, cli client.APIClient, image string) []string {
	t.Helper()
	f := make(client.Filters).Add("label", docker.LabelManaged+"=true")
	res, err := docker.ListContainers(context.Background(), cli, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range res.Items {
		if d := c.Labels[docker.LabelWorkDir]; d != "" && strings.Contains(c.Image, strings.Split(image, ":")[0]) {
			out = append(out, d)
		}
	}
	return out
}

// watchContainers records every container of image seen until stop is
// called, polling the API as the lab runs.
func watchContainers(t *testing.T, cli client.APIClient, image string) (stop func() map[string]string) {
	seen := map[string]string{}
	var mu sync.Mutex
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			for id, run := range containersOf(t, cli, image) {
				mu.Lock()
				seen[id] = run
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() map[string]string {
		close(done)
		<-finished
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// storedRun is the one run the store holds.
func storedRun(t *testing.T, dsn string) store.Run {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(ctx)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v, %v", runs, err)
	}
	return runs[0]
}

// runDockerLab runs perflab lab on the docker runtime with the simulated
// image and checks what every such run must show: the report, each trial
// in a container labelled with the run, no container left, no engine
// process on the host.
func runDockerLab(t *testing.T, cli client.APIClient, image, spec, db string) string {
	t.Helper()
	b, _ := runDockerLabIn(t, cli, image, spec, db)
	return b
}

// runDockerLabIn is runDockerLab that also returns the lab's output
// directory (its report).
func runDockerLabIn(t *testing.T, cli client.APIClient, image, spec, db string) (string, string) {
	t.Helper()
	out := t.TempDir()
	stop := watchContainers(t, cli, image)
	start := time.Now()
	cmd := exec.Command(perflabBin, "lab", spec, "--runtime", "docker", "--image", image, "--db", db, "--out", out)
	cmd.Dir = t.TempDir() // neither the repository nor the spec's directory
	b, err := cmd.CombinedOutput()
	seen := stop()
	if err != nil {
		t.Fatalf("perflab lab --runtime docker: %v\n%s", err, b)
	}
	t.Logf("lab on docker in %s, %d containers:\n%s", time.Since(start).Round(time.Second), len(seen), lastLines(string(b), 3))
	if _, err := os.Stat(filepath.Join(out, "report.md")); err != nil {
		t.Error(err)
	}
	if left := containersOf(t, cli, image); len(left) > 0 {
		t.Errorf("containers left after the lab: %v", left)
	}
	if p := simServers(); len(p) > 0 {
		t.Errorf("the lab started engines on the host, not in containers: %v", p)
	}
	run := storedRun(t, db)
	var sum lab.Summary
	if err := json.Unmarshal(run.Summary, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.EngineStarts == 0 || len(seen) == 0 || len(seen) > sum.EngineStarts {
		t.Errorf("%d containers seen for %d engine starts: every start must be a container", len(seen), sum.EngineStarts)
	}
	for id, r := range seen {
		if r != run.Key {
			t.Errorf("container %s carries run label %q, want the run key %s", id[:12], r, run.Key)
		}
	}
	rep, _ := os.ReadFile(filepath.Join(out, "report.md"))
	if !strings.Contains(string(rep), "simulated engine image") {
		t.Error("the report does not say its figures come from the simulated engine image")
	}
	return string(b), out
}

func TestE2EDockerReducedLab(t *testing.T) {
	cli, image := dockerE2E(t)
	spec, db := writeSpec(t)
	runDockerLab(t, cli, image, spec, db)

	// The simulated image for vLLM only, SGLang on its official one: the
	// figures would be neither the simulator's nor a GPU's, so the lab
	// refuses before it runs anything, naming both.
	b, err := exec.Command(perflabBin, "lab", spec, "--runtime", "docker", "--image", "vllm="+image, "--dry-run").CombinedOutput()
	if err == nil || !strings.Contains(string(b), "for every engine or for none") || !strings.Contains(string(b), "lmsysorg/sglang") {
		t.Errorf("a mix of the simulated and a real image: %v\n%s", err, b)
	}
}

// The 14B example, as a user runs it, only the runtime and the image
// changed on the command line.
func TestE2EDockerExample14B(t *testing.T) {
	cli, image := dockerE2E(t)
	root := e2eRoot(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "lab.db")
	out, dir := runDockerLabIn(t, cli, image, filepath.Join(root, "examples", "qwen3-14b-h100.yaml"), db)
	if !strings.Contains(out, "winner:") {
		t.Errorf("no winner:\n%s", lastLines(out, 10))
	}
	// Engine metrics for every engine, each scraped where and as its
	// server serves them (SGLang with --enable-metrics, TensorRT-LLM at
	// /prometheus/metrics; docs/protocols.md).
	rep, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	table := string(rep)
	i := strings.Index(table, "### Engine metrics")
	if i < 0 {
		t.Fatalf("the report has no engine-metrics table")
	}
	table = table[i:]
	if j := strings.Index(table[4:], "#"); j >= 0 {
		table = table[:j+4]
	}
	for _, name := range []string{"| vLLM |", "| SGLang |", "| TensorRT-LLM |"} {
		if !strings.Contains(table, name) {
			t.Errorf("the engine-metrics table has no row %q:\n%s", name, table)
		}
	}
}

// perflab killed with -9 leaves its containers running (nothing reaps
// them); the rerun removes them before it starts its own, resumes the run
// without running a finished trial again, and leaves no container.
func TestE2EDockerKillAndResume(t *testing.T) {
	cli, image := dockerE2E(t)
	spec, db := writeSpec(t)
	cmd := exec.Command(perflabBin, "lab", spec, "--runtime", "docker", "--image", image, "--db", db, "--out", t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	ran := 0
	for sc.Scan() && ran < 2 {
		if strings.Contains(sc.Text(), "] ran ") {
			ran++
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for len(containersOf(t, cli, image)) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	stale := containersOf(t, cli, image)
	if len(stale) == 0 {
		t.Fatal("no container was up when perflab was killed: the test proves nothing")
	}
	t.Logf("%d containers outlived perflab", len(stale))
	dirs := workDirsOf(t, cli, image)
	if len(dirs) == 0 {
		t.Error("the stale containers name no work directory")
	}
	before := storedTrials(t, db)
	if len(before) < 2 {
		t.Fatalf("%d trials stored before the kill, want at least 2", len(before))
	}
	re := exec.Command(perflabBin, "lab", spec, "--runtime", "docker", "--image", image, "--db", db, "--out", t.TempDir())
	b, err := re.CombinedOutput()
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, b)
	}
	rerun := checkResumed(t, db, before, b)
	if !strings.Contains(string(b), "winner:") {
		t.Errorf("rerun did not finish:\n%s", b)
	}
	left := containersOf(t, cli, image)
	if len(left) > 0 {
		t.Errorf("containers left after the rerun: %v", left)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("the killed lab's work directory %s is left after the rerun", d)
		}
	}
	t.Logf("resumed: %d stored trials kept, %d rerun, %d containers left", len(before), rerun, len(left))
}
