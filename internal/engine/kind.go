package engine

import (
	"net/http"
	"path/filepath"
	"slices"
	"strings"
)

// Kind is everything perflab knows about one engine that differs between
// engines: its names, its default version and images, the attention
// backends it accepts, the knobs only it has, the defaults an estimate
// assumes when a knob is unset, how it answers perflab (Protocol), how a
// config becomes its command line and what its versions cannot do. Each
// engine is registered once, in kinds; every caller asks KindOf instead of
// switching on the engine's name.
type Kind struct {
	// Name is the engine as written in Config.Engine ("vllm").
	Name string
	// Display is the name reports and progress lines print ("vLLM").
	Display string
	// Aliases are other spellings a user may type for the engine
	// ("tensorrt-llm"); ParseKind accepts them, Config.Engine does not.
	Aliases []string
	// DefaultVersion is the version assumed when Config.Version is empty:
	// the newest release whose argument parser this package was checked
	// against.
	DefaultVersion string
	// AttentionBackends are the backend names the engine accepts (vLLM's
	// AttentionBackendEnum names, SGLang's --attention-backend choices,
	// TensorRT-LLM's attn_backend values); Validate refuses any other.
	AttentionBackends []string
	// AttentionDefault is the backend the engine runs when none is named,
	// where that does not depend on the GPU or the model (TensorRT-LLM's
	// attn_backend defaults to TRTLLM); empty where it does (vLLM's and
	// SGLang's choice follows the platform and the attention kind).
	AttentionDefault string
	// AttentionCandidates are the backends a default search tries: the
	// common ones, which every supported GPU and model runs.
	AttentionCandidates []string
	// QuantizationCandidates are the precisions a default search tries:
	// online FP8 where the engine quantizes a BF16 checkpoint itself (vLLM,
	// SGLang), the pre-quantized -FP8 checkpoint where it cannot
	// (trtllm-serve has no online quantization).
	QuantizationCandidates []string
	// Image is where the engine's official images are.
	Image ImageRepo
	// Protocol is how a running server of the engine answers perflab.
	Protocol Protocol
	// AsyncScheduling and PerformanceMode say whether the engine has
	// these knobs (vLLM's --async-scheduling and --performance-mode); on
	// another engine a search skips a non-default value.
	AsyncScheduling, PerformanceMode bool
	// PadsGraphs says whether the engine, left to its default, pads a
	// decode batch up to the next size it captured a CUDA graph for.
	// vLLM always does (it has no switch); SGLang does unless
	// --disable-cuda-graph-padding; TensorRT-LLM's cuda_graph_config
	// enable_padding defaults to false, so a batch between two captured
	// sizes runs eagerly.
	PadsGraphs bool
	// LeastMaxNumSeqs is the smallest running-request cap the engine picks
	// when none is given, on any GPU (0: not known). vLLM's
	// get_batch_defaults gives 256 below 70 GiB and on the A100, 1024
	// above, doubled in throughput mode; TensorRT-LLM's max_batch_size
	// defaults to 2048. SGLang's depends on its KV pool, and is 48 under
	// speculative decoding, so it is left unknown.
	LeastMaxNumSeqs int
	// ChunksSince is the first version whose default chunks prefills when
	// Defaults.ChunkedPrefill says the engine does ("": every version):
	// vLLM's V1 engine, the default from 0.8.0.
	ChunksSince string
	// Programs are the executables (base names) that start the engine's
	// server; Modules are the Python modules (python3 -m M) that do, a
	// trailing "." matching any module under that package.
	Programs, Modules []string
	// DefaultPort is where the server listens without --port.
	DefaultPort int
	// Baseline marks the engine the reports compare others with.
	Baseline bool
	// ResultBackend is what a result of the engine records as its
	// benchmark backend and endpoint type: vLLM's runs are measured with
	// vllm bench serve's openai-chat backend, the others' under the
	// engine's own name.
	ResultBackend string
	// Defaults are what the engine does with a knob left unset, as the
	// lab's analytic estimate assumes it.
	Defaults Defaults
	// Reset is how a running server of the engine forgets its prefix
	// cache between two measurements (ResetFor): the endpoint, the env
	// the server needs for it, and whether its answer proves anything.
	Reset CacheReset
	// SaltSince, when set, is the first version that keeps measurements
	// apart by a request's cache_salt: from it on, Reset.Salt holds.
	SaltSince string

	// render appends the engine's command line to r.
	render func(r *renderer)
	// batch gives BatchDefaults: the limits vLLM and SGLang pick unset
	// follow the GPU, so a fixed Defaults entry cannot say them.
	batch func(k *Kind, c Config, d Device) BatchLimits
	// support reports, through no, each knob of c the engine at version v
	// cannot honour.
	support func(k *Kind, c Config, v version, no func(knob, value, hint string))
}

// ImageRepo is an engine's image repository and how its tags spell a
// version, plus the images pinned per version.
type ImageRepo struct {
	// Repo is the repository ("vllm/vllm-openai").
	Repo string
	// TagPrefix is put before the version in a tag: vLLM and SGLang tag
	// "v0.11.0", NVIDIA's registry tags "1.2.0rc1".
	TagPrefix string
	// Pinned are the images of the versions perflab pins (DefaultVersion
	// and the versions its renderer knows).
	Pinned map[string]string
}

