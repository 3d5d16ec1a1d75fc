package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/metrics"
)

// externalSource is a published set of measured results nobody on this
// project made, in the reference's format, with where it came from. None of
// it is fitted: every figure the test prints is held out.
type externalSource struct {
	Provenance struct {
		Repository string   `json:"repository"`
		Commit     string   `json:"commit"`
		Paths      []string `json:"paths"`
		Tables     string   `json:"tables"`
		// Estimated, when set, says which of the reference format's
		// fields the source does not print and how they were derived
		// (token totals from the same client and dataset elsewhere, a
		// duration from totals over throughput). The duration check of
		// TestExternalSourcesWellFormed cannot test a derived duration
		// and is skipped for it.
		Estimated string `json:"estimated,omitempty"`
		// Arrivals says how the source's arrival schedule differs from
		// the Poisson one the scoring runs, when it does.
		Arrivals string `json:"arrivals,omitempty"`
		// Load is "offline" for an offline engine benchmark
		// (`trtllm-bench throughput`, `vllm bench throughput`): its cases
		// are predicted with PredictOffline and its range is
		// OfflineSpan's; "" is a served benchmark.
		Load string `json:"load,omitempty"`
		// Figures names the published figures beyond total tok/s, mean
		// TTFT and mean TPOT that the source prints and the test scores
		// from the predicted run's records (see externalFigures).
		Figures []string `json:"figures,omitempty"`
	} `json:"provenance"`
	Reference
	// extra is each case's published figures that Measured has no field
	// for, by case id.
	extra map[string]externalExtra
}

// externalExtra holds published figures the reference format has no
// field for.
type externalExtra struct {
	// MeanLatencyS is the mean request latency (guidellm's "Mean
	// Latency(s)").
	MeanLatencyS float64 `json:"mean_latency_s,omitempty"`
	// MedianE2EMs is the median end-to-end request latency
	// (sglang.bench_serving's "Median E2E Latency").
	MedianE2EMs float64 `json:"median_e2e_ms,omitempty"`
}

// externalFigure is one published figure the reference format does not
// score, with how to read it from a case and from a predicted run.
type externalFigure struct {
	name     string
	measured func(c Case, x externalExtra) float64
	// predicted reads the figure from the predicted run's successful
	// records and its duration.
	predicted func(recs []metrics.Record, dur float64) float64
}

// externalFigures are the figures a source's provenance may name, each
// read from the predicted run's metrics as vllm bench computes them
// (metrics.Compute: medians as numpy's, TPOT over requests with more than
// one token).
var externalFigures = map[string]externalFigure{
	"output_tps": {"output tok/s", func(c Case, _ externalExtra) float64 { return c.Measured.OutputTPS },
		func(recs []metrics.Record, dur float64) float64 { return externalMetrics(recs, dur).OutputThroughput }},
	"mean_latency_s": {"mean latency s", func(_ Case, x externalExtra) float64 { return x.MeanLatencyS },
		func(recs []metrics.Record, dur float64) float64 { return externalMetrics(recs, dur).MeanE2ELMs / 1000 }},
	"median_e2e_ms": {"median E2E ms", func(_ Case, x externalExtra) float64 { return x.MedianE2EMs },
		func(recs []metrics.Record, dur float64) float64 { return externalMetrics(recs, dur).MedianE2ELMs }},
	"median_ttft_ms": {"median TTFT ms", func(c Case, _ externalExtra) float64 { return c.Measured.MedianTTFT },
		func(recs []metrics.Record, dur float64) float64 { return externalMetrics(recs, dur).MedianTTFTMs }},
	"median_tpot_ms": {"median TPOT ms", func(c Case, _ externalExtra) float64 { return c.Measured.MedianTPOT },
		func(recs []metrics.Record, dur float64) float64 { return externalMetrics(recs, dur).MedianTPOTMs }},
	"median_itl_ms": {"median ITL ms", func(c Case, _ externalExtra) float64 { return c.Measured.MedianITLMs },
		func(recs []metrics.Record, dur float64) float64 { return externalMetrics(recs, dur).MedianITLMs }},
}

