package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/perflab/perflab/internal/engine"
)

// Engine names as Params.Engine spells them: the engine package's.
const (
	EngineVLLM   = engine.VLLM
	EngineSGLang = engine.SGLang
	EngineTRTLLM = engine.TRTLLM
)

// defaultVersions are the versions used when Params.Version is empty: the
// engine package's one table (engine.DefaultVersions), so the simulator,
// the renderer and the lab never disagree on what an unpinned engine is.
var defaultVersions = engine.DefaultVersions

// Params is one simulated deployment: the engine and its knobs in the
// engine's own meaning. Zero values mean "the engine's default"; call
// WithDefaults to resolve them the way that engine version does at start-up.
// internal/sim/simargs fills a Params from an engine's real argv.
type Params struct {
	// Engine is "vllm", "sglang" or "trtllm".
	Engine string `json:"engine"`
	// Version is the engine version ("0.11.0", "0.5.5.post1", "1.2.0rc1");
	// empty means the newest version the calibration knows.
	Version string `json:"version,omitempty"`
	// Model is a catalog name ("Qwen3-14B", "Qwen3-14B-FP8") or an HF repo id
	// ("Qwen/Qwen3-14B"); a path given with ModelConfig overrides the catalog.
	Model string `json:"model"`
	// ModelConfig is an HF config.json path for a model not in the catalog.
	ModelConfig string `json:"model_config,omitempty"`
	// Route is how the front end spreads requests over DP replicas (the
	// engine's: vLLM's least-loaded balancer, SGLang's
	// --load-balance-method).
	Route Route `json:"route,omitempty"`
	// GPU is a hardware catalog name ("H100", "H100-PCIe", "H200", "A100",
	// "A100-40GB", "L40S", "B200", …: GPUNames) or a spelling LookupGPU
	// knows.
	GPU string `json:"gpu"`
	// GPUs is how many GPUs the deployment has (0 = TP*DP).
	GPUs int `json:"gpus,omitempty"`
	// TP and DP are the tensor- and data-parallel sizes (0 = 1).
	TP int `json:"tp,omitempty"`
	DP int `json:"dp,omitempty"`
	// EP turns on expert parallelism for MoE models (experts spread over
	// TP*DP ranks instead of being sliced by TP).
	EP bool `json:"ep,omitempty"`
	// Quantization is "" (the checkpoint's dtype) or "fp8". A "-FP8" model
	// name implies "fp8".
	Quantization string `json:"quantization,omitempty"`
	// QuantMethod is the weight-only method the engine was told by name
	// (vLLM's --quantization awq, awq_marlin, gptq, gptq_marlin), "auto"
	// when the checkpoint's quantization_config decides, "" for a
	// checkpoint that is not weight-only: which kernel runs its GEMMs
	// (Kind.intGEMM). WithDefaults sets it.
	QuantMethod string `json:"quant_method,omitempty"`
	// KVCacheDtype is "" (model dtype) or "fp8".
	KVCacheDtype string `json:"kv_cache_dtype,omitempty"`
	// AttentionBackend is the engine's own backend name; "" = its default.
	AttentionBackend string `json:"attention_backend,omitempty"`
	// MaxNumSeqs is vLLM --max-num-seqs, SGLang --max-running-requests,
	// TensorRT-LLM --max_batch_size (0 = engine default).
	MaxNumSeqs int `json:"max_num_seqs,omitempty"`
	// MaxNumBatchedTokens is vLLM --max-num-batched-tokens, SGLang
	// --chunked-prefill-size (prefill token budget), TensorRT-LLM
	// --max_num_tokens (0 = engine default).
	MaxNumBatchedTokens int `json:"max_num_batched_tokens,omitempty"`
	// ChunkedPrefill and PrefixCaching are tri-state: nil = engine default.
	ChunkedPrefill *bool `json:"chunked_prefill,omitempty"`
	PrefixCaching  *bool `json:"prefix_caching,omitempty"`
	// SpecMethod is the speculative decoding method ("mtp", "eagle",
	// "eagle3", "ngram", "draft_model"); "" = none.
	SpecMethod string `json:"spec_method,omitempty"`
	// SpecTokens is the number of draft tokens per step.
	SpecTokens int `json:"spec_tokens,omitempty"`
	// SpecAcceptance is the per-draft-token acceptance probability
	// (0 = the model's default for the method).
	SpecAcceptance float64 `json:"spec_acceptance,omitempty"`
	// MaxModelLen is the context length (0 = the model's
	// max_position_embeddings, which is what all three engines use).
	MaxModelLen int `json:"max_model_len,omitempty"`
	// MemFraction is the memory knob in the engine's own meaning: vLLM
	// --gpu-memory-utilization (share of total memory), SGLang
	// --mem-fraction-static (share of total for weights+KV), TensorRT-LLM
	// kv_cache_config.free_gpu_memory_fraction (share of memory free after
	// weights). 0 = engine default.
	MemFraction float64 `json:"mem_fraction,omitempty"`
	// AttentionDP is attention data parallelism (TensorRT-LLM's
	// enable_attention_dp, SGLang's --enable-dp-attention): each rank
	// runs attention for its own requests while the MLP stays tensor
	// parallel. The simulator does not model it and refuses it, rather
	// than price it as plain TP (issue 26).
	AttentionDP bool `json:"attention_dp,omitempty"`
	// EnforceEager disables CUDA graphs (vLLM --enforce-eager, SGLang
	// --disable-cuda-graph, TensorRT-LLM without cuda_graph_config).
	EnforceEager bool `json:"enforce_eager,omitempty"`
	// GraphBatchSizes are the decode batch sizes TensorRT-LLM captures in
	// CUDA graphs (its cuda_graph_config's batch_sizes, or the sizes it
	// generates from max_batch_size: TRTLLMGraphSizes); empty: the
	// default cuda_graph_config's.
	GraphBatchSizes []int `json:"cuda_graph_batch_sizes,omitempty"`
	// GraphPadding is TensorRT-LLM's cuda_graph_config.enable_padding: a
	// decode batch is rounded up to the next captured size instead of
	// running eagerly (vLLM and SGLang always pad).
	GraphPadding bool `json:"cuda_graph_padding,omitempty"`
	// AsyncScheduling overlaps CPU scheduling with GPU work (vLLM
	// --async-scheduling; SGLang's overlap scheduler); nil = engine default.
	AsyncScheduling *bool `json:"async_scheduling,omitempty"`
	// PerformanceMode is vLLM's --performance-mode ("balanced",
	// "interactivity", "throughput"; 0.17+); "" = default.
	PerformanceMode string `json:"performance_mode,omitempty"`
	// MixedChunk is SGLang's --enable-mixed-chunk: a prefill batch also
	// carries one decode step of every running request, whose tokens come
	// out of the chunk budget (only with chunked prefill, as SGLang's
	// scheduler sets is_mixed_chunk; not with speculative decoding).
	MixedChunk bool `json:"mixed_chunk,omitempty"`
	// NoFaults turns off the known engine bugs the simulator reproduces
	// (see faults.go): with it, a configuration the real engine crashes
	// on runs to the end.
	NoFaults bool `json:"no_faults,omitempty"`
}

