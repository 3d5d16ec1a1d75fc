package report

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/perflab/perflab/internal/store"
)

// Report is everything the written report shows, computed from stored
// results; the writers only format it.
type Report struct {
	Title     string `json:"title"`
	RunName   string `json:"run_name"`
	Model     string `json:"model"`
	GPU       string `json:"gpu"`
	GPUs      int    `json:"gpus"`
	Runtime   string `json:"runtime,omitempty"`
	Objective string `json:"objective"`
	// Engines lists "name version" pairs as the spec names them.
	Engines []EngineVersion `json:"engines"`
	// Recommended is the winning configuration.
	Recommended *Candidate `json:"recommended,omitempty"`
	// Baseline is vLLM with its defaults on the tuning workload.
	Baseline *Candidate `json:"baseline,omitempty"`
	// Cases compares baseline and winner per workload (tuning first).
	Cases []Case `json:"cases"`
	// Stages are the experiment's stages in the order they ran.
	Stages []Stage `json:"stages"`
	// NoiseFloor is the relative run-to-run spread measured by repeats
	// (0.012 = 1.2%); gains below it are not counted.
	NoiseFloor float64 `json:"noise_floor"`
	// Workloads describes the datasets and their bench commands.
	Workloads []Workload `json:"workloads"`
	// Tried lists every configuration run on the tuning workload, kept or
	// not, for the Pareto chart and the "tried and not kept" table.
	Tried []Candidate `json:"tried"`
	// Search describes the joint search and the exhaustive-grid check.
	Search *SearchInfo `json:"search,omitempty"`
	// Warnings lists impossible or suspicious values found in the results.
	Warnings []string `json:"warnings,omitempty"`
	// Charts holds the chart files written beside the report (relative).
	Charts []Chart `json:"charts,omitempty"`
}

// EngineVersion is an engine and its version.
type EngineVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Candidate is one configuration's measured outcome on one workload.
type Candidate struct {
	Key      string  `json:"key"`
	Name     string  `json:"name"`
	Stage    string  `json:"stage,omitempty"`
	Workload string  `json:"workload"`
	Command  string  `json:"command"`
	Engine   string  `json:"engine,omitempty"`
	GPUs     int     `json:"gpus,omitempty"`
	Status   string  `json:"status"`
	Failure  string  `json:"failure,omitempty"`
	Reason   string  `json:"reason,omitempty"`
	Kept     bool    `json:"kept"`
	Decision string  `json:"decision,omitempty"` // why kept / not kept
	Gain     float64 `json:"gain"`               // relative to the incumbent
	Metrics  Metrics `json:"metrics"`
	// Repeats holds the objective figure of every repeat (noise band).
	Repeats []float64 `json:"repeats,omitempty"`
	// Block is the vLLM-format result block.
	Block string `json:"block,omitempty"`
	// EngineMetrics is the server's /metrics at the end of the run.
	EngineMetrics map[string]float64 `json:"engine_metrics,omitempty"`
	// CDF inputs: per-request samples when the run kept them, else the
	// saved p0…p100 quantiles (ms).
	TTFTs []float64 `json:"-"`
	TPOTs []float64 `json:"-"`
}

// Metrics are the figures the report tables use.
type Metrics struct {
	TotalTPS      float64 `json:"total_tps"`
	OutputTPS     float64 `json:"output_tps"`
	RequestTPS    float64 `json:"request_tps"`
	MeanTTFTMs    float64 `json:"mean_ttft_ms"`
	MeanTPOTMs    float64 `json:"mean_tpot_ms"`
	P99TPOTMs     float64 `json:"p99_tpot_ms"`
	P99TTFTMs     float64 `json:"p99_ttft_ms"`
	MeanITLMs     float64 `json:"mean_itl_ms"`
	Completed     int     `json:"completed"`
	Failed        int     `json:"failed"`
	NumPrompts    int     `json:"num_prompts"`
	DurationS     float64 `json:"duration_s"`
	TPSPerGPU     float64 `json:"tps_per_gpu"`
	TokensPerUser float64 `json:"tokens_per_user"` // 1000 / mean TPOT
	SuccessRate   float64 `json:"success_rate"`
}

