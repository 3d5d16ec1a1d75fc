package lab_test

// The lab under max_load_under_slo end to end on the live runtimes: the
// real perflab binary searches each config's sustainable load against
// simulated engines served over HTTP (--runtime sim, and containers of the
// simulated engine image on --runtime docker), is interrupted with SIGINT
// mid-search and resumed. Each run of the reduced spec below takes about
// 25 s here (3 configs, 3–4 points each, time scale 5).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/lab"
	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/store"
)

// reducedSLOSpec is a small SLO lab: vLLM, then FP8, then a 16-sequence
// cap, each config's sustainable rate found to 10% with short points (120
// requests, 10 of them warm-up, a P90 bound needing 55 in the window). The
// three answers lie far apart (about 21, 29 and 20 req/s), so two runs take
// the same path: vLLM against SGLang (20.7 and 21.7 req/s) went either way
// between runs, and the next stage searched another config. Time scale 5,
// not 20: at 20 the FP8 configs' ~35 req/s are 700 requests a wall second,
// which a client on a loaded 2-core machine did not deliver (points flagged
// "client fell behind", the config left unscored).
const reducedSLOSpec = `
name: reduced-slo
model: Qwen/Qwen3-14B
fp8_model: Qwen/Qwen3-14B-FP8
hardware: {gpu: H100, count: 1}
engines:
  - {name: vllm, version: 0.11.0}
runtime: sim
time_scale: 5
tokenizer: TOKENIZER
tuning: {name: rnd, dataset: random, input_len: 256, output_len: 32, num_prompts: 120, seed: 42}
objective:
  metric: max_load_under_slo
  load:
    slo: ttft_p90<=1s,tpot_p90<=50ms
    axis: rate
    tolerance: 0.1
    start: 4
    max: 256
    warmup_prompts: 10
    point_seconds: 120
no_generalization: true
stages:
  - name: quantization
    values: [fp8-checkpoint]
  - name: max_num_seqs
    values: ["16"]
search: {disable: true}
combinations: false
repeats: 1
parallel: 1
`

func writeSLOSpec(t *testing.T) (spec, db string) {
	t.Helper()
	dir := t.TempDir()
	spec = filepath.Join(dir, "slo.yaml")
	text := strings.Replace(reducedSLOSpec, "TOKENIZER", shareddata.Path(t, "data", "tokenizers", "qwen3"), 1)
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec, "sqlite:" + filepath.Join(dir, "lab.db")
}

// storedSummary is the summary of the store's one run.
func storedSummary(t *testing.T, db string) lab.Summary {
	t.Helper()
	var sum lab.Summary
	if err := json.Unmarshal(storedRun(t, db).Summary, &sum); err != nil {
		t.Fatal(err)
	}
	return sum
}

// searchedConfigs counts the distinct configs the run searched: a trial
// key is stage/config/workload/repeat, and a config searched in one stage
// is read back, not searched again, in the next.
func searchedConfigs(sum lab.Summary) int {
	seen := map[string]bool{}
	for _, s := range sum.LoadSearches {
		parts := strings.Split(s.Key, "/")
		if len(parts) > 1 {
			seen[parts[1]] = true
		}
	}
	return len(seen)
}

// checkSLOLab checks what every finished SLO lab must show: a winner, the
// report's load section with both charts (non-empty PNGs), its table and a
// curve for every config searched.
func checkSLOLab(t *testing.T, output, out string, sum lab.Summary) {
	t.Helper()
	if !strings.Contains(output, "winner:") {
		t.Errorf("no winner:\n%s", lastLines(output, 10))
	}
	if len(sum.LoadSearches) == 0 {
		t.Fatal("the summary holds no load search")
	}
	// A point's name shows its load to 4 digits: a bisected load once
	// read "vLLM @ 20.700000000000003 req/s" in the progress and the store.
	for _, m := range pointLoad.FindAllStringSubmatch(output, -1) {
		if v, err := strconv.ParseFloat(m[1], 64); err != nil || m[1] != strconv.FormatFloat(v, 'g', 4, 64) {
			t.Errorf("a point's load printed as %q", m[1])
			break
		}
	}
	rep, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(rep)
	for _, want := range []string{"## Load within the SLO", "![Throughput vs P99 TTFT across loads](load-ttft.png)", "![Throughput vs P99 TPOT across loads](load-tpot.png)", "| Configuration | Role | Sustainable load (req/s) |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, png := range []string{"load-ttft.png", "load-tpot.png"} {
		if fi, err := os.Stat(filepath.Join(out, png)); err != nil || fi.Size() < 1000 {
			t.Errorf("chart %s: %v (%d bytes)", png, err, sizeOf(fi))
		}
	}
	// The report draws the baseline's, the winner's and the kept configs'
	// curves.
	names := []string{winnerOf(output)}
	for _, s := range sum.LoadSearches {
		if strings.HasPrefix(s.Key, "baseline/") {
			names = append(names, s.Name)
		}
	}
	for _, name := range names {
		if !strings.Contains(md, "#### Curve: "+name+"\n") {
			t.Errorf("the report has no curve for %q", name)
		}
	}
	for _, s := range sum.LoadSearches {
		if s.Result == nil || len(s.Result.Points) == 0 {
			t.Errorf("search %s (%s) has no points", s.Name, s.Key)
		}
	}
}