// ErrBadParams is wrapped by every Params validation error.
var ErrBadParams = errors.New("sim: invalid parameters")

func boolPtr(b bool) *bool { return &b }

// WithDefaults returns p with every zero knob replaced by what the engine
// version sets at start-up on that GPU and model, and validates it. The
// defaults were read from vLLM's engine/arg_utils.py (0.11.0, 0.17.1),
// SGLang's server_args.py (0.5.5.post1, 0.5.9) and TensorRT-LLM's llm_args.py
// / trtllm-serve (1.2.0rc1).
// DefaultVersion is the version of engine used when none is given ("" for
// an engine the simulator does not know).
func DefaultVersion(engine string) string { return defaultVersions[engine] }

func (p Params) WithDefaults() (Params, error) {
	p.Engine = strings.ToLower(strings.TrimSpace(p.Engine))
	if p.Engine == "" {
		p.Engine = EngineVLLM
	} else if k, ok := engine.ParseKind(p.Engine); ok {
		p.Engine = k.Name
	}
	dv, ok := defaultVersions[p.Engine]
	k, known := KindOf(p.Engine)
	if !ok || !known {
		return p, fmt.Errorf("%w: unknown engine %q (want %s)", ErrBadParams, p.Engine, engine.KindList())
	}
	if p.Version == "" {
		p.Version = dv
	}
	p.Version = strings.TrimPrefix(p.Version, "v")
	if p.GPU == "" {
		p.GPU = "H100"
	}
	hw, err := LookupGPU(p.GPU)
	if err != nil {
		return p, fmt.Errorf("%w: %v", ErrBadParams, err)
	}
	p.GPU = hw.Name
	if p.Model == "" {
		return p, fmt.Errorf("%w: no model", ErrBadParams)
	}
	arch, err := p.arch()
	if err != nil {
		return p, fmt.Errorf("%w: %v", ErrBadParams, err)
	}
	if arch.FP8Weights && p.Quantization == "" {
		p.Quantization = "fp8"
	}
	p.Quantization = strings.ToLower(p.Quantization)
	if m, ok := intQuantMethods[p.Quantization]; ok {
		if p.QuantMethod == "" {
			p.QuantMethod = p.Quantization
		}
		p.Quantization = m
	}
	if arch.WeightBits > 0 && p.QuantMethod == "" {
		p.QuantMethod = "auto"
	}
	if arch.WeightBits > 0 && p.Quantization == "" {
		// The checkpoint says how it is quantized; the engines pick the
		// method from its quantization_config, as p.Quantization would.
		p.Quantization = "awq"
		if strings.Contains(strings.ToLower(arch.Name), "gptq") {
			p.Quantization = "gptq"
		}
	}
	p.KVCacheDtype = strings.ToLower(p.KVCacheDtype)
	switch p.KVCacheDtype {
	case "auto", "bfloat16", "bf16", "float16", "fp16":
		p.KVCacheDtype = ""
	case "fp8_e4m3", "fp8_e5m2":
		p.KVCacheDtype = "fp8"
	}
	if p.Quantization != "" && p.Quantization != "fp8" && p.Quantization != "awq" && p.Quantization != "gptq" {
		return p, fmt.Errorf("%w: quantization %q not modelled (want fp8, awq or gptq)", ErrBadParams, p.Quantization)
	}
	if (p.Quantization == "awq" || p.Quantization == "gptq") && arch.WeightBits == 0 {
		return p, fmt.Errorf("%w: quantization %s needs an %s checkpoint (a -AWQ or -GPTQ model, or a config.json whose quantization_config says so); %s is not one",
			ErrBadParams, p.Quantization, strings.ToUpper(p.Quantization), p.Model)
	}
	if p.AttentionDP {
		return p, fmt.Errorf("%w: attention data parallelism (TensorRT-LLM enable_attention_dp, SGLang --enable-dp-attention) is not modelled; the simulator would price it as plain tensor parallelism", ErrBadParams)
	}
	if p.KVCacheDtype != "" && p.KVCacheDtype != "fp8" {
		return p, fmt.Errorf("%w: kv cache dtype %q not modelled (want auto or fp8)", ErrBadParams, p.KVCacheDtype)
	}
	if p.TP <= 0 {
		p.TP = 1
	}
	if p.DP <= 0 {
		p.DP = 1
	}
	if p.GPUs <= 0 {
		p.GPUs = p.TP * p.DP
	}
	if p.TP*p.DP > p.GPUs {
		return p, fmt.Errorf("%w: tp %d x dp %d needs %d GPUs, have %d", ErrBadParams, p.TP, p.DP, p.TP*p.DP, p.GPUs)
	}
	if p.MaxModelLen < 0 || p.MaxNumSeqs < 0 || p.MaxNumBatchedTokens < 0 || p.SpecTokens < 0 {
		return p, fmt.Errorf("%w: negative size", ErrBadParams)
	}
	if p.MaxModelLen == 0 {
		p.MaxModelLen = arch.MaxPositionEmbeddings
	}
	if p.SpecMethod != "" {
		if p.SpecTokens == 0 {
			p.SpecTokens = 1
		}
		if p.SpecAcceptance == 0 {
			p.SpecAcceptance = defaultAcceptance(p.SpecMethod)
		}
		if p.SpecAcceptance < 0 || p.SpecAcceptance >= 1 {
			return p, fmt.Errorf("%w: speculative acceptance %g outside [0,1)", ErrBadParams, p.SpecAcceptance)
		}
	}
	if p.MemFraction < 0 || p.MemFraction > 1 {
		return p, fmt.Errorf("%w: memory fraction %g outside (0,1]", ErrBadParams, p.MemFraction)
	}
	if err := k.defaults(&p, hw, arch); err != nil {
		return p, err
	}
	return p, nil
}

