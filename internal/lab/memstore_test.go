package lab

import (
	"context"
	"fmt"
	"sync"

	"github.com/perflab/perflab/internal/store"
)

// memStore is an in-memory Store for tests (the real one is exercised by
// the CLI tests through store.Open).
type memStore struct {
	mu     sync.Mutex
	runs   map[string]store.Run
	trials map[int64][]store.Trial
	saves  map[string]int // trial key → times saved
	nextID int64
}

var _ Store = (*memStore)(nil)

func newMemStore() *memStore {
	return &memStore{runs: map[string]store.Run{}, trials: map[int64][]store.Trial{}, saves: map[string]int{}}
}

func (m *memStore) EnsureRun(_ context.Context, key, name, spec string, fresh bool) (store.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[key]
	if !ok {
		m.nextID++
		r = store.Run{ID: m.nextID, Key: key, Name: name, Spec: spec, Status: "running"}
		m.runs[key] = r
	} else if fresh {
		m.trials[r.ID] = nil
	}
	return r, nil
}

func (m *memStore) Trials(_ context.Context, runID int64) ([]store.Trial, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]store.Trial(nil), m.trials[runID]...), nil
}

func (m *memStore) SaveTrial(_ context.Context, t *store.Trial) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.RunID == 0 {
		return fmt.Errorf("memstore: trial %s without run", t.Key)
	}
	m.nextID++
	t.ID = m.nextID
	m.trials[t.RunID] = append(m.trials[t.RunID], *t)
	m.saves[t.Key]++
	return nil
}

func (m *memStore) UpdateRun(_ context.Context, r *store.Run) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs[r.Key] = *r
	return nil
}
