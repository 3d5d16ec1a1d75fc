package simargs

// Flag tables for `python3 -m sglang.launch_server`, from ServerArgs.add_cli_args
// (python/sglang/srt/server_args.py) at v0.5.5.post1 and v0.5.9. SGLang uses a
// plain argparse.ArgumentParser, so unique prefixes of long flags are
// accepted and underscores are not rewritten.

var sglangAttention = []string{
	"triton", "torch_native", "flex_attention", "nsa", "cutlass_mla", "fa3", "fa4",
	"flashinfer", "flashmla", "trtllm_mla", "trtllm_mha", "dual_chunk_flash_attn",
	"aiter", "wave", "intel_amx", "ascend", "intel_xpu",
}

var sglangQuantization = []string{
	"awq", "fp8", "gptq", "marlin", "gptq_marlin", "awq_marlin", "bitsandbytes", "gguf",
	"modelopt", "modelopt_fp8", "modelopt_fp4", "petit_nvfp4", "w8a8_int8", "w8a8_fp8",
	"moe_wna16", "qoq", "w4afp8", "mxfp4", "auto-round", "compressed-tensors",
}

var sglangKVDtype = []string{"auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1"}

var sglangSpec = []string{"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"}

var sglangCommon = []*flag{
	// Model and tokenizer.
	fStr("--model-path", "--model"), fStr("--tokenizer-path"), fInt("--tokenizer-worker-num"),
	fChoice([]string{"auto", "slow"}, "--tokenizer-mode"), fTrue("--skip-tokenizer-init"),
	fChoice([]string{"auto", "pt", "safetensors", "npcache", "dummy", "sharded_state", "gguf",
		"bitsandbytes", "layered", "remote", "remote_instance"}, "--load-format"),
	fJSON("--model-loader-extra-config"), fTrue("--trust-remote-code"),
	fInt("--context-length"), fTrue("--is-embedding"), fTrue("--enable-multimodal"),
	fStr("--revision"), fChoice([]string{"auto", "sglang", "transformers"}, "--model-impl"),
	// HTTP server.
	fStr("--host"), fInt("--port"), fTrue("--skip-server-warmup"), fStr("--warmups"),
	fInt("--nccl-port"), fStr("--fastapi-root-path"),
	// Quantization and data type.
	fChoice([]string{"auto", "half", "float16", "bfloat16", "float", "float32"}, "--dtype"),
	fChoice(sglangQuantization, "--quantization"), fStr("--quantization-param-path"),
	fChoice(sglangKVDtype, "--kv-cache-dtype"), fTrue("--enable-fp32-lm-head"),
	// Memory and scheduling.
	fFloat("--mem-fraction-static"), fInt("--max-running-requests"), fInt("--max-queued-requests"),
	fInt("--max-total-tokens"), fInt("--chunked-prefill-size"), fInt("--max-prefill-tokens"),
	fChoice([]string{"lpm", "random", "fcfs", "dfs-weight", "lof", "priority"}, "--schedule-policy"),
	fTrue("--enable-priority-scheduling"), fFloat("--schedule-conservativeness"),
	fInt("--page-size"), fChoice([]string{"auto", "nccl", "mooncake", "mori"}, "--disaggregation-transfer-backend"),
	fChoice([]string{"null", "prefill", "decode"}, "--disaggregation-mode"),
	fTrue("--enable-dynamic-batch-tokenizer"),
	// Runtime options.
	fStr("--device"), fInt("--tensor-parallel-size", "--tp-size", "--tp"),
	fInt("--pipeline-parallel-size", "--pp-size"), fInt("--max-micro-batch-size"),
	fInt("--stream-interval"), fTrue("--stream-output"), fInt("--random-seed"),
	fInt("--watchdog-timeout"), fStr("--download-dir"), fInt("--base-gpu-id"), fInt("--gpu-id-step"),
	fTrue("--sleep-on-idle"),
	// Logging.
	fStr("--log-level"), fStr("--log-level-http"), fTrue("--log-requests"), fInt("--log-requests-level"),
	fTrue("--show-time-cost"), fTrue("--enable-metrics"), fTrue("--enable-metrics-for-all-schedulers"),
	fFloat("--decode-log-interval"), fTrue("--enable-request-time-stats-logging"),
	// API related.
	fStr("--api-key"), fStr("--served-model-name"), fStr("--chat-template"),
	fStr("--completion-template"), fStr("--file-storage-path"), fTrue("--enable-cache-report"),
	fStr("--reasoning-parser"), fStr("--tool-call-parser"), fStr("--tool-server"),
	// Data parallelism.
	fInt("--data-parallel-size", "--dp-size", "--dp"),
	fChoice([]string{"round_robin", "shortest_queue", "minimum_tokens"}, "--load-balance-method"),
	// Multi-node.
	fStr("--dist-init-addr", "--nccl-init-addr"), fInt("--nnodes"), fInt("--node-rank"),
	// Model override.
	fJSON("--json-model-override-args"), fJSON("--preferred-sampling-params"),
	// LoRA.
	fTrue("--enable-lora"), fInt("--max-lora-rank"), fPlus("--lora-target-modules"),
	fPlus("--lora-paths"), fInt("--max-loras-per-batch"), fStr("--lora-backend"),
	// Kernel backends.
	fChoice(sglangAttention, "--attention-backend"), fChoice(sglangAttention, "--prefill-attention-backend"),
	fChoice(sglangAttention, "--decode-attention-backend"),
	fChoice([]string{"flashinfer", "pytorch", "flashinfer_cutedsl"}, "--sampling-backend"),
	fChoice([]string{"xgrammar", "outlines", "llguidance", "none"}, "--grammar-backend"),
	fChoice([]string{"triton", "torch_native", "flashinfer"}, "--mm-attention-backend"),
	// Speculative decoding.
	fChoice(sglangSpec, "--speculative-algorithm"), fStr("--speculative-draft-model-path", "--speculative-draft-model"),
	fStr("--speculative-draft-model-revision"), fInt("--speculative-num-steps"),
	fInt("--speculative-eagle-topk"), fInt("--speculative-num-draft-tokens"),
	fFloat("--speculative-accept-threshold-single"), fFloat("--speculative-accept-threshold-acc"),
	fStr("--speculative-token-map"), fStr("--speculative-attention-mode"),
	// Expert parallelism.
	fInt("--expert-parallel-size", "--ep-size", "--ep"), fStr("--moe-a2a-backend"),
	fStr("--moe-runner-backend"), fTrue("--enable-eplb"), fInt("--ep-num-redundant-experts"),
	// Hierarchical cache.
	fTrue("--enable-hierarchical-cache"), fFloat("--hicache-ratio"), fInt("--hicache-size"),
	// Optimization and debug.
	fTrue("--disable-radix-cache"), fInt("--cuda-graph-max-bs"), fPlus("--cuda-graph-bs"),
	fTrue("--disable-cuda-graph"), fTrue("--disable-cuda-graph-padding"), fTrue("--enable-profile-cuda-graph"),
	fTrue("--enable-nccl-nvls"), fTrue("--enable-symm-mem"), fTrue("--disable-outlines-disk-cache"),
	fTrue("--disable-custom-all-reduce"), fTrue("--enable-mscclpp"), fTrue("--disable-overlap-schedule"),
	fTrue("--enable-mixed-chunk"), fTrue("--enable-dp-attention"), fTrue("--enable-dp-lm-head"),
	fTrue("--enable-two-batch-overlap"), fTrue("--enable-torch-compile"), fInt("--torch-compile-max-bs"),
	fStr("--torchao-config"), fTrue("--enable-nan-detection"), fTrue("--enable-p2p-check"),
	fTrue("--triton-attention-reduce-in-fp32"), fInt("--triton-attention-num-kv-splits"),
	fInt("--num-continuous-decode-steps"), fTrue("--delete-ckpt-after-loading"),
	fTrue("--enable-memory-saver"), fTrue("--allow-auto-truncate"), fTrue("--enable-custom-logit-processor"),
	fTrue("--enable-deterministic-inference"), fTrue("--disable-fast-image-processor"),
	fTrue("--disable-chunked-prefix-cache"), fTrue("--disable-shared-experts-fusion"),
	fStr("--mamba-ssm-dtype"), fInt("--max-mamba-cache-size"),
	fTrue("--enable-return-hidden-states"), fTrue("--enable-layerwise-nvtx-marker"),
}

