package sim

import (
	"fmt"
	"slices"

	"github.com/perflab/perflab/internal/engine"
)

// Kind is how the simulator imitates one engine: the parts of its model
// that differ between engines (start-up defaults, KV-cache sizing, the
// scheduler, when a step runs without a CUDA graph, which requests it
// refuses, the data-parallel routing), each read from that engine's source
// at the pinned versions (the functions' comments say where; moved here
// unchanged from the switches they replace).
// Each engine is registered once, in kinds, under its engine.Kind name;
// the model asks the Params' Kind instead of switching on the engine's
// name, so an engine the simulator learns is one more entry here.
type Kind struct {
	// Name is the engine.Kind name the Kind imitates (Params.Engine).
	Name string

	// defaults replaces p's zero knobs by what the engine sets at
	// start-up and refuses what it refuses (Params.WithDefaults' engine
	// part); the batch limits are engine.Kind.BatchDefaults'.
	defaults func(p *Params, hw GPU, arch Arch) error
	// memory is the KV cache's bytes per GPU out of total, after weights
	// and the profiling run's activation peak act; it sets the engine's
	// block size and CUDA-graph capture sizes on e.
	memory func(e *Engine, total, weights, act float64) float64
	// noCache is the engine's start-up failure when not one KV block fits.
	noCache func(p Params, hw GPU, weights float64) error
	// maxLenFits: the engine refuses to start when one request of
	// max_model_len does not fit in the KV cache (vLLM's
	// check_enough_kv_cache_memory).
	maxLenFits bool
	// poolMaxSeqs: an unset MaxNumSeqs is derived from the KV pool
	// (SGLang's max_running_requests).
	poolMaxSeqs bool
	// statePool splits rest, the cache memory left after weights, between
	// a hybrid model's per-request linear-attention state and the KV
	// cache, for an engine that keeps the states in a pool of their own:
	// kv is what the KV cache gets and maxSeqs the running requests the
	// state pool allows. nil: the states take KV-cache blocks, one
	// sequence's worth each (vLLM's hybrid KV-cache manager).
	statePool func(e *Engine, rest float64) (kv float64, maxSeqs int)
	// schedule forms one step's batch.
	schedule func(e *Engine, start float64) []work
	// graphsPrefill: a step that holds a prefill still runs in a CUDA
	// graph (vLLM's piecewise graphs); the others run such a step eagerly.
	graphsPrefill bool
	// budgetCapsPrompt: without chunked prefill, a prompt longer than the
	// token budget is refused (TensorRT-LLM's max_num_tokens).
	budgetCapsPrompt bool
	// scanDecodes reports whether the decodes of a step that holds a
	// prefill run through the chunked linear-attention scan (nil: never).
	scanDecodes func(e *Engine) bool
	// offlineGraphs sets the CUDA graphs the engine's own offline
	// benchmark configures, where they differ from a served engine's
	// (nil: the same).
	offlineGraphs func(e *Engine)
	// route is the data-parallel front end's routing as argv sets it
	// (nil: vLLM's least-loaded balancer).
	route func(argv []string) Route
	// intGEMM names the kernel the engine runs a weight-only INT4/INT8
	// checkpoint's GEMMs with on hw and the share of the 16-bit GEMMs'
	// rate it reaches once compute-bound (nil: no kernel figure read, the
	// 16-bit rate).
	intGEMM func(p Params, hw GPU) (share float64, kernel string)
	// outputsApart: the API server's streamed outputs do not queue behind
	// the admissions it has not finished. vLLM renders and tokenizes a
	// request off its event loop (renderers/base.py, the
	// AsyncMicrobatchTokenizer's worker thread) and streams from an output
	// handler task that yields between chunks of outputs
	// (v1/engine/async_llm.py, VLLM_V1_OUTPUT_PROC_CHUNK_SIZE). false: one
	// FIFO for both, as SGLang's and TensorRT-LLM's calibrations were
	// fitted (their API servers not read for this).
	outputsApart bool
}

