package report

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/store"
)

// Report is everything the written report shows, computed from stored
// results; the writers only format it.
type Report struct {
	Title   string `json:"title"`
	RunName string `json:"run_name"`
	Model   string `json:"model"`
	GPU     string `json:"gpu"`
	// GPUs is the GPU count the lab ran on; 0 when not recorded (imports).
	GPUs    int    `json:"gpus"`
	Runtime string `json:"runtime,omitempty"`
	// Provenance says where the figures come from ("" for measurements
	// on GPUs), as the runtime told when the lab ran.
	Provenance string `json:"provenance,omitempty"`
	Objective  string `json:"objective"`
	// Unit is the objective's unit ("tok/s").
	Unit string `json:"unit,omitempty"`
	// EngineStarts and GPUHours are what the run's trials cost on a
	// runtime with servers (0 on sim-predict); FreshStarts says whether
	// every measurement started its own server.
	EngineStarts int     `json:"engine_starts,omitempty"`
	GPUHours     float64 `json:"gpu_hours,omitempty"`
	FreshStarts  bool    `json:"fresh_starts,omitempty"`
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
	// Load is max_load_under_slo's curves (nil under other objectives).
	Load *LoadReport `json:"load,omitempty"`
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
	// Repeats holds the Total TPS of every repeat, in run order (the lab's
	// objective figures when the stored repeats are missing). Metrics are
	// then the mean over the repeats, the figure the lab's decision used.
	Repeats []float64 `json:"repeats,omitempty"`
	// Runs is how many stored runs Metrics averages (1 without repeats).
	Runs int `json:"runs,omitempty"`
	// Spread is half the range of the repeats' Total TPS (tok/s): the mean
	// is shown as mean ± Spread.
	Spread float64 `json:"spread,omitempty"`
	// Warnings lists what the result's checks found (stored on import and
	// raised again on reading), shown beside its figures.
	Warnings []string `json:"warnings,omitempty"`
	// Assumptions lists what a simulated result took as given instead of
	// measured (metrics.Perflab.Assumptions).
	Assumptions []string `json:"assumptions,omitempty"`
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
	// Change is the relative Total TPS change (0.581 = +58.1%), and
	// TPOTChange the relative mean TPOT change; each is nil when the two
	// sides cannot be compared (a side failed or measured 0), so no NaN
	// reaches an output.
	Change     *float64 `json:"change"`
	TPOTChange *float64 `json:"tpot_change"`
	// PerGPU is set when the two used different GPU counts: the change
	// is then computed per GPU.
	PerGPU bool `json:"per_gpu,omitempty"`
}

// Stage is one experiment stage.
type Stage struct {
	// NoiseFloor is the floor this stage's decision used (0 when none
	// got as far as repeats).
	NoiseFloor float64     `json:"noise_floor,omitempty"`
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
	// Skipped says why the stage ran nothing ("" when it ran).
	Skipped string `json:"skipped,omitempty"`
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
	GreedyBest float64 `json:"greedy_best"`
	FinalBest  float64 `json:"final_best"`
	// GreedyConfig is where the staged pass stopped, FinalConfig where the
	// search ended: the recommendation when the search took the lead.
	GreedyConfig   string  `json:"greedy_config,omitempty"`
	FinalConfig    string  `json:"final_config,omitempty"`
	Trials         int     `json:"trials"`
	GridTrials     int     `json:"grid_trials,omitempty"`
	GridBest       float64 `json:"grid_best,omitempty"`
	GridBestConfig string  `json:"grid_best_config,omitempty"`
	Note           string  `json:"note,omitempty"`
	// LeftOut says which knob values the search did not rank, and why.
	LeftOut string `json:"left_out,omitempty"`
}

// tookLead says whether the joint search ended on another configuration
// than the staged pass, with a higher figure.
func (s *SearchInfo) tookLead() bool {
	return s != nil && s.FinalConfig != "" && s.FinalConfig != s.GreedyConfig && s.FinalBest > s.GreedyBest
}

// Chart is a chart file written with the report.
type Chart struct {
	Title string `json:"title"`
	PNG   string `json:"png"`
	SVG   string `json:"svg"`
}