// vllmDefaults is vLLM's part of WithDefaults (engine/arg_utils.py).
func vllmDefaults(p *Params, hw GPU, arch Arch) error {
	// vLLM V1 (_set_default_args): chunked prefill and prefix caching
	// on; bigger batches on >=70 GiB non-A100 GPUs for the API server.
	if p.MemFraction == 0 {
		p.MemFraction = 0.9
	}
	if p.ChunkedPrefill == nil {
		p.ChunkedPrefill = boolPtr(true)
	}
	if p.PrefixCaching == nil {
		// Hybrid (Mamba / linear-attention) models had prefix caching
		// off by default: their state cannot be shared by block hash.
		p.PrefixCaching = boolPtr(!arch.Hybrid())
	}
	if p.SpecMethod == "mtp" && arch.MTPLayers == 0 {
		// SpeculativeConfig.__post_init__ (vllm/config/speculative.py):
		// MTP with no draft named drafts with the target itself, whose
		// model type is no MTP type, so the method falls through to the
		// refusal, before any weight loads.
		return fmt.Errorf("%w: NotImplementedError: Unsupported speculative method: 'mtp'", ErrBadParams)
	}
	if p.PerformanceMode == "" {
		if engine.VersionAtLeast(p.Version, "0.17.0") {
			p.PerformanceMode = "balanced"
		}
	} else if !engine.VersionAtLeast(p.Version, "0.17.0") {
		return fmt.Errorf("%w: --performance-mode is not in vLLM %s", ErrBadParams, p.Version)
	}
	switch p.PerformanceMode {
	case "", "balanced", "interactivity", "throughput":
	default:
		return fmt.Errorf("%w: performance mode %q (want balanced, interactivity or throughput)", ErrBadParams, p.PerformanceMode)
	}
	def := batchDefaults(engine.VLLM, *p, hw)
	if p.MaxNumSeqs == 0 {
		p.MaxNumSeqs = def.MaxNumSeqs
	}
	if p.MaxNumBatchedTokens == 0 {
		p.MaxNumBatchedTokens = def.MaxNumBatchedTokens
		if !*p.ChunkedPrefill && p.MaxNumBatchedTokens < p.MaxModelLen {
			p.MaxNumBatchedTokens = p.MaxModelLen
		}
	}
	if !*p.ChunkedPrefill && p.MaxNumBatchedTokens < p.MaxModelLen {
		// vLLM's SchedulerConfig refuses to start rather than reject
		// every prompt longer than the token budget.
		return fmt.Errorf("%w: ValueError: max_num_batched_tokens (%d) is smaller than max_model_len (%d). This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len.",
			ErrBadParams, p.MaxNumBatchedTokens, p.MaxModelLen)
	}
	if p.AsyncScheduling == nil {
		// Async scheduling became the default in the 0.14 line.
		p.AsyncScheduling = boolPtr(engine.VersionAtLeast(p.Version, "0.14.0") && !p.EnforceEager && p.SpecMethod == "")
	}
	if p.AttentionBackend == "" {
		p.AttentionBackend = "FLASH_ATTN"
		if arch.Hybrid() {
			p.AttentionBackend = "FLASHINFER"
		}
	}
	p.AttentionBackend = strings.ToUpper(p.AttentionBackend)
	return nil
}

