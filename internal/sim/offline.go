package sim

import (
	"fmt"
	"io"
	"math"

	"github.com/perflab/perflab/internal/dataset"
)

// withoutAPIServer drops the API server's costs from the engine: what an
// offline benchmark runs is the engine core fed in-process. vLLM's
// `bench throughput` hands LLM.generate pre-tokenized prompts
// (vllm/benchmarks/throughput.py, run_vllm, at vllm-project/vllm
// 02028314); trtllm-bench throughput feeds token ids to the LLM API's
// generate_async with no detokenization (post_proc_params None in
// tensorrt_llm/bench/benchmark/throughput.py at NVIDIA/TensorRT-LLM
// 000a01de); sglang.bench_offline_throughput calls sgl.Engine in the
// same process (python/sglang/bench_offline_throughput.py).
// None parses HTTP, applies a chat template, tokenizes or streams a
// chunk per step, which is what FrontendMs and OutputUs price.
// Of the loss beyond the kernels it keeps the engine core's part
// (offlineLossShare), which on a GPU the calibration was carried to is
// what the carry scaled by bandwidth (lossScale).
func (e *Engine) withoutAPIServer() {
	e.c.FrontendMs = 0
	e.c.OutputUs = 0
	e.keepLoss(coreLossKept(e.carryBW))
	if e.kind.offlineGraphs != nil {
		e.kind.offlineGraphs(e)
	}
}

// OfflineResult is what the offline throughput benchmarks report for one
// run: the union of the figures `vllm bench throughput` prints
// (requests/s, total and output tokens/s, elapsed time, token totals),
// trtllm-bench throughput's STATISTICS block (tensorrt_llm/bench/
// dataclasses/reporting.py: request and token throughput, total latency,
// average request latency, per-user and per-GPU output throughput) and
// sglang.bench_offline_throughput's result block (input, output and total
// token throughput).
type OfflineResult struct {
	// Requests is how many requests were sent; Completed how many finished.
	Requests  int `json:"num_requests"`
	Completed int `json:"completed"`
	// DurationS is the wall time from the first request handed over to
	// the last one finished (vLLM's elapsed_time, trtllm-bench's total
	// latency).
	DurationS    float64 `json:"elapsed_time"`
	PromptTokens int     `json:"total_input_tokens"`
	OutputTokens int     `json:"total_output_tokens"`
	// RequestThroughput is completed requests per second.
	RequestThroughput float64 `json:"requests_per_second"`
	// InputThroughput, OutputThroughput and TotalThroughput are tokens per
	// second over DurationS (prompt, generated, and both).
	InputThroughput  float64 `json:"input_tokens_per_second"`
	OutputThroughput float64 `json:"output_tokens_per_second"`
	TotalThroughput  float64 `json:"tokens_per_second"`
	// MeanLatencyMs is the mean end-to-end latency of a completed request.
	MeanLatencyMs float64 `json:"mean_request_latency_ms"`
	// PerUserOutputTPS is the mean over completed requests of output
	// tokens over that request's latency, trtllm-bench's per-user figure.
	PerUserOutputTPS float64 `json:"per_user_output_tokens_per_second"`
	// GPUs is the GPUs the deployment runs on (TP × DP); PerGPUOutputTPS
	// is OutputThroughput over it.
	GPUs            int     `json:"gpus"`
	PerGPUOutputTPS float64 `json:"per_gpu_output_tokens_per_second"`
}

// OfflineFigures computes the offline benchmarks' figures from a
// prediction's records. A run with no completed request has zero rates
// (Prediction.Err names why).
func OfflineFigures(pr *Prediction) OfflineResult {
	// trtllm-bench divides by the world size the engine runs on, not by
	// the GPUs the machine has.
	gpus := max(pr.Params.TP, 1) * max(pr.Params.DP, 1)
	r := OfflineResult{Requests: len(pr.Records), DurationS: pr.Duration, GPUs: gpus}
	var lat, perUser float64
	for _, rec := range pr.Records {
		if !rec.Success {
			continue
		}
		r.Completed++
		r.PromptTokens += rec.PromptLen
		r.OutputTokens += rec.OutputLen
		lat += rec.Latency
		if rec.Latency > 0 {
			perUser += float64(rec.OutputLen) / rec.Latency
		}
	}
	if r.Completed == 0 || r.DurationS <= 0 {
		return r
	}
	d := r.DurationS
	r.RequestThroughput = float64(r.Completed) / d
	r.InputThroughput = float64(r.PromptTokens) / d
	r.OutputThroughput = float64(r.OutputTokens) / d
	r.TotalThroughput = float64(r.PromptTokens+r.OutputTokens) / d
	r.MeanLatencyMs = lat / float64(r.Completed) * 1000
	r.PerUserOutputTPS = perUser / float64(r.Completed)
	r.PerGPUOutputTPS = r.OutputThroughput / float64(r.GPUs)
	return r
}

