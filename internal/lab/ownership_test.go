package lab

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labprogress"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/sim"
	"github.com/perflab/perflab/internal/sim/simargs"
	"github.com/perflab/perflab/internal/store"
)

// sqliteStore is a real SQLite store in the test's directory.
func sqliteStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "lab.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// gateRunner blocks its first trial until released, so a second lab can
// try the run while the first holds it.
type gateRunner struct {
	inner   Runner
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gateRunner) Run(ctx context.Context, t TrialSpec) (Measurement, error) {
	g.once.Do(func() {
		close(g.started)
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	})
	return g.inner.Run(ctx, t)
}

// TestSecondLabIsRefused: two labs on one spec and database (defect 18 of
// issue 11: both ran every trial and the store and one process's winner
// disagreed). The second is told which process holds the run and runs
// nothing; once the first ends, a rerun resumes its trials.
func TestSecondLabIsRefused(t *testing.T) {
	s := mustSpec(t, smallSpec)
	st := sqliteStore(t)
	first := analyticLab(s, st)
	gate := &gateRunner{inner: first.Runner, started: make(chan struct{}), release: make(chan struct{})}
	first.Runner = gate
	done := make(chan error, 1)
	go func() {
		_, err := first.Run(context.Background())
		done <- err
	}()
	<-gate.started
	second := analyticLab(s, st)
	cr := &countingRunner{inner: second.Runner}
	second.Runner = cr
	_, err := second.Run(context.Background())
	var held *store.HeldError
	if !errors.As(err, &held) || !strings.Contains(err.Error(), "pid ") {
		t.Fatalf("second lab: err = %v, want a HeldError naming the holder", err)
	}
	if cr.n.Load() != 0 {
		t.Errorf("second lab ran %d trials while the first held the run", cr.n.Load())
	}
	close(gate.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	again := analyticLab(s, st)
	cr2 := &countingRunner{inner: again.Runner}
	again.Runner = cr2
	if _, err := again.Run(context.Background()); err != nil {
		t.Fatalf("rerun after the first lab ended: %v", err)
	}
	if cr2.n.Load() != 0 {
		t.Errorf("rerun ran %d trials, want all reused", cr2.n.Load())
	}
}

// TestLostLeaseStopsLab: a lab whose lease was taken over (it stalled past
// its TTL, and another lab took the run) stops instead of writing on
// beside the new owner.
func TestLostLeaseStopsLab(t *testing.T) {
	s := mustSpec(t, smallSpec)
	path := filepath.Join(t.TempDir(), "lab.db")
	st, err := store.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := analyticLab(s, st)
	l.LeaseTTL = 150 * time.Millisecond
	gate := &gateRunner{inner: l.Runner, started: make(chan struct{}), release: make(chan struct{})}
	l.Runner = gate
	defer close(gate.release)
	done := make(chan error, 1)
	go func() {
		_, err := l.Run(context.Background())
		done <- err
	}()
	<-gate.started
	// Another process takes the run over, as it may once a lease lapsed:
	// written through its own connection to the database file.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	thief := store.Owner{Host: "elsewhere", PID: 1, Nonce: "t"}
	if _, err := db.Exec(`UPDATE runs SET owner = ?, lease_until_ms = ?`, thief.String(), time.Now().Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var held *store.HeldError
		if !errors.As(err, &held) || held.Owner != thief.String() {
			t.Fatalf("lab after losing its lease: err = %v, want a HeldError naming %s", err, thief)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("lab went on after losing its lease")
	}
}

// flakyRunner fails the trials of one config with a class, the first
// `times` times each is run.
type flakyRunner struct {
	inner Runner
	class string
	match func(TrialSpec) bool
	times int
	mu    sync.Mutex
	seen  map[string]int
}

func (f *flakyRunner) Run(ctx context.Context, t TrialSpec) (Measurement, error) {
	f.mu.Lock()
	if f.seen == nil {
		f.seen = map[string]int{}
	}
	f.seen[t.Key]++
	n := f.seen[t.Key]
	f.mu.Unlock()
	if f.match(t) && n <= f.times {
		return Measurement{Failure: &engine.Failure{Class: engine.FailureClass(f.class), Reason: "engine exited (killed by SIGKILL)"},
			Trace: Trace{Ended: time.Now()}}, nil
	}
	return f.inner.Run(ctx, t)
}

// TestResumeRetriesTransientFailures (defect 19 of issue 11): a trial that
// crashed mid-benchmark is retried once by a resume, and then kept as
// measured; a startup crash is reused, unless --retry-failed.
func TestResumeRetriesTransientFailures(t *testing.T) {
	s := mustSpec(t, smallSpec)
	isFP8 := func(t TrialSpec) bool { return t.Stage == "quantization" && t.Repeat == 0 }
	for _, tc := range []struct {
		class       string
		retryFailed bool
		wantRetried bool
	}{
		{FailCrashDuringBench, false, true},
		{FailHung, false, true},
		{FailStartupCrash, false, false},
		{FailStartupCrash, true, true},
	} {
		name := tc.class
		if tc.retryFailed {
			name += "/retry-failed"
		}
		t.Run(name, func(t *testing.T) {
			st := sqliteStore(t)
			l := analyticLab(s, st)
			fr := &flakyRunner{inner: l.Runner, class: tc.class, match: isFP8, times: 99}
			l.Runner = fr
			if _, err := l.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			failedKeys := map[string]bool{}
			for k, n := range fr.seen {
				if strings.HasPrefix(k, "quantization/") && strings.HasSuffix(k, "/r0") && n > 0 {
					failedKeys[k] = true
				}
			}
			if len(failedKeys) == 0 {
				t.Fatal("no quantization trial ran")
			}
			// Resume, still failing: a transient class is tried once more.
			l2 := analyticLab(s, st)
			l2.RetryFailed = tc.retryFailed
			fr2 := &flakyRunner{inner: l2.Runner, class: tc.class, match: isFP8, times: 99}
			l2.Runner = fr2
			if _, err := l2.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			for k := range failedKeys {
				if got := fr2.seen[k] > 0; got != tc.wantRetried {
					t.Errorf("%s: retried on resume = %v, want %v", k, got, tc.wantRetried)
				}
			}
			// A third run: a transient failure already retried is not
			// retried again without --retry-failed.
			l3 := analyticLab(s, st)
			l3.RetryFailed = tc.retryFailed
			fr3 := &flakyRunner{inner: l3.Runner, class: tc.class, match: isFP8, times: 99}
			l3.Runner = fr3
			if _, err := l3.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			for k := range failedKeys {
				if got := fr3.seen[k] > 0; got != tc.retryFailed {
					t.Errorf("%s: run again on the third run = %v, want %v", k, got, tc.retryFailed)
				}
				if tr, err := st.Trial(context.Background(), l3.StoredRun().ID, k); err == nil && tc.wantRetried && !tc.retryFailed && tr.Attempt != 2 {
					t.Errorf("%s: attempt %d stored, want 2", k, tr.Attempt)
				}
			}
		})
	}
}

// failingRunner fails the lab itself (not a trial) on its first call.
type failingRunner struct{}

func (failingRunner) Run(context.Context, TrialSpec) (Measurement, error) {
	return Measurement{}, errors.New("dataset: decode sharegpt.json: unexpected end of JSON input")
}

// TestFailedStartStoresNoRun (defect 14 of issue 11): a lab that stops
// before its first trial leaves no run behind, so the previous complete
// run stays the one `perflab report NAME` finds.
func TestFailedStartStoresNoRun(t *testing.T) {
	st := sqliteStore(t)
	ctx := context.Background()
	s := mustSpec(t, smallSpec)
	if _, err := analyticLab(s, st).Run(ctx); err != nil {
		t.Fatal(err)
	}
	complete, err := st.RunByName(ctx, s.Name)
	if err != nil {
		t.Fatal(err)
	}
	other := mustSpec(t, smallSpec+"min_gain: 0.001\n") // same name, another key
	l := analyticLab(other, st)
	l.Runner = failingRunner{}
	if _, err := l.Run(ctx); err == nil {
		t.Fatal("lab with a failing runner succeeded")
	}
	if l.StoredRun().ID != 0 {
		t.Errorf("failed start left run %d", l.StoredRun().ID)
	}
	if _, err := st.RunByKey(ctx, other.Key()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("failed start stored a run: %v", err)
	}
	if r, err := st.RunByName(ctx, s.Name); err != nil || r.ID != complete.ID {
		t.Errorf("latest run of %s = %d, %v; want the complete %d", s.Name, r.ID, err, complete.ID)
	}
}

// TestSpecPathsResolveAgainstSpecDir (defect 1 of issue 11): a spec's
// relative paths mean the same thing from any working directory, and a
// missing one is an error at its line when the spec is loaded.
func TestSpecPathsResolveAgainstSpecDir(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "specs")
	tokDir := filepath.Join(dir, "data", "tok")
	for _, d := range []string{sub, tokDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data", "sg.json")
	if err := os.WriteFile(data, []byte("[]"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		p := filepath.Join(sub, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	head := "name: p\nmodel: Qwen/Qwen3-14B\nengines: [{name: vllm}]\n"
	good := write("good.yaml", head+"tokenizer: ../data/tok\ntuning: {name: sg, path: ../data/sg.json}\n")
	t.Chdir(t.TempDir()) // somewhere else entirely
	s, err := labspec.LoadSpec(good)
	if err != nil {
		t.Fatal(err)
	}
	if s.Tokenizer != tokDir || s.Tuning.Path != data {
		t.Errorf("tokenizer %q, tuning path %q; want %q and %q", s.Tokenizer, s.Tuning.Path, tokDir, data)
	}
	hub := write("hub.yaml", head+"tokenizer: Qwen/Qwen3-14B\ntuning: {name: sg, path: ../data/sg.json}\n")
	if s, err := labspec.LoadSpec(hub); err != nil || s.Tokenizer != "Qwen/Qwen3-14B" {
		t.Errorf("a Hub id as tokenizer: %q, %v", s.Tokenizer, err)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"tokenizer", head + "tokenizer: ../data/missing\n", "good-tok.yaml:4: tokenizer ../data/missing: no such file"},
		{"dataset", head + "tuning:\n  name: sg\n  path: ../data/nope.json\n", `good-dataset.yaml:6: workload "sg": dataset file ` + filepath.Join(dir, "data", "nope.json")},
	} {
		p := write("good-"+map[string]string{"tokenizer": "tok", "dataset": "dataset"}[tc.name]+".yaml", tc.text)
		_, err := labspec.LoadSpec(p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

// TestWorkloadErrorSaidOnce (issue 11, defect 21: "lab: workload
// ShareGPT: lab: workload ShareGPT: ..."): a workload's request error
// reaches the lab with its context once, through either runner.
func TestWorkloadErrorSaidOnce(t *testing.T) {
	broken := func(w labspec.Workload) ([]dataset.Request, error) {
		return nil, fmt.Errorf("lab: workload %s: %w", w.Name, errors.New("dataset: truncated JSON"))
	}
	tr := TrialSpec{Key: "k", Name: "x", Workload: labspec.Workload{Name: "ShareGPT"},
		Config: engine.Config{Engine: "vllm", Version: "0.11.0", Model: "m"}}
	for name, r := range map[string]Runner{
		"predict": &PredictRunner{Predictor: AnalyticPredictor{}, Requests: broken},
		"live":    &LiveRunner{Runtime: urlRuntime{"http://127.0.0.1:1"}, Requests: broken},
	} {
		_, err := r.Run(context.Background(), tr)
		if err == nil || strings.Count(err.Error(), "workload ShareGPT") != 1 {
			t.Errorf("%s: %v, want the workload named once", name, err)
		}
	}
}

// TestSpecAliasBomb (issue 11, defect 12: a 2 KB spec of nested aliases
// grew `lab --dry-run` past 7 GB): refused at once, with its line.
func TestSpecAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: bomb\nmodel: Qwen/Qwen3-14B\nengines: [{name: vllm}]\n")
	b.WriteString(`x0: &a0 ["a","a","a","a","a","a","a","a","a","a"]` + "\n")
	for i := 1; i <= 8; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 10), ",")
		fmt.Fprintf(&b, "x%d: &a%d [%s]\n", i, i, refs)
	}
	b.WriteString("stages:\n  - name: max_num_seqs\n    values: *a8\n")
	start := time.Now()
	_, err := labspec.ParseSpec("bomb.yaml", []byte(b.String()))
	var se *labspec.SpecError
	if !errors.As(err, &se) || se.Line == 0 || !strings.Contains(se.Msg, "expands to more than") {
		t.Fatalf("err = %v, want a SpecError with the line of the expansion", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusing took %s", d)
	}
}

// TestDefaultVersionsAgree (issue 11, defect 8: the lab, sim predict and
// sim serve defaulted to different vLLM versions): an engine listed
// without a version runs at the engine package's default, the one the
// simulator and its argument parser use.
func TestDefaultVersionsAgree(t *testing.T) {
	s := mustSpec(t, "name: v\nmodel: Qwen/Qwen3-14B\nengines: [{name: vllm}, {name: sglang}, {name: trtllm}]\ntuning: {name: r, dataset: random, input_len: 8, output_len: 8}\n")
	for _, e := range s.Engines {
		want := engine.DefaultVersions[e.Name]
		if want == "" || e.Version != want || sim.DefaultVersion(e.Name) != want || simargs.DefaultVersion(e.Name) != want {
			t.Errorf("%s: lab %q, engine %q, sim %q, simargs %q", e.Name, e.Version, want, sim.DefaultVersion(e.Name), simargs.DefaultVersion(e.Name))
		}
	}
}

// countingGuide counts the predictions that reach the simulator.
type countingGuide struct {
	inner Guide
	n     atomic.Int64
}

func (c *countingGuide) Guess(ctx context.Context, cfg engine.Config, w labspec.Workload, prompts int) (Measurement, error) {
	c.n.Add(1)
	return c.inner.Guess(ctx, cfg, w, prompts)
}

// TestGuideCacheResume (issue 11, defect 4: a resume predicted every joint
// search candidate again, 80% of its 13 s): a resumed lab reads the guide's
// predictions from the store, and the same path is taken; another guide
// key (a recalibrated simulator) predicts afresh.
func TestGuideCacheResume(t *testing.T) {
	s := mustSpec(t, smallSpec)
	st := sqliteStore(t)
	run := func(key string) (*Summary, int64) {
		l := analyticLab(s, st)
		cg := &countingGuide{inner: l.Guide}
		l.Guide, l.GuideKey = cg, key
		sum, err := l.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return sum, cg.n.Load()
	}
	first, n1 := run("sim-r3-aaaa")
	if n1 == 0 {
		t.Fatal("the fresh lab made no prediction")
	}
	again, n2 := run("sim-r3-aaaa")
	if n2 != 0 {
		t.Errorf("the resume made %d predictions, want 0 (all cached)", n2)
	}
	if again.Winner.ConfigHash != first.Winner.ConfigHash {
		t.Errorf("the resume chose %s, the first run %s", again.Winner.Name, first.Winner.Name)
	}
	if _, n3 := run("sim-r3-bbbb"); n3 == 0 {
		t.Error("another guide key reused the old guide's predictions")
	}
}

// TestProgressLines (issue 11, defect 6): the first trial line follows
// its stage header and never shows an empty best; the line names the
// incumbent, and a higher measured figure beside it; a fresh database
// reports nothing "from the store"; a resume reports each stored trial
// once and runs none.
func TestProgressLines(t *testing.T) {
	s := mustSpec(t, smallSpec)
	st := sqliteStore(t)
	var buf bytes.Buffer
	l := analyticLab(s, st)
	l.Progress = NewEvents(&labprogress.LineProgress{W: &buf})
	sum, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	if !strings.HasPrefix(lines[1], "== stage baseline") || !strings.Contains(lines[2], "] ran ") {
		t.Errorf("the first trial line does not follow a stage header:\n%s\n%s", lines[1], lines[2])
	}
	if strings.Contains(buf.String(), "best ;") || strings.Contains(buf.String(), "incumbent ;") {
		t.Errorf("an empty best was printed:\n%s", buf.String())
	}
	if sum.TrialsReused != 0 || strings.Contains(buf.String(), "] stored ") {
		t.Errorf("a fresh run reported %d trials from the store", sum.TrialsReused)
	}
	sawTop := false
	for _, line := range lines {
		if strings.Contains(line, "top measured") {
			sawTop = true
		}
	}
	if !sawTop {
		t.Error("no line named a measured figure above the incumbent")
	}
	buf.Reset()
	again := analyticLab(s, st)
	again.Progress = NewEvents(&labprogress.LineProgress{W: &buf})
	sum2, err := again.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum2.TrialsRun != 0 || sum2.TrialsReused != sum.TrialsRun || strings.Count(buf.String(), "] stored ") != sum.TrialsRun {
		t.Errorf("resume: %d run, %d from the store, %d stored lines; want 0, %d, %d",
			sum2.TrialsRun, sum2.TrialsReused, strings.Count(buf.String(), "] stored "), sum.TrialsRun, sum.TrialsRun)
	}
}

// TestDryRunIsTheRun (issue 11, defect 5: the dry run said about 63
// trials, a combinations stage and a 24-candidate joint search, while the
// run ran 46 trials and another search): on sim-predict the dry run walks
// the run's own path, so its count and winner are the run's.
func TestDryRunIsTheRun(t *testing.T) {
	s := mustSpec(t, smallSpec+"noise: {sigma: 0.01, seed: 3}\n")
	mem, err := store.Open(context.Background(), "sqlite::memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	guide := &PredictRunner{Predictor: AnalyticPredictor{}, Hardware: s.Hardware, Requests: CachedRequests(StandinRequests), Noise: s.Noise}
	plan, err := DryRun(context.Background(), s, guide, "analytic", mem, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := analyticLab(s, sqliteStore(t)).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if plan.Trials != sum.TrialsRun || !plan.Exact || plan.Winner != sum.Winner.Name {
		t.Errorf("dry run: %d trials, winner %q; the run: %d, %q", plan.Trials, plan.Winner, sum.TrialsRun, sum.Winner.Name)
	}
	total := 0
	for _, st := range plan.Stages {
		total += st.Trials
	}
	if total != plan.Trials || plan.UpperBound < plan.Trials {
		t.Errorf("stages sum to %d of %d trials; upper bound %d", total, plan.Trials, plan.UpperBound)
	}
	if plan.Starts == 0 || plan.Starts > plan.Trials || !(plan.GPUHours > 0) {
		t.Errorf("starts %d of %d trials, %.3f GPU-hours", plan.Starts, plan.Trials, plan.GPUHours)
	}
}

// TestProjectStarts: on one GPU, a config's repeats share a server,
// another config stops it, a failed trial's server is not kept, an engine
// that salts its cache instead of resetting it is kept, one with neither
// is restarted, and fresh starts restart every time.
func TestProjectStarts(t *testing.T) {
	tr := func(eng, model, status string) store.Trial {
		version := ""
		if model == "c" {
			version = "1.0.0" // trtllm-serve before cache_salt
		}
		cfg, _ := json.Marshal(engine.Config{Engine: eng, Version: version, Model: model})
		return store.Trial{Config: cfg, Status: status}
	}
	seq := []store.Trial{tr("vllm", "a", "ok"), tr("vllm", "a", "ok"), tr("vllm", "b", "ok"), tr("vllm", "a", "failed"),
		tr("vllm", "a", "ok"), tr("trtllm", "c", "ok"), tr("trtllm", "c", "ok"), tr("trtllm", "d", "ok"), tr("trtllm", "d", "ok")}
	got := projectStarts(seq, 1, false)
	want := []bool{true, false, true, true, true, true, true, true, false}
	if !slices.Equal(got, want) {
		t.Errorf("starts %v, want %v", got, want)
	}
	if fresh := projectStarts(seq, 1, true); slices.Contains(fresh, false) {
		t.Errorf("fresh starts %v, want a start every trial", fresh)
	}
	// On two GPUs, two configs alternate on their own servers.
	alt := []store.Trial{tr("vllm", "a", "ok"), tr("vllm", "b", "ok"), tr("vllm", "a", "ok"), tr("vllm", "b", "ok")}
	if got := projectStarts(alt, 2, false); !slices.Equal(got, []bool{true, true, false, false}) {
		t.Errorf("two GPUs: %v", got)
	}
}

// TestFeatureLabels (issue 11, defect 7: "Why not kept" showed keys such
// as vllm|quantization=fp8-checkpoint): unmeasured features read as the
// report names configurations.
func TestFeatureLabels(t *testing.T) {
	got := featureLabels([]string{"vllm|quantization=fp8-checkpoint", "trtllm|max_num_seqs=256", "engine=sglang"})
	want := "FP8 on vLLM, max_num_seqs=256 on TensorRT-LLM, SGLang"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if strings.Contains(got, "|") {
		t.Errorf("%q carries a feature key", got)
	}
}

// fullDiskStore fails every save after the first n with ENOSPC, as a
// store on a full disk does.
type fullDiskStore struct {
	*memStore
	n     int
	saves int
}

func (f *fullDiskStore) SaveTrial(ctx context.Context, t *store.Trial) error {
	f.mu.Lock()
	f.saves++
	full := f.saves > f.n
	f.mu.Unlock()
	if full {
		return fmt.Errorf("sqlite: write: %w", syscall.ENOSPC)
	}
	return f.memStore.SaveTrial(ctx, t)
}

// TestDiskFullInterrupts: a lab stopped by a full disk leaves its run
// interrupted, resumable with what it finished, not failed.
func TestDiskFullInterrupts(t *testing.T) {
	s := mustSpec(t, smallSpec)
	st := &fullDiskStore{memStore: newMemStore(), n: 2}
	_, err := analyticLab(s, st).Run(context.Background())
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("lab on a full disk: %v, want ENOSPC", err)
	}
	run, _ := st.EnsureRun(context.Background(), s.Key(), s.Name, "", false)
	if run.Status != store.StatusInterrupted {
		t.Errorf("run stopped by a full disk: %s, want %s", run.Status, store.StatusInterrupted)
	}
	if n := len(st.trials[run.ID]); n != 2 {
		t.Errorf("%d trials kept, want the 2 saved before the disk filled", n)
	}
	for _, e := range []error{fmt.Errorf("x: %w", syscall.ENOSPC), liteErr(13), liteErr(13 | 3<<8)} {
		if !store.IsDiskFull(e) {
			t.Errorf("IsDiskFull(%v) = false", e)
		}
	}
	if store.IsDiskFull(liteErr(5)) || store.IsDiskFull(errors.New("disk full")) {
		t.Error("IsDiskFull of SQLITE_BUSY or a bare message")
	}
}

// liteErr is an error with a SQLite result code, as modernc.org/sqlite's.
type liteErr int

func (e liteErr) Error() string { return fmt.Sprintf("sqlite error %d", int(e)) }
func (e liteErr) Code() int     { return int(e) }
