package simargs

// Flag tables for `vllm serve`, taken from vLLM's EngineArgs.add_cli_args and
// the OpenAI frontend's make_arg_parser at v0.11.0 and v0.17.1. The lists are
// a reasonable subset of the real parsers (every knob the simulator models
// plus the flags commonly seen in deployments); a real flag missing here is a
// bug to fix by adding it, never by accepting unknown flags.

func fStr(names ...string) *flag   { return &flag{names: names, kind: kStr} }
func fInt(names ...string) *flag   { return &flag{names: names, kind: kInt} }
func fFloat(names ...string) *flag { return &flag{names: names, kind: kFloat} }
func fTrue(names ...string) *flag  { return &flag{names: names, kind: kStoreTrue} }
func fBool(names ...string) *flag  { return &flag{names: names, kind: kBoolOpt} }
func fJSON(names ...string) *flag  { return &flag{names: names, kind: kJSON} }
func fPlus(names ...string) *flag  { return &flag{names: names, kind: kPlus} }
func fChoice(choices []string, names ...string) *flag {
	return &flag{names: names, kind: kStr, choices: choices}
}

// vllmQuantization is QUANTIZATION_METHODS (vllm/model_executor/layers/quantization).
var vllmQuantization = []string{
	"awq", "deepspeedfp", "tpu_int8", "fp8", "ptpc_fp8", "fbgemm_fp8", "modelopt",
	"modelopt_fp4", "bitblas", "gguf", "gptq_marlin_24", "gptq_marlin", "gptq_bitblas",
	"awq_marlin", "gptq", "compressed-tensors", "bitsandbytes", "hqq", "experts_int8",
	"ipex", "quark", "moe_wna16", "torchao", "auto-round", "rtn", "inc", "mxfp4", "petit_nvfp4",
}

// vllmAttention011 is the _Backend enum that VLLM_ATTENTION_BACKEND names in 0.11.
var vllmAttention011 = []string{
	"FLASH_ATTN", "TRITON_ATTN", "XFORMERS", "ROCM_ATTN", "ROCM_AITER_MLA", "ROCM_AITER_FA",
	"TORCH_SDPA", "FLASHINFER", "FLASHINFER_MLA", "TRITON_MLA", "CUTLASS_MLA", "FLASHMLA",
	"FLASHMLA_SPARSE", "FLASH_ATTN_MLA", "PALLAS", "IPEX", "NO_ATTENTION", "FLEX_ATTENTION",
	"TREE_ATTN", "ROCM_AITER_UNIFIED_ATTN",
}

// vllmAttention017 is AttentionBackendEnum in 0.17: XFORMERS is gone.
var vllmAttention017 = []string{
	"FLASH_ATTN", "TRITON_ATTN", "ROCM_ATTN", "ROCM_AITER_MLA", "ROCM_AITER_FA",
	"ROCM_AITER_UNIFIED_ATTN", "TORCH_SDPA", "FLASHINFER", "FLASHINFER_MLA",
	"FLASHINFER_MLA_SPARSE", "TRITON_MLA", "CUTLASS_MLA", "FLASHMLA", "FLASHMLA_SPARSE",
	"FLASH_ATTN_MLA", "IPEX", "NO_ATTENTION", "FLEX_ATTENTION", "TREE_ATTN", "CPU_ATTN",
}

var vllmKVDtype = []string{"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"}

// vllmSpecMethods are SpeculativeConfig.method values.
var vllmSpecMethods = []string{
	"ngram", "eagle", "eagle3", "medusa", "mlp_speculator", "draft_model", "deepseek_mtp",
	"ernie_mtp", "qwen3_next_mtp", "mimo_mtp", "longcat_flash_mtp", "glm4_moe_mtp", "mtp",
	"suffix",
}