// sglangDefaults is SGLang's part of WithDefaults (server_args.py).
func sglangDefaults(p *Params, hw GPU, arch Arch) error {
	if p.PerformanceMode != "" {
		return fmt.Errorf("%w: SGLang has no performance mode", ErrBadParams)
	}
	if p.MaxNumBatchedTokens == 0 {
		p.MaxNumBatchedTokens = batchDefaults(engine.SGLang, *p, hw).MaxNumBatchedTokens
	}
	if p.MemFraction == 0 {
		p.MemFraction = sglangMemFraction(hw, p.TP, p.MaxNumBatchedTokens, p.SpecMethod) * sglangVisionShare(arch.Vision)
	}
	if p.ChunkedPrefill == nil {
		p.ChunkedPrefill = boolPtr(p.MaxNumBatchedTokens > 0)
	}
	spec := p.SpecMethod != ""
	if p.PrefixCaching == nil {
		// The radix cache, except for a hybrid model under speculative
		// decoding: with the default mamba_scheduler_strategy (no_buffer)
		// _handle_mamba_radix_cache disables it (server_args.py, v0.5.9).
		p.PrefixCaching = boolPtr(!(arch.Hybrid() && spec))
	}
	// Speculative decoding, every algorithm (NEXTN runs as EAGLE; NGRAM
	// too): an unset max_running_requests becomes 48 and the overlap
	// scheduler is off (SGLANG_ENABLE_SPEC_V2 is off by default)
	// (_handle_speculative_decoding, server_args.py, v0.5.9).
	if p.MaxNumSeqs == 0 {
		p.MaxNumSeqs = batchDefaults(engine.SGLang, *p, hw).MaxNumSeqs
	}
	if p.AsyncScheduling == nil {
		// The overlap scheduler, except under speculative decoding and
		// for a hybrid model whose radix cache holds its states without a
		// ping-pong buffer (no_buffer): _handle_mamba_radix_cache turns
		// overlap off then (server_args.py, v0.5.9).
		noBuffer := arch.Hybrid() && *p.PrefixCaching
		p.AsyncScheduling = boolPtr(!p.EnforceEager && !noBuffer && !spec)
	}
	if p.AttentionBackend == "" {
		// fa3 on Hopper (is_hopper_with_cuda_12_3 in server_args.py's
		// default backend), flashinfer elsewhere.
		p.AttentionBackend = "fa3"
		if hw.SM != 90 {
			p.AttentionBackend = "flashinfer"
		}
		if arch.Hybrid() {
			p.AttentionBackend = "fa3"
		}
	}
	p.AttentionBackend = strings.ToLower(p.AttentionBackend)
	// MaxNumSeqs 0 otherwise stays 0: SGLang derives
	// max_running_requests from the KV pool size (see newEngine).
	return nil
}