// Case is one benchmark case's baseline-vs-optimized row.
type Case struct {
	Workload  string     `json:"workload"`
	Baseline  *Candidate `json:"baseline,omitempty"`
	Optimized *Candidate `json:"optimized,omitempty"`
	// Change is the relative Total TPS change (0.581 = +58.1%).
	Change     float64 `json:"change"`
	TPOTChange float64 `json:"tpot_change"`
	// PerGPU is set when the two used different GPU counts: the change
	// is then computed per GPU.
	PerGPU bool `json:"per_gpu,omitempty"`
}

// Stage is one experiment stage.
type Stage struct {
	Index      int         `json:"index"`
	Name       string      `json:"name"`
	Title      string      `json:"title"`
	Candidates []Candidate `json:"candidates"`
	// Incumbent is the configuration carried into the stage, Winner the
	// one carried out of it (the same when nothing helped).
	Incumbent *Candidate `json:"incumbent,omitempty"`
	Winner    *Candidate `json:"winner,omitempty"`
	// Gain is the winner's relative gain over the incumbent (0 if none).
	Gain float64 `json:"gain"`
	// Ranking is the "Result: A (x tok/s) > B (y tok/s)" line.
	Ranking string `json:"ranking"`
	// Summary is the 9B report's "Summary:" sentence for the best pair.
	Summary string `json:"summary"`
}

// Workload is a benchmark dataset with the commands that reproduce it.
type Workload struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Perflab     string `json:"perflab_command"`
	VLLM        string `json:"vllm_command"`
}

// SearchInfo reports the search beyond the greedy pass.
type SearchInfo struct {
	GreedyBest     float64 `json:"greedy_best"`
	FinalBest      float64 `json:"final_best"`
	Trials         int     `json:"trials"`
	GridTrials     int     `json:"grid_trials,omitempty"`
	GridBest       float64 `json:"grid_best,omitempty"`
	GridBestConfig string  `json:"grid_best_config,omitempty"`
	Note           string  `json:"note,omitempty"`
}

// Chart is a chart file written with the report.
type Chart struct {
	Title string `json:"title"`
	PNG   string `json:"png"`
	SVG   string `json:"svg"`
}

// resultView is the part of a stored result (vLLM --save-result keys plus
// perflab's section) the report reads. Decoding the JSON keys rather than a
// Go type keeps imported vLLM files and perflab's own results on one path.
type resultView struct {
	NumPrompts           int         `json:"num_prompts"`
	Duration             float64     `json:"duration"`
	Completed            int         `json:"completed"`
	Failed               int         `json:"failed"`
	TotalInputTokens     int         `json:"total_input_tokens"`
	TotalOutputTokens    int         `json:"total_output_tokens"`
	RequestThroughput    float64     `json:"request_throughput"`
	OutputThroughput     float64     `json:"output_throughput"`
	TotalTokenThroughput float64     `json:"total_token_throughput"`
	MeanTTFTMs           float64     `json:"mean_ttft_ms"`
	MeanTPOTMs           float64     `json:"mean_tpot_ms"`
	P99TTFTMs            float64     `json:"p99_ttft_ms"`
	P99TPOTMs            float64     `json:"p99_tpot_ms"`
	MeanITLMs            float64     `json:"mean_itl_ms"`
	TTFTs                []float64   `json:"ttfts"`
	OutputLens           []int       `json:"output_lens"`
	ITLs                 [][]float64 `json:"itls"`
	Perflab              struct {
		Quantiles map[string][]float64 `json:"quantiles_ms"`
	} `json:"perflab"`
}