// PredictOffline predicts an offline throughput benchmark of reqs: every
// request handed to the engine core at once, with no pacing and no API
// server (Load.Offline). maxConcurrency caps requests in flight as
// trtllm-bench's --concurrency does (0 = none).
func PredictOffline(p Params, c *Coefficients, reqs []dataset.Request, maxConcurrency int) (*Prediction, OfflineResult, error) {
	pr, err := PredictWith(p, c, reqs, Load{MaxConcurrency: maxConcurrency, Offline: true})
	if err != nil {
		return nil, OfflineResult{}, fmt.Errorf("sim: offline: %w", err)
	}
	return pr, OfflineFigures(pr), nil
}

// OfflineSpan is PredictSpan for an offline run (Load.Offline), widened to
// hold the same requests served through the API server under the main
// calibration: every calibration was fitted to served runs, so how much of
// their time the API server took and how much the engine core did is an
// inference the offline tables have not checked. The served figure bounds
// what the split can move the prediction by.
func OfflineSpan(p Params, main *Coefficients, folds *FoldSet, reqs []dataset.Request, maxConcurrency int) (Span, error) {
	s, err := PredictSpan(p, main, folds, reqs, Load{MaxConcurrency: maxConcurrency, Offline: true})
	if err != nil {
		return s, err
	}
	// A served run that fails (or completes nothing) leaves the offline
	// span as it is: the bound is a widening, not a prediction.
	served, serr := PredictWith(p, main, reqs, Load{MaxConcurrency: maxConcurrency, noGaps: true})
	if serr != nil || served.Result == nil || served.Result.Completed == 0 {
		return s, nil
	}
	r := served.Result
	s.Lo = Figures{math.Min(s.Lo.TotalTPS, r.TotalTokenThroughput), math.Min(s.Lo.MeanTTFTMs, r.MeanTTFTMs), math.Min(s.Lo.MeanTPOTMs, r.MeanTPOTMs)}
	s.Hi = Figures{math.Max(s.Hi.TotalTPS, r.TotalTokenThroughput), math.Max(s.Hi.MeanTTFTMs, r.MeanTTFTMs), math.Max(s.Hi.MeanTPOTMs, r.MeanTPOTMs)}
	return s, nil
}

// WriteText prints the result in the layout of the offline benchmarks'
// result blocks, with the range of each throughput from span (nil: none).
// The token mix is fixed by the requests, so the output and request
// rates scale with the total throughput's range.
func (r OfflineResult) WriteText(w io.Writer, span *Span) error {
	rng := func(v float64) string {
		if span == nil || r.TotalThroughput <= 0 {
			return ""
		}
		k := v / r.TotalThroughput
		return fmt.Sprintf("  (range %.2f..%.2f)", span.Lo.TotalTPS*k, span.Hi.TotalTPS*k)
	}
	_, err := fmt.Fprintf(w, `====== Offline Throughput Benchmark Result (simulated) ======
Successful requests:                     %d
Benchmark duration (s):                  %.2f
Total input tokens:                      %d
Total generated tokens:                  %d
Request throughput (req/s):              %.2f%s
Input token throughput (tok/s):          %.2f%s
Output token throughput (tok/s):         %.2f%s
Total token throughput (tok/s):          %.2f%s
Average request latency (ms):            %.2f
Per user output throughput (tok/s/user): %.2f
Per GPU output throughput (tok/s/gpu):   %.2f%s
==============================================================
`, r.Completed, r.DurationS, r.PromptTokens, r.OutputTokens,
		r.RequestThroughput, rng(r.RequestThroughput), r.InputThroughput, rng(r.InputThroughput),
		r.OutputThroughput, rng(r.OutputThroughput), r.TotalThroughput, rng(r.TotalThroughput),
		r.MeanLatencyMs, r.PerUserOutputTPS, r.PerGPUOutputTPS, rng(r.PerGPUOutputTPS))
	if err != nil {
		return fmt.Errorf("sim: write offline result: %w", err)
	}
	return nil
}