// trtllmDefaults is TensorRT-LLM's part of WithDefaults (llm_args.py,
// trtllm-serve).
func trtllmDefaults(p *Params, hw GPU, arch Arch) error {
	if p.PerformanceMode != "" {
		return fmt.Errorf("%w: TensorRT-LLM has no performance mode", ErrBadParams)
	}
	if len(p.GraphBatchSizes) > 0 {
		p.GraphBatchSizes = slices.Sorted(slices.Values(p.GraphBatchSizes))
		if p.GraphBatchSizes[0] < 1 {
			return fmt.Errorf("%w: cuda_graph_config.batch_sizes %v: a batch size below 1", ErrBadParams, p.GraphBatchSizes)
		}
	}
	if p.MemFraction == 0 {
		p.MemFraction = 0.9
	}
	def := batchDefaults(engine.TRTLLM, *p, hw)
	if p.MaxNumSeqs == 0 {
		p.MaxNumSeqs = def.MaxNumSeqs
	}
	if p.MaxNumBatchedTokens == 0 {
		p.MaxNumBatchedTokens = def.MaxNumBatchedTokens
	}
	if p.ChunkedPrefill == nil {
		p.ChunkedPrefill = boolPtr(false)
	}
	if p.PrefixCaching == nil {
		p.PrefixCaching = boolPtr(true) // kv_cache_config.enable_block_reuse
	}
	if p.AsyncScheduling == nil {
		p.AsyncScheduling = boolPtr(!p.EnforceEager) // overlap scheduler
	}
	if p.AttentionBackend == "" {
		p.AttentionBackend = "TRTLLM"
	}
	p.AttentionBackend = strings.ToUpper(p.AttentionBackend)
	return nil
}

// batchDefaults are the batch limits engine name starts p with on hw when
// p leaves them unset: the engine package's BatchDefaults, which a lab
// reads to tell a default from a change, so that the two agree. Each
// Kind's defaults names its engine, not p's, so that a Kind registered
// under another name (TestKindIsTheOnlyBranch) behaves the same. The V1
// engine's defaults hold at every vLLM version, the one scheduler the
// simulator models; how an unchunked engine raises its budget is each
// engine's part.
func batchDefaults(name string, p Params, hw GPU) engine.BatchLimits {
	k, ok := engine.KindOf(name)
	if !ok {
		return engine.BatchLimits{}
	}
	c := engine.Config{Engine: name, PerformanceMode: p.PerformanceMode}
	if p.SpecMethod != "" {
		c.Speculative = &engine.Speculative{Method: p.SpecMethod, NumSpeculativeTokens: p.SpecTokens}
	}
	return k.BatchDefaults(c, engine.Device{Name: hw.Name, MemGiB: hw.MemGiB})
}

