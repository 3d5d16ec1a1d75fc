// Package app turns a lab spec and the command line's choices into a lab
// ready to run: the spec with its overrides, the simulator's fingerprint in
// its run key, the guide, the runner and its runtime, and the store. The
// CLI's lab and report commands call the same code, so both find a run by
// the same key; the API server (perflab serve) starts its labs through it too.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/lab"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/runtimes"
	"github.com/perflab/perflab/internal/sim"
	"github.com/perflab/perflab/internal/store"
	"github.com/perflab/perflab/internal/tokenizer"
)

// Options are what the command line may change about a spec. Zero values
// leave the spec's own choices.
type Options struct {
	// Runtime overrides the spec's runtime.
	Runtime string
	// TimeScale overrides the sim runtime's clock speed-up.
	TimeScale float64
	// Parallel overrides how many trials run at once.
	Parallel int
	// Coefficients is a calibration file from `perflab sim calibrate`
	// for the simulator (guide, sim-predict and sim runtimes).
	Coefficients string
	// Analytic predicts with the lab's closed-form stand-in model instead
	// of the simulator (tests).
	Analytic bool
	// KeepWorkDir keeps each engine server's working directory, under
	// WorkRoot when it is set (else in the runtime's temporary ones).
	KeepWorkDir bool
	WorkRoot    string
	// Images overrides the spec's container images, engine → image
	// (ParseImages reads the command line's --image).
	Images map[string]string
	// KubeContext and Namespace override the spec's kubernetes context
	// and namespace (not part of the run key).
	KubeContext, Namespace string
	// HidePaths keeps host paths out of the errors a lab or benchmark may
	// end with (the HF cache's directory): perflab serve's, whose clients
	// are not to learn the host's paths outside the data root.
	HidePaths bool
}

// ParseImages reads --image values: ENGINE=IMAGE for one engine, or a bare
// IMAGE for every engine (the simulated engine image serves all three). An
// image reference never holds "=", so the two cannot be confused.
func ParseImages(vals []string) (map[string]string, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, v := range vals {
		eng, img, one := strings.Cut(v, "=")
		if !one {
			for e := range engine.DefaultVersions {
				out[e] = v
			}
			continue
		}
		if _, ok := engine.DefaultVersions[eng]; !ok {
			return nil, fmt.Errorf("--image %s: unknown engine %q (want vllm, sglang or trtllm, or an image alone for every engine)", v, eng)
		}
		if img == "" {
			return nil, fmt.Errorf("--image %s: no image after %s=", v, eng)
		}
		out[eng] = img
	}
	return out, nil
}

// DefaultTimeScale is the sim runtime's clock speed-up when neither the
// spec nor the command line sets one.
const DefaultTimeScale = 20

// Spec loads a spec file and applies opts: the runtime, time scale and
// parallelism overrides, and the simulator's fingerprint (model revision
// and calibration hash) for the runtimes it measures. The result's Key is
// the run key; every command that looks a run up by its spec calls this.
func Spec(path string, opts Options) (*labspec.Spec, *sim.Coefficients, error) {
	spec, err := labspec.LoadSpec(path)
	if err != nil {
		return nil, nil, err
	}
	coef, err := Apply(spec, opts)
	if err != nil {
		return nil, nil, err
	}
	return spec, coef, nil
}

