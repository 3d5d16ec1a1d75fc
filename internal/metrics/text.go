package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// TextOptions selects optional parts of the printed block.
type TextOptions struct {
	// Perflab appends a section with perflab's additions (chunk-weighted
	// peak, exact peak concurrency, rates, dispatch lag, ...). vLLM's own
	// lines are unchanged either way.
	Perflab bool
}

// Metric section headers and row names, as vLLM prints them.
var metricText = map[string]struct{ header, name string }{
	MetricTTFT:               {"Time to First Token", "TTFT"},
	MetricTPOT:               {"Time per Output Token (excl. 1st token)", "TPOT"},
	MetricITL:                {"Inter-token Latency", "ITL"},
	MetricE2EL:               {"End-to-end Latency", "E2EL"},
	MetricClientQueueTime:    {"Client-side Queueing", "Client Queue Time"},
	MetricE2ELIncludingQueue: {"Queue-inclusive End-to-end Latency", "E2EL incl. Client Queue"},
}

// center pads s to width with fill the way Python's format spec "{:c^n}"
// does: the smaller half on the left, the odd fill character on the right.
func center(s string, width int, fill byte) string {
	pad := width - len(s)
	if pad <= 0 {
		return s
	}
	left := pad / 2
	return strings.Repeat(string(fill), left) + s + strings.Repeat(string(fill), pad-left)
}

// pyFloat2 formats like Python's "{:.2f}" (nan, inf, -inf spelled as Python).
func pyFloat2(x float64) string {
	switch {
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// row is Python's "{:<40} {:<10}".format(label, value).
func row(w *bufio.Writer, label, value string) {
	fmt.Fprintf(w, "%-40s %-10s\n", label, value)
}

// WriteText prints vLLM's "Serving Benchmark Result" block, byte for byte as
// the latest `vllm bench serve` prints it (trailing pad spaces included).
// For an imported result, rows whose keys were absent are left out.
func (r *Result) WriteText(w io.Writer) error {
	return r.WriteTextWith(w, TextOptions{})
}

// WriteTextWith is WriteText with optional extra sections.
func (r *Result) WriteTextWith(w io.Writer, opt TextOptions) error {
	bw := bufio.NewWriter(w)
	f2 := func(key, label string, v float64) {
		if r.Has(key) {
			row(bw, label, pyFloat2(v))
		}
	}
	d := func(key, label string, v int) {
		if r.Has(key) {
			row(bw, label, strconv.Itoa(v))
		}
	}
	bw.WriteString(center(" Serving Benchmark Result ", 50, '=') + "\n")
	d("completed", "Successful requests:", r.Completed)
	d("failed", "Failed requests:", r.Failed)
	if r.MaxConcurrency > 0 {
		d("max_concurrency", "Maximum request concurrency:", r.MaxConcurrency)
	}
	if !r.RateIsInf() {
		f2("request_rate", "Request rate configured (RPS):", r.RequestRate)
	}
	f2("duration", "Benchmark duration (s):", r.Duration)
	d("total_input_tokens", "Total input tokens:", r.TotalInputTokens)
	d("total_output_tokens", "Total generated tokens:", r.TotalOutputTokens)
	f2("request_throughput", "Request throughput (req/s):", r.RequestThroughput)
	if r.GoodputConfigured {
		f2("request_goodput", "Request goodput (req/s):", r.RequestGoodput)
	}
	f2("output_throughput", "Output token throughput (tok/s):", r.OutputThroughput)
	f2("max_output_tokens_per_s", "Peak output token throughput (tok/s):", r.MaxOutputTokensPerS)
	f2("max_concurrent_requests", "Peak concurrent requests:", float64(r.MaxConcurrentRequests))
	if r.RTFx > 0 {
		f2("rtfx", "RTFx (Inverse Real-Time Factor):", r.RTFx)
	}
	f2("total_token_throughput", "Total token throughput (tok/s):", r.TotalTokenThroughput)

	for _, m := range r.PercentileMetrics {
		// vLLM has client-queue figures only under --max-concurrency, and the
		// queue-inclusive E2EL only with a finite request rate as well.
		if m == MetricClientQueueTime && r.MaxConcurrency == 0 && r.Present == nil {
			continue
		}
		if m == MetricE2ELIncludingQueue && (r.MaxConcurrency == 0 || r.RateIsInf()) && r.Present == nil {
			continue
		}
		s, _ := r.Stats(m)
		t := metricText[m]
		if r.Present != nil && !r.Has("mean_"+m+"_ms") && !r.Has("median_"+m+"_ms") && len(s.Percentiles) == 0 {
			continue
		}
		bw.WriteString(center(t.header, 50, '-') + "\n")
		f2("mean_"+m+"_ms", "Mean "+t.name+" (ms):", s.Mean)
		f2("median_"+m+"_ms", "Median "+t.name+" (ms):", s.Median)
		for _, pv := range s.Percentiles {
			row(bw, "P"+pWord(pv.P)+" "+t.name+" (ms):", pyFloat2(pv.Value))
		}
	}
	if opt.Perflab && r.Perflab != nil {
		p := r.Perflab
		bw.WriteString(center("perflab additions", 50, '-') + "\n")
		row(bw, "Peak output tok/s (chunk-weighted):", pyFloat2(p.PeakOutputTokensPerS))
		row(bw, "Peak concurrent requests (exact):", strconv.Itoa(p.PeakConcurrency))
		row(bw, "Mean concurrency:", pyFloat2(p.MeanConcurrency))
		row(bw, "Offered request rate (req/s):", pyFloat2(p.OfferedRate))
		row(bw, "Achieved request rate (req/s):", pyFloat2(p.AchievedRate))
		row(bw, "P99 dispatch lag (ms):", pyFloat2(pctOf(p.DispatchLag, 99)))
		row(bw, "Mean client queue time (ms):", pyFloat2(p.ClientQueue.Mean))
		if p.TTFCCount > 0 {
			row(bw, "Mean time to first content (ms):", pyFloat2(p.TTFC.Mean))
		}
		for _, k := range sortedKeys(p.ErrorsByClass) {
			row(bw, "Failed ("+k+"):", strconv.Itoa(p.ErrorsByClass[k]))
		}
		for _, w := range p.Warnings {
			bw.WriteString("WARNING: " + w + "\n")
		}
	}
	bw.WriteString(strings.Repeat("=", 50) + "\n")
	return bw.Flush()
}

func pctOf(s LatencyStats, p float64) float64 {
	for _, pv := range s.Percentiles {
		if pv.P == p {
			return pv.Value
		}
	}
	return math.NaN()
}
