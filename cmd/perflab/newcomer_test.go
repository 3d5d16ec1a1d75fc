package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/testbin"
)

// The newcomer test drives the built binary the way issue 11's defects were
// found: a new user on a clean clone, following the README, then one step
// further each time, from a working directory that is not the repository
// root. It builds the binary and runs whole labs, so it runs only with
// PERFLAB_NEWCOMER=1 (.ci/run sets it):
//
//	PERFLAB_NEWCOMER=1 go test ./cmd/perflab -run Newcomer -v

// newcomer is the state the steps share: the binary, the repository, the
// user's scratch directory (the working directory of every command) and
// the database.
type newcomer struct {
	t    *testing.T
	bin  string
	root string
	home string
	db   string
}

func newNewcomer(t *testing.T) *newcomer {
	t.Helper()
	if os.Getenv("PERFLAB_NEWCOMER") != "1" {
		t.Skip("set PERFLAB_NEWCOMER=1 to run the newcomer end-to-end test")
	}
	shareddata.Path(t, "data", "tokenizers", "qwen3")
	shareddata.Path(t, "data", "sharegpt")
	root := shareddata.RepoRoot(t)
	// A path with a space, as a user's home may have.
	home := filepath.Join(t.TempDir(), "new user")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	// PERFLAB_BIN when CI built it once; else built here, once.
	bin, err := testbin.Perflab()
	if err != nil {
		t.Fatal(err)
	}
	return &newcomer{t: t, bin: bin, root: root, home: home, db: "sqlite:" + filepath.Join(home, "perflab.db")}
}

