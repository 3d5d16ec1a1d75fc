package report

import (
	"encoding/json"

	"github.com/perflab/perflab/internal/loadsearch"
)

// Summary is the lab's account of a run, which the lab fills and
// serializes into store.Run's summary and the report reads back (the report
// owns the type so that it never imports the lab; its JSON tags are a
// contract with every stored run, documented in docs/lab.md): every stage with its candidates and the decision
// on each, the noise floors, the incumbents, the winner against the
// baseline, the generalization pairs and the grid comparison when run.
type Summary struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	Model   string `json:"model"`
	Runtime string `json:"runtime"`
	// Provenance says where the figures come from, as the runtime told
	// for this spec ("" for GPU measurements): the docker runtime runs the
	// engines' images or the simulated one under one name.
	Provenance string `json:"provenance,omitempty"`
	Objective  string `json:"objective"`
	// Unit is the objective's unit ("tok/s", "tok/s/GPU", "req/s within SLO").
	Unit    string          `json:"unit"`
	GPU     string          `json:"gpu"`
	GPUs    int             `json:"gpus"`
	Engines []EngineVersion `json:"engines"`
	// Tuning names the tuning workload; Workloads describes every workload
	// with the commands that reproduce it.
	Tuning    string     `json:"tuning_workload"`
	Workloads []Workload `json:"workloads"`
	// NoiseSigma is the seeded noise added to sim-predict trials (0: none).
	NoiseSigma     float64 `json:"noise_sigma,omitempty"`
	Repeats        int     `json:"repeats"`
	MinSuccessRate float64 `json:"min_success_rate"`
	// NoiseFloor is the largest relative noise floor measured in the run.
	NoiseFloor float64 `json:"noise_floor"`

	Baseline *SummaryCandidate `json:"baseline"`
	Stages   []StageSummary    `json:"stages"`
	// Staged is the incumbent after the greedy stages and combinations,
	// before the joint search.
	Staged *SummaryCandidate `json:"staged"`
	Joint  *JointSummary     `json:"joint,omitempty"`
	// Winner is the final recommendation.
	Winner *SummaryCandidate `json:"winner"`
	// Gain is the winner's relative gain over the baseline on the tuning
	// workload.
	Gain float64 `json:"gain"`

	Generalization []GeneralizationPair `json:"generalization,omitempty"`
	Grid           *GridSummary         `json:"grid,omitempty"`

	// TuningTrials counts the distinct tuning-workload measurements the lab
	// used (repeats included, grid excluded).
	TuningTrials int `json:"tuning_trials"`
	// TrialsRun / TrialsReused split this invocation's trials into run now
	// and taken from the store (resume).
	TrialsRun    int `json:"trials_run"`
	TrialsReused int `json:"trials_reused"`
	// Stopped says why the lab ended early ("budget: max_trials"), if it did.
	Stopped string `json:"stopped,omitempty"`
	// EngineStarts counts the servers the run's trials started, and
	// GPUHours what its trials held GPUs for (starts and benchmarks), over
	// every trial of the run, earlier invocations included. Both are 0 on
	// a runtime without servers.
	EngineStarts int     `json:"engine_starts"`
	GPUHours     float64 `json:"gpu_hours"`
	// FreshStarts is true when every measurement started its own server
	// (fresh_start_per_repeat): the noise floor then includes
	// start-to-start variance; false, repeats ran on one server.
	FreshStarts bool `json:"fresh_starts,omitempty"`
	// Load is max_load_under_slo's question and LoadSearches every
	// config's search (each repeat and workload its own), by key.
	Load         *SummaryLoad  `json:"load,omitempty"`
	LoadSearches []*LoadSearch `json:"load_searches,omitempty"`
}

// SummaryCandidate is one configuration as the lab measured (or skipped)
// it in a stage.
type SummaryCandidate struct {
	Name       string            `json:"name"`
	Point      map[string]string `json:"point"`
	ConfigHash string            `json:"config_hash"`
	Command    string            `json:"command,omitempty"`
	TrialKey   string            `json:"trial_key,omitempty"`
	GPUs       int               `json:"gpus"`
	// Score is the objective (the mean over repeats when there are some).
	Score float64 `json:"score"`
	// RepeatScores are the objective of each repeat, when repeated.
	RepeatScores []float64 `json:"repeat_scores,omitempty"`
	// Gain is relative to the stage's incumbent (0.021 = +2.1%).
	Gain            float64 `json:"gain"`
	TotalThroughput float64 `json:"total_throughput"`
	MeanTPOTMs      float64 `json:"mean_tpot_ms"`
	P99TPOTMs       float64 `json:"p99_tpot_ms"`
	SuccessRate     float64 `json:"success_rate"`
	// Decision is "baseline", "kept", "skipped" or "failed".
	Decision string `json:"decision"`
	// Reason explains a skip: "crash: oom", "success rate 51.5% < 100%",
	// "below noise floor (+0.05% <= 1.20%)", "no gain (-2.62%)",
	// "not the best in stage", "predicted", "SLO: P99 TPOT 88.7 ms > 80.0 ms",
	// "objective is 0 req/s within SLO: no request met the SLO",
	// "unsupported: <engine message>" (never launched), "not run: budget
	// spent", "stopped by budget before its repeats (single run +1.71%)".
	Reason string `json:"reason,omitempty"`
	// Why is the kind of the reason, for code (the kinds are in why.go);
	// Reason is for people.
	Why          Why    `json:"why,omitempty"`
	FailureClass string `json:"failure_class,omitempty"`
}

