package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/perflab/perflab/internal/bench"
	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/safeyaml"
	"github.com/perflab/perflab/internal/store"
)

// Benchmark is one benchmark of an OpenAI-compatible endpoint that is
// already serving, with one of the built-in load profiles: GPUStack's
// one-click benchmark. Its result is stored as a run of its own.
type Benchmark struct {
	// Name names the run (default bench-<profile>).
	Name string `json:"name,omitempty"`
	// BaseURL is the endpoint's base ("http://host:8000").
	BaseURL string `json:"base_url"`
	// Backend is "openai" (default, /v1/completions) or "openai-chat".
	Backend string `json:"backend,omitempty"`
	// Model is the served model; Tokenizer what counts its tokens (a
	// directory holding tokenizer.json, or a Hub id; default Model).
	Model     string `json:"model"`
	Tokenizer string `json:"tokenizer,omitempty"`
	// Profile is a built-in profile (dataset.Profiles: sharegpt, short,
	// throughput, ...). DatasetPath is the ShareGPT file of a sharegpt
	// profile.
	Profile     string `json:"profile"`
	DatasetPath string `json:"dataset_path,omitempty"`
	// NumPrompts overrides the profile's (0: the profile's).
	NumPrompts int `json:"num_prompts,omitempty"`
	// MaxSeconds bounds the benchmark's time (0: none).
	MaxSeconds float64 `json:"max_seconds,omitempty"`
}

// Check refuses a benchmark that names no endpoint, no model or an
// unknown profile.
func (b *Benchmark) Check() error {
	if !strings.HasPrefix(b.BaseURL, "http://") && !strings.HasPrefix(b.BaseURL, "https://") {
		return fmt.Errorf("app: benchmark: base_url %q: want http://HOST:PORT or https://…", b.BaseURL)
	}
	if b.Model == "" {
		return errors.New("app: benchmark: model is required")
	}
	p, ok := dataset.LookupProfile(b.Profile)
	if !ok {
		var names []string
		for _, p := range dataset.Profiles() {
			names = append(names, p.Name)
		}
		return fmt.Errorf("app: benchmark: profile %q: want one of %s", b.Profile, strings.Join(names, ", "))
	}
	switch b.Backend {
	case "", bench.BackendOpenAI, bench.BackendOpenAIChat:
	default:
		return fmt.Errorf("app: benchmark: backend %q: want openai or openai-chat", b.Backend)
	}
	if b.NumPrompts < 0 || b.NumPrompts > labspec.MaxNumPrompts {
		return fmt.Errorf("app: benchmark: num_prompts %d is out of range: want 0 (the profile's) to %d", b.NumPrompts, labspec.MaxNumPrompts)
	}
	// The sample is held while it is sent: the profile's lengths times
	// the prompts asked for are bounded as a lab workload's are.
	opt := p.Dataset
	if b.NumPrompts > 0 {
		opt.NumPrompts = b.NumPrompts
	}
	if err := labspec.CheckSample(opt); err != nil {
		return fmt.Errorf("app: benchmark: profile %s: %w", b.Profile, err)
	}
	// Written so that NaN fails too.
	if !(b.MaxSeconds >= 0 && b.MaxSeconds <= bench.MaxStopSeconds) {
		return fmt.Errorf("app: benchmark: max_seconds %v is out of range: want 0 (no limit) to %d", b.MaxSeconds, bench.MaxStopSeconds)
	}
	return nil
}

// ParseBenchmark decodes a benchmark body (JSON, unknown fields refused)
// and checks it. Its nesting and keys are bounded on a token walk before
// it is decoded, as a spec's are.
func ParseBenchmark(body []byte) (*Benchmark, error) {
	if err := safeyaml.CheckJSON(body, safeyaml.Defaults); err != nil {
		return nil, fmt.Errorf("app: benchmark: %w", err)
	}
	var b Benchmark
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("app: benchmark: %w", err)
	}
	if err := b.Check(); err != nil {
		return nil, err
	}
	return &b, nil
}

// RunName is the run the benchmark is stored under.
func (b *Benchmark) RunName() string {
	if b.Name != "" {
		return b.Name
	}
	return "bench-" + b.Profile
}

