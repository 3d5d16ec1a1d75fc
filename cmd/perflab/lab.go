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

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/lab"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/report"
	"github.com/perflab/perflab/internal/runtimes"
	"github.com/perflab/perflab/internal/store"
)

// labFlags are the flags of perflab lab.
type labFlags struct {
	runtime, db, out string
	coefficients     string
	fresh, dryRun    bool
	retryFailed      bool
	keepWorkDir      bool
	grid, analytic   bool
	timeScale        float64
	parallel         int
	images           []string
	kubeContext      string
	namespace        string
}

// newLabCmd is `perflab lab`.
func newLabCmd() *cobra.Command {
	var labOpts labFlags
	labCmd := &cobra.Command{
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
(no finished trial runs again, but a trial that crashed mid-benchmark or
hung is retried once; --retry-failed retries every failure); --fresh starts
over. One lab at a time owns a run: a second one on the same spec and
database says which process holds it. Relative paths in the spec resolve
against the spec file's directory.

It exits non-zero when no trial succeeded, with the first failure's reason.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runLab(cmd, args, &labOpts) },
	}
	f := labCmd.Flags()
	f.StringVar(&labOpts.runtime, "runtime", "", runtimeHelp())
	f.StringVar(&labOpts.db, "db", defaultDB, "store: sqlite:PATH, a path, or postgres://...")
	f.StringVar(&labOpts.out, "out", "", "report directory (default out/<spec name>)")
	f.BoolVar(&labOpts.fresh, "fresh", false, "start the run over (delete its stored trials)")
	f.BoolVar(&labOpts.keepWorkDir, "keep-workdir", false, "keep each engine server's working directory (log, rendered files) after it stops, under OUT/engines")
	f.BoolVar(&labOpts.retryFailed, "retry-failed", false, "run every stored failed trial again (a resume retries only crashes and hangs, once)")
	f.BoolVar(&labOpts.dryRun, "dry-run", false, "print the plan and its ETA, run nothing")
	f.BoolVar(&labOpts.grid, "grid", false, "also run the exhaustive grid over the same space and compare")
	f.BoolVar(&labOpts.analytic, "analytic", false, "sim-predict with the lab's closed-form stand-in model instead of the simulator (tests)")
	f.Float64Var(&labOpts.timeScale, "time-scale", 0, "sim runtime: simulated-time speed-up (default: the spec's, else 20)")
	f.IntVar(&labOpts.parallel, "parallel", 0, "trials at once (default: the spec's)")
	f.StringVar(&labOpts.kubeContext, "kube-context", "", "kubernetes runtime: the kubeconfig context (default: the current one, or the in-cluster config)")
	f.StringVar(&labOpts.namespace, "namespace", "", "kubernetes runtime: the namespace of the engine pods (default: the spec's, else the context's)")
	f.StringArrayVar(&labOpts.images, "image", nil, "container runtimes: the image of ENGINE (ENGINE=IMAGE, repeatable), or of every engine (IMAGE, e.g. the simulated engine image from perflab sim image); overrides the spec's images:")
	f.StringVar(&labOpts.coefficients, "coefficients", "", "simulator calibration from perflab sim calibrate, for the guide, sim-predict and sim runtimes (default: the embedded one)")
	return labCmd
}

