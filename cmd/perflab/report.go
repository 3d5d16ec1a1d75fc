package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/report"
	"github.com/perflab/perflab/internal/store"
)

func newReportCmd() *cobra.Command {
	var (
		db       string
		out      string
		formats  []string
		specOpts app.Options
		images   []string
	)
	cmd := &cobra.Command{
		Use:   "report [RUN|SPEC]",
		Short: "Write a lab run's report (Markdown, HTML, JSON, CSV, charts) from the store",
		Long: `Write the report of a stored lab run. RUN is a run name or id; SPEC is the
lab's spec file (its run is found by the spec's key). With no argument, the
most recent run with trials is used. With SPEC, pass the same --runtime,
--image, --coefficients and --time-scale the lab was run with, if any.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, err := store.OpenExisting(ctx, db)
			if err != nil {
				return err
			}
			defer st.Close()
			if specOpts.Images, err = app.ParseImages(images); err != nil {
				return err
			}
			run, err := findRun(ctx, st, args, specOpts)
			if err != nil {
				return err
			}
			trials, err := st.Trials(ctx, run.ID)
			if err != nil {
				return err
			}
			rep, err := report.Build(run, trials)
			if err != nil {
				return err
			}
			if out == "" {
				out = filepath.Join("out", run.Name)
			}
			paths, err := report.WriteAll(rep, out, formats...)
			if err != nil {
				return err
			}
			for _, p := range paths {
				fmt.Fprintln(cmd.OutOrStdout(), p)
			}
			for _, w := range rep.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
			}
			return nil
		},
	}
	cmd.PersistentFlags().StringVar(&db, "db", defaultDB, "results database: a SQLite path (sqlite:PATH) or postgres://…")
	cmd.Flags().StringVar(&out, "out", "", "output directory (default out/<run name>)")
	cmd.Flags().StringVar(&specOpts.Runtime, "runtime", "", "with SPEC: the runtime the lab ran with, when --runtime overrode the spec's")
	cmd.Flags().StringVar(&specOpts.Coefficients, "coefficients", "", "with SPEC: the calibration the lab ran with (--coefficients)")
	cmd.Flags().Float64Var(&specOpts.TimeScale, "time-scale", 0, "with SPEC: the sim runtime's time scale the lab ran with")
	cmd.Flags().StringArrayVar(&images, "image", nil, "with SPEC: the --image values the lab ran with")
	cmd.Flags().StringSliceVar(&formats, "format", report.Formats, "formats to write: md, html, json, csv")
	cmd.AddCommand(newReportImportCmd(&db))
	// "report list" is the run list, not a run named "list".
	cmd.AddCommand(newRunsCmd("list"))
	return cmd
}

func findRun(ctx context.Context, st *store.Store, args []string, opts app.Options) (store.Run, error) {
	if len(args) == 0 {
		run, err := st.LatestRun(ctx)
		if errors.Is(err, store.ErrNotFound) {
			return store.Run{}, errors.New("report: the store has no runs yet (run `perflab lab SPEC` first)")
		}
		return run, err
	}
	arg := args[0]
	if fi, err := os.Stat(arg); err == nil && !fi.IsDir() {
		// The same spec, overrides and simulator fingerprint as the lab
		// used give the same run key.
		spec, _, err := app.Spec(arg, opts)
		if err != nil {
			return store.Run{}, err
		}
		run, err := st.RunByKey(ctx, spec.Key())
		if errors.Is(err, store.ErrNotFound) {
			// A run stored before the key left out run-control options
			// (parallel, budget) and not rerun since.
			run, err = st.RunByKey(ctx, spec.LegacyKey())
		}
		if errors.Is(err, store.ErrNotFound) {
			hint := ""
			if other, oerr := st.RunByName(ctx, spec.Name); oerr == nil {
				hint = fmt.Sprintf("; run %d is named %s but measured another spec or runtime (`perflab report %d`, or pass the lab's --runtime/--coefficients)", other.ID, spec.Name, other.ID)
			}
			return store.Run{}, fmt.Errorf("report: no stored run for spec %s with runtime %s (has `perflab lab %s` been run against this --db?)%s", arg, spec.Runtime, arg, hint)
		}
		return run, err
	}
	if id, err := strconv.ParseInt(arg, 10, 64); err == nil {
		return st.Run(ctx, id)
	}
	return st.RunByName(ctx, arg)
}

func newReportImportCmd(db *string) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "import FILE...",
		Short: "Store vLLM --save-result JSON, printed vLLM result blocks or GPUStack/guidellm JSON as a run",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var items []report.Imported
			for _, f := range args {
				got, err := report.ImportFile(f)
				if err != nil {
					return err
				}
				items = append(items, got...)
			}
			st, err := store.Open(ctx, *db)
			if err != nil {
				return err
			}
			defer st.Close()
			if name == "" {
				name = "import-" + strings.TrimSuffix(filepath.Base(args[0]), filepath.Ext(args[0]))
			}
			run, err := app.Import(ctx, st, name, items)
			if err != nil {
				return err
			}
			for _, it := range items {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\ttotal %.2f tok/s\n", it.Source, it.Format, it.Result.TotalTokenThroughput)
				for _, w := range it.Warnings {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s: %s\n", it.Source, w)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stored %d results in run %q (id %d)\n", len(items), name, run.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "run", "", "run name to store them under (default import-<first file>)")
	return cmd
}