// pointLoad finds the load in a point's progress line.
var pointLoad = regexp.MustCompile(`\] (?:ran|stored) [^@\n]* @ ([0-9.e+]+) req/s`)

// winnerOf is the winner's name on the lab's "winner:" line.
func winnerOf(output string) string {
	_, after, ok := strings.Cut(output, "winner: ")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(after, ", ")
	return name
}

func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return 0
	}
	return fi.Size()
}

// runSLOLab runs the SLO lab to its end with the extra flags (the runtime)
// and returns its output, report directory and summary.
func runSLOLab(t *testing.T, root, spec, db string, extra ...string) (string, string, lab.Summary) {
	t.Helper()
	out := t.TempDir()
	start := time.Now()
	cmd := exec.Command(perflabBin, append([]string{"lab", spec, "--db", db, "--out", out}, extra...)...)
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("perflab lab %v: %v\n%s", extra, err, b)
	}
	t.Logf("SLO lab %v in %s:\n%s", extra, time.Since(start).Round(time.Second), lastLines(string(b), 2))
	return string(b), out, storedSummary(t, db)
}

// pointTrials are the stored trials of the store's one run, by key, with
// the requests their measured windows counted (completed and failed; the
// warm-up is left out of the stored result).
func pointTrials(t *testing.T, db string) (map[string]store.Trial, int) {
	t.Helper()
	ts := storedTrials(t, db)
	requests := 0
	for _, tr := range ts {
		var r struct {
			Completed int `json:"completed"`
			Failed    int `json:"failed"`
		}
		if len(tr.Result) > 0 {
			if err := json.Unmarshal(tr.Result, &r); err != nil {
				t.Fatalf("trial %s: %v", tr.Key, err)
			}
		}
		requests += r.Completed + r.Failed
	}
	return ts, requests
}

// curves is a run's answer per config: its sustainable load and the loads
// it measured, for comparing two runs.
func curves(sum lab.Summary) map[string]string {
	out := map[string]string{}
	for _, s := range sum.LoadSearches {
		if s.Result == nil {
			continue
		}
		var loads []string
		for _, p := range s.Result.Points {
			loads = append(loads, fmt.Sprintf("%.4g", p.Load))
		}
		sort.Strings(loads)
		out[s.Name] = fmt.Sprintf("sustainable %.4g (found %v, unmeasured %v) from %d points %v", s.Result.Sustainable, s.Result.Found, s.Result.Unmeasured, len(s.Result.Points), loads)
	}
	return out
}

// interruptAndResume runs the SLO lab, sends it SIGINT once two points
// are stored and an engine (up says how many) is serving the next, and
// reruns it: the first run must stop as interrupted leaving no engine,
// and the rerun must finish measuring no stored point again. It returns
// the rerun's output, report directory and summary.
func interruptAndResume(t *testing.T, root, spec, db string, up func() int, extra ...string) (string, string, lab.Summary) {
	t.Helper()
	cmd := exec.Command(perflabBin, append([]string{"lab", spec, "--db", db, "--out", t.TempDir()}, extra...)...)
	cmd.Dir = root
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var first []string
	ran := 0
	for ran < 2 && sc.Scan() {
		first = append(first, sc.Text())
		if strings.Contains(sc.Text(), "] ran ") {
			ran++
		}
	}
	if ran < 2 {
		cmd.Wait()
		t.Fatalf("the lab ended before two points:\n%s", strings.Join(first, "\n"))
	}
	deadline := time.Now().Add(30 * time.Second)
	for up() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if up() == 0 {
		t.Fatal("no engine up after two points: the interrupt would not be mid-search")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sc.Scan() {
			first = append(first, sc.Text())
		}
	}()
	werr := make(chan error, 1)
	go func() { <-done; werr <- cmd.Wait() }()
	select {
	case err = <-werr:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the lab did not stop within 60 s of SIGINT:\n%s", strings.Join(first, "\n"))
	}
	if err == nil {
		t.Fatalf("the lab ended with no error after SIGINT: it was not interrupted mid-search:\n%s", strings.Join(first, "\n"))
	}
	if n := up(); n > 0 {
		t.Errorf("%d engines left after SIGINT", n)
	}
	if st := storedRun(t, db).Status; st != store.StatusInterrupted {
		t.Errorf("run status after SIGINT %q, want %q", st, store.StatusInterrupted)
	}
	before, reqBefore := pointTrials(t, db)
	if len(before) < 2 {
		t.Fatalf("%d points stored before SIGINT, want at least 2", len(before))
	}

	out, dir, sum := runSLOLab(t, root, spec, db, extra...)
	after, reqAfter := pointTrials(t, db)
	for key, t0 := range before {
		t1, ok := after[key]
		switch {
		case !ok:
			t.Errorf("point %s (%s) lost on resume", key, t0.Name)
		case !t1.Started.Equal(t0.Started):
			t.Errorf("point %s (%s) measured again on resume (started %s, then %s)", key, t0.Name, t0.Started, t1.Started)
		}
	}
	// Every point the rerun measured is a new trial: none was measured
	// and then dropped or overwritten.
	ranNow := strings.Count(out, "] ran ")
	if ranNow != len(after)-len(before) {
		t.Errorf("the rerun measured %d points, but the store grew by %d", ranNow, len(after)-len(before))
	}
	if storedNow := strings.Count(out, "] stored "); storedNow < len(before) {
		t.Errorf("the rerun read %d points from the store, want all %d stored before", storedNow, len(before))
	}
	t.Logf("SIGINT after %d points (%d requests counted); the rerun measured %d more (%d requests counted), %d engine starts in all for %d configs",
		len(before), reqBefore, len(after)-len(before), reqAfter-reqBefore, sum.EngineStarts, searchedConfigs(sum))
	// The config interrupted mid-search starts its server again.
	if n := searchedConfigs(sum); sum.EngineStarts > n+1 {
		t.Errorf("%d engine starts for %d configs across the interrupted run and its rerun, want at most %d", sum.EngineStarts, n, n+1)
	}
	return out, dir, sum
}

