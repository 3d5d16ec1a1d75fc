package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/store"
)

// TestRunsList (issue 11, defect 10: no way to list stored runs, and
// `report list` read "list" as a run name): `perflab runs` and `perflab
// report list` show each run with its model, status, trials and best, in
// text and JSON.
func TestRunsList(t *testing.T) {
	ctx := context.Background()
	db := "sqlite:" + filepath.Join(t.TempDir(), "p.db")
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	run, _ := st.EnsureRun(ctx, "k", "qwen3-14b-h100", "spec", false)
	run.Status = "done"
	run.Summary = []byte(`{"model":"Qwen/Qwen3-14B","runtime":"sim-predict","unit":"tok/s","gain":1.128,
		"winner":{"name":"vLLM + FP8","score":12282.5}}`)
	if err := st.UpdateRun(ctx, &run); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"ok", "failed"} {
		if err := st.SaveTrial(ctx, &store.Trial{RunID: run.ID, Key: s, Status: s}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	for _, args := range [][]string{{"runs"}, {"report", "list"}} {
		var out bytes.Buffer
		cmd := newRunsCmd(args[len(args)-1])
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"--db", db})
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for _, want := range []string{"qwen3-14b-h100", "Qwen/Qwen3-14B", "sim-predict", "done", "2 (1 failed)", "vLLM + FP8 12282.5 tok/s (+112.8%)"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out.String())
			}
		}
	}
	var out bytes.Buffer
	cmd := newRunsCmd("runs")
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--db", db, "--output", "json"})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	var rows []runRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 1 || rows[0].Trials != 2 || rows[0].Best != "vLLM + FP8" {
		t.Fatalf("json: %v %+v", err, rows)
	}
	// The report command's own tree has "list" as a subcommand.
	if c, _, err := newReportCmd().Find([]string{"list"}); err != nil || c.Name() != "list" {
		t.Errorf("report list resolves to %v, %v", c, err)
	}
}

// TestVersion: --version prints the module version and what is known of
// the commit.
func TestVersion(t *testing.T) {
	if v := version(); !strings.HasPrefix(v, "devel") && !strings.HasPrefix(v, "v") {
		t.Errorf("version %q", v)
	}
	var out bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetArgs([]string{"--version"})
	defer root.SetArgs(nil)
	defer root.SetOut(nil)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "perflab ") || !strings.Contains(out.String(), "go1.") {
		t.Errorf("--version printed %q", out.String())
	}
}