// Run sends the profile's requests to the endpoint as perflab bench does
// and stores the result as one trial of a run of its own (a new run each
// time: a benchmark of a live endpoint is not resumed). runID is the run,
// created by StartBenchmark.
func (b *Benchmark) Run(ctx context.Context, st *store.Store, run store.Run) (store.Run, error) {
	p, _ := dataset.LookupProfile(b.Profile)
	opt := p.Dataset
	if b.NumPrompts > 0 {
		opt.NumPrompts = b.NumPrompts
	}
	if b.DatasetPath != "" {
		opt.Path = b.DatasetPath
	}
	tokRef := b.Tokenizer
	if tokRef == "" {
		tokRef = b.Model
	}
	started := time.Now()
	fail := func(err error) (store.Run, error) {
		run.Status = "failed"
		run.Summary = nil
		if uerr := st.UpdateRun(context.WithoutCancel(ctx), &run); uerr != nil {
			err = errors.Join(err, uerr)
		}
		return run, err
	}
	// A benchmark is the server's alone (perflab bench resolves its own):
	// its errors name no host path.
	tok, err := resolveTokenizer(ctx, tokRef, true)
	if err != nil {
		return fail(err)
	}
	reqs, err := dataset.Sample(opt, tok)
	if err != nil {
		return fail(fmt.Errorf("app: benchmark: %w", err))
	}
	cfg := bench.Config{BaseURL: strings.TrimRight(b.BaseURL, "/"), Backend: b.Backend, Model: b.Model, Requests: reqs,
		RequestRate: p.RequestRate, MaxConcurrency: p.MaxConcurrency, Seed: opt.Seed, IgnoreEOS: opt.Name == dataset.NameRandom,
		MaxSeconds: b.MaxSeconds, Tokenizer: tok, Metrics: metrics.DefaultOptions()}
	if cfg.RequestRate == 0 {
		cfg.RequestRate = math.Inf(1)
	}
	out, runErr := bench.Run(ctx, cfg)
	if out == nil || out.Result == nil {
		if runErr == nil {
			runErr = errors.New("app: benchmark: no result")
		}
		return fail(runErr)
	}
	res := out.Result
	res.NumPrompts = opt.NumPrompts
	res.TokenizerID = tokRef
	rj, err := json.Marshal(res)
	if err != nil {
		return fail(fmt.Errorf("app: benchmark: encode result: %w", err))
	}
	status, class := "ok", ""
	if res.Completed == 0 {
		status, class = "failed", "low_success"
	}
	cmd := fmt.Sprintf("perflab bench --base-url %s --model %s --tokenizer %s --profile %s --num-prompts %d", b.BaseURL, b.Model, tokRef, b.Profile, opt.NumPrompts)
	if b.Backend != "" {
		cmd += " --backend " + b.Backend
	}
	tr := store.Trial{RunID: run.ID, Key: "benchmark/" + b.Profile, Stage: "benchmark", Name: b.Model + " @ " + b.BaseURL,
		Workload: b.Profile, Config: json.RawMessage(`{}`), Command: cmd, Status: status, FailureClass: class, Result: rj,
		Started: started, Ended: time.Now(), Attempt: 1, Cost: store.Cost{BenchSeconds: out.Duration}}
	if runErr != nil {
		tr.Reason = runErr.Error()
	}
	if err := st.SaveTrial(context.WithoutCancel(ctx), &tr); err != nil {
		return fail(err)
	}
	run.Status = "done"
	if status != "ok" {
		run.Status = "failed"
	}
	if err := st.UpdateRun(context.WithoutCancel(ctx), &run); err != nil {
		return run, err
	}
	if runErr != nil && !errors.Is(runErr, bench.ErrStopped) {
		return run, runErr
	}
	return run, nil
}

// NewBenchmarkRun stores the run a benchmark will fill, named by its name
// and start time.
func NewBenchmarkRun(ctx context.Context, st *store.Store, b *Benchmark) (store.Run, error) {
	key := fmt.Sprintf("bench:%s:%d", b.RunName(), time.Now().UnixNano())
	return st.EnsureRun(ctx, key, b.RunName(), "", false)
}
