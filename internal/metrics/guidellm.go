package metrics

import (
	"encoding/json"
	"fmt"
	"math"
)

// guidellm names its percentiles p001 (0.1th) … p999 (99.9th).
var guidellmPercentiles = []struct {
	key string
	p   float64
}{
	{"p001", 0.1}, {"p01", 1}, {"p05", 5}, {"p10", 10}, {"p25", 25}, {"p50", 50},
	{"p75", 75}, {"p90", 90}, {"p95", 95}, {"p99", 99}, {"p999", 99.9},
}

// gDist is one guidellm DistributionSummary (the fields perflab reads).
type gDist struct {
	Mean        *float64           `json:"mean"`
	Median      *float64           `json:"median"`
	StdDev      *float64           `json:"std_dev"`
	Max         *float64           `json:"max"`
	Count       *float64           `json:"count"`
	TotalSum    *float64           `json:"total_sum"`
	Percentiles map[string]float64 `json:"percentiles"`
}

// gStatus is guidellm's StatusDistributionSummary.
type gStatus struct {
	Successful *gDist `json:"successful"`
}

type gTotals struct {
	Successful float64 `json:"successful"`
	Incomplete float64 `json:"incomplete"`
	Errored    float64 `json:"errored"`
	Total      float64 `json:"total"`
}

type gBenchmark struct {
	Duration      *float64 `json:"duration"`
	StartTime     *float64 `json:"start_time"`
	EndTime       *float64 `json:"end_time"`
	RequestTotals *gTotals `json:"request_totals"`
	Metrics       struct {
		RequestTotals          *gTotals `json:"request_totals"`
		RequestsPerSecond      *gStatus `json:"requests_per_second"`
		RequestConcurrency     *gStatus `json:"request_concurrency"`
		RequestLatency         *gStatus `json:"request_latency"`
		PromptTokenCount       *gStatus `json:"prompt_token_count"`
		OutputTokenCount       *gStatus `json:"output_token_count"`
		TimeToFirstTokenMs     *gStatus `json:"time_to_first_token_ms"`
		TimePerOutputTokenMs   *gStatus `json:"time_per_output_token_ms"`
		InterTokenLatencyMs    *gStatus `json:"inter_token_latency_ms"`
		OutputTokensPerSecond  *gStatus `json:"output_tokens_per_second"`
		TokensPerSecond        *gStatus `json:"tokens_per_second"`
		TimeToFirstOutputToken *gStatus `json:"time_to_first_output_token_ms"`
	} `json:"metrics"`
	Config   json.RawMessage `json:"config"`
	Args     json.RawMessage `json:"args"`
	Strategy json.RawMessage `json:"strategy"`
}

