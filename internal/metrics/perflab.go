package metrics

// Perflab holds perflab's additions to vLLM's metrics. Each field departs from
// or goes beyond `vllm bench serve` on purpose; docs/bench-notes/metrics.md
// explains why.
type Perflab struct {
	// Source says where the result came from: "perflab" (computed from
	// records), "vllm-text", "vllm-json" or "guidellm" (imported).
	Source string `json:"source,omitempty"`
	// Origin locates an imported result in its input.
	Origin *Origin `json:"origin,omitempty"`
	// Warnings lists impossible or suspicious values (see Validate) and
	// notes from the importer. Flagged, never fatal.
	Warnings []string `json:"warnings,omitempty"`
	// Assumptions lists what a simulated result takes as given instead of
	// measured (sim.Assumptions: a speculative acceptance from published
	// figures, an attention backend priced as the default), so a reader
	// of the figures knows which knob's effect is not the simulator's to
	// tell. Empty for measured results.
	Assumptions []string `json:"assumptions,omitempty"`

	// PeakOutputTokensPerS is the largest number of output tokens received
	// in one 1-s bucket, counting every token a chunk carries (ChunkTokens).
	// vLLM's max_output_tokens_per_s counts one per chunk and so under-reports
	// whenever a chunk carries several tokens (speculative decoding, stream
	// intervals, detokenizer batching).
	PeakOutputTokensPerS float64 `json:"peak_output_tokens_per_s"`
	// PeakConcurrency is the exact peak number of requests in flight (sent
	// and not yet finished), failed ones included, by a sweep-line over
	// half-open [Sent, Sent+Latency) intervals.
	PeakConcurrency int `json:"peak_concurrency"`
	// MaxConcurrentRequestsV011 is vLLM v0.11's "Peak concurrent requests":
	// the most requests active at any point of one 1-s bucket. It
	// over-reports, but it is what the v0.11 reports print, so it is kept for
	// like-for-like comparison.
	MaxConcurrentRequestsV011 int `json:"max_concurrent_requests_v0_11"`
	// MeanConcurrency is ΣE2E(successful)/duration (Little's law).
	MeanConcurrency float64 `json:"mean_concurrency"`

	// OfferedRate is the rate the schedule asked for, (n-1)/(last-first
	// Scheduled); AchievedRate is the same over the actual send times. Both
	// are +Inf (JSON "inf") when all requests were due at once.
	OfferedRate  float64 `json:"offered_rate"`
	AchievedRate float64 `json:"achieved_rate"`
	// DispatchLag summarizes Sent-Scheduled-QueueTime (ms): how late the
	// client itself was, the concurrency wait excluded.
	DispatchLag LatencyStats `json:"dispatch_lag_ms"`
	// ClientQueue summarizes the wait for a --max-concurrency slot (ms) over
	// every request.
	ClientQueue LatencyStats `json:"client_queue_ms"`
	// TTFC summarizes time to first content token (ms) over successful
	// requests that produced reasoning first; TTFCCount says how many.
	TTFC      LatencyStats `json:"ttfc_ms"`
	TTFCCount int          `json:"ttfc_count"`
	// ReasoningTokens is the total of reasoning_content tokens.
	ReasoningTokens int `json:"reasoning_tokens"`
	// IncludeQueueInTTFT records that TTFT (and the goodput check on it)
	// includes the client queue time, unlike vLLM.
	IncludeQueueInTTFT bool `json:"include_queue_in_ttft,omitempty"`

	// OutputLenSources counts successful requests by the source of their
	// output token count ("usage", "tokenizer", "chunks").
	OutputLenSources map[string]int `json:"output_len_sources,omitempty"`
	// ErrorsByClass counts failed requests by Record.ErrorClass.
	ErrorsByClass map[string]int `json:"errors_by_class,omitempty"`

	// Quantiles holds, per metric ("ttft", "tpot"), the values in ms at
	// p0, p5, …, p100 (21 points, numpy's linear rule): a compact latency
	// distribution, always saved, from which reports draw CDFs without the
	// per-request arrays.
	Quantiles map[string][]float64 `json:"quantiles_ms,omitempty"`

	// KeepUp holds whether the server kept up with the window's arrivals
	// (see KeepUp), when Options.KeepUp asked for it.
	KeepUp *KeepUp `json:"keep_up,omitempty"`

	// Per-request arrays, saved only with Detailed (like vLLM's arrays).
	ScheduledTimes  []float64 `json:"scheduled_times,omitempty"`
	SentTimes       []float64 `json:"sent_times,omitempty"`
	DispatchLags    []float64 `json:"dispatch_lags,omitempty"`
	OutputLenSource []string  `json:"output_len_source,omitempty"`
	ErrorClasses    []string  `json:"error_classes,omitempty"`
	RequestIDs      []string  `json:"request_ids,omitempty"`
}

// Origin locates an imported result: the 1-based line and byte offset of its
// first line, and the text just before it (a heading, a "# fa3" comment), which
// usually names the configuration it measured.
type Origin struct {
	Line      int    `json:"line"`
	Offset    int    `json:"offset"`
	Preceding string `json:"preceding,omitempty"`
	// Index is the result's position among those found in the input.
	Index int `json:"index"`
}

func (r *Result) perflab() *Perflab {
	if r.Perflab == nil {
		r.Perflab = &Perflab{}
	}
	return r.Perflab
}

// warn appends a warning to the result's perflab section.
func (r *Result) warn(msg string) {
	p := r.perflab()
	for _, w := range p.Warnings {
		if w == msg {
			return
		}
	}
	p.Warnings = append(p.Warnings, msg)
}