// decodeMetrics reads a stored result into the report's figures, through
// the store's decoder (store.DecodeResult: the one decoder of every result
// perflab writes, which reads vLLM's --save-result files too, so imported
// results and perflab's own stay on one path). r is nil when raw is empty.
func decodeMetrics(raw json.RawMessage, gpus int) (m Metrics, r *metrics.Result, err error) {
	if len(raw) == 0 {
		return Metrics{}, nil, nil
	}
	if r, err = store.DecodeResult(raw); err != nil {
		return Metrics{}, nil, fmt.Errorf("report: decode result: %w", err)
	}
	// A percentile the result lacks reads 0, as an absent key always did.
	p99 := func(metric string) float64 { v, _ := r.Percentile(metric, 99); return v }
	m = Metrics{
		TotalTPS: r.TotalTokenThroughput, OutputTPS: r.OutputThroughput, RequestTPS: r.RequestThroughput,
		MeanTTFTMs: r.MeanTTFTMs, MeanTPOTMs: r.MeanTPOTMs, P99TPOTMs: p99(metrics.MetricTPOT), P99TTFTMs: p99(metrics.MetricTTFT),
		MeanITLMs: r.MeanITLMs, Completed: r.Completed, Failed: r.Failed, NumPrompts: r.NumPrompts,
		DurationS: r.Duration,
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
	return m, r, nil
}

// pct formats a relative change as the reports do: "+58.1%".
func pct(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", x*100)
}

// pctOf is pct of a change that may be missing ("n/a").
func pctOf(x *float64) string {
	if x == nil {
		return "n/a"
	}
	return pct(*x)
}

// rel is (b-a)/a, or nil when that is not a finite number (a is zero, or
// either is not finite).
func rel(a, b float64) *float64 {
	r := (b - a) / a
	if a == 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return nil
	}
	return &r
}

// statusNotRun is the Status of a candidate the lab decided not to launch.
const statusNotRun = "not run"

// ranking renders "A (x tok/s) > B (y tok/s)" from the successful
// candidates, best first; failed ones are named after it with their class,
// then those never run.
func ranking(cands []Candidate) string {
	ok := make([]Candidate, 0, len(cands))
	var failed, notRun []string
	for _, c := range cands {
		switch c.Status {
		case "ok":
			ok = append(ok, c)
		case statusNotRun:
			notRun = append(notRun, c.Name)
		default:
			failed = append(failed, fmt.Sprintf("%s (%s)", c.Name, nonEmpty(c.Failure, "failed")))
		}
	}
	sort.SliceStable(ok, func(i, j int) bool { return ok[i].Metrics.TotalTPS > ok[j].Metrics.TotalTPS })
	var b strings.Builder
	for i, c := range ok {
		if i > 0 {
			// Equal at the precision shown is a tie, not a ranking:
			// "x > x" reads as false on its face.
			sep := " > "
			if sameShown(ok[i-1].Metrics.TotalTPS, c.Metrics.TotalTPS) {
				sep = " = "
			}
			b.WriteString(sep)
		}
		fmt.Fprintf(&b, "%s (%s tok/s%s)", c.Name, tpsFigure(c), runsNote(c))
	}
	s := b.String()
	if len(failed) > 0 {
		if s != "" {
			s += "; "
		}
		s += "failed: " + strings.Join(failed, ", ")
	}
	if len(notRun) > 0 {
		if s != "" {
			s += "; "
		}
		s += "not run: " + strings.Join(notRun, ", ")
	}
	return s
}

// sameShown says whether two figures print the same at the two decimals
// the report shows: ranked, they would read "x > x".
func sameShown(a, b float64) bool { return fmt.Sprintf("%.2f", a) == fmt.Sprintf("%.2f", b) }

// summarySentence is the 9B report's "Summary:" line comparing two runs.
func summarySentence(a, b Candidate) string {
	if a.Metrics.TotalTPS < b.Metrics.TotalTPS {
		a, b = b, a
	}
	d := a.Metrics.TotalTPS - b.Metrics.TotalTPS
	s := fmt.Sprintf("`%s` Total TPS = %s, `%s` Total TPS = %s. `%s` is faster by %.2f tok/s (%.2f%%)",
		a.Name, tpsFigure(a), b.Name, tpsFigure(b), a.Name, d, 100*d/b.Metrics.TotalTPS)
	if fmt.Sprintf("%.2f", d) == "0.00" {
		s = fmt.Sprintf("`%s` Total TPS = %s, `%s` Total TPS = %s: the same", a.Name, tpsFigure(a), b.Name, tpsFigure(b))
	}
	ta, tb := a.Metrics.MeanTPOTMs, b.Metrics.MeanTPOTMs
	if ta > 0 && tb > 0 {
		// The reference reports' wording: "reduced by X ms (Y%)", or
		// "increased by X ms (Y% slower)".
		verb, slower := "reduced", ""
		dt := tb - ta
		if dt < 0 {
			verb, dt, slower = "increased", -dt, " slower"
		}
		if fmt.Sprintf("%.2f", dt) == "0.00" {
			s += fmt.Sprintf("; Mean TPOT = %.2f ms vs %.2f ms, the same", ta, tb)
		} else {
			s += fmt.Sprintf("; Mean TPOT = %.2f ms vs %.2f ms, %s by %.2f ms (%.2f%%%s)", ta, tb, verb, dt, 100*dt/tb, slower)
		}
	}
	return s + "."
}