// ParseGuidellm reads a guidellm benchmarks report (the JSON GPUStack's
// benchmark runner saves: {"benchmarks": [...]}, a bare list of benchmarks,
// or one benchmark object) and returns one Result per benchmark.
//
// guidellm measures differently from vLLM, and the mapping says so in each
// result's warnings:
//   - throughputs are recomputed as vLLM defines them (count / duration);
//     guidellm's own rate-distribution means are kept in Extra
//     (guidellm_requests_per_second_mean, guidellm_output_tokens_per_second_mean,
//     guidellm_tokens_per_second_mean);
//   - guidellm's inter_token_latency_ms is, per request, (last−first)/(n−1):
//     vLLM's TPOT formula. It becomes our TPOT and also our ITL (its
//     token-weighted mean equals vLLM's mean ITL when each chunk carries one
//     token; its percentiles are of per-request means, not of single gaps);
//   - guidellm's time_per_output_token_ms includes the first token and has no
//     vLLM counterpart; its mean is kept as Extra guidellm_tpot_incl_ttft_mean_ms;
//   - failed counts errored plus incomplete requests;
//   - max_output_tokens_per_s is guidellm's peak per-event rate (what GPUStack
//     prints as "Peak output token throughput"), not vLLM's 1-s bucket peak;
//     Validate flags it when it is implausible.
func ParseGuidellm(data []byte) ([]*Result, error) {
	clean := pythonJSONToStrict(data)
	var top struct {
		Benchmarks []json.RawMessage `json:"benchmarks"`
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(clean, &raws); err != nil {
		if err := json.Unmarshal(clean, &top); err != nil {
			return nil, fmt.Errorf("metrics: parse guidellm JSON: %w", err)
		}
		raws = top.Benchmarks
		if raws == nil {
			// A single benchmark object.
			var probe map[string]json.RawMessage
			if json.Unmarshal(clean, &probe) == nil && probe["metrics"] != nil {
				raws = []json.RawMessage{clean}
			}
		}
	}
	return ParseGuidellmBenchmarks(raws)
}

// ParseGuidellmBenchmarks is ParseGuidellm on the report's "benchmarks"
// list, each as strict JSON (PythonJSONReader's output).
func ParseGuidellmBenchmarks(raws []json.RawMessage) ([]*Result, error) {
	if len(raws) == 0 {
		return nil, fmt.Errorf("metrics: parse guidellm JSON: no benchmarks found")
	}
	var out []*Result
	for i, raw := range raws {
		var b gBenchmark
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("metrics: guidellm benchmark %d: %w", i, err)
		}
		r, err := fromGuidellm(&b)
		if err != nil {
			return nil, fmt.Errorf("metrics: guidellm benchmark %d: %w", i, err)
		}
		r.Perflab.Origin = &Origin{Index: i}
		for _, w := range r.Validate() {
			r.warn(w)
		}
		out = append(out, r)
	}
	return out, nil
}

