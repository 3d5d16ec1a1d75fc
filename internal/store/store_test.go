package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// backends returns a fresh store per available dialect. PostgreSQL is
// reached through PERFLAB_TEST_POSTGRES (.ci/run starts a real server);
// under CI=true its absence is a failure, not a skip.
func backends(t *testing.T) map[string]func(t *testing.T) *Store {
	t.Helper()
	out := map[string]func(t *testing.T) *Store{
		"sqlite": func(t *testing.T) *Store {
			s, err := Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "sub", "perflab.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	dsn := os.Getenv("PERFLAB_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("PERFLAB_TEST_POSTGRES is not set under CI=true: .ci/run must start PostgreSQL")
		}
		t.Log("PERFLAB_TEST_POSTGRES not set: PostgreSQL cases skipped")
		return out
	}
	out["postgres"] = func(t *testing.T) *Store {
		ctx := context.Background()
		admin, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		// A schema per test keeps the cases independent on one server.
		schema := fmt.Sprintf("t%d", time.Now().UnixNano())
		if _, err := admin.db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
			t.Fatal(err)
		}
		admin.Close()
		sep := "?"
		if containsByte(dsn, '?') {
			sep = "&"
		}
		s, err := Open(ctx, dsn+sep+"search_path="+schema)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			s.db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE")
			s.Close()
		})
		return s
	}
	return out
}

func containsByte(s string, c byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return true
		}
	}
	return false
}

func TestStore(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			r, err := s.EnsureRun(ctx, "k1", "qwen3-14b-h100", "model: x\n", false)
			if err != nil {
				t.Fatal(err)
			}
			if r.ID == 0 || r.Status != "running" || r.Created.IsZero() {
				t.Fatalf("new run = %+v", r)
			}
			again, err := s.EnsureRun(ctx, "k1", "qwen3-14b-h100", "model: x\n", false)
			if err != nil || again.ID != r.ID {
				t.Fatalf("resume: got %+v, %v; want id %d", again, err, r.ID)
			}

			start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
			tr := Trial{RunID: r.ID, Key: "engine/abc/ShareGPT/0", Stage: "engine", Name: "SGLang",
				Workload: "ShareGPT", Config: json.RawMessage(`{"engine":"sglang"}`),
				Command: "python3 -m sglang.launch_server --model-path Qwen/Qwen3-14B", Status: "ok",
				Result:        json.RawMessage(`{"total_token_throughput":6595.66}`),
				EngineMetrics: map[string]float64{"vllm:num_preemptions_total": 3},
				LogTail:       "ready", Started: start, Ended: start.Add(90 * time.Second)}
			if err := s.SaveTrial(ctx, &tr); err != nil {
				t.Fatal(err)
			}
			failed := Trial{RunID: r.ID, Key: "fp8/def/ShareGPT/0", Stage: "quantization", Name: "FP8",
				Workload: "ShareGPT", Status: "failed", FailureClass: "oom", Reason: "CUDA out of memory"}
			if err := s.SaveTrial(ctx, &failed); err != nil {
				t.Fatal(err)
			}
			got, err := s.Trial(ctx, r.ID, tr.Key)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != tr.ID || got.Stage != "engine" || string(got.Result) != string(tr.Result) ||
				got.EngineMetrics["vllm:num_preemptions_total"] != 3 || !got.Ended.Equal(tr.Ended) || string(got.Config) != string(tr.Config) {
				t.Fatalf("round trip: got %+v\nwant %+v", got, tr)
			}

			// Saving the same key again replaces it, never duplicates.
			tr.Status, tr.Reason = "failed", "crash_during_bench"
			if err := s.SaveTrial(ctx, &tr); err != nil {
				t.Fatal(err)
			}
			all, err := s.Trials(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != 2 || all[0].Key != tr.Key || all[0].Status != "failed" || all[1].FailureClass != "oom" {
				t.Fatalf("trials = %+v", all)
			}

			r.Status, r.Summary = "done", json.RawMessage(`{"winner":"engine/abc/ShareGPT/0"}`)
			if err := s.UpdateRun(ctx, &r); err != nil {
				t.Fatal(err)
			}
			byName, err := s.RunByName(ctx, "qwen3-14b-h100")
			if err != nil || byName.Status != "done" || string(byName.Summary) != string(r.Summary) {
				t.Fatalf("by name: %+v %v", byName, err)
			}
			if _, err := s.Trial(ctx, r.ID, "nope"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("missing trial: err = %v, want ErrNotFound", err)
			}
			if _, err := s.RunByKey(ctx, "nope"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("missing run: err = %v, want ErrNotFound", err)
			}

			// --fresh: same run, no trials.
			fresh, err := s.EnsureRun(ctx, "k1", "qwen3-14b-h100", "model: y\n", true)
			if err != nil || fresh.ID != r.ID || fresh.Status != "running" || fresh.Spec != "model: y\n" {
				t.Fatalf("fresh: %+v %v", fresh, err)
			}
			if all, _ := s.Trials(ctx, r.ID); len(all) != 0 {
				t.Fatalf("fresh left %d trials", len(all))
			}
			runs, err := s.Runs(ctx)
			if err != nil || len(runs) != 1 {
				t.Fatalf("runs = %v, %v", runs, err)
			}
		})
	}
}

