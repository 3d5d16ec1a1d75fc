package store

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestLease: one live owner at a time; the holder renews; a second owner
// is told who holds the run; a lapsed lease and a dead holder on this host
// are taken over at once; --fresh's reset and a trial's attempt survive a
// round trip. Each case runs on SQLite and, under CI, on PostgreSQL.
func TestLease(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			run, err := s.EnsureRun(ctx, "k", "lease", "spec", false)
			if err != nil {
				t.Fatal(err)
			}
			a, b := NewOwner(), NewOwner()
			b.Nonce += "b"
			if err := s.AcquireRun(ctx, run.ID, a, time.Minute); err != nil {
				t.Fatalf("first acquire: %v", err)
			}
			if err := s.AcquireRun(ctx, run.ID, a, time.Minute); err != nil {
				t.Fatalf("re-acquire by the holder: %v", err)
			}
			err = s.AcquireRun(ctx, run.ID, b, time.Minute)
			var held *HeldError
			if !errors.As(err, &held) || held.Owner != a.String() || held.RunID != run.ID {
				t.Fatalf("second owner: err = %v, want a HeldError naming %s", err, a)
			}
			if err := s.RenewLease(ctx, run.ID, a, time.Minute); err != nil {
				t.Fatalf("renew: %v", err)
			}
			if err := s.RenewLease(ctx, run.ID, b, time.Minute); !errors.As(err, &held) {
				t.Fatalf("renew by a non-holder: err = %v, want HeldError", err)
			}
			// A lapsed lease is free for the next lab.
			if err := s.AcquireRun(ctx, run.ID, a, -time.Second); err != nil {
				t.Fatal(err)
			}
			if err := s.AcquireRun(ctx, run.ID, b, time.Minute); err != nil {
				t.Fatalf("acquire after the lease lapsed: %v", err)
			}
			if err := s.ReleaseRun(ctx, run.ID, b); err != nil {
				t.Fatal(err)
			}
			// A holder that is a dead process on this host: taken at once,
			// although its lease has an hour left (a lab killed with -9).
			cmd := exec.Command("true")
			if err := cmd.Run(); err != nil {
				t.Fatal(err)
			}
			dead := Owner{Host: a.Host, PID: cmd.Process.Pid, Nonce: "dead"}
			if err := s.AcquireRun(ctx, run.ID, dead, time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := s.AcquireRun(ctx, run.ID, a, time.Minute); err != nil {
				t.Fatalf("acquire from a dead holder: %v", err)
			}
			// A live holder on another host is not second-guessed.
			other := Owner{Host: a.Host + "-elsewhere", PID: cmd.Process.Pid, Nonce: "x"}
			if err := s.ReleaseRun(ctx, run.ID, a); err != nil {
				t.Fatal(err)
			}
			if err := s.AcquireRun(ctx, run.ID, other, time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := s.AcquireRun(ctx, run.ID, a, time.Minute); !errors.As(err, &held) {
				t.Fatalf("acquire from another host's holder: err = %v, want HeldError", err)
			}

			tr := Trial{RunID: run.ID, Key: "t1", Status: "failed", FailureClass: "hung", Attempt: 2}
			if err := s.SaveTrial(ctx, &tr); err != nil {
				t.Fatal(err)
			}
			got, err := s.Trial(ctx, run.ID, "t1")
			if err != nil || got.Attempt != 2 {
				t.Fatalf("attempt round trip: %+v %v", got, err)
			}
			if err := s.ResetRun(ctx, run.ID); err != nil {
				t.Fatal(err)
			}
			if ts, _ := s.Trials(ctx, run.ID); len(ts) != 0 {
				t.Fatalf("reset left %d trials", len(ts))
			}
			if err := s.DeleteRun(ctx, run.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Run(ctx, run.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("deleted run still readable: %v", err)
			}
		})
	}
}

// TestLatestRunHasTrials: an empty run (a lab that stopped before its
// first trial) is never "the latest run" of its name, or overall, while a
// run with trials exists; with none, it is found all the same.
func TestLatestRunHasTrials(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			full, err := s.EnsureRun(ctx, "full", "same", "spec", false)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SaveTrial(ctx, &Trial{RunID: full.ID, Key: "a", Status: "ok"}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond) // a later updated_ms
			empty, err := s.EnsureRun(ctx, "empty", "same", "spec", false)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := s.RunByName(ctx, "same"); err != nil || r.ID != full.ID {
				t.Fatalf("RunByName = %d, %v; want the run with trials %d (not the empty %d)", r.ID, err, full.ID, empty.ID)
			}
			if r, err := s.LatestRun(ctx); err != nil || r.ID != full.ID {
				t.Fatalf("LatestRun = %d, %v; want %d", r.ID, err, full.ID)
			}
			if err := s.DeleteRun(ctx, full.ID); err != nil {
				t.Fatal(err)
			}
			if r, err := s.RunByName(ctx, "same"); err != nil || r.ID != empty.ID {
				t.Fatalf("RunByName with only the empty run = %d, %v", r.ID, err)
			}
		})
	}
}

// TestTrialCost: a trial's cost (engine start, start and benchmark
// seconds, GPUs) survives the round trip on both databases.
func TestTrialCost(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			run, err := s.EnsureRun(ctx, "c", "cost", "spec", false)
			if err != nil {
				t.Fatal(err)
			}
			want := Cost{EngineStart: true, StartupSeconds: 181.25, BenchSeconds: 42.5, GPUs: 4}
			if err := s.SaveTrial(ctx, &Trial{RunID: run.ID, Key: "k", Status: "ok", Cost: want}); err != nil {
				t.Fatal(err)
			}
			got, err := s.Trial(ctx, run.ID, "k")
			if err != nil || got.Cost != want {
				t.Fatalf("cost = %+v (%v), want %+v", got.Cost, err, want)
			}
			if h := got.Cost.GPUHours(); h < 0.248 || h > 0.249 {
				t.Errorf("GPU-hours %v, want 4 × 223.75 s = 0.2486", h)
			}
		})
	}
}