// sglangMemFraction is SGLang's default --mem-fraction-static
// (server_args._handle_gpu_memory_settings, since sglang#10975): the GPU's
// memory less a reserve in MiB of 512 for metadata, 1.5 per token of the
// chunked-prefill size (16384 without chunking) for the prefill's
// activations, 2 per CUDA-graph batch size, 1024 per 8 GPUs of TP, at least
// 10 GiB on a GPU over 60 GiB, and 2 GiB more for a speculative draft. On
// an H100 that is 13.1 GiB (0.835), not a round 10: 5.1 GiB of KV cache for
// the 32B BF16 rather than 7.2.
func sglangMemFraction(hw GPU, tp, chunk int, spec string) float64 {
	gpuMiB := hw.MemGiB * 1024
	graphBS := 256.0
	if tp >= 4 || hw.MemGiB >= 160 {
		graphBS = 512
	}
	if hw.MemGiB < 60 {
		graphBS = 160
	}
	act := chunk
	if act <= 0 {
		act = 16384
	}
	reserve := 512 + 1.5*float64(max(act, 2048)) + 2*graphBS + float64(tp)/8*1024
	if gpuMiB > 60*1024 {
		reserve = math.Max(reserve, 10*1024)
	}
	switch strings.ToLower(spec) {
	case "", "ngram":
	case "standalone":
		reserve += 6 * 1024
	default:
		reserve += 2 * 1024
	}
	f := math.Round((gpuMiB-reserve)/gpuMiB*1000) / 1000
	// Not SGLang's: a GPU too small for its reserve gets half, so the
	// engine reports the OOM on the weights instead of a bad fraction.
	return math.Max(f, 0.5)
}

// sglangVisionShare is what SGLang keeps of its default mem_fraction_static
// for a multimodal checkpoint, to leave room for the vision tower's
// activations (adjust_mem_fraction_for_vlm, server_args.py, v0.5.9): 0.95,
// less a tenth for each doubling of the tower's layers x hidden size over
// ViT-L's 24 x 1024, within [0.8, 1.05]. A config without the field reads
// as ViT-L's (Qwen3.5 names its depth "depth", so 24 layers are read).
// 1 for a text-only model.
func sglangVisionShare(v *VisionTower) float64 {
	if v == nil {
		return 1
	}
	layers, hidden := v.NumHiddenLayers, v.HiddenSize
	if layers == 0 {
		layers = 24
	}
	if hidden == 0 {
		hidden = 1024
	}
	ratio := float64(layers) * float64(hidden) * float64(hidden) / (24 * 1024 * 1024)
	return 0.95 * math.Max(0.8, math.Min(1.05, 1-0.1*(ratio-1)))
}

func defaultAcceptance(method string) float64 { return acceptanceOf(method).point }

// acceptancePrior is what published measurements say of a speculative
// method's per-draft-token acceptance a (mean accepted length L = (1 −
// a^(k+1)) / (1 − a), the bonus token counted): point for ordinary chat
// text, and the range [lo, hi] the published workloads span. Nothing
// measures it on the workload at hand, so a prediction with speculative
// decoding holds the run at both ends in its span (PredictSpan). Sources
// with commits are in docs/sim-fidelity.md, "Speculative acceptance".
type acceptancePrior struct {
	point, lo, hi float64
	// basis says where point comes from, for the span's note.
	basis string
}

// claim is what a prediction takes as given: "speculative acceptance
// 0.68 per draft token is EAGLE-3 on MT-Bench (vLLM's baselines), not
// measured on this workload".
func (a acceptancePrior) claim() string {
	return fmt.Sprintf("speculative acceptance %.2f per draft token is %s, not measured on this workload", a.point, a.basis)
}

