package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver (pure Go)
)

// ErrNotFound is returned when a run or trial does not exist.
var ErrNotFound = errors.New("not found")

// Dialect names the SQL flavour behind a Store.
type Dialect string

// The supported dialects.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Store is a handle on the results database. It is safe for concurrent use.
type Store struct {
	db      *sql.DB
	dialect Dialect
	dsn     string
}

// DSN is a parsed database name: which database, and where.
type DSN struct {
	Dialect Dialect
	// Path is the SQLite file (":memory:" for a throwaway database).
	Path string
	// Params are the SQLite URI's own parameters as written after "?"
	// ("mode=ro"), passed to the driver.
	Params string
	// URL is the PostgreSQL connection URL.
	URL string
}

// dsnScheme matches a URL scheme ("mysql://"): anything with one that is
// not PostgreSQL's is refused, not taken as a file name.
var dsnScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// ParseDSN checks a database name before anything runs and says what is
// supported when it is not:
//   - "postgres://…" or "postgresql://…": PostgreSQL through pgx;
//   - "sqlite:PATH", "file:PATH", "sqlite:file:PATH" or a plain PATH:
//     SQLite (the file and its directory are created, unless ?mode=ro),
//     ":memory:" for a throwaway database; parameters after "?" go to
//     SQLite.
func ParseDSN(dsn string) (DSN, error) {
	const want = "want sqlite:PATH, a file path, or postgres://USER@HOST/DB"
	switch {
	case strings.TrimSpace(dsn) == "":
		return DSN{}, fmt.Errorf("store: empty database name (%s)", want)
	case strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://"):
		u, err := url.Parse(dsn)
		if err != nil {
			return DSN{}, fmt.Errorf("store: database %s: %w", redact(dsn), err)
		}
		if u.Host == "" {
			return DSN{}, fmt.Errorf("store: database %s: no host (%s)", redact(dsn), want)
		}
		return DSN{Dialect: Postgres, URL: dsn}, nil
	case dsnScheme.MatchString(dsn):
		scheme, _, _ := strings.Cut(dsn, "://")
		return DSN{}, fmt.Errorf("store: database %s: %s is not supported (%s)", redact(dsn), scheme, want)
	}
	path := dsn
	// Both, in this order: "sqlite:file:/x.db?mode=ro" is SQLite's URI
	// form behind perflab's prefix, not a directory named "file:".
	path, _ = strings.CutPrefix(path, "sqlite:")
	path, _ = strings.CutPrefix(path, "file:")
	path, params, _ := strings.Cut(path, "?")
	if path == "" {
		return DSN{}, fmt.Errorf("store: database %q: the SQLite file name is empty (%s, or sqlite::memory:)", dsn, want)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return DSN{}, fmt.Errorf("store: database %s: is a directory, not a SQLite file", path)
	}
	return DSN{Dialect: SQLite, Path: path, Params: params}, nil
}

// ReadOnly says whether the SQLite URI asks for a read-only database
// (mode=ro), which must exist already.
func (d DSN) ReadOnly() bool {
	q, err := url.ParseQuery(d.Params)
	return err == nil && q.Get("mode") == "ro"
}

// ErrNoDatabase is wrapped by OpenExisting's error when the SQLite file
// does not exist.
var ErrNoDatabase = errors.New("no such database")

// OpenExisting is Open for a command that only reads (perflab runs,
// report): a SQLite file that does not exist is an error wrapping
// ErrNoDatabase, and neither it nor its directory is created.
func OpenExisting(ctx context.Context, dsn string) (*Store, error) {
	d, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if d.Dialect == SQLite && d.Path != ":memory:" {
		if _, err := os.Stat(d.Path); err != nil {
			return nil, fmt.Errorf("store: database %s: %w (nothing has been stored there yet: a lab or an import creates it)", d.Path, ErrNoDatabase)
		}
	}
	return Open(ctx, dsn)
}

