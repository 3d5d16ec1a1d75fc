package lab

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/store"
)

// Failure classes stored in store.Trial.FailureClass: the engine package's
// classes (defined there once), as the strings the store keeps.
const (
	FailStartupCrash     = string(engine.ClassStartupCrash)
	FailOOM              = string(engine.ClassOOM)
	FailGPUBusy          = string(engine.ClassGPUBusy)
	FailHung             = string(engine.ClassHung)
	FailCrashDuringBench = string(engine.ClassCrashDuringBench)
	FailUnhealthy        = string(engine.ClassUnhealthy)
	FailLowSuccess       = string(engine.ClassLowSuccess)
	FailInvalidConfig    = string(engine.ClassInvalidConfig)
)

// TrialSpec is one trial to run: one config on one workload, one repeat.
type TrialSpec struct {
	// Key is the trial's deterministic key (see TrialKey).
	Key      string
	Stage    string
	Name     string
	Point    labspec.Point
	Config   engine.Config
	Workload labspec.Workload
	Repeat   int
}

// TrialKey is stage/config-hash/workload/repeat. The lab reuses a finished
// trial whose key matches after the stage (see sameMeasurement), so the same
// config measured again in a later stage is not rerun.
func TrialKey(stage string, cfg engine.Config, w labspec.Workload, repeat int) string {
	return fmt.Sprintf("%s/%s/%s/r%d", stage, labspec.ConfigHash(cfg), w.KeyName(), repeat)
}

// measurementKey is the part of a trial key that identifies the measurement
// (config, workload, repeat), whatever stage first asked for it.
func measurementKey(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[i+1:]
	}
	return key
}

// Runner runs trials. Run never returns an error for a failed trial: a
// crash, an OOM or a hung engine is the returned measurement's Failure.
// It returns an error only when the lab itself must stop (ctx canceled).
type Runner interface {
	Run(ctx context.Context, t TrialSpec) (Measurement, error)
}

// Guide predicts a config's result on a workload cheaply, without a trial:
// the simulator run in process on a subsample of the workload. The joint
// search ranks untested configs with it.
type Guide interface {
	Guess(ctx context.Context, cfg engine.Config, w labspec.Workload, prompts int) (Measurement, error)
}

// Ranged is a guide (or a predictor behind one) whose predictions carry a
// measured range: the one sim predict reports.
type Ranged interface {
	// Upside is how far above the guide's prediction for cfg its measured
	// throughput may lie, as a fraction: the top of the range, which held
	// 9 in 10 of that engine's errors on models its calibration had not
	// seen. ok is false where the calibration has no measured range (one
	// fitted to other measurements, or an analytic stand-in).
	Upside(cfg engine.Config) (frac float64, ok bool)
}

// upside asks g for its range when it has one.
func upside(g any, cfg engine.Config) (float64, bool) {
	if r, ok := g.(Ranged); ok {
		return r.Upside(cfg)
	}
	return 0, false
}

// Predictor is the in-process simulator face the sim-predict runtime and the
// guide use: engine.Render → simargs.Parse → sim.Predict. It returns the
// result JSON (vLLM save-result keys), the serving command for the record
// and a failure class with its reason when the config fails (OOM, rejected
// flags).
type Predictor interface {
	Predict(ctx context.Context, cfg engine.Config, hw labspec.Hardware, reqs []dataset.Request, w labspec.Workload) (Prediction, error)
}

// Prediction is one in-process prediction.
type Prediction struct {
	Command      string
	Result       json.RawMessage
	FailureClass string
	Reason       string
	// Seconds is the predicted benchmark duration (for the ETA).
	Seconds float64
}

// Requests builds a workload's requests (dataset.Sample with the
// tokenizer). Its errors name the workload ("lab: workload ShareGPT: ..."),
// so callers pass them on as they are.
type Requests func(w labspec.Workload) ([]dataset.Request, error)