// Defaults are an engine's behaviour for knobs left unset, in the rough
// terms the analytic estimate (lab's first guess before anything runs)
// uses.
type Defaults struct {
	// GPUMemoryFraction is the share of GPU memory the engine claims
	// (vLLM's gpu_memory_utilization 0.9, SGLang's mem_fraction_static
	// of about 0.87 on an 80 GB GPU, TensorRT-LLM's
	// free_gpu_memory_fraction 0.9).
	GPUMemoryFraction float64
	// MaxNumSeqs is the running-batch cap (vLLM 256, SGLang 1024,
	// TensorRT-LLM 2048).
	MaxNumSeqs float64
	// MaxNumBatchedTokens is the per-step token budget.
	MaxNumBatchedTokens float64
	// ChunkedPrefill says whether prefills are chunked by default.
	ChunkedPrefill bool
	// StepOverheadMs is the scheduler's fixed cost of one decode step
	// that the analytic estimate adds to memory time.
	StepOverheadMs float64
}

// kinds is the one place the engines are registered, in the order help
// texts and errors list them.
var kinds = []*Kind{
	{
		Name: VLLM, Display: "vLLM", DefaultVersion: "0.17.1",
		AttentionBackends: []string{"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION",
			"TREE_ATTN", "FLASHMLA", "FLASH_ATTN_MLA", "CUTLASS_MLA", "TRITON_MLA", "FLASHINFER_MLA", "XFORMERS"},
		AttentionCandidates:    []string{"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"},
		QuantizationCandidates: []string{QuantFP8},
		Image: ImageRepo{Repo: "vllm/vllm-openai", TagPrefix: "v", Pinned: map[string]string{
			"0.11.0": "vllm/vllm-openai:v0.11.0",
			"0.17.1": "vllm/vllm-openai:v0.17.1",
		}},
		Programs: []string{"vllm"}, Modules: []string{"vllm."}, DefaultPort: 8000,
		Protocol:        vllmProtocol{},
		AsyncScheduling: true, PerformanceMode: true, PadsGraphs: true, Baseline: true, ResultBackend: "openai-chat",
		LeastMaxNumSeqs: 256, ChunksSince: "0.8.0",
		Defaults: Defaults{GPUMemoryFraction: 0.9, MaxNumSeqs: 256, MaxNumBatchedTokens: 8192, ChunkedPrefill: true, StepOverheadMs: 9},
		// The route exists only under VLLM_SERVER_DEV_MODE=1
		// (vllm/entrypoints/openai/api_server.py at v0.11.0,
		// vllm/entrypoints/serve/cache/api_router.py at v0.17.1), and it
		// "currently do[es] not check if the prefix cache is successfully
		// reset": the scheduler refuses while blocks are held and the API
		// answers 200 anyway. The V1 engine counts lookups and hits as
		// vllm:prefix_cache_queries / vllm:prefix_cache_hits
		// (vllm/v1/metrics/loggers.py), exposed with prometheus_client's
		// _total suffix.
		Reset: CacheReset{Method: http.MethodPost, Path: "/reset_prefix_cache", Env: map[string]string{"VLLM_SERVER_DEV_MODE": "1"},
			Check: &CacheCheck{MetricsPath: "/metrics", Queries: "vllm:prefix_cache_queries_total", Hits: "vllm:prefix_cache_hits_total"}},
		render:  (*renderer).vllm,
		batch:   vllmBatch,
		support: vllmSupport,
	},
	{
		Name: SGLang, Display: "SGLang", DefaultVersion: "0.5.9",
		AttentionBackends: []string{"fa3", "flashinfer", "triton", "torch_native", "flex_attention",
			"flashmla", "cutlass_mla", "trtllm_mha", "trtllm_mla", "fa4", "aiter", "wave", "nsa"},
		AttentionCandidates:    []string{"fa3", "flashinfer", "triton"},
		QuantizationCandidates: []string{QuantFP8},
		Image: ImageRepo{Repo: "lmsysorg/sglang", TagPrefix: "v", Pinned: map[string]string{
			"0.5.5.post1": "lmsysorg/sglang:v0.5.5.post1",
			"0.5.9":       "lmsysorg/sglang:v0.5.9",
		}},
		Programs: []string{"sglang"}, Modules: []string{"sglang.launch_server"}, DefaultPort: 30000,
		Protocol: sglangProtocol{}, ResultBackend: SGLang, PadsGraphs: true,
		Defaults: Defaults{GPUMemoryFraction: 0.87, MaxNumSeqs: 1024, MaxNumBatchedTokens: 8192, ChunkedPrefill: true, StepOverheadMs: 6.5},
		// flush_cache refuses while requests are running (between two
		// measurements none are) and answers 400 when it could not flush
		// (python/sglang/srt/entrypoints/http_server.py): its answer is
		// the proof.
		Reset:   CacheReset{Method: http.MethodPost, Path: "/flush_cache"},
		render:  (*renderer).sglang,
		batch:   sglangBatch,
		support: sglangSupport,
	},
	{
		Name: TRTLLM, Display: "TensorRT-LLM", DefaultVersion: "1.2.0rc1",
		Aliases:                []string{"trt-llm", "tensorrt-llm", "tensorrt_llm"},
		AttentionBackends:      []string{"TRTLLM", "FLASHINFER", "VANILLA"},
		AttentionDefault:       "TRTLLM", // TorchLlmArgs.attn_backend, llmapi/llm_args.py
		LeastMaxNumSeqs:        2048,
		AttentionCandidates:    []string{"TRTLLM", "FLASHINFER"},
		QuantizationCandidates: []string{QuantFP8Checkpoint},
		Image: ImageRepo{Repo: "nvcr.io/nvidia/tensorrt-llm/release", Pinned: map[string]string{
			"1.2.0rc1": "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc1",
		}},
		Programs: []string{"trtllm-serve"}, DefaultPort: 8000,
		Protocol: trtllmProtocol{}, ResultBackend: TRTLLM,
		Defaults: Defaults{GPUMemoryFraction: 0.9, MaxNumSeqs: 2048, MaxNumBatchedTokens: 8192, ChunkedPrefill: false, StepOverheadMs: 6.8},
		// trtllm-serve has no reset endpoint. It reads a request's
		// cache_salt into the KV cache's block keys since TensorRT-LLM PR
		// #7106, merged to main in August 2025; 1.2.0rc0 is the first
		// release cut from main after it.
		SaltSince: "1.2.0rc0",
		render:    (*renderer).trtllm,
		batch:     trtllmBatch,
		support:   trtllmSupport,
	},
}

