package lab

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/store"
)

// Measurement is one trial's outcome as a runner returns it and the lab,
// its objectives and its guide read it, typed: the benchmark's result (nil
// when nothing was measured; kept next to a failure when the server died
// mid-benchmark), the failure (nil when it ran) and what it cost. JSON is
// only the store's encoding of it: trialRecord encodes one for the store,
// measurementOf decodes a stored trial, in one place each, with the
// decoder of every result perflab writes (metrics.DecodeStored), so a
// trial stored by any earlier version reads back.
type Measurement struct {
	Result  *metrics.Result
	Failure *engine.Failure
	Cost    store.Cost
	// SustainableLoad is max_load_under_slo's answer for the config: the
	// highest load found within the SLO (0 under other objectives, or when
	// none meets it).
	SustainableLoad float64
	// Trace is how a runner took the measurement, for the trial's record
	// (zero for a guide's prediction).
	Trace Trace
}

// Trace is what a runner records of how it took a measurement besides the
// figures: what the store shows next to a trial so that it can be rerun and
// a failure read.
type Trace struct {
	// Command is the serving command (argv joined for display).
	Command string
	// Notes are the runner's remarks (the GPUs, a reused server, the
	// noise); a failure's reason is appended to them in the record.
	Notes string
	// LogTail is the server's last log lines.
	LogTail string
	// Cache is how the server started without an earlier measurement's
	// prefix cache (engine.Reuse*; "" when no server was reached).
	Cache string
	// EngineMetrics is the engine's /metrics after the benchmark.
	EngineMetrics map[string]float64
	// Ended is when the measurement ended (zero: when the lab got it).
	Ended time.Time
}

// trialRecord is the store's record of m, taken for t from started: the
// one place a runner's typed measurement becomes a store.Trial (its result
// as JSON, its failure as a class and a reason).
func trialRecord(t TrialSpec, m Measurement, started time.Time) (store.Trial, error) {
	rec := newRecord(t)
	rec.Started = started
	tr := m.Trace
	rec.Command, rec.Reason, rec.LogTail, rec.Cache, rec.EngineMetrics, rec.Ended = tr.Command, tr.Notes, tr.LogTail, tr.Cache, tr.EngineMetrics, tr.Ended
	rec.Cost = m.Cost
	if m.Result != nil {
		b, err := encodeMeasurement(m)
		if err != nil {
			return rec, err
		}
		rec.Result = b
	}
	rec.Status = "ok"
	if f := m.Failure; f != nil {
		rec.Status, rec.FailureClass, rec.Reason = "failed", string(f.Class), engine.JoinNotes(rec.Reason, f.Reason)
	}
	return rec, nil
}

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
	sc, err := store.DecodeScored(result)
	if errors.Is(err, store.ErrNoResult) {
		return Measurement{}, errors.New("lab: empty result")
	}
	if err != nil {
		return Measurement{}, fmt.Errorf("lab: decode result: %w", err)
	}
	return Measurement{Result: sc.Result, SustainableLoad: sc.SustainableLoad}, nil
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

// encodeMeasurement is the result JSON of m as the store keeps it
// (store.EncodeScored).
func encodeMeasurement(m Measurement) ([]byte, error) {
	b, err := store.EncodeScored(store.Scored{Result: m.res(), SustainableLoad: m.SustainableLoad})
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	return b, nil
}