func fromGuidellm(b *gBenchmark) (*Result, error) {
	m := &b.Metrics
	r := &Result{Present: map[string]bool{}, Perflab: &Perflab{Source: "guidellm"}, RequestRate: math.Inf(1)}
	totals := m.RequestTotals
	if totals == nil {
		totals = b.RequestTotals
	}
	if totals == nil {
		return nil, fmt.Errorf("no request_totals")
	}
	r.Completed = int(totals.Successful)
	r.Failed = int(totals.Errored + totals.Incomplete)
	r.NumPrompts = int(totals.Total)
	if r.NumPrompts == 0 {
		r.NumPrompts = r.Completed + r.Failed
	}
	for _, k := range []string{"completed", "failed", "num_prompts"} {
		r.markPresent(k)
	}
	switch {
	case b.Duration != nil:
		r.Duration = *b.Duration
	case b.StartTime != nil && b.EndTime != nil:
		r.Duration = *b.EndTime - *b.StartTime
	default:
		return nil, fmt.Errorf("no duration or start/end time")
	}
	r.markPresent("duration")

	succ := func(s *gStatus) *gDist {
		if s == nil {
			return nil
		}
		return s.Successful
	}
	if d := succ(m.PromptTokenCount); d != nil && d.TotalSum != nil {
		r.TotalInputTokens = int(math.Round(*d.TotalSum))
		r.markPresent("total_input_tokens")
	}
	if d := succ(m.OutputTokenCount); d != nil && d.TotalSum != nil {
		r.TotalOutputTokens = int(math.Round(*d.TotalSum))
		r.markPresent("total_output_tokens")
	}
	if r.Duration > 0 {
		r.RequestThroughput = float64(r.Completed) / r.Duration
		r.markPresent("request_throughput")
		if r.Has("total_output_tokens") {
			r.OutputThroughput = float64(r.TotalOutputTokens) / r.Duration
			r.markPresent("output_throughput")
		}
		if r.Has("total_input_tokens") && r.Has("total_output_tokens") {
			r.TotalTokenThroughput = float64(r.TotalInputTokens+r.TotalOutputTokens) / r.Duration
			r.markPresent("total_token_throughput")
		}
	}
	extra := func(k string, d *gDist) {
		if d != nil && d.Mean != nil {
			if r.Extra == nil {
				r.Extra = map[string]any{}
			}
			r.Extra[k] = *d.Mean
		}
	}
	extra("guidellm_requests_per_second_mean", succ(m.RequestsPerSecond))
	extra("guidellm_output_tokens_per_second_mean", succ(m.OutputTokensPerSecond))
	extra("guidellm_tokens_per_second_mean", succ(m.TokensPerSecond))
	extra("guidellm_tpot_incl_ttft_mean_ms", succ(m.TimePerOutputTokenMs))
	extra("guidellm_time_to_first_output_token_mean_ms", succ(m.TimeToFirstOutputToken))
	if d := succ(m.OutputTokensPerSecond); d != nil && d.Max != nil {
		r.MaxOutputTokensPerS = *d.Max
		r.markPresent("max_output_tokens_per_s")
	}
	if d := succ(m.RequestConcurrency); d != nil && d.Max != nil {
		r.MaxConcurrentRequests = int(math.Round(*d.Max))
		r.markPresent("max_concurrent_requests")
	}
	setMetric := func(metric string, d *gDist, scale float64) {
		if d == nil {
			return
		}
		set := func(which string, v *float64) {
			if v != nil {
				*r.statField(metric, which) = *v * scale
				r.markPresent(which + "_" + metric + "_ms")
			}
		}
		set("mean", d.Mean)
		set("median", d.Median)
		set("std", d.StdDev)
		for _, gp := range guidellmPercentiles {
			if v, ok := d.Percentiles[gp.key]; ok {
				r.setPercentile(metric, gp.p, v*scale)
				r.markPresent("p" + pWord(gp.p) + "_" + metric + "_ms")
			}
		}
		r.PercentileMetrics = append(r.PercentileMetrics, metric)
	}
	setMetric(MetricTTFT, succ(m.TimeToFirstTokenMs), 1)
	setMetric(MetricTPOT, succ(m.InterTokenLatencyMs), 1)
	setMetric(MetricITL, succ(m.InterTokenLatencyMs), 1)
	setMetric(MetricE2EL, succ(m.RequestLatency), 1000)
	r.PercentileMetrics = canonicalMetrics(r.PercentileMetrics)
	r.warn("guidellm: throughputs recomputed as count/duration; TPOT and ITL both from guidellm's inter_token_latency_ms (per-request (last-first)/(n-1), token-weighted); guidellm's time_per_output_token_ms includes TTFT and is kept as extra guidellm_tpot_incl_ttft_mean_ms")
	guidellmStrategy(r, b)
	return r, nil
}

// guidellmStrategy reads the load strategy (concurrent streams, constant or
// poisson rate) from wherever the guidellm version put it.
func guidellmStrategy(r *Result, b *gBenchmark) {
	type strat struct {
		Type    string   `json:"type_"`
		Streams *float64 `json:"streams"`
		Rate    *float64 `json:"rate"`
	}
	var cands []strat
	for _, raw := range []json.RawMessage{b.Strategy, b.Config, b.Args} {
		if len(raw) == 0 {
			continue
		}
		var s strat
		if json.Unmarshal(raw, &s) == nil && s.Type != "" {
			cands = append(cands, s)
		}
		var wrap struct {
			Strategy strat `json:"strategy"`
		}
		if json.Unmarshal(raw, &wrap) == nil && wrap.Strategy.Type != "" {
			cands = append(cands, wrap.Strategy)
		}
	}
	for _, s := range cands {
		if s.Streams != nil && *s.Streams > 0 {
			r.MaxConcurrency = int(*s.Streams)
			r.markPresent("max_concurrency")
		}
		if s.Rate != nil && *s.Rate > 0 && !math.IsInf(*s.Rate, 0) {
			r.RequestRate = *s.Rate
			r.markPresent("request_rate")
		}
		if r.Extra == nil {
			r.Extra = map[string]any{}
		}
		r.Extra["guidellm_strategy"] = s.Type
		return
	}
}