// KindOf is the registered engine named name exactly as Config.Engine
// writes it (no alias), or false.
func KindOf(name string) (*Kind, bool) {
	for _, k := range kinds {
		if k.Name == name {
			return k, true
		}
	}
	return nil, false
}

// ParseKind is the engine a user's spelling names: its Name or one of its
// Aliases, in any case, spaces trimmed.
func ParseKind(s string) (*Kind, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	for _, k := range kinds {
		if k.Name == s {
			return k, true
		}
		for _, a := range k.Aliases {
			if a == s {
				return k, true
			}
		}
	}
	return nil, false
}

// Kinds are the registered engines, in registration order.
func Kinds() []*Kind { return append([]*Kind(nil), kinds...) }

// KindNames are the registered engines' names, in registration order.
func KindNames() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.Name
	}
	return out
}

// KindList is KindNames for messages: "vllm, sglang or trtllm".
func KindList() string {
	n := KindNames()
	if len(n) < 2 {
		return strings.Join(n, "")
	}
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

// DisplayName is the name reports print for engine name, or name itself
// for an engine that is not registered.
func DisplayName(name string) string {
	if k, ok := KindOf(name); ok {
		return k.Display
	}
	return name
}

// KindOfCommand is the engine whose server argv starts ("vllm serve M",
// "python3 -m sglang.launch_server ..."), or false.
func KindOfCommand(argv []string) (*Kind, bool) {
	if len(argv) == 0 {
		return nil, false
	}
	base := filepath.Base(argv[0])
	for _, k := range kinds {
		if slices.Contains(k.Programs, base) {
			return k, true
		}
	}
	if !strings.HasPrefix(base, "python") || len(argv) < 3 || argv[1] != "-m" {
		return nil, false
	}
	for _, k := range kinds {
		for _, m := range k.Modules {
			if argv[2] == m || strings.HasSuffix(m, ".") && strings.HasPrefix(argv[2], m) {
				return k, true
			}
		}
	}
	return nil, false
}

// pythons are the interpreters a Kind's Modules are started with
// (python3 -m sglang.launch_server); KindOfCommand accepts any python*.
var pythons = []string{"python3", "python"}

// ServerPrograms are the executables (base names) that start some
// registered engine's server: every Kind's Programs, then the Python
// interpreters when a Kind is started as a module. A stand-in that serves
// every engine's command (the simulated image, the fake kubelet) provides
// exactly these.
func ServerPrograms() []string {
	var out []string
	modules := false
	for _, k := range kinds {
		for _, p := range k.Programs {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		modules = modules || len(k.Modules) > 0
	}
	if modules {
		out = append(out, pythons...)
	}
	return out
}

// ChunksByDefault says whether the engine at version chunks prefills when
// not told either way. vLLM's V1 engine, the default from 0.8.0, turns
// enable_chunked_prefill on for generative models (EngineArgs
// _set_default_args); SGLang chunks at its default --chunked-prefill-size;
// TensorRT-LLM's enable_chunked_prefill defaults to false (Defaults).
func (k *Kind) ChunksByDefault(version string) bool {
	if !k.Defaults.ChunkedPrefill {
		return false
	}
	return version == "" || k.ChunksSince == "" || VersionAtLeast(version, k.ChunksSince)
}

// HasAttentionBackend reports whether the engine accepts backend b.
func (k *Kind) HasAttentionBackend(b string) bool {
	for _, n := range k.AttentionBackends {
		if n == b {
			return true
		}
	}
	return false
}
