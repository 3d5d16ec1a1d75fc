package lab_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/shareddata"

	"github.com/perflab/perflab/internal/store"
	"github.com/perflab/perflab/internal/testbin"
)

// The end-to-end tests drive the real perflab binary with the sim runtime
// (engines as real processes over HTTP). They build the binary, so they run
// only with PERFLAB_LAB_E2E=1:
//
//	PERFLAB_LAB_E2E=1 go test ./internal/lab -run E2E -v

var perflabBin string

func TestMain(m *testing.M) {
	if os.Getenv("PERFLAB_LAB_E2E") == "1" {
		// PERFLAB_BIN when CI built it once; else built here.
		bin, err := testbin.Perflab()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		perflabBin = bin
		code := m.Run()
		testbin.Cleanup()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func e2eRoot(t *testing.T) string {
	t.Helper()
	if perflabBin == "" {
		t.Skip("set PERFLAB_LAB_E2E=1 to run the end-to-end lab tests")
	}
	shareddata.Path(t, "data", "tokenizers", "qwen3")
	return shareddata.RepoRoot(t)
}

// reducedSpec is a small lab for the sim runtime: two engines, one knob,
// a short random workload, one generalization case.
const reducedSpec = `
name: reduced-sim
model: Qwen/Qwen3-14B
fp8_model: Qwen/Qwen3-14B-FP8
hardware: {gpu: H100, count: 1}
engines:
  - {name: vllm, version: 0.11.0}
  - {name: sglang, version: 0.5.5.post1}
runtime: sim
time_scale: 20
tokenizer: ../shared/data/tokenizers/qwen3
tuning: {name: rnd, dataset: random, input_len: 256, output_len: 32, num_prompts: 48, seed: 42}
generalization:
  - {name: short, dataset: random, input_len: 128, output_len: 4, num_prompts: 48, seed: 42}
stages:
  - name: engine
  - name: quantization
    values: [fp8-checkpoint]
  - name: max_num_seqs
    values: ["32"]
search: {disable: true}
combinations: false
repeats: 2
parallel: 1
`

// writeSpec writes the reduced spec into a fresh directory, its tokenizer
// path made relative to that directory, as a user's spec elsewhere on the
// disk would be: the lab must resolve it against the spec's directory, not
// the working directory or the engine's.
func writeSpec(t *testing.T) (spec, db string) {
	dir := t.TempDir()
	spec = filepath.Join(dir, "reduced.yaml")
	rel, err := filepath.Rel(dir, shareddata.Path(t, "data", "tokenizers", "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(reducedSpec, "../shared/data/tokenizers/qwen3", rel, 1)
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec, "sqlite:" + filepath.Join(dir, "lab.db")
}

// simServers lists live processes started from the test's binary with
// "sim serve" (the lab's engines).
func simServers() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cl := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.HasPrefix(cl, perflabBin+" sim serve") {
			st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if strings.Contains(string(st), ") Z ") {
				continue // a zombie is dead
			}
			var pid int
			fmt.Sscan(e.Name(), &pid)
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestE2EReducedSimLab(t *testing.T) {
	root := e2eRoot(t)
	spec, db := writeSpec(t)
	out := t.TempDir()
	start := time.Now()
	cmd := exec.Command(perflabBin, "lab", spec, "--db", db, "--out", out)
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("perflab lab: %v\n%s", err, b)
	}
	el := time.Since(start)
	t.Logf("reduced sim lab: %s\n%s", el, lastLines(string(b), 4))
	if el > 5*time.Minute {
		t.Errorf("reduced sim lab took %s, want under 5 min", el)
	}
	if _, err := os.Stat(filepath.Join(out, "report.md")); err != nil {
		t.Error(err)
	}
	if p := simServers(); len(p) > 0 {
		t.Errorf("engines left running: %v", p)
	}
}

func TestE2EKillAndResume(t *testing.T) {
	root := e2eRoot(t)
	spec, db := writeSpec(t)
	cmd := exec.Command(perflabBin, "lab", spec, "--db", db, "--out", t.TempDir())
	cmd.Dir = root
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill -9 while the third trial's engine is up: two trials finished.
	sc := bufio.NewScanner(stderr)
	ran := 0
	for sc.Scan() && ran < 2 {
		if strings.Contains(sc.Text(), "] ran ") {
			ran++
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(simServers()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	cmd.Wait()
	// No engine outlives the lab.
	deadline = time.Now().Add(10 * time.Second)
	for len(simServers()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if p := simServers(); len(p) > 0 {
		t.Fatalf("orphaned engines after kill -9: %v", p)
	}
	before := storedTrials(t, db)
	if len(before) < 2 {
		t.Fatalf("%d trials stored before the kill, want at least 2", len(before))
	}
	// Rerun: it finishes, runs none of the stored trials again, loses none.
	re := exec.Command(perflabBin, "lab", spec, "--db", db, "--out", t.TempDir())
	re.Dir = root
	b, err := re.CombinedOutput()
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, b)
	}
	checkResumed(t, db, before, b)
	if !strings.Contains(string(b), "winner:") {
		t.Errorf("rerun did not finish:\n%s", b)
	}
	if p := simServers(); len(p) > 0 {
		t.Errorf("engines left running: %v", p)
	}
}

// checkResumed fails the test for every trial stored before a kill that
// the rerun (its output out) ran again or lost, and returns how many ran
// again.
func checkResumed(t *testing.T, db string, before map[string]store.Trial, out []byte) (rerun int) {
	t.Helper()
	for _, line := range strings.Split(string(out), "\n") {
		for key := range before {
			if strings.Contains(line, "] ran ") && strings.Contains(line, before[key].Name+" ("+before[key].Workload+", repeat "+fmt.Sprint(before[key].Repeat)+")") {
				t.Errorf("finished trial %s ran again: %s", key, line)
				rerun++
			}
		}
	}
	after := storedTrials(t, db)
	for key, t0 := range before {
		t1, ok := after[key]
		if !ok {
			t.Errorf("trial %s lost", key)
		} else if !t1.Started.Equal(t0.Started) {
			t.Errorf("trial %s was rerun (started %s, then %s)", key, t0.Started, t1.Started)
		}
	}
	return rerun
}

func storedTrials(t *testing.T, dsn string) map[string]store.Trial {
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
	ts, err := st.Trials(ctx, runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.Trial{}
	for _, tr := range ts {
		out[tr.Key] = tr
	}
	return out
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