// StageSummary is one stage of the staged pass (or the combinations step).
type StageSummary struct {
	Name string `json:"name"`
	Knob string `json:"knob"`
	// Incumbent is the configuration the stage's candidates were compared
	// with; Kept names the candidate kept ("" when none was).
	Incumbent  *SummaryCandidate  `json:"incumbent"`
	Candidates []SummaryCandidate `json:"candidates"`
	Kept       string             `json:"kept,omitempty"`
	// NoiseFloor is the relative floor measured for this stage's decision
	// (0 when no candidate got as far as the repeats).
	NoiseFloor float64 `json:"noise_floor"`
	// Skipped says why the stage was not run ("no candidates apply to trtllm").
	Skipped string `json:"skipped,omitempty"`
}

// JointSummary is the simulator-guided joint search after the staged pass.
type JointSummary struct {
	Knobs []string `json:"knobs"`
	// Space is how many distinct configs the search ranked.
	Space int `json:"space"`
	// Tried are the configs it ran, in order, with the guide's calibrated
	// prediction in Reason.
	Tried []SummaryCandidate `json:"tried"`
	// Calibration is the fitted correction (measured/predicted) per
	// "knob=value", plus "*" for the global factor.
	Calibration map[string]float64 `json:"calibration,omitempty"`
	StopReason  string             `json:"stop_reason"`
	// Hopeless counts the untested configs left out of the last ranking
	// because the top of the guide's range for each lay below the
	// incumbent's measured score (objectives that prune: a candidate costs
	// a load search).
	Hopeless int `json:"hopeless,omitempty"`
	// Improved says whether the search beat the staged winner.
	Improved bool `json:"improved"`
	// LeftOut says which knob values the search did not rank, and why
	// ("" when none): batch limits the tuning workload never reaches.
	LeftOut string `json:"left_out,omitempty"`
}

// GeneralizationPair is the baseline and the winner on one workload.
type GeneralizationPair struct {
	Workload string            `json:"workload"`
	Baseline *SummaryCandidate `json:"baseline"`
	Winner   *SummaryCandidate `json:"winner"`
	// Gain is the winner's relative gain over the baseline (NaN-free: 0
	// when either failed).
	Gain float64 `json:"gain"`
}

// GridSummary compares the lab with an exhaustive grid over the same space.
type GridSummary struct {
	Size int               `json:"size"`
	Best *SummaryCandidate `json:"best"`
	// LabTrials is Summary.TuningTrials; LabShare is LabTrials/Size.
	LabTrials int     `json:"lab_trials"`
	LabShare  float64 `json:"lab_share"`
	// WinnerGap / StagedGap are how far below the grid's best the lab's
	// winner and its greedy staged pass ended (0.004 = 0.4% lower).
	WinnerGap float64 `json:"winner_gap"`
	StagedGap float64 `json:"staged_gap"`
}

// JSON encodes the summary for store.Run.
func (s *Summary) JSON() json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	return b
}

// Why is the kind of a candidate's reason (the Why* constants, why.go).
type Why string

// SummaryLoad is max_load_under_slo's question as the spec asked it (the
// lab's LoadObjective, field for field).
type SummaryLoad struct {
	// SLO is the compact form, e.g. "ttft_p99<=2s,tpot_p99<=50ms,success>=99%".
	SLO string `json:"slo"`
	// Axis is rate (open loop, the default) or concurrency (closed loop).
	Axis string `json:"axis,omitempty"`
	// Tolerance is the relative precision of the answer (default 0.05).
	Tolerance     float64 `json:"tolerance,omitempty"`
	Start         float64 `json:"start,omitempty"`
	Max           float64 `json:"max,omitempty"`
	WarmupPrompts int     `json:"warmup_prompts,omitempty"`
	// PointSeconds bounds a point's benchmark time in the engine's seconds
	// (0: no bound).
	PointSeconds float64 `json:"point_seconds,omitempty"`
}

// LoadSearch is one config's load search (the lab's LoadSearch, field for
// field): Key is the trial key of the search (its config on the tuning
// workload); each point's trial is in Result.Points[i].Ref.
type LoadSearch struct {
	Key    string             `json:"key"`
	Name   string             `json:"name"`
	Result *loadsearch.Result `json:"result"`
}