func decodeMetrics(raw json.RawMessage, gpus int) (Metrics, resultView, error) {
	var v resultView
	if len(raw) == 0 {
		return Metrics{}, v, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return Metrics{}, v, fmt.Errorf("report: decode result: %w", err)
	}
	m := Metrics{
		TotalTPS: v.TotalTokenThroughput, OutputTPS: v.OutputThroughput, RequestTPS: v.RequestThroughput,
		MeanTTFTMs: v.MeanTTFTMs, MeanTPOTMs: v.MeanTPOTMs, P99TPOTMs: v.P99TPOTMs, P99TTFTMs: v.P99TTFTMs,
		MeanITLMs: v.MeanITLMs, Completed: v.Completed, Failed: v.Failed, NumPrompts: v.NumPrompts,
		DurationS: v.Duration,
	}
	if m.NumPrompts == 0 {
		m.NumPrompts = m.Completed + m.Failed
	}
	if m.NumPrompts > 0 {
		m.SuccessRate = float64(m.Completed) / float64(m.NumPrompts)
	}
	if gpus < 1 {
		gpus = 1
	}
	m.TPSPerGPU = m.TotalTPS / float64(gpus)
	if m.MeanTPOTMs > 0 {
		m.TokensPerUser = 1000 / m.MeanTPOTMs
	}
	return m, v, nil
}

// pct formats a relative change as the reports do: "+58.1%".
func pct(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", x*100)
}

// rel is (b-a)/a, or NaN when a is zero.
func rel(a, b float64) float64 {
	if a == 0 {
		return math.NaN()
	}
	return (b - a) / a
}

// ranking renders "A (x tok/s) > B (y tok/s)" from the successful
// candidates, best first; failed ones are named after it with their class.
func ranking(cands []Candidate) string {
	ok := make([]Candidate, 0, len(cands))
	var failed []string
	for _, c := range cands {
		if c.Status == "ok" {
			ok = append(ok, c)
		} else {
			failed = append(failed, fmt.Sprintf("%s (%s)", c.Name, nonEmpty(c.Failure, "failed")))
		}
	}
	sort.SliceStable(ok, func(i, j int) bool { return ok[i].Metrics.TotalTPS > ok[j].Metrics.TotalTPS })
	parts := make([]string, len(ok))
	for i, c := range ok {
		parts[i] = fmt.Sprintf("%s (%.2f tok/s)", c.Name, c.Metrics.TotalTPS)
	}
	s := strings.Join(parts, " > ")
	if len(failed) > 0 {
		if s != "" {
			s += "; "
		}
		s += "failed: " + strings.Join(failed, ", ")
	}
	return s
}

// summarySentence is the 9B report's "Summary:" line comparing two runs.
func summarySentence(a, b Candidate) string {
	if a.Metrics.TotalTPS < b.Metrics.TotalTPS {
		a, b = b, a
	}
	d := a.Metrics.TotalTPS - b.Metrics.TotalTPS
	s := fmt.Sprintf("`%s` Total TPS = %.2f, `%s` Total TPS = %.2f. `%s` is faster by %.2f tok/s (%.2f%%)",
		a.Name, a.Metrics.TotalTPS, b.Name, b.Metrics.TotalTPS, a.Name, d, 100*d/b.Metrics.TotalTPS)
	ta, tb := a.Metrics.MeanTPOTMs, b.Metrics.MeanTPOTMs
	if ta > 0 && tb > 0 {
		verb := "reduced"
		dt := tb - ta
		if dt < 0 {
			verb, dt = "increased", -dt
		}
		s += fmt.Sprintf("; Mean TPOT = %.2f ms vs %.2f ms, %s by %.2f ms (%.2f%%)", ta, tb, verb, dt, 100*dt/tb)
	}
	return s + "."
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// trialIndex gives lookups over a run's trials.
type trialIndex struct {
	byKey map[string]store.Trial
}

func newTrialIndex(ts []store.Trial) trialIndex {
	ix := trialIndex{byKey: make(map[string]store.Trial, len(ts))}
	for _, t := range ts {
		ix.byKey[t.Key] = t
	}
	return ix
}