// Apply applies opts to a spec already parsed (Spec does it for a file).
func Apply(spec *labspec.Spec, opts Options) (*sim.Coefficients, error) {
	if opts.Runtime != "" {
		spec.Runtime = opts.Runtime
	}
	if opts.KubeContext != "" || opts.Namespace != "" {
		ks := runtimes.KubeSettings{}
		if spec.Kubernetes != nil {
			ks = *spec.Kubernetes
		}
		if opts.KubeContext != "" {
			ks.Context = opts.KubeContext
		}
		if opts.Namespace != "" {
			ks.Namespace = opts.Namespace
		}
		spec.Kubernetes = &ks
	}
	if len(opts.Images) > 0 {
		// Part of the run key, as the images decide what is measured.
		images := maps.Clone(spec.Images)
		if images == nil {
			images = map[string]string{}
		}
		maps.Copy(images, opts.Images)
		spec.Images = images
	}
	kind, err := runtimes.Lookup(spec.Runtime)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	settings, err := spec.RuntimeSettings()
	if err != nil {
		return nil, err
	}
	if sp, ok := kind.(runtimes.Specializer); ok {
		// What the runtime measures depends on the spec (the simulated
		// engine image or the engines' own): asked once, here, as the run
		// key depends on it.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		kind, err = sp.Specialize(ctx, runtimes.Choice{Engines: spec.EngineVersions(), Settings: settings})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("lab: %w", err)
		}
		spec.SetRuntimeKind(kind)
	}
	if opts.TimeScale > 0 {
		spec.TimeScale = opts.TimeScale
	}
	if spec.TimeScale == 0 {
		spec.TimeScale = kind.DefaultTimeScale()
	}
	if opts.Parallel > 0 {
		spec.Parallel = opts.Parallel
	}
	var coef *sim.Coefficients
	if opts.Coefficients != "" {
		c, err := sim.LoadCoefficients(opts.Coefficients)
		if err != nil {
			return nil, fmt.Errorf("lab: --coefficients: %w", err)
		}
		coef = c
	}
	spec.Simulator = ""
	switch {
	case opts.Analytic:
		spec.Simulator = "analytic"
	case kind.Simulated():
		spec.Simulator = sim.Fingerprint(coef)
	}
	return coef, nil
}

// Setup is a lab's moving parts before it runs.
type Setup struct {
	// Predict is the in-process simulator runner: the guide of the joint
	// search, and the runner of sim-predict labs and dry runs.
	Predict *lab.PredictRunner
	// Requests samples each workload's requests (cached).
	Requests lab.Requests
	// GuideKey identifies the guide's predictions (lab.Lab.GuideKey).
	GuideKey string

	coef *sim.Coefficients
	opts Options
}

// NewSetup builds the guide and the request sampler for a spec prepared by
// Spec or Apply; Runner adds what measures the trials.
func NewSetup(ctx context.Context, spec *labspec.Spec, coef *sim.Coefficients, opts Options) (*Setup, error) {
	var predictor lab.Predictor = lab.SimPredictor{SLO: spec.Objective.SLO, Coefficients: coef}
	var requests lab.Requests
	if opts.Analytic {
		predictor, requests = lab.AnalyticPredictor{}, lab.StandinRequests
	} else {
		// The tokenizer loads (0.7 s for Qwen3's) when a workload is first
		// sampled: a resume whose every trial and prediction is stored
		// needs none.
		var (
			once    sync.Once
			sampler lab.Requests
			tokErr  error
		)
		requests = func(w labspec.Workload) ([]dataset.Request, error) {
			once.Do(func() {
				tok, err := tokenizerOf(context.WithoutCancel(ctx), spec, opts.HidePaths)
				if err != nil {
					tokErr = err
					return
				}
				sampler = lab.DatasetRequests(tok)
			})
			if tokErr != nil {
				return nil, tokErr
			}
			return sampler(w)
		}
	}
	requests = lab.CachedRequests(requests)
	predict := &lab.PredictRunner{Predictor: predictor, Hardware: spec.Hardware, Requests: requests, Noise: spec.Noise}
	key := sim.Fingerprint(coef)
	if opts.Analytic {
		key = "analytic"
	}
	return &Setup{Predict: predict, Requests: requests, GuideKey: key, coef: coef, opts: opts}, nil
}

// Runner returns what measures the spec's trials: the predictions
// themselves for a runtime without servers, else a live runner on the
// runtime's servers, with its GPUs (the host's real ones come from one
// allocator per process, shared by every lab in it).
func (su *Setup) Runner(ctx context.Context, spec *labspec.Spec) (lab.Runner, error) {
	kind := spec.RuntimeKind()
	if !kind.Servers() {
		return su.Predict, nil
	}
	tokPath := spec.Tokenizer
	if !filepath.IsAbs(tokPath) {
		tokPath = "" // a Hub id: sim serve then counts tokens without one
	}
	timeScale := 0.0
	if kind.DefaultTimeScale() > 0 {
		timeScale = spec.TimeScale
	}
	settings, err := spec.RuntimeSettings()
	if err != nil {
		return nil, err
	}
	rt, err := kind.New(runtimes.Env{GPU: spec.Hardware.GPU, TimeScale: timeScale, Tokenizer: tokPath,
		Coefficients: absPath(su.opts.Coefficients), Settings: settings, Run: spec.Key()})
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	gpus, err := kind.GPUs(ctx, spec.Hardware.Count)
	if err != nil {
		return nil, fmt.Errorf("lab: hardware.count %d: %w", spec.Hardware.Count, err)
	}
	return &lab.LiveRunner{Runtime: rt, Requests: su.Requests, TimeScale: labspec.Scale(timeScale), SLO: spec.Objective.SLO, GPUs: gpus,
		FreshStart: spec.FreshStartPerRepeat, KeepWorkDir: su.opts.KeepWorkDir, WorkRoot: absPath(su.opts.WorkRoot)}, nil
}

