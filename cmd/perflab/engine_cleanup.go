package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/runtimes"
)

// newEngineCleanupCmd removes the engine servers perflab started that
// outlived it: containers of a perflab killed with -9. A lab removes its
// own run's leftovers when it starts again; this is for the rest.
func newEngineCleanupCmd() *cobra.Command {
	var run string
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove the engine containers perflab started that are still there",
		Long: `Remove the engine servers perflab started that outlived it: the containers
of a perflab killed with -9 (every container perflab starts carries the
labels perflab.managed=true and perflab.run=<run key>). A lab that starts
again on its run removes that run's own leftovers first; this command removes
them on demand.

With --run KEY, only that run's (its key is in perflab runs); without it,
every container perflab started on this Docker host, a running lab's too:
stop the labs first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var errs []error
			total := 0
			for _, c := range runtimes.Cleaners() {
				names, err := c.Cleanup(cmd.Context(), run)
				for _, n := range names {
					fmt.Fprintln(cmd.OutOrStdout(), "removed", n)
				}
				total += len(names)
				if err != nil {
					errs = append(errs, fmt.Errorf("engine cleanup: %w", err))
				}
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			if total == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "nothing to remove")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "only the servers of the run with this key")
	return cmd
}