// Parallel trials finish together; every save must land.
func TestConcurrentSaves(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := open(t)
			r, err := s.EnsureRun(ctx, "k", "n", "", false)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 40)
			for i := 0; i < 40; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					errs <- s.SaveTrial(ctx, &Trial{RunID: r.ID, Key: fmt.Sprint("t", i), Status: "ok"})
				}(i)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			all, err := s.Trials(ctx, r.ID)
			if err != nil || len(all) != 40 {
				t.Fatalf("got %d trials, %v", len(all), err)
			}
		})
	}
}

// Reopening a database applies no migration twice and keeps the data.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := s.EnsureRun(ctx, "k", "n", "", false)
	if err := s.SaveTrial(ctx, &Trial{RunID: r.ID, Key: "a", Status: "ok"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	all, _ := loadMigrations()
	if err := s.db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != len(all) {
		t.Fatalf("migrations recorded = %d, %v; want each of the %d once", n, err, len(all))
	}
	if all, _ := s.Trials(ctx, r.ID); len(all) != 1 {
		t.Fatalf("reopened store has %d trials", len(all))
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, ""); err == nil {
		t.Fatal("empty dsn accepted")
	}
	// A file that is not a database: a clear error, not a panic.
	bad := filepath.Join(t.TempDir(), "bad.db")
	os.WriteFile(bad, []byte("this is not sqlite, just some text that is long enough to matter........................................................."), 0o644)
	if _, err := Open(ctx, bad); err == nil {
		t.Fatal("garbage database file accepted")
	}
	// A dead server: a clear error naming it, password redacted.
	_, err := Open(ctx, "postgres://u:secret@127.0.0.1:1/x?sslmode=disable&connect_timeout=2")
	if err == nil || containsSecret(err.Error()) {
		t.Fatalf("dead postgres: err = %v", err)
	}
}

func containsSecret(s string) bool {
	for i := 0; i+6 <= len(s); i++ {
		if s[i:i+6] == "secret" {
			return true
		}
	}
	return false
}

// TestOpenCreatesNothingUnasked: SQLite's URI form behind the prefix
// ("sqlite:file:/x.db?mode=ro") opens that file, read-only, without a
// literal "file:" directory; OpenExisting (read-only commands) refuses a
// missing file and creates neither it nor its directories.
func TestOpenCreatesNothingUnasked(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Chdir(dir)
	path := filepath.Join(dir, "p.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := s.EnsureRun(ctx, "k", "n", "", false)
	s.Close()
	ro, err := Open(ctx, "sqlite:file:"+path+"?mode=ro")
	if err != nil {
		t.Fatalf("sqlite:file:…?mode=ro: %v", err)
	}
	if got, err := ro.Run(ctx, r.ID); err != nil || got.Key != "k" {
		t.Errorf("read-only store: run %+v, %v", got, err)
	}
	if _, err := ro.EnsureRun(ctx, "k2", "n2", "", false); err == nil {
		t.Error("a write to a mode=ro store succeeded: the mode was dropped")
	}
	ro.Close()
	if _, err := os.Stat(filepath.Join(dir, "file:")); err == nil {
		t.Error(`sqlite:file:… created a directory named "file:"`)
	}
	missing := filepath.Join(dir, "nonexistent", "dir", "x.db")
	_, err = OpenExisting(ctx, "sqlite:"+missing)
	if !errors.Is(err, ErrNoDatabase) {
		t.Errorf("OpenExisting of a missing file: %v, want ErrNoDatabase", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nonexistent")); err == nil {
		t.Error("OpenExisting created the missing file's directories")
	}
	if s, err := OpenExisting(ctx, "sqlite:"+path); err != nil {
		t.Errorf("OpenExisting of an existing file: %v", err)
	} else {
		s.Close()
	}
}
