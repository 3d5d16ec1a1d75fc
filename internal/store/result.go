package store

import (
	"errors"
	"fmt"

	"github.com/perflab/perflab/internal/metrics"
)

// ErrNoResult is Trial.Metrics's error for a trial stored without a result.
var ErrNoResult = errors.New("store: trial has no result")

// Metrics decodes the trial's stored result into the typed one (see
// DecodeResult).
func (t Trial) Metrics() (*metrics.Result, error) {
	r, err := DecodeResult(t.Result)
	if err != nil && !errors.Is(err, ErrNoResult) {
		return nil, fmt.Errorf("store: trial %s: %w", t.Key, err)
	}
	return r, err
}

// DecodeResult reads a result JSON as the store keeps it: the one decoder
// of every result perflab writes (metrics.DecodeStored: no import marking,
// no re-validation), which reads rows stored by any earlier version.
func DecodeResult(b []byte) (*metrics.Result, error) {
	if len(b) == 0 {
		return nil, ErrNoResult
	}
	return metrics.DecodeStored(b)
}

// SetMetrics stores r as the trial's result.
func (t *Trial) SetMetrics(r *metrics.Result) error {
	b, err := r.MarshalJSON()
	if err != nil {
		return fmt.Errorf("store: trial %s: encode result: %w", t.Key, err)
	}
	t.Result = b
	return nil
}
