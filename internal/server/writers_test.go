package server

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/store"
)

// TestTwoWritersOneSQLite: a server and a CLI lab (the CLI's wiring, on a
// store of its own on the same SQLite file, as another process would have)
// write one file at once. On the same spec one of them holds the run and
// the other is refused, naming the holder; on two specs both finish; the
// file passes SQLite's integrity check and holds every trial.
func TestTwoWritersOneSQLite(t *testing.T) {
	root := shareddata.Path(t, "data")
	path := filepath.Join(t.TempDir(), "perflab.db")
	ctx := context.Background()
	open := func() *store.Store {
		st, err := store.Open(ctx, "sqlite:"+path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	srvStore, cliStore := open(), open()
	ts := newTestServer(t, srvStore, Config{DataRoot: root})

	cliLab := func(text string) (store.Run, error) {
		spec, err := labspec.ParseSpecIn("cli.yaml", []byte(text), root)
		if err != nil {
			return store.Run{}, err
		}
		coef, err := app.Apply(spec, app.Options{})
		if err != nil {
			return store.Run{}, err
		}
		su, err := app.NewSetup(ctx, spec, coef, app.Options{})
		if err != nil {
			return store.Run{}, err
		}
		_, run, err := su.Run(ctx, spec, cliStore, app.RunOptions{})
		return run, err
	}

	// The same spec from both: one lab per run.
	var (
		wg     sync.WaitGroup
		cliErr error
	)
	s := ts.submit(t, simSpec)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, cliErr = cliLab(simSpec)
	}()
	evs := ts.follow(t, s.ID, 0, nil)
	wg.Wait()
	end := evs[len(evs)-1].data
	var held *store.HeldError
	srvHeld := strings.Contains(end.Error, "held by another lab")
	if srvHeld == errors.As(cliErr, &held) {
		t.Fatalf("same spec: server ended %s %q, CLI %v; want exactly one refused as held", end.Status, end.Error, cliErr)
	}

	// Two specs at once: both finish.
	other := strings.Replace(simSpec, "name: small", "name: other", 1)
	s2 := ts.submit(t, other)
	var cliRun store.Run
	wg.Add(1)
	go func() {
		defer wg.Done()
		cliRun, cliErr = cliLab(strings.Replace(simSpec, "name: small", "name: third", 1))
	}()
	evs = ts.follow(t, s2.ID, 0, nil)
	wg.Wait()
	if end := evs[len(evs)-1].data; end.Status != "done" || cliErr != nil {
		t.Fatalf("two specs at once: server %s %q, CLI %v", end.Status, end.Error, cliErr)
	}
	for _, id := range []int64{s2.ID, cliRun.ID} {
		r, err := srvStore.Run(ctx, id)
		trials, _ := srvStore.Trials(ctx, id)
		if err != nil || r.Status != "done" || len(trials) == 0 {
			t.Errorf("run %d: %v %s, %d trials", id, err, r.Status, len(trials))
		}
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ok string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q %v", ok, err)
	}
}