// TestParseDSN (issue 11, defect 15: "sqlite:" ran 22 trials before
// failing, "mysql://x" made a SQLite file named "mysql:/x"): a database
// name is checked before anything runs, and a refusal names what is
// supported.
func TestParseDSN(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		dsn     string
		dialect Dialect
		path    string
		bad     string // part of the error
	}{
		{dsn: "sqlite:.perflab/perflab.db", dialect: SQLite, path: ".perflab/perflab.db"},
		{dsn: "file:x.db?mode=rwc", dialect: SQLite, path: "x.db"},
		{dsn: "plain.db", dialect: SQLite, path: "plain.db"},
		{dsn: "sqlite::memory:", dialect: SQLite, path: ":memory:"},
		{dsn: "postgres://u:secret@127.0.0.1:5432/db?sslmode=disable", dialect: Postgres},
		{dsn: "postgresql://u@db.internal/perflab", dialect: Postgres},
		{dsn: "", bad: "empty database name"},
		{dsn: "sqlite:", bad: "SQLite file name is empty"},
		{dsn: "mysql://x", bad: "mysql is not supported (want sqlite:PATH"},
		{dsn: "postgres:///nohost", bad: "no host"},
		{dsn: "sqlite:" + dir, bad: "is a directory"},
	} {
		d, err := ParseDSN(tc.dsn)
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%q: err = %v, want %q", tc.dsn, err, tc.bad)
			}
			if strings.Contains(fmt.Sprint(err), "secret") {
				t.Errorf("%q: the error shows the password", tc.dsn)
			}
			continue
		}
		if err != nil || d.Dialect != tc.dialect || (tc.path != "" && d.Path != tc.path) {
			t.Errorf("%q: %+v, %v; want %s %s", tc.dsn, d, err, tc.dialect, tc.path)
		}
	}
}

// TestRunInfos: the run list carries each run's trial and failure counts
// and its first trial's start, on both databases, newest run first.
func TestRunInfos(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			a, _ := s.EnsureRun(ctx, "a", "first", "spec", false)
			t0 := time.UnixMilli(time.Now().UnixMilli()).UTC()
			for i, st := range []string{"ok", "failed", "ok"} {
				tr := Trial{RunID: a.ID, Key: fmt.Sprint(i), Status: st, Started: t0.Add(time.Duration(i) * time.Second)}
				if err := s.SaveTrial(ctx, &tr); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(5 * time.Millisecond)
			b, _ := s.EnsureRun(ctx, "b", "empty", "spec", false)
			infos, err := s.RunInfos(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(infos) != 2 || infos[0].ID != b.ID || infos[1].ID != a.ID {
				t.Fatalf("runs %+v, want the empty run first (newest), then the other", infos)
			}
			if got := infos[1]; got.Trials != 3 || got.Failed != 1 || !got.Started.Equal(t0) {
				t.Errorf("first run: %d trials, %d failed, started %v; want 3, 1, %v", got.Trials, got.Failed, got.Started, t0)
			}
			if got := infos[0]; got.Trials != 0 || got.Failed != 0 || !got.Started.IsZero() {
				t.Errorf("empty run: %+v", got)
			}
		})
	}
}

// TestGuideCache: a guiding prediction is stored and read back by key,
// and replaced when saved again.
func TestGuideCache(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			if _, ok, err := s.Guess(ctx, "k"); ok || err != nil {
				t.Fatalf("empty cache: %v %v", ok, err)
			}
			for _, v := range []string{`{"a":1}`, `{"a":2}`} {
				if err := s.SaveGuess(ctx, "k", []byte(v)); err != nil {
					t.Fatal(err)
				}
				got, ok, err := s.Guess(ctx, "k")
				if !ok || err != nil || string(got) != v {
					t.Fatalf("got %s %v %v, want %s", got, ok, err, v)
				}
			}
		})
	}
}

// TestArchiveRun: a run a live lab holds is not archived (a *HeldError);
// a free one keeps its id, trials and status under a key of its own, and
// its key is free for a new run.
func TestArchiveRun(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			run, _ := s.EnsureRun(ctx, "k", "arch", "spec", false)
			if err := s.SaveTrial(ctx, &Trial{RunID: run.ID, Key: "a", Status: "ok"}); err != nil {
				t.Fatal(err)
			}
			o := NewOwner()
			s.AcquireRun(ctx, run.ID, o, time.Minute)
			var held *HeldError
			if err := s.ArchiveRun(ctx, run.ID); !errors.As(err, &held) {
				t.Fatalf("archive of a held run: %v, want a HeldError", err)
			}
			s.ReleaseRun(ctx, run.ID, o)
			if err := s.ArchiveRun(ctx, run.ID); err != nil {
				t.Fatal(err)
			}
			old, err := s.Run(ctx, run.ID)
			if err != nil || !strings.HasPrefix(old.Key, "k#archived-") {
				t.Fatalf("archived run: %+v, %v", old, err)
			}
			if ts, _ := s.Trials(ctx, run.ID); len(ts) != 1 {
				t.Errorf("archived run has %d trials, want 1", len(ts))
			}
			fresh, _ := s.EnsureRun(ctx, "k", "arch", "spec", false)
			if fresh.ID == run.ID {
				t.Error("the key still finds the archived run")
			}
		})
	}
}