// Open opens (and migrates) the database named by dsn (see ParseDSN).
func Open(ctx context.Context, dsn string) (*Store, error) {
	d, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	var db *sql.DB
	dialect := d.Dialect
	switch dialect {
	case Postgres:
		db, err = sql.Open("pgx", d.URL)
	default:
		path := d.Path
		if path != ":memory:" && !d.ReadOnly() {
			if dir := filepath.Dir(path); dir != "." {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return nil, fmt.Errorf("store: create %s: %w", dir, err)
				}
			}
		}
		// WAL keeps readers (perflab report) from blocking the lab's writes;
		// the busy timeout covers parallel trials finishing together.
		params := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)"
		if d.Params != "" {
			params = d.Params + "&" + params
		}
		db, err = sql.Open("sqlite", "file:"+path+"?"+params)
		if err == nil && path == ":memory:" {
			db.SetMaxOpenConns(1) // each connection would get its own empty database
		}
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", redact(dsn), err)
	}
	s := &Store{db: db, dialect: dialect, dsn: dsn}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: connect %s: %w", redact(dsn), err)
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// redact hides a password in a connection URL for error messages.
func redact(dsn string) string {
	if i := strings.Index(dsn, "://"); i >= 0 {
		rest := dsn[i+3:]
		if at := strings.IndexByte(rest, '@'); at >= 0 {
			if colon := strings.IndexByte(rest[:at], ':'); colon >= 0 {
				return dsn[:i+3] + rest[:colon] + ":***" + rest[at:]
			}
		}
	}
	return dsn
}

