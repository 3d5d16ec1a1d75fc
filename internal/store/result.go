package store

import (
	"errors"
	"fmt"
	"maps"

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

// Scored is a stored result with what an objective added to it: the
// load search's answer is kept in the result's JSON (under
// "sustainable_load", no key of vLLM's) so that a trial stored by any
// version carries it, and is typed here, at the store's boundary, so no
// reader looks it up by name.
type Scored struct {
	// Result is the benchmark's result, without the objective's key among
	// its extras.
	Result *metrics.Result
	// SustainableLoad is max_load_under_slo's answer for the config (0:
	// none, or another objective).
	SustainableLoad float64
}

// sustainableKey is where a stored result keeps Scored.SustainableLoad.
const sustainableKey = "sustainable_load"

// DecodeScored reads a stored result (DecodeResult) and takes the
// objective's answer out of its extras.
func DecodeScored(b []byte) (Scored, error) {
	r, err := DecodeResult(b)
	if err != nil {
		return Scored{}, err
	}
	s := Scored{Result: r}
	// A zero stays among the extras: perflab never writes one, so a
	// result holding it came from elsewhere and is kept as it was.
	if x, ok := r.Extra[sustainableKey].(float64); ok && x != 0 {
		s.SustainableLoad = x
		delete(r.Extra, sustainableKey)
		if len(r.Extra) == 0 {
			r.Extra = nil
		}
	}
	return s, nil
}

// EncodeScored is the stored form of s, which DecodeScored reads back:
// the result's own encoding with the sustainable load among its extras.
func EncodeScored(s Scored) ([]byte, error) {
	r := s.Result
	if r == nil {
		r = &metrics.Result{}
	}
	if s.SustainableLoad != 0 {
		c := *r
		c.Extra = maps.Clone(r.Extra)
		if c.Extra == nil {
			c.Extra = map[string]any{}
		}
		c.Extra[sustainableKey] = s.SustainableLoad
		r = &c
	}
	b, err := r.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("store: encode result: %w", err)
	}
	return b, nil
}