// Preflight reads every dataset file the workloads name, to its end,
// so a truncated or malformed file stops the lab before it stores a run
// or touches a report, with the file and the place named. It tokenizes
// nothing: that waits for a trial that needs the requests.
func (su *Setup) Preflight(spec *labspec.Spec) error {
	for _, w := range append([]labspec.Workload{*spec.Tuning}, spec.Generalization...) {
		if w.Path == "" {
			continue
		}
		if err := checkJSONFile(w.Path); err != nil {
			return fmt.Errorf("lab: workload %s: %w", w.Name, err)
		}
	}
	return nil
}

// checkJSONFile reads a JSON file through, token by token.
func checkJSONFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("dataset file: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	for {
		if _, err := dec.Token(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("dataset file %s: truncated JSON after byte %d", path, dec.InputOffset())
			}
			return fmt.Errorf("dataset file %s: invalid JSON near byte %d: %w", path, dec.InputOffset(), err)
		}
	}
}

// Tokenizer loads the spec's tokenizer: a local path when it exists (the
// spec made it absolute), else a model id resolved through the HF cache
// and the Hub.
func Tokenizer(ctx context.Context, spec *labspec.Spec) (*tokenizer.Tokenizer, error) {
	return tokenizerOf(ctx, spec, false)
}

func tokenizerOf(ctx context.Context, spec *labspec.Spec, hidePaths bool) (*tokenizer.Tokenizer, error) {
	ref := spec.Tokenizer
	if ref == "" {
		ref = spec.Model
	}
	return resolveTokenizer(ctx, ref, hidePaths)
}

// resolveTokenizer loads a tokenizer: a local path when ref is absolute
// (a spec or the server made every local path so, through
// lab.PathResolver), else a model id through the HF cache and the Hub only:
// a relative name is never looked for in the working directory, which on
// a server is not the data root.
func resolveTokenizer(ctx context.Context, ref string, hidePaths bool) (*tokenizer.Tokenizer, error) {
	opt := tokenizer.ResolveOptions{HubOnly: true, HidePaths: hidePaths}
	if filepath.IsAbs(ref) {
		opt.Path = ref
	}
	tok, err := tokenizer.Resolve(ctx, ref, opt)
	if err != nil {
		var nf *tokenizer.NotFoundError
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("lab: %w\nthe spec's tokenizer: takes a local tokenizer (a directory holding tokenizer.json; relative paths resolve against the spec's directory) or a Hub id", err)
		}
		return nil, fmt.Errorf("lab: %w", err)
	}
	return tok, nil
}

// ErrAllFailed is wrapped by the error a lab returns when not one of its
// trials succeeded.
var ErrAllFailed = errors.New("every trial failed")

// AllFailed returns an error wrapping ErrAllFailed, with the first
// failure's trial and reason, when trials is not empty and none of them
// succeeded; nil otherwise.
func AllFailed(trials []store.Trial) error {
	if len(trials) == 0 {
		return nil
	}
	for _, t := range trials {
		if t.Status == "ok" {
			return nil
		}
	}
	first := trials[0]
	return fmt.Errorf("lab: %w (%d); the first, %s (trial %s): %s: %s",
		ErrAllFailed, len(trials), first.Name, first.Key, first.FailureClass, firstLine(first.Reason))
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

// absPath makes a path absolute, so that an engine process started in
// another directory finds the file ("" stays "").
func absPath(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

var _ dataset.Tokenizer = (*tokenizer.Tokenizer)(nil)
