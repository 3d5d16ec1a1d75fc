package sim

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/dataset"
)

// cpuTime is this process's user+system CPU time: on a shared machine the
// wall-clock ns/op overstates the cost, so the benchmarks report both.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPredictShareGPT14B is the speed target: a 1,000-request
// ShareGPT-shaped run of Qwen3-14B on one H100 (target <= 0.2 s).
func BenchmarkPredictShareGPT14B(b *testing.B) {
	reqs, err := Workload{Kind: "sharegpt", NumPrompts: 1000, TotalInput: 217393, TotalOutput: 201648}.Requests()
	if err != nil {
		b.Fatal(err)
	}
	p := Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen3-14B", GPU: "H100"}
	c0 := cpuTime()
	for i := 0; i < b.N; i++ {
		if _, err := Predict(p, reqs, Load{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuTime()-c0).Seconds()/float64(b.N), "cpu-s/op")
}

// BenchmarkSweep100 predicts 100 configurations (engines x max-num-seqs x
// batched tokens x FP8) of the same ShareGPT run (target <= 10 s).
func BenchmarkSweep100(b *testing.B) {
	reqs, _ := Workload{Kind: "sharegpt", NumPrompts: 1000, TotalInput: 217393, TotalOutput: 201648}.Requests()
	var ps []Params
	for _, eng := range []string{"vllm", "sglang", "trtllm", "vllm", "sglang"} {
		for _, model := range []string{"Qwen3-14B", "Qwen3-14B-FP8"} {
			for _, seqs := range []int{128, 256, 512, 1024, 2048} {
				for _, tok := range []int{4096, 16384} {
					ps = append(ps, Params{Engine: eng, Model: model, GPU: "H100", MaxNumSeqs: seqs, MaxNumBatchedTokens: tok})
				}
			}
		}
	}
	if len(ps) != 100 {
		b.Fatal(fmt.Sprint(len(ps)))
	}
	c0 := cpuTime()
	defer func() { b.ReportMetric((cpuTime()-c0).Seconds()/float64(b.N), "cpu-s/op") }()
	for i := 0; i < b.N; i++ {
		for _, p := range ps {
			if _, err := Predict(p, reqs, Load{}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkPredictSpanShareGPT14B is the same run with its range: the main
// calibration and the three leave-one-model-out ones (what sim predict
// prints), so about four predictions' cost.
func BenchmarkPredictSpanShareGPT14B(b *testing.B) {
	reqs, err := Workload{Kind: "sharegpt", NumPrompts: 1000, TotalInput: 217393, TotalOutput: 201648}.Requests()
	if err != nil {
		b.Fatal(err)
	}
	p := Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen3-14B", GPU: "H100"}
	c0 := cpuTime()
	for i := 0; i < b.N; i++ {
		if _, err := PredictSpan(p, nil, nil, reqs, Load{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuTime()-c0).Seconds()/float64(b.N), "cpu-s/op")
}

// BenchmarkPredictShareGPT14BKernels is BenchmarkPredictShareGPT14B on the
// kernel-table step model (the embedded calibration's overheads with
// step_model kernels): what reading each step from the table costs.
func BenchmarkPredictShareGPT14BKernels(b *testing.B) {
	reqs, err := Workload{Kind: "sharegpt", NumPrompts: 1000, TotalInput: 217393, TotalOutput: 201648}.Requests()
	if err != nil {
		b.Fatal(err)
	}
	c := DefaultCoefficients()
	c.StepModel = StepKernels
	p := Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen3-14B", GPU: "H100"}
	c0 := cpuTime()
	for i := 0; i < b.N; i++ {
		if _, err := PredictWith(p, c, reqs, Load{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuTime()-c0).Seconds()/float64(b.N), "cpu-s/op")
}

// BenchmarkPredictOffline is one offline table row's prediction (trtllm-bench
// on Llama 3.1 8B, 3,000 requests of 128 tokens in and 2,048 out), offline
// against the same requests served, so the ratio of the two shows what an
// offline prediction saves by keeping no inter-token gaps.
func BenchmarkPredictOffline(b *testing.B) {
	reqs := make([]dataset.Request, 3000)
	for i := range reqs {
		reqs[i] = dataset.Request{PromptLen: 128, OutputLen: 2048}
	}
	p := Params{Engine: EngineTRTLLM, Version: "0.15.0", Model: "Llama-3.1-8B", GPU: "H100", MemFraction: 0.95, MaxModelLen: 2176}
	for _, offline := range []bool{false, true} {
		name := "served"
		if offline {
			name = "offline"
		}
		b.Run(name, func(b *testing.B) {
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if _, err := PredictWith(p, nil, reqs, Load{Offline: offline}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuTime()-c0).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}