// externalMetrics is the predicted run's figures as the benchmark clients
// compute them.
func externalMetrics(recs []metrics.Record, dur float64) *metrics.Result {
	return metrics.Compute(recs, dur, metrics.Options{})
}

// TestExternalFiguresFromRecords checks each further figure's reading of a
// predicted run against values worked by hand, so a source's medians are
// compared like for like.
func TestExternalFiguresFromRecords(t *testing.T) {
	recs := []metrics.Record{
		// TTFT, latency in seconds; TPOT = (latency - TTFT) / (out - 1).
		{Success: true, OutputLen: 11, TTFT: 0.1, Latency: 1.1, ITL: []float64{0.1, 0.1}}, // TPOT 100 ms
		{Success: true, OutputLen: 5, TTFT: 0.3, Latency: 0.7, ITL: []float64{0.2}},       // TPOT 100 ms
		{Success: true, OutputLen: 21, TTFT: 0.2, Latency: 4.2, ITL: []float64{0.4, 0.3}}, // TPOT 200 ms
		{Success: true, OutputLen: 1, TTFT: 0.5, Latency: 0.9, ITL: nil},                  // no TPOT (one token: latency - TTFT is no per-token gap)
	}
	for _, tc := range []struct {
		fig  string
		want float64
	}{
		{"output_tps", 38.0 / 2},    // 38 tokens over a 2 s run
		{"mean_latency_s", 6.9 / 4}, // (1.1 + 0.7 + 4.2 + 0.9) / 4
		{"median_e2e_ms", 1000},     // middle two of 0.7, 0.9, 1.1, 4.2 s
		{"median_ttft_ms", 250},     // middle two of 0.1, 0.2, 0.3, 0.5 s
		{"median_tpot_ms", 100},     // 100, 100, 200 ms; the one-token request has none
		{"median_itl_ms", 200},      // 0.1, 0.1, 0.2, 0.3, 0.4 s
	} {
		got := externalFigures[tc.fig].predicted(recs, 2)
		if math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", tc.fig, got, tc.want)
		}
	}
}

// externalSourceFiles lists the held-out sources: every JSON file under
// testdata/external, in name order.
func externalSourceFiles(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "external", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no source under testdata/external")
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	sort.Strings(names)
	return names
}

