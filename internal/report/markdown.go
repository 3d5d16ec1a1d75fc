package report

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/objective"
)

// WriteMarkdown writes the report in the reference reports' structure:
// Conclusion, Optimization Objective, Experimental Setup, Experiment
// Results, Summary of Optimization Options, Other Benchmark Cases, then
// perflab's additions (noise, configs not kept, search, warnings).
func WriteMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	p("# %s\n\n", r.Title)
	p("## Conclusion\n\n")
	for _, c := range r.Charts {
		if c.Title == chartBaselineVsOptimized {
			p("![%s](%s)\n\n", c.Title, c.PNG)
		}
	}
	if r.Recommended != nil {
		p("Recommended configuration for optimizing %s of %s on %s:\n\n", objective.WordsOf(r.Objective).Noun, r.Model, gpuPhrase(r))
		p("```bash\n%s\n```\n\n", r.Recommended.Command)
		if a := r.Recommended.Assumptions; len(a) > 0 {
			p("Its figures are simulated, and the simulator assumed, not measured: %s. Measure it before relying on the gain.\n\n", strings.Join(a, "; "))
		}
	} else if anyOK(r) {
		// Imported results, or a lab that stopped before deciding: results
		// exist, but no decision was recorded to recommend from.
		p("No lab decision was recorded for these results, so there is no recommendation; every stored result is listed under Experiment Results.\n\n")
	} else {
		p("No configuration finished successfully, so there is no recommendation.\n\n")
	}
	if len(r.Cases) > 0 {
		p("Comparison of benchmark results before and after optimization:\n\n")
		// The baseline is the spec's first engine at its defaults, which
		// is vLLM in the reference reports but need not be.
		who := ""
		if r.Baseline != nil && r.Baseline.Engine != "" {
			who = engineTitle(r.Baseline.Engine) + " "
		}
		p("| Benchmark Case | baseline (%swithout any optimizations) | Optimized |\n", who)
		p("|----------|-------------------------------------------|-----------|\n")
		for _, c := range r.Cases {
			p("| **%s** | %s | %s |\n", c.Workload, caseCell(c.Baseline, "", r.NoiseFloor), caseCell(c.Optimized, changeTag(c), r.NoiseFloor))
		}
		p("\n")
	}
	if lo, hi := floorRange(r); hi > 0 {
		// Each decision used its own stage's floor; the ± on single runs
		// above is the largest of them.
		if lo < hi {
			p("Each change was kept only when its gain beat the run-to-run noise floor measured in its own stage, from repeated runs of the incumbent and the best candidate: %.2f%% to %.2f%% here (each decision below gives its own). The ± on single-run cases is the largest, ±%.2f%%.\n\n", 100*lo, 100*hi, 100*hi)
		} else {
			p("Each change was kept only when its gain beat the run-to-run noise floor of %.2f%% measured from repeated runs of the incumbent and the best candidate; the ± on single-run cases is that floor.\n\n", 100*hi)
		}
	}
	if r.Provenance != "" {
		// Said here, next to the numbers, and not only under the setup.
		p("Runtime `%s`: these figures are %s.\n\n", r.Runtime, r.Provenance)
	}

	p("## Optimization Objective\n\n%s\n\n", objective.WordsOf(r.Objective).Sentence)

	p("## Experimental Setup\n\n### Model\n\n%s\n\n### Hardware\n\n%s\n\n", nonEmpty(r.Model, notRecorded), hardwareLine(r))
	p("### Engine Version\n\n")
	if len(r.Engines) == 0 {
		p("%s\n", notRecorded)
	}
	for _, e := range r.Engines {
		p("- %s: v%s\n", engineTitle(e.Name), strings.TrimPrefix(e.Version, "v"))
	}
	if r.Runtime != "" {
		p("\nRuntime: `%s`%s\n", r.Runtime, runtimeNote(r.Provenance))
		if r.EngineStarts > 0 {
			how := "one server per configuration, serving its repeats and workloads with its prefix cache reset between them (TensorRT-LLM: each measurement's requests salted their own way); the noise floor is repeat-to-repeat on one server"
			if r.FreshStarts {
				how = "a server started for every measurement; the noise floor includes start-to-start variance"
			}
			p("\nEngine servers started: %d, GPU-hours: %.2f (starts and benchmarks of every trial; %s).\n", r.EngineStarts, r.GPUHours, how)
		}
	}
	p("\n### Benchmark Dataset\n\n")
	if len(r.Workloads) == 0 {
		p("%s\n", notRecorded)
	}
	for i, wl := range r.Workloads {
		p("%d. %s: %s\n", i+1, wl.Name, wl.Description)
	}
	p("\n### Benchmark Script\n\n")
	if len(r.Workloads) == 0 {
		p("%s\n\n", notRecorded)
	} else {
		p("Each case is run with `perflab bench`; the `vllm bench serve` command beside it measures the same thing.\n\n")
	}
	for _, wl := range r.Workloads {
		p("```bash\n# %s\n%s\n# vLLM equivalent\n%s\n```\n\n", wl.Name, wl.Perflab, wl.VLLM)
	}

	p("## Experiment Results\n\n")
	for _, st := range r.Stages {
		p("### %d. %s\n\n", st.Index, st.Title)
		shown := st.Candidates
		if st.Skipped != "" && len(shown) == 0 {
			// Nothing ran: reprinting the incumbent's figures read as a
			// result of this stage.
			if st.Incumbent != nil {
				p("Nothing ran; the incumbent stays %s.\n\n", st.Incumbent.Name)
			}
			continue
		}
		if st.Incumbent != nil && !containsKey(shown, st.Incumbent.Key) {
			inc := *st.Incumbent
			inc.Name += " (incumbent)"
			inc.Decision = ""
			shown = append([]Candidate{inc}, shown...)
		}
		for _, c := range shown {
			p("#### %s\n\n", c.Name)
			if c.Status == statusNotRun {
				p("Not run: %s\n\n", nonEmpty(c.Reason, "the lab did not launch it"))
				continue
			}
			if c.Command != "" {
				p("Serving script:\n\n```bash\n%s\n```\n\n", c.Command)
			} else {
				p("Serving script: not recorded.\n\n")
			}
			if c.Status != "ok" {
				p("Failed: %s — %s\n\n", nonEmpty(c.Failure, "failed"), firstLine(c.Reason))
				continue
			}
			if c.Block != "" {
				label := "Benchmark result"
				if c.Runs > 1 {
					label += fmt.Sprintf(" (first of %d runs; the figures compared are their mean)", c.Runs)
				}
				p("%s:\n\n```\n%s```\n\n", label, ensureNL(c.Block))
			}
			if len(c.Assumptions) > 0 {
				p("The simulator assumed, not measured:\n\n")
				for _, a := range c.Assumptions {
					p("- %s\n", a)
				}
				p("\n")
			}
			if len(c.Warnings) > 0 {
				p("Warnings on this result:\n\n")
				for _, w := range c.Warnings {
					p("- %s\n", w)
				}
				p("\n")
			}
			if c.Runs > 1 {
				p("Repeats (Total TPS): %s; mean %s tok/s (± half the range)\n\n", floats(c.Repeats), tpsFigure(c))
			} else if len(c.Repeats) > 1 {
				p("Repeats (Total TPS): %s\n\n", floats(c.Repeats))
			}
			if c.Decision != "" {
				p("Decision: %s\n\n", c.Decision)
			}
		}
		if st.Ranking != "" {
			p("Result: %s\n\n", st.Ranking)
		}
		if st.Summary != "" {
			p("- Summary: %s\n\n", st.Summary)
		}
	}

	p("### Summary of Optimization Options\n\n")
	p("| Optimization Option | Throughput Improvement | Kept configuration | Notes |\n")
	p("|---|---|---|---|\n")
	for _, st := range r.Stages {
		gain, kept := "-", "-"
		if st.Winner != nil && st.Incumbent != nil && st.Winner.Key != st.Incumbent.Key {
			gain, kept = pct(st.Gain), st.Winner.Name
		}
		p("| %s | %s | %s | %s |\n", st.Name, gain, kept, stageNotes(st))
	}
	if s := r.Search; s.tookLead() {
		// The recommendation came from past the stages: say so here, or
		// the table would end on a configuration that is not the one
		// recommended.
		p("| joint search (beyond the stages) | %s | %s | took the lead from %s (%.2f → %.2f %s) |\n",
			pctOf(rel(s.GreedyBest, s.FinalBest)), s.FinalConfig, s.GreedyConfig, s.GreedyBest, s.FinalBest, r.Unit)
	}
	p("\n")

	if len(r.Cases) > 1 {
		p("### Other Benchmark Cases\n\nThe optimized configuration was also benchmarked on other workloads to see whether it generalizes.\n\n")
		for _, c := range r.Cases[1:] {
			p("#### %s\n\n", c.Workload)
			for _, side := range []struct {
				label string
				c     *Candidate
			}{{"Baseline", c.Baseline}, {"Optimized", c.Optimized}} {
				if side.c == nil {
					continue
				}
				if strings.Contains(side.c.Command, "\n") {
					// A script that writes an options file first reads as one.
					p("%s:\n\n```bash\n%s\n```\n\n", side.label, side.c.Command)
				} else {
					p("%s (`%s`):\n\n", side.label, side.c.Command)
				}
				if side.c.Status == statusNotRun {
					p("Not run: %s\n\n", nonEmpty(side.c.Reason, "the lab did not launch it"))
				} else if side.c.Status != "ok" {
					p("Failed: %s — %s\n\n", nonEmpty(side.c.Failure, "failed"), firstLine(side.c.Reason))
				} else if side.c.Block != "" {
					p("```\n%s```\n\n", ensureNL(side.c.Block))
				}
			}
		}
	}

	writeLoadSection(p, r)
	p("## Beyond the reference method\n\n")
	var notKept []Candidate
	for _, c := range r.Tried {
		if !c.Kept {
			notKept = append(notKept, c)
		}
	}
	if len(notKept) > 0 {
		p("### Configurations tried and not kept\n\n| Stage | Configuration | Total TPS | Mean TPOT (ms) | Why not kept |\n|---|---|---|---|---|\n")
		for _, c := range notKept {
			tps, tpot := "-", "-"
			if c.Status == "ok" {
				tps, tpot = tpsFigure(c), fmt.Sprintf("%.2f", c.Metrics.MeanTPOTMs)
			}
			p("| %s | %s | %s | %s | %s |\n", c.Stage, c.Name, tps, tpot, nonEmpty(c.Decision, nonEmpty(c.Failure, "not better")))
		}
		p("\n")
	}
	if s := r.Search; s != nil {
		p("### Search beyond the greedy pass\n\n")
		p("The staged (greedy) pass reached %.2f %s; the simulator-guided joint search ended at %.2f %s (%s) after %d trials in all.\n", s.GreedyBest, nonEmpty(r.Unit, "tok/s"), s.FinalBest, nonEmpty(r.Unit, "tok/s"), pctOf(rel(s.GreedyBest, s.FinalBest)), s.Trials)
		if s.GridTrials > 0 {
			p("An exhaustive grid of %d configurations peaks at %.2f tok/s (%s); the lab's winner is within %.2f%% of it using %.0f%% of the grid's trials.\n",
				s.GridTrials, s.GridBest, s.GridBestConfig, 100*(s.GridBest-s.FinalBest)/s.GridBest, 100*float64(s.Trials)/float64(s.GridTrials))
		}
		if s.Note != "" {
			p("%s\n", s.Note)
		}
		if s.LeftOut != "" {
			p("%s.\n", s.LeftOut)
		}
		p("\n")
	}
	if em := engineMetricsRows(r); len(em) > 0 {
		p("### Engine metrics at the end of each run\n\n| Configuration | KV-cache usage | Preemptions | Running | Waiting |\n|---|---|---|---|---|\n")
		for _, row := range em {
			p("%s\n", row)
		}
		p("\n")
	}
	for _, c := range r.Charts {
		if c.Title != chartBaselineVsOptimized && c.Title != chartLoadTTFT && c.Title != chartLoadTPOT {
			p("![%s](%s)\n\n", c.Title, c.PNG)
		}
	}
	if len(r.Warnings) > 0 {
		p("### Warnings\n\n")
		for _, w := range r.Warnings {
			p("- %s\n", w)
		}
		p("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func anyOK(r *Report) bool {
	for _, st := range r.Stages {
		for _, c := range st.Candidates {
			if c.Status == "ok" {
				return true
			}
		}
	}
	return false
}

func caseCell(c *Candidate, tag string, noise float64) string {
	if c == nil {
		return "-"
	}
	if c.Status == statusNotRun {
		return "not run"
	}
	if c.Status != "ok" {
		return "failed: " + nonEmpty(c.Failure, "error")
	}
	// A mean of repeats carries its own spread; a single run the measured
	// noise floor as its band.
	fig := fmt.Sprintf("%.2f", c.Metrics.TotalTPS)
	if c.Runs > 1 {
		fig = fmt.Sprintf("%s (mean of %d runs)", tpsFigure(*c), c.Runs)
	} else if noise > 0 {
		fig += fmt.Sprintf(" ±%.1f%%", 100*noise)
	}
	s := fmt.Sprintf("Total TPS: %s%s<br>Mean TPOT(ms): %.2f", fig, tag, c.Metrics.MeanTPOTMs)
	if r := c.Metrics.SuccessRate; r > 0 && r < 1 {
		s += fmt.Sprintf("<br>Success rate: %.1f%%", 100*r)
	}
	return s
}

func changeTag(c Case) string {
	if c.Baseline == nil || c.Optimized == nil || c.Baseline.Status != "ok" || c.Optimized.Status != "ok" || c.Change == nil {
		return ""
	}
	s := " (" + pct(*c.Change)
	if c.PerGPU {
		s += " per GPU"
	}
	return s + ")"
}

func stageNotes(st Stage) string {
	var notes []string
	for _, c := range st.Candidates {
		if c.Kept || (st.Incumbent != nil && c.Key == st.Incumbent.Key) {
			continue
		}
		if c.Decision != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", c.Name, c.Decision))
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return strings.ReplaceAll(strings.Join(notes, "; "), "|", "\\|")
}

// engineGauges are the names each engine gives what the engine-metrics
// table shows, in the order looked up: vLLM's (V1, then the deprecated
// KV name), SGLang's (python/sglang/srt/metrics/collector.py) and
// trtllm-serve's (tensorrt_llm/metrics/collector.py). A figure the
// engine does not export shows as "–".
var engineGauges = struct{ kv, preempt, running, waiting []string }{
	kv:      []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage", "trtllm_kv_cache_utilization"},
	preempt: []string{"vllm:num_preemptions_total"},
	running: []string{"vllm:num_requests_running", "sglang:num_running_reqs", "trtllm_num_requests_running"},
	waiting: []string{"vllm:num_requests_waiting", "sglang:num_queue_reqs", "trtllm_num_requests_waiting"},
}

func firstMetric(m map[string]float64, names []string) (float64, bool) {
	for _, n := range names {
		if v, ok := m[n]; ok {
			return v, true
		}
	}
	return 0, false
}

func engineMetricsRows(r *Report) []string {
	var rows []string
	// The baseline is not among Tried; it ran on a server too.
	all := r.Tried
	if r.Baseline != nil && !slices.ContainsFunc(r.Tried, func(c Candidate) bool { return c.Key == r.Baseline.Key }) {
		all = append([]Candidate{*r.Baseline}, r.Tried...)
	}
	for _, c := range all {
		m := c.EngineMetrics
		if len(m) == 0 {
			continue
		}
		kv, ok := firstMetric(m, engineGauges.kv)
		if !ok {
			continue // no figure of the table's: another exposition
		}
		count := func(names []string) string {
			if v, ok := firstMetric(m, names); ok {
				return fmt.Sprintf("%.0f", v)
			}
			return "–"
		}
		rows = append(rows, fmt.Sprintf("| %s | %.1f%% | %s | %s | %s |", c.Name, 100*kv,
			count(engineGauges.preempt), count(engineGauges.running), count(engineGauges.waiting)))
	}
	sort.Strings(rows)
	return rows
}

// notRecorded stands in for setup facts the results do not carry
// (imported files name no model, GPU or engine).
const notRecorded = "Not recorded."

func hardwareLine(r *Report) string {
	switch {
	case r.GPU == "":
		return notRecorded
	case r.GPUs < 1:
		return "NVIDIA " + r.GPU + " GPUs (count not recorded)."
	case r.GPUs == 1:
		return "A single NVIDIA " + r.GPU + " GPU."
	}
	return fmt.Sprintf("%d× NVIDIA %s GPUs.", r.GPUs, r.GPU)
}

func gpuPhrase(r *Report) string {
	switch {
	case r.GPU == "":
		return "unrecorded hardware"
	case r.GPUs < 1:
		return "NVIDIA " + r.GPU
	}
	return fmt.Sprintf("%d× NVIDIA %s", r.GPUs, r.GPU)
}

// runtimeNote says where a run's figures come from ("" for GPU
// measurements).
func runtimeNote(provenance string) string {
	if provenance != "" {
		return " — figures are " + provenance + "."
	}
	return ""
}

func engineTitle(name string) string { return engine.DisplayName(name) }

func floats(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ", ")
}

func ensureNL(s string) string {
	if strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// floorRange is the smallest and largest noise floor the decisions used
// (0, 0 when none was measured).
func floorRange(r *Report) (lo, hi float64) {
	for _, st := range r.Stages {
		if f := st.NoiseFloor; f > 0 {
			if lo == 0 || f < lo {
				lo = f
			}
			hi = max(hi, f)
		}
	}
	if r.NoiseFloor > hi {
		hi = r.NoiseFloor
	}
	if lo == 0 {
		lo = hi
	}
	return lo, hi
}
