package engine

import "testing"

// TestBatchDefaults: each engine's unset batch limits on a GPU, as its
// source sets them at the pinned versions (defaults.go says where).
func TestBatchDefaults(t *testing.T) {
	h100 := Device{Name: "NVIDIA H100 80GB HBM3", MemGiB: 79.2}
	h200 := Device{Name: "NVIDIA H200", MemGiB: 139.8}
	a100 := Device{Name: "NVIDIA A100-SXM4-80GB", MemGiB: 79.2}
	l40s := Device{Name: "NVIDIA L40S", MemGiB: 44.4}
	off := false
	for _, tc := range []struct {
		name string
		c    Config
		d    Device
		want BatchLimits
	}{
		{"vllm H100", Config{Engine: VLLM}, h100, BatchLimits{1024, 8192}},
		{"vllm 0.11 H100", Config{Engine: VLLM, Version: "0.11.0"}, h100, BatchLimits{1024, 8192}},
		{"vllm A100 80GB keeps the small ones", Config{Engine: VLLM}, a100, BatchLimits{256, 2048}},
		{"vllm L40S", Config{Engine: VLLM}, l40s, BatchLimits{256, 2048}},
		{"vllm throughput mode doubles both", Config{Engine: VLLM, PerformanceMode: "throughput"}, h100, BatchLimits{2048, 16384}},
		{"vllm balanced mode", Config{Engine: VLLM, PerformanceMode: "balanced"}, h100, BatchLimits{1024, 8192}},
		{"vllm unchunked budget follows the context", Config{Engine: VLLM, ChunkedPrefill: &off}, h100, BatchLimits{1024, 0}},
		{"vllm before V1", Config{Engine: VLLM, Version: "0.6.3"}, h100, BatchLimits{}},
		{"vllm unknown GPU", Config{Engine: VLLM}, Device{}, BatchLimits{}},
		{"sglang H100", Config{Engine: SGLang}, h100, BatchLimits{0, 8192}},
		{"sglang H200", Config{Engine: SGLang}, h200, BatchLimits{0, 8192}},
		{"sglang B200", Config{Engine: SGLang}, Device{Name: "NVIDIA B200", MemGiB: 178.4}, BatchLimits{0, 16384}},
		{"sglang L40S", Config{Engine: SGLang}, l40s, BatchLimits{0, 4096}},
		{"sglang speculative", Config{Engine: SGLang, Speculative: &Speculative{Method: "eagle3", NumSpeculativeTokens: 3}}, h100, BatchLimits{48, 8192}},
		{"sglang unchunked", Config{Engine: SGLang, ChunkedPrefill: &off}, h100, BatchLimits{}},
		{"trtllm any GPU", Config{Engine: TRTLLM}, a100, BatchLimits{2048, 8192}},
		{"trtllm unknown GPU", Config{Engine: TRTLLM}, Device{}, BatchLimits{2048, 8192}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, ok := KindOf(tc.c.Engine)
			if !ok {
				t.Fatalf("no kind %s", tc.c.Engine)
			}
			if got := k.BatchDefaults(tc.c, tc.d); got != tc.want {
				t.Errorf("BatchDefaults = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestWithoutDefaults: a limit spelled at the engine's default on the GPU
// renders the command of the unset limit, and any other value is kept.
func TestWithoutDefaults(t *testing.T) {
	h100 := Device{Name: "H100", MemGiB: 79.2}
	a100 := Device{Name: "A100", MemGiB: 79.2}
	for _, tc := range []struct {
		name string
		c    Config
		d    Device
		want Config
	}{
		{"vllm defaults on H100", Config{Engine: VLLM, Model: "m", MaxNumSeqs: 1024, MaxNumBatchedTokens: 8192}, h100, Config{Engine: VLLM, Model: "m"}},
		{"vllm H100 values on A100 are changes", Config{Engine: VLLM, Model: "m", MaxNumSeqs: 1024, MaxNumBatchedTokens: 8192}, a100, Config{Engine: VLLM, Model: "m", MaxNumSeqs: 1024, MaxNumBatchedTokens: 8192}},
		{"vllm throughput mode", Config{Engine: VLLM, Model: "m", PerformanceMode: "throughput", MaxNumSeqs: 1024, MaxNumBatchedTokens: 16384}, h100, Config{Engine: VLLM, Model: "m", PerformanceMode: "throughput", MaxNumSeqs: 1024}},
		{"vllm unknown GPU keeps both", Config{Engine: VLLM, Model: "m", MaxNumSeqs: 1024}, Device{}, Config{Engine: VLLM, Model: "m", MaxNumSeqs: 1024}},
		{"sglang running requests follow the pool", Config{Engine: SGLang, Model: "m", MaxNumSeqs: 1024, MaxNumBatchedTokens: 8192}, h100, Config{Engine: SGLang, Model: "m", MaxNumSeqs: 1024}},
		{"trtllm", Config{Engine: TRTLLM, Model: "m", MaxNumSeqs: 2048, MaxNumBatchedTokens: 4096}, h100, Config{Engine: TRTLLM, Model: "m", MaxNumBatchedTokens: 4096}},
		{"unknown engine", Config{Engine: "toy", MaxNumSeqs: 2048}, h100, Config{Engine: "toy", MaxNumSeqs: 2048}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := WithoutDefaults(tc.c, tc.d)
			if got.MaxNumSeqs != tc.want.MaxNumSeqs || got.MaxNumBatchedTokens != tc.want.MaxNumBatchedTokens || got.PerformanceMode != tc.want.PerformanceMode {
				t.Errorf("WithoutDefaults = %+v, want %+v", got, tc.want)
			}
		})
	}
}