var vllmCommon = []*flag{
	// Frontend (vllm/entrypoints/openai/cli_args.py).
	fStr("--host"), fInt("--port"),
	fChoice([]string{"debug", "info", "warning", "error", "critical", "trace"}, "--uvicorn-log-level"),
	fTrue("--disable-uvicorn-access-log"), fTrue("--allow-credentials"),
	fStr("--allowed-origins"), fStr("--allowed-methods"), fStr("--allowed-headers"),
	fStr("--api-key"), fPlus("--lora-modules"), fStr("--chat-template"),
	fChoice([]string{"auto", "string", "openai"}, "--chat-template-content-format"),
	fStr("--response-role"), fStr("--ssl-keyfile"), fStr("--ssl-certfile"), fStr("--ssl-ca-certs"),
	fTrue("--enable-ssl-refresh"), fInt("--ssl-cert-reqs"), fStr("--root-path"), fStr("--middleware"),
	fTrue("--return-tokens-as-token-ids"), fTrue("--disable-frontend-multiprocessing"),
	fTrue("--enable-request-id-headers"), fTrue("--enable-auto-tool-choice"),
	fTrue("--exclude-tools-when-tool-choice-none"), fStr("--tool-call-parser"),
	fStr("--tool-parser-plugin"), fStr("--tool-server"), fStr("--log-config-file"),
	fInt("--max-log-len"), fTrue("--disable-fastapi-docs"), fTrue("--enable-prompt-tokens-details"),
	fTrue("--enable-server-load-tracking"), fTrue("--enable-force-include-usage"),
	fTrue("--enable-tokenizer-info-endpoint"), fTrue("--enable-log-outputs"),
	fTrue("--headless"), fInt("--api-server-count", "-asc"), fStr("--config"),
	fTrue("--disable-log-stats"), fTrue("--enable-log-requests"),
	// ModelConfig.
	fStr("--model"), fStr("--runner"), fStr("--convert"), fStr("--task"),
	fStr("--tokenizer"), fChoice([]string{"auto", "slow", "mistral", "custom"}, "--tokenizer-mode"),
	fBool("--trust-remote-code"),
	fChoice([]string{"auto", "half", "float16", "bfloat16", "float", "float32"}, "--dtype"),
	fInt("--seed"), fStr("--hf-config-path"), fStr("--allowed-local-media-path"),
	fStr("--allowed-media-domains"), fStr("--revision"), fStr("--code-revision"),
	fJSON("--rope-scaling"), fFloat("--rope-theta"), fStr("--tokenizer-revision"),
	{names: []string{"--max-model-len"}, kind: kHumanInt},
	{names: []string{"--quantization", "-q"}, kind: kStr, choices: vllmQuantization},
	fBool("--enforce-eager"), fInt("--max-logprobs"),
	fChoice([]string{"raw_logits", "raw_logprobs", "processed_logits", "processed_logprobs"}, "--logprobs-mode"),
	fBool("--disable-sliding-window"), fBool("--disable-cascade-attn"), fBool("--skip-tokenizer-init"),
	fBool("--enable-prompt-embeds"), fPlus("--served-model-name"),
	fChoice([]string{"auto", "hf", "mistral"}, "--config-format"), fStr("--hf-token"),
	fJSON("--hf-overrides"), fJSON("--pooler-config"), fStr("--logits-processor-pattern"),
	fStr("--generation-config"), fJSON("--override-generation-config"), fBool("--enable-sleep-mode"),
	fChoice([]string{"auto", "vllm", "transformers", "terratorch"}, "--model-impl"),
	fStr("--override-attention-dtype"), fPlus("--logits-processors"), fStr("--io-processor-plugin"),
	// LoadConfig.
	fStr("--load-format"), fStr("--download-dir"), fJSON("--model-loader-extra-config"),
	fPlus("--ignore-patterns"), fBool("--use-tqdm-on-load"), fStr("--pt-load-map-location"),
	// StructuredOutputs / reasoning.
	fStr("--reasoning-parser"), fJSON("--structured-outputs-config"),
	// ParallelConfig.
	fChoice([]string{"ray", "mp", "uni", "external_launcher"}, "--distributed-executor-backend"),
	fInt("--pipeline-parallel-size", "-pp"), fInt("--tensor-parallel-size", "-tp"),
	fInt("--decode-context-parallel-size", "-dcp"), fInt("--data-parallel-size", "-dp"),
	fInt("--data-parallel-rank", "-dpn"), fInt("--data-parallel-start-rank", "-dpr"),
	fInt("--data-parallel-size-local", "-dpl"), fStr("--data-parallel-address", "-dpa"),
	fInt("--data-parallel-rpc-port", "-dpp"), fStr("--data-parallel-backend", "-dpb"),
	fBool("--data-parallel-hybrid-lb"), fBool("--enable-expert-parallel"), fBool("--enable-dbo"),
	fBool("--enable-eplb"), fJSON("--eplb-config"), fStr("--expert-placement-strategy"),
	fInt("--max-parallel-loading-workers"), fBool("--ray-workers-use-nsight"),
	fBool("--disable-custom-all-reduce"), fStr("--worker-cls"), fStr("--worker-extension-cls"),
	// CacheConfig.
	fChoice([]string{"1", "8", "16", "32", "64", "128"}, "--block-size"),
	fFloat("--gpu-memory-utilization"), fStr("--kv-cache-memory"), fFloat("--swap-space"),
	{names: []string{"--kv-cache-dtype"}, kind: kStr, choices: vllmKVDtype},
	fInt("--num-gpu-blocks-override"), fBool("--enable-prefix-caching"),
	fChoice([]string{"sha256", "sha256_cbor", "builtin"}, "--prefix-caching-hash-algo"),
	fFloat("--cpu-offload-gb"), fBool("--calculate-kv-scales"), fBool("--kv-sharing-fast-prefill"),
	fStr("--mamba-cache-dtype"), fStr("--mamba-ssm-cache-dtype"),
	// MultiModalConfig.
	fJSON("--limit-mm-per-prompt"), fJSON("--media-io-kwargs"), fJSON("--mm-processor-kwargs"),
	fFloat("--mm-processor-cache-gb"), fStr("--mm-encoder-tp-mode"),
	// LoRAConfig.
	fBool("--enable-lora"), fInt("--max-loras"), fInt("--max-lora-rank"), fStr("--lora-dtype"),
	fInt("--max-cpu-loras"), fBool("--fully-sharded-loras"), fJSON("--default-mm-loras"),
	// ObservabilityConfig.
	fStr("--show-hidden-metrics-for-version"), fStr("--otlp-traces-endpoint"),
	fStr("--collect-detailed-traces"),
	// SchedulerConfig.
	fInt("--max-num-batched-tokens"), fInt("--max-num-seqs"), fInt("--max-num-partial-prefills"),
	fInt("--max-long-partial-prefills"), fInt("--long-prefill-token-threshold"),
	fChoice([]string{"fcfs", "priority"}, "--scheduling-policy"), fBool("--enable-chunked-prefill"),
	fBool("--disable-chunked-mm-input"), fStr("--scheduler-cls"),
	fBool("--disable-hybrid-kv-cache-manager"), fBool("--async-scheduling"),
	// VllmConfig.
	fJSON("--speculative-config"), fJSON("--kv-transfer-config"), fJSON("--kv-events-config"),
	fStr("--compilation-config", "-O"), fJSON("--additional-config"),
}

