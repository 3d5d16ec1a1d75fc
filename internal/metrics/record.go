// Package metrics turns per-request records into the serving metrics that
// `vllm bench serve` defines (TTFT, TPOT, ITL, E2EL, throughputs, goodput,
// numpy-linear percentiles), prints vLLM's result block and writes vLLM's
// --save-result JSON, plus perflab's own clearly labelled additions.
//
// Both the live benchmark (package bench) and the simulator's prediction face
// (package sim) produce []Record, so a predicted run and a measured run go
// through exactly the same arithmetic.
package metrics

// Record is what one request produced. Times are seconds on the run's
// monotonic clock, measured from the benchmark's start (t=0 is the moment the
// first request was due).
type Record struct {
	// ID is the request id sent as x-request-id.
	ID string `json:"id"`
	// Success is false for any failed request; failed requests are left out
	// of every latency figure, as vLLM does.
	Success bool `json:"success"`
	// Error is the human-readable reason for a failure ("" on success).
	Error string `json:"error,omitempty"`
	// ErrorClass groups failures: "http_status", "timeout", "reset",
	// "no_choices", "connect", "bad_stream", "canceled".
	ErrorClass string `json:"error_class,omitempty"`
	// PromptLen is the prompt length in tokens as the dataset counted it.
	PromptLen int `json:"prompt_len"`
	// OutputLen is the number of generated tokens (see OutputLenSource).
	OutputLen int `json:"output_len"`
	// OutputLenSource is "usage" when the server reported usage, else
	// "tokenizer" (re-tokenized generated text) or "chunks".
	OutputLenSource string `json:"output_len_source,omitempty"`
	// ReasoningTokens counts tokens delivered as reasoning_content deltas.
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
	// Scheduled is when the request was due under the load schedule.
	Scheduled float64 `json:"scheduled"`
	// Sent is when the request was actually written to the connection
	// (after any wait for a --max-concurrency slot).
	Sent float64 `json:"sent"`
	// QueueTime is the wait for a concurrency slot (Sent - Scheduled minus
	// dispatch lag); vLLM leaves it out of TTFT, and so do we by default.
	QueueTime float64 `json:"queue_time"`
	// TTFT is the time from Sent to the first chunk that carries choices.
	TTFT float64 `json:"ttft"`
	// TTFC is the time from Sent to the first content (non-reasoning) token;
	// zero when the model produced no reasoning.
	TTFC float64 `json:"ttfc,omitempty"`
	// ITL holds the gaps between consecutive choices chunks after the first.
	ITL []float64 `json:"itl"`
	// ChunkTokens holds, per choices chunk (first included), how many tokens it
	// carried when known (else 1). len(ChunkTokens) == len(ITL)+1 on success.
	ChunkTokens []int `json:"chunk_tokens,omitempty"`
	// Latency is the end-to-end latency: Sent to the last choices chunk.
	Latency float64 `json:"latency"`
	// GeneratedText is the concatenated content (kept only when asked for).
	GeneratedText string `json:"generated_text,omitempty"`
}

// Stretched returns the record with every time in it multiplied by k: the
// record a client would have measured against a server running k times
// slower (the sim runtime's compressed clock, undone). Every figure
// computed from the stretched records, percentiles and CDFs included, is
// then in the simulated time; scaling computed results instead misses
// whatever is nested or named unlike a time.
func (r Record) Stretched(k float64) Record {
	r.Scheduled *= k
	r.Sent *= k
	r.QueueTime *= k
	r.TTFT *= k
	r.TTFC *= k
	r.Latency *= k
	if len(r.ITL) > 0 {
		itl := make([]float64, len(r.ITL))
		for i, v := range r.ITL {
			itl[i] = v * k
		}
		r.ITL = itl
	}
	return r
}
