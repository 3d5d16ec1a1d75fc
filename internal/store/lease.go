package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Owner names a lab process that holds a run: host, pid and a nonce (a
// restarted process with the same pid is another owner).
type Owner struct {
	Host  string
	PID   int
	Nonce string
}

// NewOwner is the owner for this process.
func NewOwner() Owner {
	host, _ := os.Hostname()
	return Owner{Host: host, PID: os.Getpid(), Nonce: strconv.FormatInt(time.Now().UnixNano(), 36)}
}

func (o Owner) String() string { return o.Host + "/" + strconv.Itoa(o.PID) + "/" + o.Nonce }

// parseOwner reads what String writes; ok is false for anything else.
func parseOwner(s string) (Owner, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return Owner{}, false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil {
		return Owner{}, false
	}
	return Owner{Host: parts[0], PID: pid, Nonce: parts[2]}, true
}

// dead says whether the owner is a process on this host that no longer
// exists, so its lease can be taken at once rather than when it expires
// (a lab killed with -9 and started again).
func (o Owner) dead() bool {
	host, _ := os.Hostname()
	if o.Host != host || o.PID <= 0 {
		return false
	}
	err := syscall.Kill(o.PID, 0)
	return errors.Is(err, syscall.ESRCH)
}

// HeldError says that another live lab holds the run.
type HeldError struct {
	RunID int64
	Owner string
	Until time.Time
}

func (e *HeldError) Error() string {
	who := e.Owner
	if o, ok := parseOwner(e.Owner); ok {
		who = fmt.Sprintf("pid %d on %s", o.PID, o.Host)
	}
	return fmt.Sprintf("store: run %d is held by another lab (%s) until %s unless it renews; wait for it, stop it, or let its lease lapse",
		e.RunID, who, e.Until.Local().Format("15:04:05"))
}

// AcquireRun makes owner the run's only writer for ttl. It succeeds when
// the run is free, already owner's, its lease has lapsed, or its holder is
// a dead process on this host; otherwise it returns a *HeldError naming the
// holder. The check and the take are one UPDATE, so two labs racing for
// the run cannot both win.
func (s *Store) AcquireRun(ctx context.Context, runID int64, owner Owner, ttl time.Duration) error {
	for range 2 {
		now := time.Now()
		res, err := s.db.ExecContext(ctx, s.q(`UPDATE runs SET owner = ?, lease_until_ms = ?
			WHERE id = ? AND (owner = '' OR owner = ? OR lease_until_ms < ?)`),
			owner.String(), now.Add(ttl).UnixMilli(), runID, owner.String(), now.UnixMilli())
		if err != nil {
			return fmt.Errorf("store: lease run %d: %w", runID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		var holder string
		var until int64
		err = s.db.QueryRowContext(ctx, s.q(`SELECT owner, lease_until_ms FROM runs WHERE id = ?`), runID).Scan(&holder, &until)
		if err != nil {
			return fmt.Errorf("store: lease run %d: read holder: %w", runID, err)
		}
		if o, ok := parseOwner(holder); ok && o.dead() {
			// Free it only if it is still that dead holder's, then retry.
			if _, err := s.db.ExecContext(ctx, s.q(`UPDATE runs SET owner = '', lease_until_ms = 0 WHERE id = ? AND owner = ?`), runID, holder); err != nil {
				return fmt.Errorf("store: lease run %d: free dead holder %s: %w", runID, holder, err)
			}
			continue
		}
		return &HeldError{RunID: runID, Owner: holder, Until: time.UnixMilli(until)}
	}
	return fmt.Errorf("store: lease run %d: lost the race twice", runID)
}

// IsDiskFull says whether err comes of a full disk: the host's (ENOSPC),
// SQLite's SQLITE_FULL or PostgreSQL's disk_full (53100). A lab stopped by
// one has lost nothing it finished and can go on once there is room:
// interrupted, not failed.
func IsDiskFull(err error) bool {
	if errors.Is(err, syscall.ENOSPC) {
		return true
	}
	// The drivers' error types, by their methods: modernc.org/sqlite's
	// Code (extended codes keep the primary one in the low byte) and
	// pgconn's SQLState.
	var lite interface{ Code() int }
	if errors.As(err, &lite) && lite.Code()&0xff == sqliteFull {
		return true
	}
	var pg interface{ SQLState() string }
	return errors.As(err, &pg) && pg.SQLState() == pgDiskFull
}

const (
	sqliteFull = 13      // SQLITE_FULL
	pgDiskFull = "53100" // disk_full
)

// Holder returns a *HeldError naming the live lab that holds the run (its
// lease not lapsed, and not a dead process of this host), nil when none
// does: what AcquireRun would say, without taking the run.
func (s *Store) Holder(ctx context.Context, runID int64) error {
	var holder string
	var until int64
	err := s.db.QueryRowContext(ctx, s.q(`SELECT owner, lease_until_ms FROM runs WHERE id = ?`), runID).Scan(&holder, &until)
	if err != nil {
		return fmt.Errorf("store: lease of run %d: %w", runID, err)
	}
	if holder == "" || until < time.Now().UnixMilli() {
		return nil
	}
	if o, ok := parseOwner(holder); ok && o.dead() {
		return nil
	}
	return &HeldError{RunID: runID, Owner: holder, Until: time.UnixMilli(until)}
}

// ArchiveRun sets a run aside under a key of its own ("KEY#archived-MS"),
// its trials, summary, name and status kept, so that the next lab of its
// spec starts a new run (a fresh start) and nothing measured is lost. A
// run a live lab holds is not archived: a *HeldError says who holds it.
func (s *Store) ArchiveRun(ctx context.Context, runID int64) error {
	var holder string
	var until int64
	if err := s.db.QueryRowContext(ctx, s.q(`SELECT owner, lease_until_ms FROM runs WHERE id = ?`), runID).Scan(&holder, &until); err != nil {
		return fmt.Errorf("store: archive run %d: %w", runID, err)
	}
	if err := s.Holder(ctx, runID); err != nil {
		return err
	}
	// Only if the lease is still as read: a lab that took the run since
	// keeps it.
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE runs SET key = key || ?, owner = '', lease_until_ms = 0
		WHERE id = ? AND owner = ? AND lease_until_ms = ?`),
		fmt.Sprintf("#archived-%d", time.Now().UnixMilli()), runID, holder, until)
	if err != nil {
		return fmt.Errorf("store: archive run %d: %w", runID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		if err := s.Holder(ctx, runID); err != nil {
			return err
		}
		return fmt.Errorf("store: archive run %d: its lease changed meanwhile; try again", runID)
	}
	return nil
}

// RenewLease extends owner's lease; it returns a *HeldError when the run
// is no longer owner's (its lease lapsed and another lab took it).
func (s *Store) RenewLease(ctx context.Context, runID int64, owner Owner, ttl time.Duration) error {
	res, err := s.db.ExecContext(ctx, s.q(`UPDATE runs SET lease_until_ms = ? WHERE id = ? AND owner = ?`),
		time.Now().Add(ttl).UnixMilli(), runID, owner.String())
	if err != nil {
		return fmt.Errorf("store: renew lease of run %d: %w", runID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var holder string
		var until int64
		_ = s.db.QueryRowContext(ctx, s.q(`SELECT owner, lease_until_ms FROM runs WHERE id = ?`), runID).Scan(&holder, &until)
		return &HeldError{RunID: runID, Owner: holder, Until: time.UnixMilli(until)}
	}
	return nil
}

// ReleaseRun gives the run up if owner holds it.
func (s *Store) ReleaseRun(ctx context.Context, runID int64, owner Owner) error {
	if _, err := s.db.ExecContext(ctx, s.q(`UPDATE runs SET owner = '', lease_until_ms = 0 WHERE id = ? AND owner = ?`),
		runID, owner.String()); err != nil {
		return fmt.Errorf("store: release run %d: %w", runID, err)
	}
	return nil
}

// ResetRun deletes the run's trials (a --fresh start); call it holding the
// run's lease, so it never deletes what another live lab is writing.
func (s *Store) ResetRun(ctx context.Context, runID int64) error {
	if _, err := s.db.ExecContext(ctx, s.q(`DELETE FROM trials WHERE run_id = ?`), runID); err != nil {
		return fmt.Errorf("store: reset run %d: %w", runID, err)
	}
	return nil
}

// DeleteRun removes a run and its trials.
func (s *Store) DeleteRun(ctx context.Context, runID int64) error {
	if _, err := s.db.ExecContext(ctx, s.q(`DELETE FROM trials WHERE run_id = ?`), runID); err != nil {
		return fmt.Errorf("store: delete run %d: %w", runID, err)
	}
	if _, err := s.db.ExecContext(ctx, s.q(`DELETE FROM runs WHERE id = ?`), runID); err != nil {
		return fmt.Errorf("store: delete run %d: %w", runID, err)
	}
	return nil
}
