package report

import (
	"slices"
	"testing"
)

// TestEngineMetricsRowsEachEngine: the engine-metrics table reads each
// engine's own names (SGLang's sglang:*, trtllm-serve's trtllm_*), not
// only vLLM's; a figure an engine does not export is "–", not 0.
func TestEngineMetricsRowsEachEngine(t *testing.T) {
	r := &Report{Baseline: &Candidate{Key: "base", Name: "vLLM", EngineMetrics: map[string]float64{"vllm:kv_cache_usage_perc": 0.5, "vllm:num_preemptions_total": 3,
		"vllm:num_requests_running": 7, "vllm:num_requests_waiting": 1}}, Tried: []Candidate{
		{Name: "vLLM again", EngineMetrics: map[string]float64{"vllm:kv_cache_usage_perc": 0.5, "vllm:num_preemptions_total": 3,
			"vllm:num_requests_running": 7, "vllm:num_requests_waiting": 1}},
		{Name: "SGLang", EngineMetrics: map[string]float64{"sglang:token_usage": 0.25, "sglang:num_running_reqs": 4, "sglang:num_queue_reqs": 2}},
		{Name: "TensorRT-LLM", EngineMetrics: map[string]float64{"trtllm_kv_cache_utilization": 0.75, "trtllm_num_requests_running": 5, "trtllm_num_requests_waiting": 0}},
		{Name: "no table figure", EngineMetrics: map[string]float64{"perflab:sim_token_lateness_p50_seconds": 0}},
	}}
	got := engineMetricsRows(r)
	want := []string{
		"| SGLang | 25.0% | – | 4 | 2 |",
		"| TensorRT-LLM | 75.0% | – | 5 | 0 |",
		"| vLLM again | 50.0% | 3 | 7 | 1 |",
		"| vLLM | 50.0% | 3 | 7 | 1 |",
	}
	if !slices.Equal(got, want) {
		t.Errorf("rows\n%q\nwant\n%q", got, want)
	}
}