func loadExternalSource(t *testing.T, name string) *externalSource {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "external", name))
	if err != nil {
		t.Fatal(err)
	}
	var s externalSource
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	// The figures Measured has no field for, read again per case.
	var side struct {
		Cases []struct {
			ID       string        `json:"id"`
			Measured externalExtra `json:"measured"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &side); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	s.extra = map[string]externalExtra{}
	for _, c := range side.Cases {
		s.extra[c.ID] = c.Measured
	}
	return &s
}

// TestExternalSourcesWellFormed checks what the scoring relies on: every
// source names its commit, every case rebuilds its requests with the
// reported totals, ids are unique, every ordering names two cases, every
// figure a source names is one the test can score and each case publishes
// something to score.
func TestExternalSourcesWellFormed(t *testing.T) {
	for _, name := range externalSourceFiles(t) {
		s := loadExternalSource(t, name)
		if len(s.Provenance.Commit) != 40 || s.Provenance.Repository == "" || len(s.Provenance.Paths) == 0 {
			t.Errorf("%s: provenance incomplete: %+v", name, s.Provenance)
		}
		if l := s.Provenance.Load; l != "" && l != "offline" {
			t.Errorf("%s: provenance load %q (want \"\" or \"offline\")", name, l)
		}
		if s.Provenance.Load == "offline" && (len(s.Provenance.Figures) != 1 || s.Provenance.Figures[0] != "output_tps") {
			t.Errorf("%s: an offline source is scored on output tok/s alone; figures %v", name, s.Provenance.Figures)
		}
		for _, f := range s.Provenance.Figures {
			if _, ok := externalFigures[f]; !ok {
				t.Errorf("%s: provenance names figure %q, which the test cannot score", name, f)
			}
		}
		seen := map[string]bool{}
		for _, c := range s.Cases {
			if seen[c.ID] {
				t.Errorf("%s: duplicate case %s", name, c.ID)
			}
			seen[c.ID] = true
			if a := c.Workload.Arrivals; a != "" && a != "constant" || a != "" && !(c.Workload.RequestRate > 0) {
				t.Errorf("%s: %s: arrivals %q at rate %g (want \"\" or \"constant\", and constant only at a finite rate)", name, c.ID, a, c.Workload.RequestRate)
			}
			if c.Measured.TotalInput != c.Workload.TotalInput || c.Measured.TotalOutput != c.Workload.TotalOutput {
				t.Errorf("%s: %s: workload totals %d/%d, measured %d/%d", name, c.ID,
					c.Workload.TotalInput, c.Workload.TotalOutput, c.Measured.TotalInput, c.Measured.TotalOutput)
			}
			scored := c.Measured.TotalTPS > 0 || c.Measured.MeanTTFTMs > 0 || c.Measured.MeanTPOTMs > 0
			for _, f := range s.Provenance.Figures {
				if fig, ok := externalFigures[f]; ok && fig.measured(c, s.extra[c.ID]) > 0 {
					scored = true
				}
			}
			if !scored && c.Exclude == "" {
				t.Errorf("%s: %s publishes no figure the test scores", name, c.ID)
			}
			reqs, err := c.Workload.Requests()
			if err != nil {
				t.Errorf("%s: %s: %v", name, c.ID, err)
				continue
			}
			var in, out int
			for _, r := range reqs {
				in += r.PromptLen
				out += r.OutputLen
			}
			if in != c.Measured.TotalInput || out != c.Measured.TotalOutput {
				t.Errorf("%s: %s: rebuilt %d/%d tokens, reported %d/%d", name, c.ID, in, out, c.Measured.TotalInput, c.Measured.TotalOutput)
			}
			// The report's own throughput must follow from its totals and
			// duration: a transcription slip shows here. A source that
			// prints neither totals nor duration has them derived (said in
			// its provenance), and nothing to check.
			if s.Provenance.Estimated != "" {
				continue
			}
			// guidellm's throughput is over its own window, not the
			// printed duration: 1-3% apart in the 9B latency report's
			// blocks, so a slip there is a larger gap.
			tol := 0.01
			if c.Workload.Client == "guidellm" {
				tol = 0.03
			}
			if c.Measured.TotalTPS > 0 {
				if got := float64(in+out) / c.Measured.Duration; math.Abs(got/c.Measured.TotalTPS-1) > tol {
					t.Errorf("%s: %s: totals over duration give %.1f tok/s, the block says %.1f", name, c.ID, got, c.Measured.TotalTPS)
				}
			}
			if c.Measured.OutputTPS > 0 && c.Measured.Duration > 0 {
				if got := float64(out) / c.Measured.Duration; math.Abs(got/c.Measured.OutputTPS-1) > tol {
					t.Errorf("%s: %s: output over duration gives %.1f tok/s, the block says %.1f", name, c.ID, got, c.Measured.OutputTPS)
				}
			}
		}
		for _, o := range s.Orderings {
			if !seen[o.Better] || !seen[o.Worse] {
				t.Errorf("%s: ordering %s > %s names an unknown case", name, o.Better, o.Worse)
			}
		}
	}
}

// TestExternalSources predicts every held-out case with the embedded
// calibration and prints, per case, predicted against measured throughput,
// TTFT and TPOT with `sim predict`'s range; then per source and per group
// (report, engine, GPU, model) the MAPEs and how many measured values lie
// inside the range, and the published orderings. A figure a source does
// not print is not scored. The further figures a source names in its
// provenance (mean latency, medians, output tok/s) are read from a
// predicted run's records and scored in a second table. Nothing here was
// fitted on: the whole set is held out. Long (every case runs once per
// calibration of the range; about 6.5 minutes on the shared 2-core VM, most
// of it the three offline trtllm-bench files; the served sources alone
// about 20 s): SIM_EXTERNAL_SOURCES=1 runs it, =served the served sources
// (what .ci/run runs), =offline the offline tables, and
// =gpustack,sglang the files whose names contain one of the
// comma-separated parts. Where a kind's whole set ran, its figures are
// held to the bounds below.
func TestExternalSources(t *testing.T) {
	only := os.Getenv("SIM_EXTERNAL_SOURCES")
	if only == "" {
		t.Skip("SIM_EXTERNAL_SOURCES=1 scores the simulator on the held-out published sources (or =name,… the files whose names contain one of them)")
	}
	ShareGPTLengthsPath = filepath.Join(sharedDir(t), "data", "sharegpt", "sharegpt_v3_sample_1000.json")
	coef := DefaultCoefficients()
	// The kernel-table step model (issue 26, behind a switch) is scored
	// too, MAPEs only: its range is not what `sim predict` prints.
	kern, err := LoadCoefficients(kernelCoefficientsFile)
	if err != nil {
		t.Fatal(err)
	}
	type acc struct {
		errs  [3][]float64
		in, n [3]int
		// width is each TPS range's hi/lo: a range that holds everything
		// by being wide says little.
		width []float64
	}
	// add counts each published figure (ok) in the MAPE and, where the
	// range can be compared with it (cov), in the coverage.
	add := func(a *acc, e [3]float64, ok, cov, inside [3]bool) {
		for i := range 3 {
			if !ok[i] {
				continue
			}
			a.errs[i] = append(a.errs[i], math.Abs(e[i]))
			if cov[i] {
				a.n[i]++
				if inside[i] {
					a.in[i]++
				}
			}
		}
	}
	groups, kgroups := map[string]*acc{}, map[string]*acc{}
	group := func(m map[string]*acc, k string) *acc {
		if m[k] == nil {
			m[k] = &acc{}
		}
		return m[k]
	}
	// Further figures, per figure name and group.
	type xacc struct {
		errs     []float64
		signed   []float64
		in, n    int
		hasRange bool
	}
	xgroups := map[string]*xacc{}
	var b, xb strings.Builder
	xb.WriteString("\nfurther published figures (predicted run's records; output tok/s range = the TPS range × the output share):\n| case | figure | measured | predicted (err) | range |\n|---|---|---|---|---|\n")
	// ran and sources count, per kind (offline or not), the sources scored
	// and those there are: the bounds below hold only for a kind's whole set.
	var ran, sources [2]int
	var servedRep, servedReq int
	for _, name := range externalSourceFiles(t) {
		s := loadExternalSource(t, name)
		kind := 0
		if s.Provenance.Load == "offline" {
			kind = 1
		}
		sources[kind]++
		if !externalSelected(only, name, kind == 1) {
			continue
		}
		ran[kind]++
		fmt.Fprintf(&b, "\nsource %s: %s@%s %s\n", name, s.Provenance.Repository, s.Provenance.Commit[:12], strings.Join(s.Provenance.Paths, ", "))
		if s.Provenance.Load == "offline" {
			b.WriteString("offline engine benchmark: output tok/s in the further figures' table\n")
			for _, c := range s.Cases {
				if c.Exclude != "" {
					fmt.Fprintf(&xb, "| %s | excluded: %s |||\n", c.ID, c.Exclude)
					continue
				}
				reqs, err := c.Workload.cachedRequests()
				if err != nil {
					t.Fatal(err)
				}
				meas := c.Measured.OutputTPS
				offline := func(cf *Coefficients) float64 {
					pr, off, err := PredictOffline(c.Params, cf, reqs, c.Workload.MaxConcurrency)
					if err == nil {
						err = pr.Err()
					}
					if err != nil {
						t.Logf("%s: refused: %v", c.ID, err)
						return math.NaN()
					}
					return off.OutputThroughput
				}
				pred, kpred := offline(coef), offline(kern)
				rng, inside, e := "refused", false, 1.0
				if !math.IsNaN(pred) {
					e = pred/meas - 1
					sp, err := OfflineSpan(c.Params, coef, nil, reqs, c.Workload.MaxConcurrency)
					if err != nil {
						t.Fatalf("%s: range: %v", c.ID, err)
					}
					k := float64(c.Workload.TotalOutput) / float64(c.Workload.TotalInput+c.Workload.TotalOutput)
					lo, hi := sp.Lo.TotalTPS*k, sp.Hi.TotalTPS*k
					inside = meas >= lo && meas <= hi
					rng = fmt.Sprintf("%.1f..%.1f", lo, hi)
					if inside {
						rng += " ✓"
					}
					if sp.Borrowed != "" || len(sp.Unseen) > 0 {
						t.Logf("%s: range borrowed %q, unseen %v", c.ID, sp.Borrowed, sp.Unseen)
					}
				}
				fmt.Fprintf(&xb, "| %s | output tok/s (offline; kernel model %+.0f%%) | %.2f | %.2f (%+.0f%%) | %s |\n", c.ID, 100*(kpred/meas-1), meas, pred, 100*e, rng)
				for _, k := range append([]string{"all"}, externalGroupKeys(c)[1:]...) {
					for _, fig := range []string{"output tok/s (offline)", "output tok/s (offline), kernel model"} {
						xa := xgroups[fig+"\x00"+k]
						if xa == nil {
							xa = &xacc{}
							xgroups[fig+"\x00"+k] = xa
						}
						if fig == "output tok/s (offline)" {
							xa.errs = append(xa.errs, math.Abs(e))
							xa.signed = append(xa.signed, e)
							xa.hasRange = true
							xa.n++
							if inside {
								xa.in++
							}
						} else if !math.IsNaN(kpred) {
							xa.errs = append(xa.errs, math.Abs(kpred/meas-1))
							xa.signed = append(xa.signed, kpred/meas-1)
						} else {
							xa.errs = append(xa.errs, 1)
						}
					}
				}
			}
			continue
		}
		b.WriteString("| case | TPS meas | TPS pred (err) | TPS range | TTFT meas | TTFT pred (err) | TTFT range | TPOT meas | TPOT pred (err) | TPOT range | kernel model TPS / TTFT / TPOT err |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		f := Evaluate(&s.Reference, coef)
		kres := map[string]CaseResult{}
		for _, r := range Evaluate(&s.Reference, kern).Results {
			c := r.Case
			kres[c.ID] = r
			if c.Exclude != "" {
				continue
			}
			e, ok := [3]float64{1, 1, 1}, externalPublished(c)
			if r.Err == nil {
				e[0], e[1], e[2] = r.Errors()
			}
			for _, k := range externalGroupKeys(c) {
				add(group(kgroups, k), e, ok, [3]bool{}, [3]bool{})
			}
		}
		for _, r := range f.Results {
			c := r.Case
			if c.Exclude != "" {
				fmt.Fprintf(&b, "| %s | excluded: %s |||||||||\n", c.ID, c.Exclude)
				continue
			}
			keys := externalGroupKeys(c)
			ok := externalPublished(c)
			if r.Err != nil {
				fmt.Fprintf(&b, "| %s | %.0f | refused: %v |||||||\n", c.ID, c.Measured.TotalTPS, r.Err)
				// A refused case counts as 100% off and outside the range,
				// as in the in-sample scoring.
				for _, k := range keys {
					add(group(groups, k), [3]float64{1, 1, 1}, ok, ok, [3]bool{})
				}
				continue
			}
			reqs, err := c.Workload.cachedRequests()
			if err != nil {
				t.Fatal(err)
			}
			load := c.Workload.Load()
			sp, err := PredictSpan(c.Params, coef, nil, reqs, load)
			if err != nil {
				t.Fatalf("%s: range: %v", c.ID, err)
			}
			m := Figures{c.Measured.TotalTPS, c.Measured.MeanTTFTMs, c.Measured.MeanTPOTMs}
			inT, inF, inP := sp.Contains(m)
			e1, e2, e3 := r.Errors()
			// The range's TPOT is vllm bench's per-token one; a guidellm
			// case's TPOT is TTFT over output tokens, which it does not
			// bound.
			cov := ok
			cov[2] = ok[2] && c.Workload.Client != "guidellm"
			cell := func(meas, pred, e, lo, hi float64, in, pub, covered bool) string {
				if !pub {
					return "– | – | –"
				}
				mark := ""
				if in && covered {
					mark = " ✓"
				}
				rng := fmt.Sprintf("%.1f..%.1f%s", lo, hi, mark)
				if !covered {
					rng = "n/a (guidellm TPOT)"
				}
				return fmt.Sprintf("%.1f | %.1f (%+.0f%%) | %s", meas, pred, 100*e, rng)
			}
			kc := "refused"
			if ok == [3]bool{} {
				// Only further figures (scored below) are published.
				kc = "–"
			} else if kr := kres[c.ID]; kr.Err == nil {
				a, b, c := kr.Errors()
				kc = fmt.Sprintf("%+.0f%% / %+.0f%% / %+.0f%%", 100*a, 100*b, 100*c)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", c.ID,
				cell(m.TotalTPS, r.TotalTPS, e1, sp.Lo.TotalTPS, sp.Hi.TotalTPS, inT, ok[0], cov[0]),
				cell(m.MeanTTFTMs, r.MeanTTFTMs, e2, sp.Lo.MeanTTFTMs, sp.Hi.MeanTTFTMs, inF, ok[1], cov[1]),
				cell(m.MeanTPOTMs, r.MeanTPOTMs, e3, sp.Lo.MeanTPOTMs, sp.Hi.MeanTPOTMs, inP, ok[2], cov[2]), kc)
			if sp.Borrowed != "" || len(sp.Unseen) > 0 {
				t.Logf("%s: range borrowed %q, unseen %v", c.ID, sp.Borrowed, sp.Unseen)
			}
			for _, k := range keys {
				add(group(groups, k), [3]float64{e1, e2, e3}, ok, cov, [3]bool{inT, inF, inP})
				if ok[0] {
					group(groups, k).width = append(group(groups, k).width, sp.Hi.TotalTPS/sp.Lo.TotalTPS)
				}
			}
			if len(s.Provenance.Figures) == 0 {
				continue
			}
			pr, err := PredictWith(c.Params, coef, reqs, load)
			if err != nil {
				t.Fatalf("%s: %v", c.ID, err)
			}
			var recs []metrics.Record
			var in, out float64
			for _, rec := range pr.Records {
				if rec.Success {
					recs = append(recs, rec)
					in += float64(rec.PromptLen)
					out += float64(rec.OutputLen)
				}
			}
			for _, fn := range s.Provenance.Figures {
				fig := externalFigures[fn]
				meas := fig.measured(c, s.extra[c.ID])
				if meas <= 0 {
					continue
				}
				pred := fig.predicted(recs, pr.Duration)
				e := pred/meas - 1
				rng, inside, hasRange := "–", false, false
				if fn == "output_tps" && in+out > 0 {
					lo, hi := sp.Lo.TotalTPS*out/(in+out), sp.Hi.TotalTPS*out/(in+out)
					inside, hasRange = meas >= lo && meas <= hi, true
					rng = fmt.Sprintf("%.1f..%.1f", lo, hi)
					if inside {
						rng += " ✓"
					}
				}
				fmt.Fprintf(&xb, "| %s | %s | %.2f | %.2f (%+.0f%%) | %s |\n", c.ID, fig.name, meas, pred, 100*e, rng)
				for _, k := range append([]string{"all"}, keys[1:]...) {
					xa := xgroups[fig.name+"\x00"+k]
					if xa == nil {
						xa = &xacc{}
						xgroups[fig.name+"\x00"+k] = xa
					}
					xa.errs = append(xa.errs, math.Abs(e))
					xa.signed = append(xa.signed, e)
					if hasRange {
						xa.hasRange = true
						xa.n++
						if inside {
							xa.in++
						}
					}
				}
			}
		}
		b.WriteString("\npublished orderings (total tok/s; required when the published gap > 3%):\n")
		for _, o := range f.Orderings {
			fmt.Fprintf(&b, "  %s > %s (%s): measured %+.1f%%, predicted %+.1f%%, required %v, reproduced %v\n",
				o.Better, o.Worse, o.Why, 100*o.MeasuredGap, 100*o.PredictedGap, o.Required, o.Reproduced)
		}
		rep, req := f.RequiredOrderings()
		fmt.Fprintf(&b, "required orderings reproduced: %d of %d\n", rep, req)
		servedRep += rep
		servedReq += req
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pct := func(v []float64) string {
		if len(v) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f%%", 100*meanOf(v))
	}
	b.WriteString("\n| group (all held out) | cases | TPS MAPE | TTFT MAPE | TPOT MAPE | TPS in range | TTFT in range | TPOT in range | median TPS range hi/lo |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range keys {
		a := groups[k]
		if len(a.errs[0])+len(a.errs[1])+len(a.errs[2]) == 0 {
			continue
		}
		w := "–"
		if len(a.width) > 0 {
			sort.Float64s(a.width)
			w = fmt.Sprintf("%.1f×", a.width[len(a.width)/2])
		}
		n := max(len(a.errs[0]), len(a.errs[1]), len(a.errs[2]))
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %d/%d | %d/%d | %d/%d | %s |\n", k, n,
			pct(a.errs[0]), pct(a.errs[1]), pct(a.errs[2]), a.in[0], a.n[0], a.in[1], a.n[1], a.in[2], a.n[2], w)
	}
	b.WriteString("\nkernel-table step model (coefficients_kernels.json), same cases:\n| group (all held out) | cases | TPS MAPE | TTFT MAPE | TPOT MAPE |\n|---|---|---|---|---|\n")
	for _, k := range keys {
		a := group(kgroups, k)
		if len(a.errs[0])+len(a.errs[1])+len(a.errs[2]) == 0 {
			continue
		}
		n := max(len(a.errs[0]), len(a.errs[1]), len(a.errs[2]))
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", k, n, pct(a.errs[0]), pct(a.errs[1]), pct(a.errs[2]))
	}
	if len(xgroups) > 0 {
		b.WriteString(xb.String())
		xkeys := make([]string, 0, len(xgroups))
		for k := range xgroups {
			xkeys = append(xkeys, k)
		}
		sort.Strings(xkeys)
		b.WriteString("\n| further figure | group | cases | MAPE | mean signed error | in range |\n|---|---|---|---|---|---|\n")
		for _, k := range xkeys {
			xa := xgroups[k]
			fig, grp, _ := strings.Cut(k, "\x00")
			rng := "–"
			if xa.hasRange {
				rng = fmt.Sprintf("%d/%d", xa.in, xa.n)
			}
			sg := "–"
			if len(xa.signed) > 0 {
				sg = fmt.Sprintf("%+.1f%%", 100*meanOf(xa.signed))
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %.1f%% | %s | %s |\n", fig, grp, len(xa.errs), 100*meanOf(xa.errs), sg, rng)
		}
	}
	t.Log("\n" + b.String())
	// The held-out figures docs/sim-fidelity.md states ("Where it
	// stands"), as ceilings and floors with a little room, checked where a
	// kind's every source ran: a change that loses held-out accuracy fails
	// here rather than in a later session's report.
	if ran[0] == sources[0] {
		a := groups["all"]
		if a == nil {
			t.Fatal("every served source ran, and no case was scored")
		}
		if m := meanOf(a.errs[0]); m > externalServedTPSMAPE {
			t.Errorf("served total tok/s MAPE %.1f%%, above %.1f%%", 100*m, 100*externalServedTPSMAPE)
		}
		for i, fig := range []string{"total tok/s", "mean TTFT", "mean TPOT"} {
			if a.n[i] == 0 || float64(a.in[i]) < externalServedCoverage[i]*float64(a.n[i]) {
				t.Errorf("served %s: %d of %d inside the range, below %.0f%%", fig, a.in[i], a.n[i], 100*externalServedCoverage[i])
			}
		}
		if servedReq-servedRep > externalOrderingsMissed {
			t.Errorf("served sources: %d of %d required orderings reproduced, more than %d missed", servedRep, servedReq, externalOrderingsMissed)
		}
	}
	if ran[1] == sources[1] {
		xa := xgroups["output tok/s (offline)\x00all"]
		switch {
		case xa == nil || xa.n == 0:
			t.Error("every offline source ran, and no row was scored")
		case meanOf(xa.errs) > externalOfflineMAPE:
			t.Errorf("offline output tok/s MAPE %.1f%%, above %.1f%%", 100*meanOf(xa.errs), 100*externalOfflineMAPE)
		case float64(xa.in) < externalOfflineCoverage*float64(xa.n):
			t.Errorf("offline output tok/s: %d of %d inside the range, below %.0f%%", xa.in, xa.n, 100*externalOfflineCoverage)
		}
	}
}

// The bounds TestExternalSources holds a kind's whole set to (2026-12-02:
// served total tok/s 14.1% MAPE, in range 92/92, TTFT 77/92, TPOT 74/82,
// 25 of 31 required orderings; offline 15.9% over 232 rows, 232/232). The
// TTFT and TPOT ranges narrowed that day (87/92 and 79/82 on 2026-12-01):
// the leave-one-model-out spreads they are widened by had been inflated by
// the 9B report's guidellm TPOT read as TTFT per token, and with the
// reading fixed SGLang's small-batch TTFT and vLLM's weight-only TPOT fall
// outside (docs/sim-fidelity.md).
const (
	externalServedTPSMAPE   = 0.145
	externalOrderingsMissed = 6
	externalOfflineMAPE     = 0.17
	externalOfflineCoverage = 0.97
)

var externalServedCoverage = [3]float64{0.95, 0.82, 0.88}

// externalSelected is whether SIM_EXTERNAL_SOURCES (only) selects the
// source file name: "1" all of them, "served" every source measured
// through a serving benchmark, "offline" every offline engine table, and
// any other comma-separated part the files whose names contain it.
func externalSelected(only, name string, offline bool) bool {
	for _, f := range strings.Split(only, ",") {
		switch f = strings.TrimSpace(f); {
		case f == "1", f == "served" && !offline, f == "offline" && offline:
			return true
		case f != "" && f != "served" && f != "offline" && strings.Contains(name, f):
			return true
		}
	}
	return false
}

// externalPublished says which of total tok/s, mean TTFT and mean TPOT a case
// prints (and, for TPOT, whether it is comparable).
func externalPublished(c Case) [3]bool {
	m := c.Measured
	return [3]bool{m.TotalTPS > 0, m.MeanTTFTMs > 0, m.MeanTPOTMs > 0 && c.NoTPOT == ""}
}

// externalGroupKeys are the groups a case is scored in.
func externalGroupKeys(c Case) []string {
	return []string{"all", "report " + c.Report, "engine " + c.Params.Engine, "GPU " + c.Params.GPU, "model " + modelOf(c)}
}

func TestExternalSelected(t *testing.T) {
	for _, tc := range []struct {
		only, name string
		offline    bool
		want       bool
	}{
		{"1", "gpustack-a100.json", false, true},
		{"1", "trtllm-bench-llama31-70b-fp8-tp8-h100.json", true, true},
		{"served", "gpustack-a100.json", false, true},
		{"served", "trtllm-bench-llama31-70b-fp8-tp8-h100.json", true, false},
		{"offline", "trtllm-bench-llama31-70b-fp8-tp8-h100.json", true, true},
		{"offline", "gpustack-a100.json", false, false},
		{"gpustack,sglang", "sglang-v030-vllm-v060-llama31.json", false, true},
		{"gpustack, sglang", "sglang-v030-vllm-v060-llama31.json", false, true},
		{"8b-h100", "gpustack-a100.json", false, false},
		// A source named like a keyword is not selected by it.
		{"served", "served-table.json", true, false},
		{",", "gpustack-a100.json", false, false},
	} {
		if got := externalSelected(tc.only, tc.name, tc.offline); got != tc.want {
			t.Errorf("externalSelected(%q, %q, offline %v) = %v, want %v", tc.only, tc.name, tc.offline, got, tc.want)
		}
	}
}
