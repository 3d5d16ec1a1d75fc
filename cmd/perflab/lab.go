package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/lab"
	"github.com/perflab/perflab/internal/report"
	"github.com/perflab/perflab/internal/sim"
	"github.com/perflab/perflab/internal/store"
	"github.com/perflab/perflab/internal/tokenizer"
)

var labOpts struct {
	runtime, db, out string
	coefficients     string
	fresh, dryRun    bool
	grid, analytic   bool
	timeScale        float64
	parallel         int
}

var labCmd = &cobra.Command{
	Use:   "lab SPEC",
	Short: "Run the performance lab: staged tuning, joint search, generalization, report",
	Long: `Run the performance lab described by SPEC (YAML; see docs/lab.md and examples/).

The baseline is vLLM with its defaults; the stages run in the reference
reports' order and keep a candidate only if every request succeeded (see
min_success_rate), it did not crash, and its gain beats the noise floor
measured from repeats. Then knobs that helped alone are combined, and a
simulator-guided joint search looks past the greedy optimum. The baseline
and the winner run on every generalization workload, and the report is
written into --out.

Every trial is stored as it ends: rerunning the same spec resumes the run
(no finished trial runs again); --fresh starts over. Relative paths in the
spec resolve against the current directory (run the examples from the
repository root).`,
	Args: cobra.ExactArgs(1),
	RunE: runLab,
}

func init() {
	f := labCmd.Flags()
	f.StringVar(&labOpts.runtime, "runtime", "", "sim-predict, sim or process (default: the spec's, else sim-predict)")
	f.StringVar(&labOpts.db, "db", defaultDB, "store: sqlite:PATH, a path, or postgres://...")
	f.StringVar(&labOpts.out, "out", "", "report directory (default out/<spec name>)")
	f.BoolVar(&labOpts.fresh, "fresh", false, "start the run over (delete its stored trials)")
	f.BoolVar(&labOpts.dryRun, "dry-run", false, "print the plan and its ETA, run nothing")
	f.BoolVar(&labOpts.grid, "grid", false, "also run the exhaustive grid over the same space and compare")
	f.BoolVar(&labOpts.analytic, "analytic", false, "sim-predict with the lab's closed-form stand-in model instead of the simulator (tests)")
	f.Float64Var(&labOpts.timeScale, "time-scale", 0, "sim runtime: simulated-time speed-up (default: the spec's, else 20)")
	f.IntVar(&labOpts.parallel, "parallel", 0, "trials at once (default: the spec's)")
	f.StringVar(&labOpts.coefficients, "coefficients", "", "simulator calibration from perflab sim calibrate, for the guide, sim-predict and sim runtimes (default: the embedded one)")
	rootCmd.AddCommand(labCmd)
}

