package lab

import (
	"encoding/json"
	"fmt"

	"github.com/perflab/perflab/internal/metrics"
)

// Observation is what the lab reads from one trial's result: the keys of
// vLLM's --save-result JSON that the keep rules and the objective need.
// Reading the stored JSON (rather than a Go type) lets a resumed lab reread
// trials written by any earlier version.
type Observation struct {
	Completed         int     `json:"completed"`
	NumPrompts        int     `json:"num_prompts"`
	Duration          float64 `json:"duration"`
	RequestThroughput float64 `json:"request_throughput"`
	OutputThroughput  float64 `json:"output_throughput"`
	TotalThroughput   float64 `json:"total_token_throughput"`
	MeanTTFTMs        float64 `json:"mean_ttft_ms"`
	P99TTFTMs         float64 `json:"p99_ttft_ms"`
	MeanTPOTMs        float64 `json:"mean_tpot_ms"`
	P99TPOTMs         float64 `json:"p99_tpot_ms"`
	// RequestGoodput is vLLM's request_goodput (requests/s meeting the SLO).
	RequestGoodput float64 `json:"request_goodput"`
	// SustainableLoad is the load search's answer, set on the result a
	// max_load_under_slo search scores (it is no key of vLLM's).
	SustainableLoad float64 `json:"sustainable_load,omitempty"`
}

// ParseObservation reads an Observation from a result JSON.
func ParseObservation(result []byte) (Observation, error) {
	var o Observation
	if len(result) == 0 {
		return o, fmt.Errorf("lab: empty result")
	}
	if err := json.Unmarshal(result, &o); err != nil {
		return o, fmt.Errorf("lab: decode result: %w", err)
	}
	return o, nil
}

// SuccessRate is completed / num_prompts (0 when nothing was sent).
func (o Observation) SuccessRate() float64 {
	if o.NumPrompts <= 0 {
		return 0
	}
	return float64(o.Completed) / float64(o.NumPrompts)
}

// scaleResult multiplies a result's throughputs by f and its times by 1/f:
// the shape of run-to-run noise on a serving benchmark. It acts on the
// typed result (metrics.Result.ScaleSpeed), read as perflab wrote it, so
// noise adds no key and no warning the prediction did not have.
func scaleResult(result []byte, f float64) ([]byte, error) {
	r, err := metrics.DecodeStored(result)
	if err != nil {
		return nil, fmt.Errorf("lab: noise: decode result: %w", err)
	}
	r.ScaleSpeed(f)
	b, err := r.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("lab: noise: encode result: %w", err)
	}
	return b, nil
}
