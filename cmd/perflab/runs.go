package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/lab"
	"github.com/perflab/perflab/internal/store"
)

// runRow is one stored run as `perflab runs` shows it.
type runRow struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	// Key is the run key: its servers' perflab.run label (perflab engine
	// cleanup --run KEY).
	Key     string    `json:"key"`
	Model   string    `json:"model,omitempty"`
	Runtime string    `json:"runtime,omitempty"`
	Status  string    `json:"status"`
	Started time.Time `json:"started"`
	Trials  int       `json:"trials"`
	Failed  int       `json:"failed"`
	Best    string    `json:"best,omitempty"`
	Score   float64   `json:"best_score,omitempty"`
	Unit    string    `json:"unit,omitempty"`
	Gain    float64   `json:"gain,omitempty"`
}

// newRunsCmd lists the store's runs; it is `perflab runs` and `perflab
// report list`.
func newRunsCmd(use string) *cobra.Command {
	var db, output string
	cmd := &cobra.Command{
		Use:   use,
		Short: "List the stored runs: name, id, model, status, when, trials and the best configuration",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("runs: --output %q: want text or json", output)
			}
			st, err := store.OpenExisting(cmd.Context(), db)
			if err != nil {
				return err
			}
			defer st.Close()
			infos, err := st.RunInfos(cmd.Context())
			if err != nil {
				return err
			}
			rows := make([]runRow, 0, len(infos))
			for _, ri := range infos {
				rows = append(rows, toRunRow(ri))
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			return printRuns(cmd.OutOrStdout(), rows)
		},
	}
	f := cmd.Flags()
	f.StringVar(&db, "db", defaultDB, "store: sqlite:PATH, a path, or postgres://...")
	f.StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

// toRunRow reads what the list shows from a run and its summary (a run
// without one, an import or a lab stopped early, shows what it has).
func toRunRow(ri store.RunInfo) runRow {
	r := runRow{ID: ri.ID, Name: ri.Name, Key: ri.Key, Status: ri.Status, Started: ri.Started, Trials: ri.Trials, Failed: ri.Failed}
	if r.Started.IsZero() {
		r.Started = ri.Created
	}
	var sum lab.Summary
	if len(ri.Summary) > 0 && json.Unmarshal(ri.Summary, &sum) == nil {
		r.Model, r.Runtime, r.Unit, r.Gain = sum.Model, sum.Runtime, sum.Unit, sum.Gain
		if sum.Winner != nil {
			r.Best, r.Score = sum.Winner.Name, sum.Winner.Score
		}
	}
	return r
}

func printRuns(w io.Writer, rows []runRow) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no runs stored yet (perflab lab SPEC runs one)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tMODEL\tRUNTIME\tSTATUS\tSTARTED\tTRIALS\tBEST")
	for _, r := range rows {
		best := "-"
		if r.Best != "" {
			best = fmt.Sprintf("%s %.1f %s (%+.1f%%)", r.Best, r.Score, r.Unit, 100*r.Gain)
		}
		trials := fmt.Sprint(r.Trials)
		if r.Failed > 0 {
			trials += fmt.Sprintf(" (%d failed)", r.Failed)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Name, dash(r.Model), dash(r.Runtime), r.Status,
			r.Started.Local().Format("2006-01-02 15:04"), trials, best)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