// vllm011 is `vllm serve` at v0.11.0: attention backend only by env var,
// no performance mode, CUDA graph sizes as a list.
var vllm011 = newCLI(cli{
	engine: "vllm", prog: "vllm serve", usage: "usage: vllm serve [model_tag] [options]",
	style: styleArgparse, underscores: true, positional: []string{"model_tag"},
}, vllmCommon, []*flag{
	fPlus("--cuda-graph-sizes"),
	fTrue("--disable-log-requests"), // deprecated in 0.11, removed later
})

// vllm017 is `vllm serve` at v0.17.1: --attention-backend and
// --performance-mode arrive, CUDA graph capture is sized by one bound.
var vllm017 = newCLI(cli{
	engine: "vllm", prog: "vllm serve", usage: "usage: vllm serve [model_tag] [options]",
	style: styleArgparse, underscores: true, positional: []string{"model_tag"},
}, vllmCommon, []*flag{
	{names: []string{"--attention-backend"}, kind: kStr, choices: vllmAttention017, foldCase: true},
	fChoice([]string{"balanced", "interactivity", "throughput"}, "--performance-mode"),
	fInt("--max-cudagraph-capture-size"),
	fPlus("--cuda-graph-sizes"),
	fJSON("--attention-config"),
	fBool("--language-model-only"),
})