// sglang055 is launch_server at v0.5.5.post1.
var sglang055 = newCLI(cli{
	engine: "sglang", prog: "launch_server.py",
	usage: "usage: launch_server.py [-h] --model-path MODEL_PATH [options]", style: styleArgparse,
}, sglangCommon)

// sglang059 is launch_server at v0.5.9 (adds the mamba radix strategy and
// the prefill CUDA-graph switch seen in 0.5.9 deployments).
var sglang059 = newCLI(cli{
	engine: "sglang", prog: "launch_server.py",
	usage: "usage: launch_server.py [-h] --model-path MODEL_PATH [options]", style: styleArgparse,
}, sglangCommon, []*flag{
	fStr("--mamba-radix-cache-strategy"), fTrue("--disable-prefill-cuda-graph"),
})

// Flag table for trtllm-serve (tensorrt_llm/commands/serve.py) at 1.2.0rc1:
// a click command, so flags keep their underscores, there are no
// abbreviations, and MODEL is a required positional.
var trtllm120 = newCLI(cli{
	engine: "trtllm", prog: "trtllm-serve serve", usage: "Usage: trtllm-serve serve [OPTIONS] MODEL",
	style: styleClick, positional: []string{"MODEL"}, required: 1,
}, []*flag{
	fStr("--tokenizer"), fStr("--host"), fInt("--port"),
	{names: []string{"--backend"}, kind: kStr, choices: []string{"pytorch", "tensorrt", "_autodeploy", "trt"}},
	fChoice([]string{"internal_error", "error", "warning", "info", "verbose", "debug", "trace"}, "--log_level"),
	fInt("--max_beam_width"), fInt("--max_batch_size"), fInt("--max_num_tokens"), fInt("--max_seq_len"),
	fInt("--tp_size"), fInt("--pp_size"), fInt("--ep_size"), fInt("--cluster_size"),
	fInt("--gpus_per_node"), fFloat("--kv_cache_free_gpu_memory_fraction"),
	fInt("--num_postprocess_workers"), fTrue("--trust_remote_code"),
	fStr("--extra_llm_api_options"), fStr("--reasoning_parser"), fStr("--tool_parser"),
	fStr("--metadata_server_config_file"), fStr("--server_role"),
	fTrue("--fail_fast_on_attention_window_too_large"), fStr("--otlp_traces_endpoint"),
	fStr("--disagg_cluster_uri"), fTrue("--enable_chunked_prefill"), fStr("--media_io_kwargs"),
})
