package metrics

import (
	"fmt"
	"math"
)

// maxPlausibleTokensPerS bounds a single engine's output rate: no served model
// on any current accelerator comes within two orders of magnitude of it, so a
// higher figure is a measurement artefact (the 9B reference report's
// 20,132,659 tok/s is guidellm's per-event rate over a near-zero interval).
const maxPlausibleTokensPerS = 1e6

// Validate lists impossible or suspicious values: negative or non-finite
// figures, output throughput above total throughput, more completed requests
// than prompts, a peak output rate above any plausible engine, a peak
// concurrency above the request count or the concurrency limit, throughputs
// that disagree with counts over duration. It never fails: callers store the
// warnings beside the numbers (ParseText, ParseJSON and ParseGuidellm do so in
// Perflab.Warnings).
func (r *Result) Validate() []string {
	var ws []string
	check := func(key string, v float64) {
		if !r.Has(key) {
			return
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			ws = append(ws, fmt.Sprintf("%s is %v", key, v))
		} else if v < 0 {
			ws = append(ws, fmt.Sprintf("%s is negative (%v)", key, v))
		}
	}
	check("duration", r.Duration)
	check("completed", float64(r.Completed))
	check("failed", float64(r.Failed))
	check("total_input_tokens", float64(r.TotalInputTokens))
	check("total_output_tokens", float64(r.TotalOutputTokens))
	check("request_throughput", r.RequestThroughput)
	check("output_throughput", r.OutputThroughput)
	check("total_token_throughput", r.TotalTokenThroughput)
	check("max_output_tokens_per_s", r.MaxOutputTokensPerS)
	check("max_concurrent_requests", float64(r.MaxConcurrentRequests))
	if r.GoodputConfigured {
		check("request_goodput", r.RequestGoodput)
	}
	for _, m := range r.PercentileMetrics {
		s, _ := r.Stats(m)
		check("mean_"+m+"_ms", s.Mean)
		check("median_"+m+"_ms", s.Median)
		check("std_"+m+"_ms", s.Std)
		for _, pv := range s.Percentiles {
			check("p"+pWord(pv.P)+"_"+m+"_ms", pv.Value)
		}
	}
	if r.Has("duration") && r.Duration == 0 {
		ws = append(ws, "duration is zero")
	}
	if r.Has("output_throughput") && r.Has("total_token_throughput") && r.OutputThroughput > r.TotalTokenThroughput*(1+1e-9)+0.01 {
		ws = append(ws, fmt.Sprintf("output throughput %.2f tok/s exceeds total token throughput %.2f tok/s", r.OutputThroughput, r.TotalTokenThroughput))
	}
	if r.Has("num_prompts") && r.Has("completed") && r.NumPrompts > 0 && r.Completed > r.NumPrompts {
		ws = append(ws, fmt.Sprintf("completed %d exceeds num_prompts %d", r.Completed, r.NumPrompts))
	}
	if r.Has("num_prompts") && r.Has("completed") && r.Has("failed") && r.NumPrompts > 0 && r.Completed+r.Failed > r.NumPrompts {
		ws = append(ws, fmt.Sprintf("completed+failed %d exceeds num_prompts %d", r.Completed+r.Failed, r.NumPrompts))
	}
	if r.Has("max_output_tokens_per_s") && r.MaxOutputTokensPerS > maxPlausibleTokensPerS {
		ws = append(ws, fmt.Sprintf("peak output token throughput %.2f tok/s is implausible (above %.0f tok/s); likely a rate over a near-zero interval", r.MaxOutputTokensPerS, float64(maxPlausibleTokensPerS)))
	}
	// vLLM counts one per streamed chunk in its peak, so chunks of several
	// tokens (speculative decoding, an engine that streams a step's
	// tokens together) put it below the mean rightly; the chunk-weighted
	// peak, where perflab measured one, says whether that explains it.
	below := func(peak float64) bool { return peak < r.OutputThroughput*(1-1e-9)-0.01 }
	perChunk := r.Perflab != nil && r.Perflab.PeakOutputTokensPerS > 0 && !below(r.Perflab.PeakOutputTokensPerS)
	if r.Has("max_output_tokens_per_s") && r.Has("output_throughput") && r.MaxOutputTokensPerS > 0 && below(r.MaxOutputTokensPerS) && r.Duration >= 1 && !perChunk {
		ws = append(ws, fmt.Sprintf("peak output token throughput %.2f is below the mean output throughput %.2f", r.MaxOutputTokensPerS, r.OutputThroughput))
	}
	if r.Has("max_concurrent_requests") && r.Has("max_concurrency") && r.MaxConcurrency > 0 && r.MaxConcurrentRequests > r.MaxConcurrency {
		ws = append(ws, fmt.Sprintf("peak concurrent requests %d exceeds max concurrency %d", r.MaxConcurrentRequests, r.MaxConcurrency))
	}
	if r.Has("max_concurrent_requests") && r.Has("completed") && r.Has("failed") && r.MaxConcurrentRequests > r.Completed+r.Failed && r.Completed+r.Failed > 0 {
		ws = append(ws, fmt.Sprintf("peak concurrent requests %d exceeds the request count %d", r.MaxConcurrentRequests, r.Completed+r.Failed))
	}
	// Throughputs are counts over duration; the printed block rounds to 2
	// decimals, so allow that much slack plus the duration's own rounding.
	consistent := func(name string, got float64, count int) {
		if !r.Has(name) || !r.Has("duration") || r.Duration <= 0 {
			return
		}
		want := float64(count) / r.Duration
		tol := 0.006 + want*0.0051/r.Duration + want*1e-6
		if math.Abs(got-want) > tol {
			ws = append(ws, fmt.Sprintf("%s %.2f disagrees with count/duration %.2f", name, got, want))
		}
	}
	if r.Has("completed") {
		consistent("request_throughput", r.RequestThroughput, r.Completed)
	}
	if r.Has("total_output_tokens") {
		consistent("output_throughput", r.OutputThroughput, r.TotalOutputTokens)
	}
	if r.Has("total_input_tokens") && r.Has("total_output_tokens") {
		consistent("total_token_throughput", r.TotalTokenThroughput, r.TotalInputTokens+r.TotalOutputTokens)
	}
	for _, m := range r.PercentileMetrics {
		s, _ := r.Stats(m)
		if r.Has("mean_"+m+"_ms") && r.Has("median_"+m+"_ms") {
			for _, pv := range s.Percentiles {
				if pv.P >= 50 && pv.Value < s.Median-0.01 && r.Has("p"+pWord(pv.P)+"_"+m+"_ms") {
					ws = append(ws, fmt.Sprintf("p%s %s %.2f ms is below its median %.2f ms", pWord(pv.P), m, pv.Value, s.Median))
				}
			}
		}
	}
	return ws
}