// tpsFigure is a candidate's Total TPS as the report shows it everywhere a
// decision rests on it: the mean of its repeats ± half their range when it
// ran more than once, so the figure shown is the figure compared.
func tpsFigure(c Candidate) string {
	if c.Runs > 1 {
		return fmt.Sprintf("%.2f ± %.2f", c.Metrics.TotalTPS, c.Spread)
	}
	return fmt.Sprintf("%.2f", c.Metrics.TotalTPS)
}

// runsNote says how many runs a figure averages, when more than one.
func runsNote(c Candidate) string {
	if c.Runs > 1 {
		return fmt.Sprintf(", mean of %d runs", c.Runs)
	}
	return ""
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
	// repeats lists the stored runs of one configuration on one workload,
	// by repeat index, under repeatGroup's key.
	repeats map[string][]store.Trial
}

func newTrialIndex(ts []store.Trial) trialIndex {
	ix := trialIndex{byKey: make(map[string]store.Trial, len(ts)), repeats: map[string][]store.Trial{}}
	for _, t := range ts {
		ix.byKey[t.Key] = t
		if g, _, ok := repeatGroup(t.Key); ok {
			ix.repeats[g] = append(ix.repeats[g], t)
		}
	}
	for _, g := range ix.repeats {
		sort.SliceStable(g, func(i, j int) bool {
			_, a, _ := repeatGroup(g[i].Key)
			_, b, _ := repeatGroup(g[j].Key)
			return a < b
		})
	}
	return ix
}

// repeatGroup splits a lab trial key, "stage/confighash/workload/rN", into
// the configuration-and-workload part and N. The stage is left out on
// purpose: the lab reuses a stored (config, workload, repeat) whatever stage
// asks for it, so the baseline's first run is "baseline/…/r0" and its
// repeats "engine/…/r1", "engine/…/r2". Other keys (imports) are not grouped.
func repeatGroup(key string) (string, int, bool) {
	i := strings.IndexByte(key, '/')
	j := strings.LastIndex(key, "/r")
	if i < 0 || j <= i {
		return "", 0, false
	}
	n, err := strconv.Atoi(key[j+2:])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return key[i+1 : j], n, true
}

// averageRepeats replaces c's figures with their mean over the stored
// repeats of its configuration and workload, the figure the lab's keep or
// drop decision compared, and records each repeat's Total TPS and the
// spread. The result block stays the first run's, as vLLM printed it.
func (ix trialIndex) averageRepeats(c *Candidate, gpus int) error {
	g, _, ok := repeatGroup(c.Key)
	if !ok || c.Status != "ok" || len(ix.repeats[g]) < 2 {
		return nil
	}
	var runs []Metrics
	for _, t := range ix.repeats[g] {
		if t.Status != "ok" || len(t.Result) == 0 {
			continue
		}
		m, _, err := decodeMetrics(t.Result, trialGPUs(t.Config, gpus))
		if err != nil {
			return fmt.Errorf("trial %s: %w", t.Key, err)
		}
		runs = append(runs, m)
	}
	if len(runs) < 2 {
		return nil
	}
	mean := runs[0]
	avg := func(f func(m *Metrics) *float64) {
		var s float64
		for i := range runs {
			s += *f(&runs[i])
		}
		*f(&mean) = s / float64(len(runs))
	}
	for _, f := range []func(m *Metrics) *float64{
		func(m *Metrics) *float64 { return &m.TotalTPS }, func(m *Metrics) *float64 { return &m.OutputTPS },
		func(m *Metrics) *float64 { return &m.RequestTPS }, func(m *Metrics) *float64 { return &m.MeanTTFTMs },
		func(m *Metrics) *float64 { return &m.MeanTPOTMs }, func(m *Metrics) *float64 { return &m.P99TPOTMs },
		func(m *Metrics) *float64 { return &m.P99TTFTMs }, func(m *Metrics) *float64 { return &m.MeanITLMs },
		func(m *Metrics) *float64 { return &m.DurationS }, func(m *Metrics) *float64 { return &m.TPSPerGPU },
		func(m *Metrics) *float64 { return &m.SuccessRate },
	} {
		avg(f)
	}
	mean.TokensPerUser = 0
	if mean.MeanTPOTMs > 0 {
		mean.TokensPerUser = 1000 / mean.MeanTPOTMs
	}
	lo, hi := runs[0].TotalTPS, runs[0].TotalTPS
	c.Repeats = make([]float64, len(runs))
	for i, m := range runs {
		c.Repeats[i] = m.TotalTPS
		lo, hi = min(lo, m.TotalTPS), max(hi, m.TotalTPS)
	}
	c.Metrics, c.Runs, c.Spread = mean, len(runs), (hi-lo)/2
	return nil
}