// Dialect reports which database is behind the store.
func (s *Store) Dialect() Dialect { return s.dialect }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// q rewrites ?-placeholders into $n for PostgreSQL.
func (s *Store) q(query string) string {
	if s.dialect != Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func nullJSON(b json.RawMessage) string {
	if len(b) == 0 {
		return ""
	}
	return string(b)
}

func rawJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// EnsureRun returns the run with key, creating it when absent. With fresh,
// an existing run's trials are deleted first so the lab starts over.
func (s *Store) EnsureRun(ctx context.Context, key, name, spec string, fresh bool) (Run, error) {
	r, err := s.RunByKey(ctx, key)
	switch {
	case err == nil:
		if fresh {
			if _, err := s.db.ExecContext(ctx, s.q(`DELETE FROM trials WHERE run_id = ?`), r.ID); err != nil {
				return Run{}, fmt.Errorf("store: reset run %d: %w", r.ID, err)
			}
			r.Status, r.Summary, r.Spec = "running", nil, spec
			if err := s.UpdateRun(ctx, &r); err != nil {
				return Run{}, err
			}
		}
		return r, nil
	case !errors.Is(err, ErrNotFound):
		return Run{}, err
	}
	now := time.Now().UTC()
	r = Run{Key: key, Name: name, Spec: spec, Status: "running", Created: now, Updated: now}
	const ins = `INSERT INTO runs (key, name, spec, status, summary, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`
	if err := s.db.QueryRowContext(ctx, s.q(ins), r.Key, r.Name, r.Spec, r.Status, "", ms(now), ms(now)).Scan(&r.ID); err != nil {
		return Run{}, fmt.Errorf("store: create run %q: %w", name, err)
	}
	r.Created, r.Updated = fromMS(ms(now)), fromMS(ms(now))
	return r, nil
}

// UpdateRun saves a run's status, spec and summary.
func (s *Store) UpdateRun(ctx context.Context, r *Run) error {
	r.Updated = time.Now().UTC()
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE runs SET name = ?, spec = ?, status = ?, summary = ?, updated_ms = ? WHERE id = ?`),
		r.Name, r.Spec, r.Status, nullJSON(r.Summary), ms(r.Updated), r.ID)
	if err != nil {
		return fmt.Errorf("store: update run %d: %w", r.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: update run %d: %w", r.ID, ErrNotFound)
	}
	return nil
}

const runCols = `id, key, name, spec, status, summary, created_ms, updated_ms`

func scanRun(sc interface{ Scan(...any) error }) (Run, error) {
	var (
		r        Run
		summary  string
		cms, ums int64
	)
	if err := sc.Scan(&r.ID, &r.Key, &r.Name, &r.Spec, &r.Status, &summary, &cms, &ums); err != nil {
		return Run{}, err
	}
	r.Summary, r.Created, r.Updated = rawJSON(summary), fromMS(cms), fromMS(ums)
	return r, nil
}

func (s *Store) oneRun(ctx context.Context, what string, query string, args ...any) (Run, error) {
	r, err := scanRun(s.db.QueryRowContext(ctx, s.q(query), args...))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("store: run %s: %w", what, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("store: read run %s: %w", what, err)
	}
	return r, nil
}

// Run returns the run with id.
func (s *Store) Run(ctx context.Context, id int64) (Run, error) {
	return s.oneRun(ctx, strconv.FormatInt(id, 10), `SELECT `+runCols+` FROM runs WHERE id = ?`, id)
}

// RunByKey returns the run for a spec key.
func (s *Store) RunByKey(ctx context.Context, key string) (Run, error) {
	return s.oneRun(ctx, "key "+key, `SELECT `+runCols+` FROM runs WHERE key = ?`, key)
}

// RunByName returns the latest run with that name that has trials (an
// empty run, of a lab that stopped before its first trial, only when no
// other has the name).
func (s *Store) RunByName(ctx context.Context, name string) (Run, error) {
	return s.oneRun(ctx, strconv.Quote(name), `SELECT `+runCols+` FROM runs WHERE name = ?
		ORDER BY CASE WHEN EXISTS (SELECT 1 FROM trials WHERE trials.run_id = runs.id) THEN 0 ELSE 1 END,
		updated_ms DESC, id DESC LIMIT 1`, name)
}

// LatestRun returns the latest run that has trials, else the latest run.
func (s *Store) LatestRun(ctx context.Context) (Run, error) {
	return s.oneRun(ctx, "latest", `SELECT `+runCols+` FROM runs
		ORDER BY CASE WHEN EXISTS (SELECT 1 FROM trials WHERE trials.run_id = runs.id) THEN 0 ELSE 1 END,
		updated_ms DESC, id DESC LIMIT 1`)
}

// Runs lists every run, newest first.
func (s *Store) Runs(ctx context.Context) ([]Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+runCols+` FROM runs ORDER BY updated_ms DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RunInfo is a run with what its trials add up to.
type RunInfo struct {
	Run
	// Trials counts the run's stored trials, Failed those that failed.
	Trials, Failed int
	// Started is when its first trial started (zero without trials).
	Started time.Time
	// LeaseUntil is when its lab's lease on it lapses (zero: no lab ever
	// held it): a "running" run whose lease has lapsed has no live lab.
	LeaseUntil time.Time
}

// RunInfos lists every run with its trial counts, newest first.
func (s *Store) RunInfos(ctx context.Context) ([]RunInfo, error) {
	q := `SELECT runs.id, runs.key, runs.name, runs.spec, runs.status, runs.summary, runs.created_ms, runs.updated_ms,
		COUNT(t.id), COALESCE(SUM(CASE WHEN t.status <> 'ok' THEN 1 ELSE 0 END), 0), COALESCE(MIN(t.started_ms), 0),
		runs.lease_until_ms
		FROM runs LEFT JOIN trials t ON t.run_id = runs.id
		GROUP BY runs.id, runs.key, runs.name, runs.spec, runs.status, runs.summary, runs.created_ms, runs.updated_ms, runs.lease_until_ms
		ORDER BY runs.updated_ms DESC, runs.id DESC`
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	defer rows.Close()
	var out []RunInfo
	for rows.Next() {
		var (
			ri       RunInfo
			summary  string
			cms, ums int64
			started  int64
			lease    int64
		)
		if err := rows.Scan(&ri.ID, &ri.Key, &ri.Name, &ri.Spec, &ri.Status, &summary, &cms, &ums,
			&ri.Trials, &ri.Failed, &started, &lease); err != nil {
			return nil, fmt.Errorf("store: list runs: %w", err)
		}
		ri.Summary, ri.Created, ri.Updated, ri.Started, ri.LeaseUntil = rawJSON(summary), fromMS(cms), fromMS(ums), fromMS(started), fromMS(lease)
		out = append(out, ri)
	}
	return out, rows.Err()
}

// SaveTrial inserts the trial, or replaces the one with the same run and
// key, in one transaction; t.ID is set.
func (s *Store) SaveTrial(ctx context.Context, t *Trial) error {
	if t.RunID == 0 || t.Key == "" {
		return fmt.Errorf("store: save trial: run id and key are required (run %d, key %q)", t.RunID, t.Key)
	}
	em := ""
	if len(t.EngineMetrics) > 0 {
		b, err := json.Marshal(t.EngineMetrics)
		if err != nil {
			return fmt.Errorf("store: save trial %s: engine metrics: %w", t.Key, err)
		}
		em = string(b)
	}
	if t.Attempt < 1 {
		t.Attempt = 1
	}
	const up = `INSERT INTO trials (run_id, key, stage, name, workload, repeat_no, config, command, status,
		failure_class, reason, result, engine_metrics, log_tail, started_ms, ended_ms, attempt,
		startup_ms, bench_ms, gpus, engine_start, cache)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, key) DO UPDATE SET stage = excluded.stage, name = excluded.name,
		workload = excluded.workload, repeat_no = excluded.repeat_no, config = excluded.config,
		command = excluded.command, status = excluded.status, failure_class = excluded.failure_class,
		reason = excluded.reason, result = excluded.result, engine_metrics = excluded.engine_metrics,
		log_tail = excluded.log_tail, started_ms = excluded.started_ms, ended_ms = excluded.ended_ms,
		attempt = excluded.attempt, startup_ms = excluded.startup_ms, bench_ms = excluded.bench_ms,
		gpus = excluded.gpus, engine_start = excluded.engine_start, cache = excluded.cache
		RETURNING id`
	err := s.db.QueryRowContext(ctx, s.q(up), t.RunID, t.Key, t.Stage, t.Name, t.Workload, t.Repeat,
		nullJSON(t.Config), t.Command, t.Status, t.FailureClass, t.Reason, nullJSON(t.Result), em,
		t.LogTail, ms(t.Started), ms(t.Ended), t.Attempt,
		int64(t.Cost.StartupSeconds*1000), int64(t.Cost.BenchSeconds*1000), t.Cost.GPUs, boolInt(t.Cost.EngineStart), t.Cache).Scan(&t.ID)
	if err != nil {
		return fmt.Errorf("store: save trial %s: %w", t.Key, err)
	}
	return nil
}

const trialCols = `id, run_id, key, stage, name, workload, repeat_no, config, command, status,
	failure_class, reason, result, engine_metrics, log_tail, started_ms, ended_ms, attempt,
	startup_ms, bench_ms, gpus, engine_start, cache`

func scanTrial(sc interface{ Scan(...any) error }) (Trial, error) {
	var (
		t                  Trial
		cfg, res, em       string
		startedMS, endedMS int64
		startupMS, benchMS int64
		engineStart        int
	)
	if err := sc.Scan(&t.ID, &t.RunID, &t.Key, &t.Stage, &t.Name, &t.Workload, &t.Repeat, &cfg, &t.Command,
		&t.Status, &t.FailureClass, &t.Reason, &res, &em, &t.LogTail, &startedMS, &endedMS, &t.Attempt,
		&startupMS, &benchMS, &t.Cost.GPUs, &engineStart, &t.Cache); err != nil {
		return Trial{}, err
	}
	t.Config, t.Result = rawJSON(cfg), rawJSON(res)
	if em != "" {
		if err := json.Unmarshal([]byte(em), &t.EngineMetrics); err != nil {
			return Trial{}, fmt.Errorf("engine metrics of trial %s: %w", t.Key, err)
		}
	}
	t.Started, t.Ended = fromMS(startedMS), fromMS(endedMS)
	t.Cost.StartupSeconds, t.Cost.BenchSeconds = float64(startupMS)/1000, float64(benchMS)/1000
	t.Cost.EngineStart = engineStart != 0
	return t, nil
}

// Trial returns the trial of run with key.
func (s *Store) Trial(ctx context.Context, runID int64, key string) (Trial, error) {
	t, err := scanTrial(s.db.QueryRowContext(ctx, s.q(`SELECT `+trialCols+` FROM trials WHERE run_id = ? AND key = ?`), runID, key))
	if errors.Is(err, sql.ErrNoRows) {
		return Trial{}, fmt.Errorf("store: trial %s of run %d: %w", key, runID, ErrNotFound)
	}
	if err != nil {
		return Trial{}, fmt.Errorf("store: read trial %s of run %d: %w", key, runID, err)
	}
	return t, nil
}

// Trials lists the trials of a run in the order they were saved.
func (s *Store) Trials(ctx context.Context, runID int64) ([]Trial, error) {
	return s.listTrials(ctx, runID, trialCols)
}

// listTrials reads a run's trials, in the order they were saved, with the
// columns cols (trialCols, or trialHeadCols).
func (s *Store) listTrials(ctx context.Context, runID int64, cols string) ([]Trial, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT `+cols+` FROM trials WHERE run_id = ? ORDER BY id`), runID)
	if err != nil {
		return nil, fmt.Errorf("store: list trials of run %d: %w", runID, err)
	}
	defer rows.Close()
	var out []Trial
	for rows.Next() {
		t, err := scanTrial(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list trials of run %d: %w", runID, err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// trialHeadCols are trialCols without the large columns (result, engine
// metrics, log tail), which read as empty.
const trialHeadCols = `id, run_id, key, stage, name, workload, repeat_no, config, command, status,
	failure_class, reason, '', '', '', started_ms, ended_ms, attempt,
	startup_ms, bench_ms, gpus, engine_start, cache`

// TrialHeads lists the trials of a run as Trials does, without their
// result, engine metrics and log tail: a list that polls them (the
// server's) reads a few kilobytes, not every result's per-request arrays.
func (s *Store) TrialHeads(ctx context.Context, runID int64) ([]Trial, error) {
	return s.listTrials(ctx, runID, trialHeadCols)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
