package app

import (
	"context"
	"fmt"

	"github.com/perflab/perflab/internal/report"
	"github.com/perflab/perflab/internal/store"
)

// Import stores results taken in from other tools (report.ImportFile or
// ImportBytes) as the trials of the run named name, created when new: what
// `perflab report import` and the server's POST /imports both do.
func Import(ctx context.Context, st *store.Store, name string, items []report.Imported) (store.Run, error) {
	if len(items) == 0 {
		return store.Run{}, fmt.Errorf("app: import into %s: no results", name)
	}
	run, err := st.EnsureRun(ctx, "import:"+name, name, "", false)
	if err != nil {
		return store.Run{}, err
	}
	trials, err := report.ToTrials(run.ID, items)
	if err != nil {
		return store.Run{}, err
	}
	for i := range trials {
		if err := st.SaveTrial(ctx, &trials[i]); err != nil {
			return store.Run{}, err
		}
	}
	return run, nil
}