// kinds is the one place the simulated engines are registered.
var kinds = []*Kind{
	{
		Name:          engine.VLLM,
		defaults:      vllmDefaults,
		memory:        vllmMemory,
		noCache:       vllmNoCache,
		maxLenFits:    true,
		schedule:      (*Engine).scheduleVLLM,
		graphsPrefill: true,
		scanDecodes:   vllmScanDecodes,
		intGEMM:       vllmIntGEMM,
		outputsApart:  true,
	},
	{
		Name:        engine.SGLang,
		defaults:    sglangDefaults,
		memory:      sglangMemory,
		noCache:     sglangNoCache,
		poolMaxSeqs: true,
		statePool:   sglangStatePool,
		schedule:    (*Engine).scheduleSGLang,
		scanDecodes: (*Engine).mixedChunk,
		route:       sglangRoute,
	},
	{
		Name:             engine.TRTLLM,
		defaults:         trtllmDefaults,
		memory:           trtllmMemory,
		noCache:          trtllmNoCache,
		schedule:         (*Engine).scheduleTRT,
		budgetCapsPrompt: true,
		offlineGraphs:    trtllmBenchGraphs,
	},
}

// KindOf is the simulator's Kind of the engine named name (engine.Kind's
// name), or nil and false for an engine the simulator does not imitate.
func KindOf(name string) (*Kind, bool) {
	i := slices.IndexFunc(kinds, func(k *Kind) bool { return k.Name == name })
	if i < 0 {
		return nil, false
	}
	return kinds[i], true
}

// vllmMemory: vLLM profiles with torch.compile'd, reused buffers: its
// measured peak is far below the naive intermediate sizes. The published
// Qwen3-32B BF16 run (max_model_len 40960 at 0.9) starts, which bounds
// this reserve to ~0.25 GiB on an H100.
func vllmMemory(e *Engine, total, weights, act float64) float64 {
	p := e.p
	kv := total*p.MemFraction - weights - 0.05*act - 0.05*gib
	e.blockSize = 16
	// vLLM's largest CUDA-graph capture size: min(2 × max_num_seqs ×
	// decode query length, 512), and never above the token budget;
	// performance mode changes the spacing of the sizes, not the cap.
	dql := 1
	if p.SpecMethod != "" {
		dql += p.SpecTokens
	}
	e.graphMax = min(512, 2*p.MaxNumSeqs*dql, max(p.MaxNumBatchedTokens, 1))
	e.graphDQL = dql
	return kv
}

func sglangMemory(e *Engine, total, weights, act float64) float64 {
	e.blockSize = 1
	e.graphMax = 256
	if e.hw.MemGiB > 100 {
		e.graphMax = 512
	}
	return total*e.p.MemFraction - weights
}

// SGLang's mamba pool (handle_max_mamba_cache and init_memory_pool,
// model_runner_kv_cache_mixin.py, v0.5.9): under speculative decoding the
// draft tokens' intermediate states are set aside first (a state per
// draft token of every running request); with the radix cache off and
// max_running_requests set, there is one slot per running request;
// otherwise the memory left is split mamba_full_memory_ratio : 1 (0.9)
// between the slots and the KV cache. max_running_requests is capped at
// the slots over the mamba ratio: 3 with the radix cache on (cached
// prefixes hold slots of their own), 1 with it off.
const (
	sglangMambaFullMemoryRatio = 0.9
	sglangMambaSlotsPerRequest = 3
)

func sglangStatePool(e *Engine, rest float64) (kv float64, maxSeqs int) {
	p := e.p
	if p.SpecMethod != "" && p.MaxNumSeqs > 0 {
		rest -= e.stateBytesSeq * float64(p.MaxNumSeqs*(p.SpecTokens+1))
	}
	ratio := sglangMambaSlotsPerRequest
	if !*p.PrefixCaching {
		ratio = 1
	}
	slots := int(rest * sglangMambaFullMemoryRatio / (1 + sglangMambaFullMemoryRatio) / e.stateBytesSeq)
	if !*p.PrefixCaching && p.MaxNumSeqs > 0 {
		slots = p.MaxNumSeqs
	}
	return rest - float64(slots)*e.stateBytesSeq, slots / ratio
}

