package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Guess returns a cached guiding prediction by key; ok is false when none
// is stored.
func (s *Store) Guess(ctx context.Context, key string) (value []byte, ok bool, err error) {
	var v string
	err = s.db.QueryRowContext(ctx, s.q(`SELECT value FROM guide_cache WHERE key = ?`), key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: read guess %s: %w", key, err)
	}
	return []byte(v), true, nil
}

// SaveGuess stores a guiding prediction under key (replacing one there).
func (s *Store) SaveGuess(ctx context.Context, key string, value []byte) error {
	_, err := s.db.ExecContext(ctx, s.q(`INSERT INTO guide_cache (key, value, created_ms) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, created_ms = excluded.created_ms`),
		key, string(value), time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("store: save guess %s: %w", key, err)
	}
	return nil
}