// run runs the binary in the user's directory and returns its output and
// exit code; a hang is a failure, not a wait.
func (n *newcomer) run(timeout time.Duration, args ...string) (stdout, stderr string, code int) {
	n.t.Helper()
	cmd := exec.Command(n.bin, args...)
	cmd.Dir = n.home
	// No network in tests: the Hub is off, and the HF cache is the user's
	// own empty one.
	cmd.Env = append(os.Environ(), "HF_HUB_OFFLINE=1", "HF_HOME="+filepath.Join(n.home, ".cache", "huggingface"))
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		n.t.Fatalf("perflab %s: no exit after %s\nstderr:\n%s", strings.Join(args, " "), timeout, e.String())
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// must runs a command that must succeed.
func (n *newcomer) must(timeout time.Duration, args ...string) (string, string) {
	n.t.Helper()
	o, e, code := n.run(timeout, args...)
	if code != 0 {
		n.t.Fatalf("perflab %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, o, e)
	}
	return o, e
}

// example is the path of one of the repository's example specs.
func (n *newcomer) example(name string) string { return filepath.Join(n.root, "examples", name) }

var (
	availableCmd = regexp.MustCompile(`(?m)^  (\S+)\s{2,}\S`)
	trialsStored = regexp.MustCompile(`\((\d+) trials stored`)
	dryTrials    = regexp.MustCompile(`about (\d+) trials`)
)

// subcommands lists every command path under args, from the binary's own
// help, as a user discovers them.
func (n *newcomer) subcommands(path []string) [][]string {
	out, _ := n.must(time.Minute, append(path, "--help")...)
	_, list, ok := strings.Cut(out, "Available Commands:")
	if !ok {
		return nil
	}
	list, _, _ = strings.Cut(list, "\n\n")
	var all [][]string
	for _, m := range availableCmd.FindAllStringSubmatch(list, -1) {
		if m[1] == "help" || m[1] == "completion" {
			continue
		}
		p := append(append([]string(nil), path...), m[1])
		all = append(all, p)
		all = append(all, n.subcommands(p)...)
	}
	return all
}

// repeatedContext returns a "context:" segment that an error line carries
// twice ("tokenizer: tokenizer: ..."), or "".
func repeatedContext(msg string) string {
	for _, line := range strings.Split(msg, "\n") {
		seen := map[string]bool{}
		parts := strings.Split(line, ": ")
		for _, p := range parts[:max(len(parts)-1, 0)] {
			if seen[p] {
				return p
			}
			seen[p] = true
		}
	}
	return ""
}

// noNonFinite fails when a report file carries NaN or Inf.
func (n *newcomer) noNonFinite(dir string) {
	n.t.Helper()
	for _, f := range []string{"report.json", "report.md", "report.csv", "report.html"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			n.t.Errorf("report file: %v", err)
			continue
		}
		if len(b) == 0 {
			n.t.Errorf("%s is empty", f)
		}
		if regexp.MustCompile(`\b(NaN|[+-]?Inf)\b`).Match(b) {
			n.t.Errorf("%s carries NaN or Inf", f)
		}
		if f == "report.json" && !json.Valid(b) {
			n.t.Errorf("report.json is not valid JSON")
		}
	}
}

// TestNewcomer walks the README and the steps just off it. Each step names
// the defect of issue 11 it guards against.
func TestNewcomer(t *testing.T) {
	n := newNewcomer(t)

	t.Run("help", func(t *testing.T) {
		cmds := n.subcommands(nil)
		if len(cmds) < 8 {
			t.Fatalf("found only %d subcommands: %v", len(cmds), cmds)
		}
		for _, c := range cmds {
			o, e, code := n.run(time.Minute, append(c, "--help")...)
			if code != 0 || !strings.Contains(o, "Usage:") || e != "" {
				t.Errorf("perflab %s --help: exit %d, stderr %q", strings.Join(c, " "), code, e)
			}
		}
	})

	spec := n.example("qwen3-14b-h100.yaml")
	out := filepath.Join(n.home, "out")
	var firstRun int
	t.Run("main job from another directory", func(t *testing.T) {
		_, e := n.must(5*time.Minute, "lab", spec, "--db", n.db, "--out", out)
		m := trialsStored.FindStringSubmatch(e)
		if m == nil {
			t.Fatalf("no trial count in:\n%s", e)
		}
		firstRun, _ = strconv.Atoi(m[1])
		n.noNonFinite(out)
	})

	t.Run("rerun resumes", func(t *testing.T) {
		_, e := n.must(5*time.Minute, "lab", spec, "--db", n.db, "--out", out)
		if strings.Contains(e, "] ran ") {
			t.Errorf("the rerun ran trials again:\n%s", e)
		}
		n.noNonFinite(out)
	})

	t.Run("dry run matches the run", func(t *testing.T) {
		o, _ := n.must(5*time.Minute, "lab", spec, "--dry-run")
		m := dryTrials.FindStringSubmatch(o)
		if m == nil {
			t.Fatalf("no trial count in the dry run:\n%s", o)
		}
		planned, _ := strconv.Atoi(m[1])
		if firstRun == 0 || math.Abs(float64(planned-firstRun)) > 0.1*float64(firstRun) {
			t.Errorf("dry run plans %d trials, the run stored %d: more than 10%% apart\n%s", planned, firstRun, o)
		}
	})

	t.Run("report SPEC finds the run", func(t *testing.T) {
		rep := filepath.Join(n.home, "again")
		n.must(time.Minute, "report", spec, "--db", n.db, "--out", rep)
		n.noNonFinite(rep)
	})

	t.Run("sim runtime with relative paths", func(t *testing.T) {
		dir := filepath.Join(n.home, "my specs")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(dir, shareddata.Path(t, "data", "tokenizers", "qwen3"))
		if err != nil {
			t.Fatal(err)
		}
		text := fmt.Sprintf(`name: tiny-sim
model: Qwen/Qwen3-14B
hardware: {gpu: H100, count: 1}
engines: [{name: vllm, version: 0.11.0}]
runtime: sim
tokenizer: %s
tuning: {name: rnd, dataset: random, input_len: 128, output_len: 16, num_prompts: 24, seed: 1}
no_generalization: true
stages: [{name: max_num_seqs, values: ["64"]}]
search: {disable: true}
combinations: false
repeats: 1
`, rel)
		p := filepath.Join(dir, "tiny.yaml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, e := n.must(5*time.Minute, "lab", p, "--db", n.db, "--out", filepath.Join(n.home, "tiny"), "--keep-workdir")
		if strings.Contains(e, "FAILED") {
			t.Errorf("a trial failed on the sim runtime:\n%s", e)
		}
		// --keep-workdir says where the servers' directories are, and each
		// start's log is there after the lab has stopped its servers.
		kept := filepath.Join(n.home, "tiny", "engines")
		if !strings.Contains(e, "kept under "+kept) {
			t.Errorf("--keep-workdir did not print %s:\n%s", kept, e)
		}
		logs, _ := filepath.Glob(filepath.Join(kept, "*", "engine.log"))
		if len(logs) == 0 {
			t.Errorf("no engine.log kept under %s", kept)
		}
	})

	t.Run("every trial fails", func(t *testing.T) {
		p := filepath.Join(n.home, "too-big.yaml")
		text := `name: too-big
model: Qwen/Qwen3-235B-A22B
hardware: {gpu: H100, count: 1}
engines: [{name: vllm, version: 0.11.0}, {name: sglang, version: 0.5.5.post1}]
tuning: {name: rnd, dataset: random, input_len: 128, output_len: 16, num_prompts: 24, seed: 1}
tokenizer: ` + shareddata.Path(t, "data", "tokenizers", "qwen3") + `
no_generalization: true
stages: [{name: engine}]
repeats: 1
`
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		rep := filepath.Join(n.home, "too-big")
		_, e, code := n.run(5*time.Minute, "lab", p, "--db", n.db, "--out", rep)
		if code == 0 || !strings.Contains(e, "every trial failed") || !strings.Contains(e, "oom") {
			t.Errorf("a lab whose every trial failed: exit %d, stderr:\n%s", code, e)
		}
		n.noNonFinite(rep)
	})

	t.Run("a failed start keeps the last report", func(t *testing.T) {
		dir := filepath.Join(n.home, "trunc")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		full, err := os.ReadFile(shareddata.Path(t, "data", "sharegpt", "sharegpt_v3_sample_1000.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "sharegpt.json"), full[:len(full)/3], 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(spec)
		if err != nil {
			t.Fatal(err)
		}
		text := regexp.MustCompile(`(?m)^  path: .*$`).ReplaceAllString(string(b), "  path: sharegpt.json")
		text = regexp.MustCompile(`(?m)^tokenizer: .*$`).ReplaceAllString(text, "tokenizer: "+shareddata.Path(t, "data", "tokenizers", "qwen3"))
		p := filepath.Join(dir, "same-name.yaml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		before, err := os.ReadFile(filepath.Join(out, "report.md"))
		if err != nil {
			t.Fatal(err)
		}
		_, e, code := n.run(5*time.Minute, "lab", p, "--db", n.db, "--out", out)
		if code == 0 || !strings.Contains(e, "sharegpt.json") {
			t.Errorf("a truncated dataset: exit %d, stderr:\n%s", code, e)
		}
		after, _ := os.ReadFile(filepath.Join(out, "report.md"))
		if !bytes.Equal(before, after) {
			t.Error("a lab that failed before its first trial rewrote the last report")
		}
		// `report NAME` still finds the complete run.
		rep := filepath.Join(n.home, "by-name")
		n.must(time.Minute, "report", "qwen3-14b-h100", "--db", n.db, "--out", rep)
		got, _ := os.ReadFile(filepath.Join(rep, "report.md"))
		if !bytes.Equal(before, got) {
			t.Error("report by name picked another run than the complete one")
		}
	})

	t.Run("runs lists the stored runs", func(t *testing.T) {
		for _, args := range [][]string{{"runs", "--db", n.db}, {"report", "list", "--db", n.db}} {
			o, _ := n.must(time.Minute, args...)
			for _, want := range []string{"qwen3-14b-h100", "Qwen/Qwen3-14B", "too-big", "failed"} {
				if !strings.Contains(o, want) {
					t.Errorf("perflab %s lacks %q:\n%s", strings.Join(args, " "), want, o)
				}
			}
		}
	})

	t.Run("version", func(t *testing.T) {
		if o, _ := n.must(time.Minute, "--version"); !strings.HasPrefix(o, "perflab ") {
			t.Errorf("--version printed %q", o)
		}
	})

	t.Run("a lab spec given to engine command", func(t *testing.T) {
		_, e, code := n.run(time.Minute, "engine", "command", spec)
		if code == 0 || !strings.Contains(e, "is a lab spec") || !strings.Contains(e, "perflab lab") {
			t.Errorf("exit %d, stderr %q", code, e)
		}
		o, _ := n.must(time.Minute, "engine", "command", n.example("engine-vllm-qwen3-14b.yaml"))
		if !strings.HasPrefix(o, "vllm serve Qwen/Qwen3-14B-FP8") {
			t.Errorf("the example engine config rendered %q", o)
		}
	})

	t.Run("a bad --db is refused before anything runs", func(t *testing.T) {
		for _, db := range []string{"sqlite:", "mysql://x"} {
			_, e, code := n.run(time.Minute, "lab", spec, "--db", db)
			if code == 0 || !strings.Contains(e, "want sqlite:PATH") || strings.Contains(e, "] ran ") {
				t.Errorf("--db %s: exit %d, stderr %q", db, code, e)
			}
		}
		if _, err := os.Stat(filepath.Join(n.home, "mysql:")); err == nil {
			t.Error("--db mysql://x made a SQLite file")
		}
	})

	seed := []string{"--", "vllm", "serve", "Qwen/Qwen3-235B-A22B-Instruct-2507", "--tensor-parallel-size", "8"}
	t.Run("sim predict with a seed's own model name", func(t *testing.T) {
		args := append([]string{"sim", "predict", "--gpu", "H100", "--gpus", "8", "--dataset-name", "random",
			"--random-input-len", "128", "--random-output-len", "16", "--num-prompts", "20",
			"--tokenizer", shareddata.Path(t, "data", "tokenizers", "qwen3")}, seed...)
		o, e := n.must(2*time.Minute, args...)
		if !strings.Contains(o, "Serving Benchmark Result") || !strings.Contains(e, "simulating vLLM") ||
			!strings.Contains(e, "catalog (Qwen3-235B-A22B)") {
			t.Errorf("stdout:\n%s\nstderr:\n%s", o, e)
		}
	})

	t.Run("sim serve with a seed's own model name", func(t *testing.T) {
		args := append([]string{"sim", "serve", "--gpu", "H100", "--gpus", "8", "--startup-delay", "0s"}, seed...)
		args = append(args, "--port", "0")
		cmd := exec.Command(n.bin, args...)
		cmd.Dir = n.home
		cmd.Env = append(os.Environ(), "HF_HUB_OFFLINE=1", "HF_HOME="+filepath.Join(n.home, ".cache", "huggingface"))
		var e syncBuffer
		cmd.Stderr = &e
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
		}()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) && !strings.Contains(e.String(), "Application startup complete") {
			time.Sleep(100 * time.Millisecond)
		}
		if !strings.Contains(e.String(), "Application startup complete") {
			t.Errorf("sim serve did not start in 60 s")
		}
		if !strings.Contains(e.String(), "simulating vLLM") || !strings.Contains(e.String(), "catalog (Qwen3-235B-A22B)") ||
			strings.Contains(e.String(), "unknown model") {
			t.Errorf("sim serve stderr:\n%s", e.String())
		}
	})

	t.Run("errors say it once", func(t *testing.T) {
		for _, args := range [][]string{
			{"lab", filepath.Join(n.home, "missing.yaml")},
			{"bench", "--model", "Qwen/Qwen3-14B", "--base-url", "http://127.0.0.1:1"},
			{"report", "99", "--db", n.db, "--out", filepath.Join(n.home, "no-report")},
		} {
			_, e, code := n.run(time.Minute, args...)
			if code == 0 {
				t.Errorf("perflab %s succeeded", strings.Join(args, " "))
			}
			if p := repeatedContext(e); p != "" {
				t.Errorf("perflab %s: the context %q is said twice in %q", strings.Join(args, " "), p, e)
			}
		}
	})
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