// trtllmMemory: the profiling pass that sizes the KV cache runs dummy
// prompts totalling max_num_tokens, with or without chunked prefill
// (KvCacheCreator): a context longer than max_num_tokens is refused
// without chunking, never run in one pass, so chunking does not change the
// cache size.
func trtllmMemory(e *Engine, total, weights, act float64) float64 {
	nonTorch := 0.6 * gib
	e.blockSize = 32
	sizes := trtllmGraphs(e.p)
	e.graphMax = sizes[len(sizes)-1]
	if !e.p.GraphPadding {
		e.graphSizes = sizes
	}
	return (total - weights - act - nonTorch - 1.0*gib) * e.p.MemFraction
}

// trtllmGraphMax is cuda_graph_config's max_batch_size when neither it nor
// batch_sizes is given: TensorRT-LLM's LLM API turns CUDA graphs on by
// default (TorchLlmArgs.cuda_graph_config's default factory) and caps them
// at 128 (validate_cuda_graph_config, tensorrt_llm/llmapi/llm_args.py).
const trtllmGraphMax = 128

// trtllmGraphs are the sizes p captures: its own, or the default config's.
func trtllmGraphs(p Params) []int {
	if len(p.GraphBatchSizes) > 0 {
		return p.GraphBatchSizes
	}
	return TRTLLMGraphSizes(trtllmGraphMax, p.GraphPadding)
}

// TRTLLMGraphSizes are the batch sizes TensorRT-LLM captures for
// cuda_graph_config's max_batch_size max (CudaGraphConfig.
// _generate_cuda_graph_batch_sizes): with enable_padding 1, 2, 4 and every
// multiple of 8 up to 128; without it (the default) every size up to 31,
// then 32, 64 and 128; then the powers of two from 256 below max, and max
// itself. Without padding a decode batch of another size is not rounded
// up (CUDAGraphRunner pads only with enable_padding and otherwise replays
// a graph only for a captured size: maybe_get_cuda_graph,
// tensorrt_llm/_torch/pyexecutor/cuda_graph_runner.py) and runs eagerly,
// so trtllm-serve at 40 running requests pays the eager step.
func TRTLLMGraphSizes(max int, padding bool) []int {
	if max < 1 {
		max = trtllmGraphMax
	}
	var s []int
	if padding {
		s = []int{1, 2, 4}
		for n := 8; n <= 128; n += 8 {
			s = append(s, n)
		}
	} else {
		for n := 1; n < 32; n++ {
			s = append(s, n)
		}
		s = append(s, 32, 64, 128)
	}
	for n := 256; n < max; n *= 2 {
		s = append(s, n)
	}
	s = slices.DeleteFunc(s, func(n int) bool { return n > max })
	if s[len(s)-1] != max {
		s = append(s, max)
	}
	return s
}

// trtllmBenchGraphs: trtllm-bench throughput configures graphs of its own,
// padded, up to the benchmark's max batch size (get_settings in
// tensorrt_llm/bench/benchmark/utils/general.py), but every offline table
// the simulator is checked on except one ran the TensorRT engine backend
// (0.15 to 0.17), which launches no PyTorch kernels, and the offline loss
// share was fitted with graphs padded up to 128 and eager steps above.
// Modelling trtllm-bench's padding took the offline tables from 20.0 to
// 21.3% (docs/sim-fidelity.md, "TensorRT-LLM replays a CUDA graph only at
// the sizes it captured"), so offline runs keep that cap until the engine
// backend is modelled.
// trtllmMemory already set graphMax to the largest size, so dropping the
// exact sizes pads every batch up to it.
func trtllmBenchGraphs(e *Engine) {
	e.graphSizes = nil
}

func vllmNoCache(p Params, hw GPU, weights float64) error {
	return fmt.Errorf("%w: ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine. (weights %.2f GiB, gpu_memory_utilization %.2f of %.2f GiB)",
		ErrOOM, weights/gib, p.MemFraction, hw.MemGiB)
}

func sglangNoCache(p Params, hw GPU, weights float64) error {
	return fmt.Errorf("%w: RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. (weights %.2f GiB, mem_fraction_static %.3f of %.2f GiB)",
		ErrOOM, weights/gib, p.MemFraction, hw.MemGiB)
}

func trtllmNoCache(p Params, hw GPU, weights float64) error {
	return fmt.Errorf("%w: RuntimeError: Executor failed to allocate KV cache: no free GPU memory after loading %.2f GiB of weights", ErrOOM, weights/gib)
}

