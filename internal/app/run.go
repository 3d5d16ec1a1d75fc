package app

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/perflab/perflab/internal/lab"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/store"
)

// RunOptions are a lab's choices that do not change its run key.
type RunOptions struct {
	// Progress receives the lab's events (nil: none).
	Progress lab.Progress
	// Fresh starts the run over, the earlier one archived (StartOver);
	// Grid also runs the exhaustive grid;
	// RetryFailed runs every stored failed trial again.
	Fresh, Grid, RetryFailed bool
}

// Run runs the spec's lab as `perflab lab` does, on the store st: the
// dataset preflight, the runner on the spec's runtime, then the lab, whose
// servers are stopped when it ends. It returns the lab's summary (nil when
// it could not start) and the run it stored (ID 0 when it stopped before
// storing one). The CLI and the server both start labs through it.
func (su *Setup) Run(ctx context.Context, spec *labspec.Spec, st *store.Store, ro RunOptions) (*lab.Summary, store.Run, error) {
	// A missing or truncated dataset stops the lab here, before a run is
	// stored or a report overwritten.
	if err := su.Preflight(spec); err != nil {
		return nil, store.Run{}, err
	}
	if ro.Fresh {
		if err := StartOver(ctx, st, spec.Key()); err != nil {
			return nil, store.Run{}, err
		}
	}
	runner, err := su.Runner(ctx, spec)
	if err != nil {
		return nil, store.Run{}, err
	}
	if c, ok := runner.(io.Closer); ok {
		// The lab stops the servers it kept up; this covers a lab that
		// never got as far as running.
		defer c.Close()
	}
	l := &lab.Lab{Spec: spec, Store: st, Runner: runner, Guide: su.Predict, Fresh: ro.Fresh, Grid: ro.Grid,
		RetryFailed: ro.RetryFailed, Progress: ro.Progress, GuideKey: su.GuideKey}
	sum, err := l.Run(ctx)
	return sum, l.StoredRun(), err
}

// StartOver readies a fresh start of the spec whose run key is key: a
// stored run with trials is archived (store.ArchiveRun), kept whole under
// a key of its own, and the lab starts a new run. Deleting the trials
// instead lost them for good when the fresh lab was stopped before its
// first trial, and took away what the earlier run had measured. A run
// without trials has nothing to keep and is simply reused.
func StartOver(ctx context.Context, st *store.Store, key string) error {
	run, err := st.RunByKey(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lab: start over: %w", err)
	}
	trials, err := st.TrialHeads(ctx, run.ID)
	if err != nil {
		return fmt.Errorf("lab: start over: %w", err)
	}
	if len(trials) == 0 {
		return nil
	}
	if err := st.ArchiveRun(ctx, run.ID); err != nil {
		return fmt.Errorf("lab: start run %s over: %w", run.Name, err)
	}
	return nil
}
