package serve

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/engine"
)

// classify is the order every runtime classes a server that died before
// it was ready by (engine.GPUBusyLine's doc: the guard before OOM).
func classify(lines []string) engine.FailureClass {
	switch {
	case engine.GPUBusyLine(lines) != "":
		return engine.ClassGPUBusy
	case engine.OOMLine(lines) != "":
		return engine.ClassOOM
	}
	return engine.ClassStartupCrash
}

// TestStartupLinesClassify runs the simulated engines into their start-up
// failures and through a healthy multi-GPU start, and classes their logs
// with perflab's classifier: the engines' own words (NCCL's included) must
// land in the right class, and a healthy start's NCCL lines in none.
func TestStartupLinesClassify(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       Options
		want    engine.FailureClass // "" = starts
		has     []string
		lastHas string
	}{
		{name: "vllm tp2 starts", o: Options{Engine: "vllm", Argv: []string{"vllm", "serve", "Qwen/Qwen3-14B", "-tp", "2", "--port", "0"}, GPUs: 2},
			has: []string{"(Worker_TP1 pid=", "[pynccl.py:70] vLLM is using nccl==2.27.3", "rank 1 in world size 2 is assigned as DP rank 0, PP rank 0, TP rank 1"}},
		{name: "sglang tp2 starts", o: Options{Engine: "sglang", Argv: []string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-14B", "--tp", "2", "--port", "0"}, GPUs: 2},
			has: []string{" TP1] Init torch distributed begin.", " TP1] Init torch distributed ends. mem usage="}},
		{name: "vllm tp2 small /dev/shm", o: Options{Engine: "vllm", Argv: []string{"vllm", "serve", "Qwen/Qwen3-14B", "-tp", "2", "--port", "0"}, GPUs: 2, Env: map[string]string{ShmEnv: "1048576"}},
			want: engine.ClassStartupCrash, has: []string{"NCCL error in: ", "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3", "Error: failed to extend /dev/shm/nccl-"},
			lastHas: "Engine core initialization failed"},
		{name: "sglang tp2 small /dev/shm", o: Options{Engine: "sglang", Argv: []string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-14B", "--tp", "2", "--port", "0"}, GPUs: 2, Env: map[string]string{ShmEnv: "0"}},
			want: engine.ClassStartupCrash, lastHas: "No space left on device (28)"},
		{name: "vllm tp8 64 MiB /dev/shm", o: Options{Engine: "vllm", Argv: []string{"vllm", "serve", "Qwen/Qwen3-14B", "-tp", "8", "--port", "0"}, GPUs: 8, Env: map[string]string{ShmEnv: "67108864"}},
			want: engine.ClassStartupCrash},
		{name: "vllm tp2 enough /dev/shm", o: Options{Engine: "vllm", Argv: []string{"vllm", "serve", "Qwen/Qwen3-14B", "-tp", "2", "--port", "0"}, GPUs: 2, Env: map[string]string{ShmEnv: "67108864"}}},
		{name: "vllm oom", o: Options{Engine: "vllm", Argv: []string{"vllm", "serve", "Qwen/Qwen3-235B-A22B", "--port", "0"}},
			want: engine.ClassOOM, has: []string{"torch.OutOfMemoryError: CUDA out of memory."}},
		{name: "sglang oom", o: Options{Engine: "sglang", GPU: "L40S", Argv: []string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-32B", "--port", "0"}},
			want: engine.ClassOOM},
		{name: "trtllm oom", o: Options{Engine: "trtllm", Argv: []string{"trtllm-serve", "Qwen/Qwen3-235B-A22B", "--port", "0"}},
			want: engine.ClassOOM},
		{name: "vllm memory guard", o: Options{Engine: "vllm", Argv: []string{"vllm", "serve", "Qwen/Qwen3-14B", "--port", "0"}, OccupiedGiB: 20},
			want: engine.ClassGPUBusy},
		{name: "vllm guard before NCCL", o: Options{Engine: "vllm", Argv: []string{"vllm", "serve", "Qwen/Qwen3-14B", "-tp", "2", "--port", "0"}, GPUs: 2, OccupiedGiB: 20, Env: map[string]string{ShmEnv: "0"}},
			want: engine.ClassGPUBusy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log lockedBuffer
			o := tc.o
			if o.GPU == "" {
				o.GPU = "H100"
			}
			o.TimeScale, o.StartupDelay, o.Stderr = 50, 0, &log
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			o.Ready = func(string) { cancel() }
			err := Run(ctx, o)
			lines := strings.Split(strings.TrimRight(log.String(), "\n"), "\n")
			var ee *ExitError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Run: %v\n%s", err, log.String())
			case tc.want != "" && !errors.As(err, &ee):
				t.Fatalf("Run: %v, want the engine's exit\n%s", err, log.String())
			case tc.want != "":
				if got := classify(lines); got != tc.want {
					t.Errorf("classed %s, want %s\n%s", got, tc.want, log.String())
				}
			default:
				if l := engine.OOMLine(lines) + engine.GPUBusyLine(lines); l != "" {
					t.Errorf("a healthy start's line %q would class a later death as oom/gpu_busy", l)
				}
			}
			for _, h := range tc.has {
				if !strings.Contains(log.String(), h) {
					t.Errorf("log lacks %q:\n%s", h, log.String())
				}
			}
			if tc.lastHas != "" && !strings.Contains(engine.LastLine(lines), tc.lastHas) {
				t.Errorf("last line %q lacks %q", engine.LastLine(lines), tc.lastHas)
			}
		})
	}
}

// TestSGLangUnbalancedIsGPUBusy: SGLang's tensor-parallel memory check
// (python/sglang/srt/model_executor/model_runner.py,
// ModelRunner.init_torch_distributed) raises when one rank's GPU has less
// free memory than the others, "Some GPUs may be occupied by other
// processes": like vLLM's guard, a GPU not yet free, gpu_busy. With
// SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK off it is only a warning, which
// must not class a later death.
func TestSGLangUnbalancedIsGPUBusy(t *testing.T) {
	raised := []string{
		"[2026-11-26 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
		"RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=41.2, local_gpu_memory=78.9, local_gpu_memory * 0.9=71.01",
	}
	if got := classify(raised); got != engine.ClassGPUBusy {
		t.Errorf("raised: %s, want gpu_busy", got)
	}
	old := []string{"ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=41.2, local_gpu_memory=78.9, local_gpu_memory * 0.9=71.01"}
	if got := classify(old); got != engine.ClassGPUBusy {
		t.Errorf("0.5.5's ValueError: %s, want gpu_busy", got)
	}
	warned := []string{
		"[2026-11-26 10:00:00 TP0] The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=41.2, local_gpu_memory=78.9, local_gpu_memory * 0.9=71.01",
		"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
	}
	if got := classify(warned); got != engine.ClassOOM {
		t.Errorf("a warning then an OOM: %s, want oom", got)
	}
}
