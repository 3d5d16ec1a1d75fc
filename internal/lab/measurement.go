package lab

import (
	"errors"
	"fmt"
	"maps"
	"math"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/store"
)

// Measurement is one trial's outcome as the lab, its objectives and its
// guide read it, typed: the benchmark's result (nil when the trial failed),
// the failure (nil when it ran) and what it cost. JSON is only the store's
// encoding of it: measurementOf decodes a stored trial, in one place, with
// the decoder of every result perflab writes (metrics.DecodeStored), so a
// trial stored by any earlier version reads back.
type Measurement struct {
	Result  *metrics.Result
	Failure *engine.Failure
	Cost    store.Cost
	// SustainableLoad is max_load_under_slo's answer for the config: the
	// highest load found within the SLO (0 under other objectives, or when
	// none meets it).
	SustainableLoad float64
}

// sustainableKey is the key the load search adds to the result it scores
// (it is no key of vLLM's, so the result keeps it among its extras).
const sustainableKey = "sustainable_load"

// measurementOf reads a stored trial (its result through the store's
// decoder, Trial.Metrics).
func measurementOf(t store.Trial) (Measurement, error) {
	if t.Status != "ok" {
		return Measurement{Failure: &engine.Failure{Class: engine.FailureClass(t.FailureClass), Reason: t.Reason}, Cost: t.Cost}, nil
	}
	m, err := decodeMeasurement(t.Result)
	m.Cost = t.Cost
	return m, err
}

// decodeMeasurement reads a result JSON as perflab stores it (a stored
// trial's, a prediction's, a guide-cache row's).
func decodeMeasurement(result []byte) (Measurement, error) {
	r, err := store.DecodeResult(result)
	if errors.Is(err, store.ErrNoResult) {
		return Measurement{}, errors.New("lab: empty result")
	}
	if err != nil {
		return Measurement{}, fmt.Errorf("lab: decode result: %w", err)
	}
	m := Measurement{Result: r}
	if x, ok := r.Extra[sustainableKey].(float64); ok {
		m.SustainableLoad = x
	}
	return m, nil
}

// res is the result, or an empty one for a failed trial: its figures read 0.
func (m Measurement) res() *metrics.Result {
	if m.Result == nil {
		return &metrics.Result{}
	}
	return m.Result
}

// SuccessRate is completed / num_prompts (0 when nothing was sent).
func (m Measurement) SuccessRate() float64 {
	r := m.res()
	if r.NumPrompts <= 0 {
		return 0
	}
	return float64(r.Completed) / float64(r.NumPrompts)
}

// p99 is metric's P99 in ms; ok is false when the result has none.
func (m Measurement) p99(metric string) (ms float64, ok bool) {
	v, ok := m.res().Percentile(metric, 99)
	return v, ok && !math.IsNaN(v)
}

// P99TPOTMs is the P99 TPOT in ms (0 when the result has none).
func (m Measurement) P99TPOTMs() float64 { v, _ := m.p99(metrics.MetricTPOT); return v }

// P99TTFTMs is the P99 TTFT in ms (0 when the result has none).
func (m Measurement) P99TTFTMs() float64 { v, _ := m.p99(metrics.MetricTTFT); return v }

// encodeMeasurement is the result JSON of m as the store keeps it: the
// result's own encoding, with the sustainable load among its extras.
func encodeMeasurement(m Measurement) ([]byte, error) {
	r := *m.res()
	if m.SustainableLoad != 0 {
		r.Extra = maps.Clone(r.Extra)
		if r.Extra == nil {
			r.Extra = map[string]any{}
		}
		r.Extra[sustainableKey] = m.SustainableLoad
	}
	b, err := r.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("lab: encode result: %w", err)
	}
	return b, nil
}