// vllmScanDecodes: vLLM before #44700 (merged 2026-06-06, after 0.22.1)
// ran every non-speculative sequence of a step that holds a prefill
// through the chunked kernel, each one-token decode as a padded 64-token
// chunk with its state gathered and scattered around it; only decode-only
// steps used the recurrent kernel. (SGLang keeps prefill and decode batches
// apart unless --enable-mixed-chunk, and a mixed batch runs its decodes
// through the extend (chunked) kernels too, sglang#36065, still open in
// 2026-08: its Kind's scanDecodes is Engine.mixedChunk.)
func vllmScanDecodes(e *Engine) bool { return !engine.VersionAtLeast(e.p.Version, "0.23.0") }

// sglangRoute is SGLang's --load-balance-method: round_robin by default;
// minimum_tokens is taken as shortest_queue, which the simulator cannot
// tell apart for requests it has only counted.
func sglangRoute(argv []string) Route {
	switch flagValue(argv, "--load-balance-method") {
	case "shortest_queue", "minimum_tokens":
		return RouteShortestQueue
	}
	return RouteRoundRobin
}

// marlinLargeBatch is the share of the 16-bit GEMM's rate the Marlin
// kernels keep once the batch makes a GEMM compute-bound: Marlin runs its
// 64-row tile again for each 64 rows (IST-DASLab/marlin#2) and, on Hopper,
// through the Ampere mma instructions (neuralmagic/nm-vllm#401). Its
// benchmark in vllm-project/vllm#2497 (2024-01-24, Marlin's bench.py
// against torch's 16-bit GEMM, batch 256 to 4,000: 0.74, 0.73, 0.66,
// 0.60, 0.61) gives the mean, 0.67.
const marlinLargeBatch = 0.67

// vllmIntGEMM is vLLM's kernel choice for a weight-only checkpoint
// (model_executor/layers/quantization, 0.9 to 0.17): awq_marlin and
// gptq_marlin override the checkpoint's method unless --quantization
// names the plain one, which vLLM then keeps. Plain AWQ dequantizes the
// weights and runs the 16-bit GEMM from 256 tokens on (vllm#2566); plain
// GPTQ runs the ExLlamaV2 kernels, for which nothing here was measured:
// priced as Marlin. A GPTQ-format checkpoint (GPTQ, compressed-tensors
// W4A16/W8A16) on Hopper goes through choose_mp_linear_kernel, which puts
// Machete first: a CUTLASS wgmma kernel, priced at the 16-bit rate.
// AWQ Marlin calls the Marlin kernel directly on every GPU.
//
// An FP8 checkpoint reaches it only on a GPU without FP8 tensor cores
// (weightOnly), where Fp8LinearMethod sets use_marlin (below compute
// capability 8.9, fp8.py at v0.11.0) and runs the FP8 Marlin kernel:
// weight-only, 16-bit math, priced as Marlin.
func vllmIntGEMM(p Params, hw GPU) (float64, string) {
	if p.Quantization == "fp8" {
		return marlinLargeBatch, "FP8 Marlin (the GPU has no FP8 tensor cores)"
	}
	switch p.QuantMethod {
	case "awq":
		return 1, "AWQ (dequantized to 16 bits, then the 16-bit GEMM)"
	case "gptq":
		return marlinLargeBatch, "GPTQ ExLlamaV2 (priced as Marlin)"
	}
	if p.Quantization == "gptq" && hw.SM == 90 {
		return 1, "Machete"
	}
	return marlinLargeBatch, "Marlin"
}

// WeightOnlyKernel names the kernel the engine runs deployment p's
// weight-only INT4/INT8 GEMMs with and the share of the 16-bit GEMMs' rate
// it is priced at once compute-bound. ok is false for a checkpoint that
// is not weight-only and for an engine whose choice was not read.
func WeightOnlyKernel(p Params) (kernel string, share float64, ok bool) {
	p, err := p.WithDefaults()
	if err != nil {
		return "", 0, false
	}
	a, err := p.arch()
	k, known := KindOf(p.Engine)
	hw, _ := LookupGPU(p.GPU)
	if err != nil || !a.weightOnly(hw) || !known || k.intGEMM == nil {
		return "", 0, false
	}
	share, kernel = k.intGEMM(p, hw)
	return kernel, share, true
}