func acceptanceOf(method string) acceptancePrior {
	switch strings.ToLower(method) {
	case "eagle3":
		// vLLM's EAGLE-3 acceptance baselines on MT-Bench at k=3: Llama-3.1-8B
		// 0.72, Qwen3-8B 0.63, gpt-oss-20b 0.71; Qwen3-VL-30B 0.26; Llama at
		// k=7 0.74.
		return acceptancePrior{0.68, 0.26, 0.75, "EAGLE-3 on MT-Bench (vLLM's baselines)"}
	case "eagle":
		// EAGLE-1 on MT-Bench in vLLM V1: 0.57 at k=2, 0.54 at k=4.
		return acceptancePrior{0.55, 0.26, 0.72, "EAGLE on MT-Bench (vLLM)"}
	case "mtp":
		// MTP on GSM8K in vLLM: 0.83 at k=1, 0.81 at k=8; DeepSeek-V4-Flash
		// on vLLM's random dataset 0.61 at k=2.
		return acceptancePrior{0.75, 0.6, 0.85, "MTP on GSM8K and random prompts (vLLM)"}
	case "ngram", "suffix":
		// Prompt lookup in generic chat: mean accepted length about 1.3–1.4
		// at 3–5 draft tokens (TensorRT-LLM's n-gram study), 0.23–0.29; a
		// translation set 0.73–0.79, code edits 0.70. On vLLM's random
		// dataset the prompt is a run of consecutive token ids with no
		// n-gram to copy, so drafts come only from the output repeating
		// itself: nothing, or a loop. Suffix decoding matches the same
		// text and has no cleaner published figure.
		return acceptancePrior{0.27, 0.01, 0.75, "prompt lookup in generic chat (TensorRT-LLM's n-gram study)"}
	default:
		// A separate draft model: no published figure was gathered.
		return acceptancePrior{0.6, 0.3, 0.8, "no published figure (a prior)"}
	}
}

// String renders the knobs that differ from zero, for logs and reports.
func (p Params) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s on %dx%s", p.Engine, p.Version, p.Model, max(p.GPUs, 1), p.GPU)
	add := func(k, v string) { b.WriteString(" " + k + "=" + v) }
	if p.TP > 1 {
		add("tp", strconv.Itoa(p.TP))
	}
	if p.DP > 1 {
		add("dp", strconv.Itoa(p.DP))
	}
	if p.Quantization != "" {
		add("quant", p.Quantization)
	}
	if p.KVCacheDtype != "" {
		add("kv", p.KVCacheDtype)
	}
	if p.AttentionBackend != "" {
		add("attn", p.AttentionBackend)
	}
	if p.MaxNumSeqs > 0 {
		add("max_seqs", strconv.Itoa(p.MaxNumSeqs))
	}
	if p.MaxNumBatchedTokens > 0 {
		add("max_tokens", strconv.Itoa(p.MaxNumBatchedTokens))
	}
	if p.ChunkedPrefill != nil {
		add("chunked", strconv.FormatBool(*p.ChunkedPrefill))
	}
	if p.PrefixCaching != nil {
		add("prefix", strconv.FormatBool(*p.PrefixCaching))
	}
	if p.PerformanceMode != "" {
		add("perf", p.PerformanceMode)
	}
	if p.MixedChunk {
		add("mixed_chunk", "true")
	}
	if p.SpecMethod != "" {
		add("spec", fmt.Sprintf("%s/%d", p.SpecMethod, p.SpecTokens))
	}
	return b.String()
}

// intQuantMethods maps the engines' names of the weight-only integer
// kernels (vLLM's QUANTIZATION_METHODS, SGLang's --quantization choices)
// to the checkpoint format the simulator prices.
var intQuantMethods = map[string]string{
	"awq": "awq", "awq_marlin": "awq", "gptq": "gptq", "gptq_marlin": "gptq", "moe_wna16": "gptq",
}

// arch resolves the model: a config.json path wins over the catalog; a
// "-FP8" model name or Quantization "fp8" gives FP8 weights.
func (p Params) arch() (Arch, error) {
	var a Arch
	var err error
	if p.ModelConfig != "" {
		a, err = LoadModelConfig(p.ModelConfig)
		if err != nil {
			return a, err
		}
		a.Name = p.Model
		if strings.HasSuffix(strings.ToLower(p.Model), "-fp8") {
			a.FP8Weights = true
		}
	} else {
		a, err = LookupModel(p.Model)
		if err != nil {
			return a, err
		}
	}
	if strings.EqualFold(p.Quantization, "fp8") {
		a.FP8Weights = true
	}
	return a, nil
}
