// Package store persists lab runs and their trials in SQLite (pure Go,
// modernc.org/sqlite) or PostgreSQL (pgx), with one schema and embedded
// migrations. Every trial is written in its own transaction as soon as it
// ends, so a killed lab loses nothing it finished.
package store

import (
	"encoding/json"
	"time"
)

// Run is one lab run: one spec, resumed across invocations.
type Run struct {
	ID int64 `json:"id"`
	// Key identifies the spec (a hash of its normalized content); rerunning
	// the same spec resumes the run with the same key.
	Key  string `json:"key"`
	Name string `json:"name"`
	Spec string `json:"spec"` // the spec as YAML
	// Status is "running", "done", "failed" or "interrupted" (stopped
	// before its end: canceled, or its lab's context ended).
	Status string `json:"status"`
	// Summary is the lab's run summary (stages, decisions, winner) as JSON;
	// the lab owns its shape, the report decodes it.
	Summary json.RawMessage `json:"summary,omitempty"`
	Created time.Time       `json:"created"`
	Updated time.Time       `json:"updated"`
}

// StatusInterrupted is the status of a run whose lab was stopped before its
// end (a cancel, SIGTERM): a rerun of its spec resumes it. A run whose lab
// was killed outright stays "running" with a lapsed lease.
const StatusInterrupted = "interrupted"

// Trial is one benchmark of one configuration on one workload.
type Trial struct {
	ID    int64 `json:"id"`
	RunID int64 `json:"run_id"`
	// Key identifies the trial within its run (stage, config hash, workload,
	// repeat): a finished trial with the same key is never run again.
	Key      string `json:"key"`
	Stage    string `json:"stage"`
	Name     string `json:"name"`     // human label, e.g. "SGLang + FP8"
	Workload string `json:"workload"` // workload name, e.g. "ShareGPT"
	Repeat   int    `json:"repeat"`
	// Config is the normalized engine.Config as JSON.
	Config json.RawMessage `json:"config"`
	// Command is the exact serving command (argv joined for display), Env its
	// environment additions.
	Command string `json:"command"`
	// Status is "ok" or "failed".
	Status string `json:"status"`
	// FailureClass is "", "startup_crash", "oom", "hung", "crash_during_bench",
	// "unhealthy", "low_success" or "invalid_config".
	FailureClass string `json:"failure_class,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// Result is the metrics.Result JSON (vLLM --save-result keys + perflab).
	Result json.RawMessage `json:"result,omitempty"`
	// EngineMetrics is the engine's /metrics at the end of the run, parsed
	// into name → value.
	EngineMetrics map[string]float64 `json:"engine_metrics,omitempty"`
	LogTail       string             `json:"log_tail,omitempty"`
	Started       time.Time          `json:"started"`
	Ended         time.Time          `json:"ended"`
	// Attempt counts the times this trial was run (1 for the first); a
	// resumed lab retries a transient failure only while it is 1.
	Attempt int `json:"attempt,omitempty"`
	// Cost is what the trial took from the GPUs.
	Cost Cost `json:"cost"`
	// Cache says how the trial's server started without an earlier
	// measurement's prefix cache: "fresh" (a server started for it),
	// "reset_verified" (reset, and the engine's counters showed a probe
	// miss), "reset" (reset by an endpoint whose answer is its proof),
	// "salted" (its requests carried their own cache_salt), or "" (no
	// record: trials stored before this field, or failed before a server).
	Cache string `json:"cache,omitempty"`
}

// Cost is what one trial took: whether it started an engine server, how
// long that start took, how long it benchmarked, and on how many GPUs.
type Cost struct {
	// EngineStart is true when the trial started its server (false: it
	// ran on a server already up for its config, or started none).
	EngineStart bool `json:"engine_start,omitempty"`
	// StartupSeconds is the server's start, to ready (0 without a start).
	StartupSeconds float64 `json:"startup_seconds,omitempty"`
	// BenchSeconds is the benchmark's own wall time.
	BenchSeconds float64 `json:"bench_seconds,omitempty"`
	// GPUs is how many GPUs the trial held.
	GPUs int `json:"gpus,omitempty"`
}

// GPUHours is what the trial held its GPUs for, start and benchmark.
func (c Cost) GPUHours() float64 {
	return float64(c.GPUs) * (c.StartupSeconds + c.BenchSeconds) / 3600
}
