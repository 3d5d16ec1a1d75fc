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
	var run, only string
	cmd := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove the engine containers perflab started that are still there",
		Long: `Remove the engine servers perflab started that outlived it: the containers
of a perflab killed with -9 (every container perflab starts carries the
labels perflab.managed=true and perflab.run=<run key>). A lab that starts
again on its run removes that run's own leftovers first; this command removes
them on demand.

With --run KEY, only that run's (its key is in perflab runs -o json); without it,
every one perflab started, a running lab's too: stop the labs first.
--runtime docker or --runtime kubernetes asks that runtime only (the
Docker host of DOCKER_HOST; the current context and namespace of the
kubeconfig, KUBECONFIG); without it, every runtime that can have
leftovers is asked, and one that cannot be reached is skipped with a
warning.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cleaners := runtimes.Cleaners()
			if only != "" {
				k, err := runtimes.Lookup(only)
				if err != nil {
					return fmt.Errorf("engine cleanup: %w", err)
				}
				c, ok := k.(runtimes.Cleaner)
				if !ok {
					return fmt.Errorf("engine cleanup: runtime %s leaves nothing behind (its servers end with perflab)", only)
				}
				cleaners = []runtimes.Cleaner{c}
			}
			var errs []error
			total := 0
			for _, c := range cleaners {
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
				if only != "" || len(errs) == len(cleaners) {
					return err
				}
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: skipped:", err)
			}
			if total == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "nothing to remove")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "only the servers of the run with this key")
	cmd.Flags().StringVar(&only, "runtime", "", "only this runtime's leftovers (docker, kubernetes)")
	return cmd
}