// CachedRequests memoizes a Requests function per dataset: the workloads a
// load search derives from one spec workload differ in their load (a
// rate, a *LoadPoint) but sample the same requests, so the key is the
// dataset options the workload resolves to, not the workload. Keyed by
// the workload, a pointer in it made every point of an SLO search sample
// and tokenize ShareGPT again: half the 15 minutes the 14B SLO example's
// dry run took (issue 27).
func CachedRequests(f Requests) Requests {
	var mu sync.Mutex
	cache := map[string][]dataset.Request{}
	errs := map[string]error{}
	return func(w labspec.Workload) ([]dataset.Request, error) {
		mu.Lock()
		defer mu.Unlock()
		// The name too: an error names its workload.
		opt, _ := w.Resolve()
		k := fmt.Sprintf("%s|%+v", w.Name, opt)
		if r, ok := cache[k]; ok {
			return r, errs[k]
		}
		r, err := f(w)
		cache[k], errs[k] = r, err
		return r, err
	}
}

// PredictRunner is the sim-predict runtime: each trial is an in-process
// prediction, optionally with seeded noise (the simulator is deterministic;
// the noise exists so the noise-floor rule is exercised, and is labelled as
// such in the summary).
type PredictRunner struct {
	Predictor Predictor
	Hardware  labspec.Hardware
	Requests  Requests
	Noise     labspec.Noise
}

var _ Runner = (*PredictRunner)(nil)
var _ Guide = (*PredictRunner)(nil)

// Run predicts one trial.
func (r *PredictRunner) Run(ctx context.Context, t TrialSpec) (Measurement, error) {
	if err := ctx.Err(); err != nil {
		return Measurement{}, err
	}
	reqs, err := r.Requests(t.Workload)
	if err != nil {
		return Measurement{}, err // it names the workload
	}
	p, err := r.Predictor.Predict(ctx, t.Config, r.Hardware, reqs, t.Workload)
	if err != nil {
		if ctx.Err() != nil {
			return Measurement{}, ctx.Err()
		}
		return Measurement{}, fmt.Errorf("lab: predict %s: %w", t.Name, err)
	}
	trace := Trace{Command: p.Command, Ended: time.Now()}
	if p.FailureClass != "" {
		return Measurement{Failure: &engine.Failure{Class: engine.FailureClass(p.FailureClass), Reason: p.Reason}, Trace: trace}, nil
	}
	m, err := decodeMeasurement(p.Result)
	if err != nil {
		return Measurement{}, fmt.Errorf("lab: predict %s: %w", t.Name, err)
	}
	if r.Noise.Sigma > 0 {
		f := noiseFactor(r.Noise, measurementKey(t.Key))
		m.Result.ScaleSpeed(f)
		trace.Notes = fmt.Sprintf("sim-predict with seeded noise x%.4f (sigma %.3g)", f, r.Noise.Sigma)
	}
	m.Trace = trace
	return m, nil
}

// Guess predicts without noise on the first prompts requests.
func (r *PredictRunner) Guess(ctx context.Context, cfg engine.Config, w labspec.Workload, prompts int) (Measurement, error) {
	reqs, err := r.Requests(w)
	if err != nil {
		return Measurement{}, err
	}
	if prompts > 0 && prompts < len(reqs) {
		reqs = reqs[:prompts]
	}
	p, err := r.Predictor.Predict(ctx, cfg, r.Hardware, reqs, w)
	if err != nil {
		return Measurement{}, err
	}
	if p.FailureClass != "" {
		return Measurement{}, fmt.Errorf("%s: %s", p.FailureClass, p.Reason)
	}
	return decodeMeasurement(p.Result)
}

// Upside implements Ranged: the predictor's range, when it has one.
func (r *PredictRunner) Upside(cfg engine.Config) (float64, bool) { return upside(r.Predictor, cfg) }

var _ Ranged = (*PredictRunner)(nil)

// noiseFactor is a deterministic lognormal draw with mean 1 for one
// measurement key.
func noiseFactor(n labspec.Noise, key string) float64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n.Seed))
	h.Write(b[:])
	h.Write([]byte(key))
	rng := rand.New(rand.NewPCG(h.Sum64(), 0x9e3779b97f4a7c15))
	z := rng.NormFloat64()
	return math.Exp(n.Sigma*z - n.Sigma*n.Sigma/2)
}

func newRecord(t TrialSpec) store.Trial {
	cfg, _ := json.Marshal(t.Config)
	return store.Trial{
		Key: t.Key, Stage: t.Stage, Name: t.Name, Workload: t.Workload.Name, Repeat: t.Repeat,
		Config: cfg, Started: time.Now(),
	}
}

// ErrBudget is returned inside the lab when the trial budget or the time
// budget is spent; the lab then finishes with what it has.
var ErrBudget = errors.New("lab: budget spent")