func runLab(cmd *cobra.Command, args []string, labOpts *labFlags) error {
	ctx := cmd.Context()
	// A bad --db is refused before the first trial, not after the last.
	if _, err := store.ParseDSN(labOpts.db); err != nil && !labOpts.dryRun {
		return err
	}
	images, err := app.ParseImages(labOpts.images)
	if err != nil {
		return err
	}
	opts := app.Options{Runtime: labOpts.runtime, TimeScale: labOpts.timeScale, Parallel: labOpts.parallel,
		Coefficients: labOpts.coefficients, Analytic: labOpts.analytic, KeepWorkDir: labOpts.keepWorkDir, Images: images,
		KubeContext: labOpts.kubeContext, Namespace: labOpts.namespace}
	spec, coef, err := app.Spec(args[0], opts)
	if err != nil {
		return err
	}
	out := labOpts.out
	if out == "" {
		out = filepath.Join("out", spec.Name)
	}
	stderr := cmd.ErrOrStderr()
	if labOpts.keepWorkDir && spec.RuntimeKind().Servers() && !labOpts.dryRun {
		opts.WorkRoot = filepath.Join(out, "engines")
		fmt.Fprintf(stderr, "engine working directories (log, rendered files) are kept under %s\n", opts.WorkRoot)
	}
	su, err := app.NewSetup(ctx, spec, coef, opts)
	if err != nil {
		return err
	}
	if labOpts.dryRun {
		return printPlan(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), spec, su)
	}
	st, err := store.Open(ctx, labOpts.db)
	if err != nil {
		return err
	}
	defer st.Close()

	progress := lab.NewProgress(stderr)
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		progress = lab.NewTerminalProgress(stderr)
	}
	start := time.Now()
	sum, run, runErr := su.Run(ctx, spec, st, app.RunOptions{Progress: progress, Fresh: labOpts.fresh, Grid: labOpts.grid, RetryFailed: labOpts.retryFailed})
	if runErr != nil && sum == nil {
		return runErr
	}
	if run.ID == 0 {
		// It stopped before its first trial and stored no run: the last
		// complete report of this name stays as it was.
		return runErr
	}
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
	if runErr != nil {
		return runErr
	}
	// A lab none of whose trials ran is a failure a script must see, with
	// the reason, not a report to go and read.
	return app.AllFailed(trials)
}

// printPlan runs the lab on the in-process simulator into a throwaway
// store and prints its path: the trials of each stage, the engine starts
// and GPU-hours, and the ETA. On sim-predict that path is the run's own.
// It writes its progress to progress as it walks.
func printPlan(ctx context.Context, w, progress io.Writer, spec *labspec.Spec, su *app.Setup) error {
	mem, err := store.Open(ctx, "sqlite::memory:")
	if err != nil {
		return err
	}
	defer mem.Close()
	p, err := lab.DryRun(ctx, spec, su.Predict, su.GuideKey, mem, progress)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "lab %s: %s on %dx %s, runtime %s, objective %s\n", spec.Name, spec.Model, spec.Hardware.Count, spec.Hardware.GPU, spec.Runtime, spec.Objective.Metric)
	fmt.Fprintf(w, "%-28s %8s\n", "stage", "trials")
	for _, s := range p.Stages {
		if s.Skipped != "" {
			fmt.Fprintf(w, "%-28s %8d  skipped: %s\n", s.Name, s.Trials, s.Skipped)
			continue
		}
		fmt.Fprintf(w, "%-28s %8d\n", s.Name, s.Trials)
	}
	how := "the run's own path (sim-predict)"
	if !p.Exact {
		how = fmt.Sprintf("the path the run takes where its measurements match the simulator's; at most %d", p.UpperBound)
	}
	fmt.Fprintf(w, "about %d trials: %s; ETA %s; winner on this path: %s\n", p.Trials, how, p.ETA.Round(time.Second), p.Winner)
	on := "on " + spec.Runtime
	if p.Exact {
		on = "on GPUs (process runtime)"
	}
	fmt.Fprintf(w, "%s: %d engine starts for %d distinct configs, at %.0f s each, %.2f GPU-hours\n", on, p.Starts, p.Configs, p.StartupSeconds, p.GPUHours)
	return nil
}

// runtimeHelp lists the runtimes for --runtime, from their registry.
func runtimeHelp() string {
	var b strings.Builder
	b.WriteString("where trials run (default: the spec's, else " + runtimes.Default + "):")
	for _, n := range runtimes.Names() {
		k, _ := runtimes.Lookup(n)
		fmt.Fprintf(&b, "\n%s: %s", n, k.Summary())
	}
	return b.String()
}