// compareRuns logs how a resumed run's answers differ from an
// uninterrupted one's: its winner, and each config's points and answer.
// They are not asserted equal: on a live runtime the latencies are
// wall-clock measurements, so a point near a bound can go either way
// between two runs, the later points of a search follow, and on a loaded
// machine a whole config's answer moves (on docker at a load average of 26
// the FP8 config sustained 17.3 req/s against 29 on a quieter run, and
// lost its stage). What resuming must not change is asserted in
// interruptAndResume.
func compareRuns(t *testing.T, whole, resumed lab.Summary, wholeOut, resumedOut string) {
	t.Helper()
	t.Logf("winner: uninterrupted %q, resumed %q", winnerOf(wholeOut), winnerOf(resumedOut))
	a, b := curves(whole), curves(resumed)
	same := 0
	for name, ca := range a {
		switch cb, ok := b[name]; {
		case !ok:
			t.Logf("%s: searched only in the uninterrupted run: %s", name, ca)
		case ca != cb:
			t.Logf("%s differs:\n  uninterrupted: %s\n  resumed:       %s", name, ca, cb)
		default:
			same++
		}
	}
	for name, cb := range b {
		if _, ok := a[name]; !ok {
			t.Logf("%s: searched only in the resumed run: %s", name, cb)
		}
	}
	t.Logf("%d of %d configs with the same points and answer in the uninterrupted and the resumed run", same, len(a))
}

func TestE2ESLOLab(t *testing.T) {
	root := e2eRoot(t)
	spec, db := writeSLOSpec(t)
	start := time.Now()
	out, dir, sum := runSLOLab(t, root, spec, db)
	if el := time.Since(start); el > 2*time.Minute {
		t.Errorf("reduced SLO lab took %s, want under 2 min", el)
	}
	checkSLOLab(t, out, dir, sum)
	// Every point of a config on one server.
	if n := searchedConfigs(sum); sum.EngineStarts > n {
		t.Errorf("%d engine starts for %d configs searched: a config's points must share its server", sum.EngineStarts, n)
	}
	if p := simServers(); len(p) > 0 {
		t.Errorf("engines left running: %v", p)
	}
	t.Logf("answers: %v", curves(sum))
}

func TestE2ESLOInterruptAndResume(t *testing.T) {
	root := e2eRoot(t)
	spec, db := writeSLOSpec(t)
	wholeOut, _, whole := runSLOLab(t, root, spec, db)

	spec2, db2 := writeSLOSpec(t)
	out, dir, resumed := interruptAndResume(t, root, spec2, db2, func() int { return len(simServers()) })
	checkSLOLab(t, out, dir, resumed)
	compareRuns(t, whole, resumed, wholeOut, out)
}

func TestE2EDockerSLOLab(t *testing.T) {
	cli, image := dockerE2E(t)
	root := e2eRoot(t)
	spec, db := writeSLOSpec(t)
	b, dir := runDockerLabIn(t, cli, image, spec, db)
	sum := storedSummary(t, db)
	checkSLOLab(t, b, dir, sum)
	if n := searchedConfigs(sum); sum.EngineStarts > n {
		t.Errorf("%d engine starts for %d configs searched: a config's points must share its container", sum.EngineStarts, n)
	}

	spec2, db2 := writeSLOSpec(t)
	flags := []string{"--runtime", "docker", "--image", image}
	out, dir2, resumed := interruptAndResume(t, root, spec2, db2, func() int { return len(containersOf(t, cli, image)) }, flags...)
	checkSLOLab(t, out, dir2, resumed)
	compareRuns(t, sum, resumed, b, out)
	if left := containersOf(t, cli, image); len(left) > 0 {
		t.Errorf("containers left after the resumed lab: %v", left)
	}
}