func runLab(cmd *cobra.Command, args []string) error {
	ctx := cmd.Context()
	spec, err := lab.LoadSpec(args[0])
	if err != nil {
		return err
	}
	if labOpts.runtime != "" {
		spec.Runtime = labOpts.runtime
	}
	switch spec.Runtime {
	case lab.RuntimeSimPredict, lab.RuntimeSim, lab.RuntimeProcess:
	default:
		return fmt.Errorf("lab: --runtime %q: want sim-predict, sim or process", spec.Runtime)
	}
	if labOpts.timeScale > 0 {
		spec.TimeScale = labOpts.timeScale
	}
	if spec.Runtime == lab.RuntimeSim && spec.TimeScale == 0 {
		spec.TimeScale = 20
	}
	if labOpts.parallel > 0 {
		spec.Parallel = labOpts.parallel
	}
	out := labOpts.out
	if out == "" {
		out = filepath.Join("out", spec.Name)
	}
	stderr := cmd.ErrOrStderr()

	var coef *sim.Coefficients
	if labOpts.coefficients != "" {
		c, err := sim.LoadCoefficients(labOpts.coefficients)
		if err != nil {
			return fmt.Errorf("lab: --coefficients: %w", err)
		}
		coef = c
	}
	var predictor lab.Predictor = lab.SimPredictor{SLO: spec.Objective.SLO, Coefficients: coef}
	spec.Simulator = ""
	if spec.Runtime == lab.RuntimeSimPredict || spec.Runtime == lab.RuntimeSim {
		spec.Simulator = sim.Fingerprint(coef)
	}
	var requests lab.Requests
	if labOpts.analytic {
		predictor, requests = lab.AnalyticPredictor{}, lab.StandinRequests
		spec.Simulator = "analytic"
	} else {
		tok, err := resolveLabTokenizer(ctx, spec)
		if err != nil {
			return err
		}
		requests = lab.DatasetRequests(tok)
	}
	requests = lab.CachedRequests(requests)
	predict := &lab.PredictRunner{Predictor: predictor, Hardware: spec.Hardware, Requests: requests, Noise: spec.Noise}

	if labOpts.dryRun {
		return printPlan(ctx, cmd.OutOrStdout(), spec, predict)
	}

	var runner lab.Runner = predict
	switch spec.Runtime {
	case lab.RuntimeSim:
		tokPath := spec.Tokenizer
		if _, err := os.Stat(tokPath); err != nil {
			tokPath = ""
		}
		runner = &lab.LiveRunner{
			Runtime: &engine.Sim{GPU: spec.Hardware.GPU, GPUs: 0, TimeScale: spec.TimeScale, Tokenizer: tokPath,
				Coefficients: absPath(labOpts.coefficients)},
			Requests:  requests,
			TimeScale: spec.TimeScale,
			SLO:       spec.Objective.SLO,
		}
	case lab.RuntimeProcess:
		runner = &lab.LiveRunner{Runtime: &engine.Process{}, Requests: requests, SLO: spec.Objective.SLO}
	}

	dsn := labOpts.db
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok && filepath.Dir(path) != "." {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("lab: create store directory: %w", err)
		}
	}
	st, err := store.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer st.Close()

	progress := lab.NewProgress(stderr)
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		progress = lab.NewTerminalProgress(stderr)
	}
	l := &lab.Lab{Spec: spec, Store: st, Runner: runner, Guide: predict, Fresh: labOpts.fresh, Grid: labOpts.grid,
		Progress: progress}
	start := time.Now()
	sum, runErr := l.Run(ctx)
	if runErr != nil && sum == nil {
		return runErr
	}
	run := l.StoredRun()
	trials, err := st.Trials(context.WithoutCancel(ctx), run.ID)
	if err != nil {
		return err
	}
	rep, err := report.Build(run, trials)
	if err != nil {
		return err
	}
	paths, err := report.WriteAll(rep, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "report: %s (%d trials stored, %s)\n", strings.Join(paths, ", "), len(trials), time.Since(start).Round(time.Millisecond))
	if sum.Grid != nil && sum.Grid.Best != nil {
		fmt.Fprintf(stderr, "grid: %d configs, best %s %.1f; lab winner %.2f%% below it (greedy stages alone %.2f%%) using %d trials (%.0f%% of the grid)\n",
			sum.Grid.Size, sum.Grid.Best.Name, sum.Grid.Best.Score, 100*sum.Grid.WinnerGap, 100*sum.Grid.StagedGap,
			sum.Grid.LabTrials, 100*sum.Grid.LabShare)
	}
	return runErr
}

// resolveLabTokenizer loads the spec's tokenizer: a local path when it
// exists, else a model id resolved through the HF cache and Hub.
func resolveLabTokenizer(ctx context.Context, spec *lab.Spec) (*tokenizer.Tokenizer, error) {
	ref := spec.Tokenizer
	if ref == "" {
		ref = spec.Model
	}
	var opt tokenizer.ResolveOptions
	if _, err := os.Stat(ref); err == nil {
		opt.Path = ref
	}
	tok, err := tokenizer.Resolve(ctx, ref, opt)
	if err != nil {
		return nil, fmt.Errorf("lab: tokenizer %q: %w", ref, err)
	}
	return tok, nil
}

// printPlan prints the stages, trial counts and an ETA from the
// simulator's predicted durations plus the engines' start-up times.
func printPlan(ctx context.Context, w io.Writer, spec *lab.Spec, predict *lab.PredictRunner) error {
	plan := spec.Plan()
	per, err := lab.EstimateTrialSeconds(ctx, spec, predict)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "lab %s: %s on %dx %s, runtime %s, objective %s\n", spec.Name, spec.Model, spec.Hardware.Count, spec.Hardware.GPU, spec.Runtime, spec.Objective.Metric)
	fmt.Fprintf(w, "%-28s %10s %8s\n", "stage", "candidates", "repeats")
	for _, s := range plan.Stages {
		fmt.Fprintf(w, "%-28s %10d %8d\n", s.Name, s.Candidates, s.Repeats)
	}
	eta := time.Duration(per * float64(plan.Trials) * float64(time.Second))
	fmt.Fprintf(w, "about %d trials at ~%.1f s each: ETA %s (exhaustive grid: %d configs)\n", plan.Trials, per, eta.Round(time.Second), plan.Grid)
	return nil
}

// absPath makes a path absolute, so that an engine process started in
// another directory finds the file ("" stays "").
func absPath(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
