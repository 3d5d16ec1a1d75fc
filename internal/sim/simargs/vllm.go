package simargs

import (
	"fmt"
	"math"
	"strings"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/sim"
)

// vllmCLI picks the parser for a vLLM version. The tables are read at 0.11.0
// and 0.17.1; versions between take 0.17's spelling without
// --performance-mode (the flag backend moved to --attention-backend in 0.12).
func vllmCLI(version string) *cli {
	switch {
	case !engine.VersionAtLeast(version, "0.12.0"):
		return vllm011
	case !engine.VersionAtLeast(version, "0.17.0"):
		return vllmMid
	}
	return vllm017
}

var vllmMid = newCLI(cli{
	engine: "vllm", prog: "vllm serve", usage: "usage: vllm serve [model_tag] [options]",
	style: styleArgparse, underscores: true, positional: []string{"model_tag"},
}, without(vllm017.flags, "--performance-mode"))

func parseVLLM(version string, rest []string, env map[string]string) (*Result, error) {
	if version == "" {
		version = DefaultVersion(sim.EngineVLLM)
	}
	c := vllmCLI(version)
	p, perr := c.parse(rest)
	if perr != nil {
		return nil, perr
	}
	res := &Result{Params: sim.Params{Engine: sim.EngineVLLM, Version: version}}
	pr := &res.Params

	switch {
	case len(p.pos) > 0:
		pr.Model = p.pos[0]
		if p.has("--model") && p.str("--model") != pr.Model {
			res.Warnings = append(res.Warnings, Warning(fmt.Sprintf("With `vllm serve`, you should provide the model as a positional argument instead of via the `--model` option; using %s", pr.Model)))
		}
	case p.has("--model"):
		pr.Model = p.str("--model")
		res.Warnings = append(res.Warnings, "With `vllm serve`, you should provide the model as a positional argument or in a config file instead of via the `--model` option.")
	default:
		// vLLM would fall back to its built-in default model; the simulator
		// needs to know which model it imitates.
		return nil, c.fail("the following arguments are required: model_tag")
	}

	pr.TP = p.int("--tensor-parallel-size")
	pr.DP = p.int("--data-parallel-size")
	pr.EP = p.vals["--enable-expert-parallel"].on
	if p.has("--quantization") {
		pr.Quantization = p.str("--quantization")
	} else if fp8Name(pr.Model) {
		pr.Quantization = "fp8"
	}
	pr.KVCacheDtype = kvDtype(p.str("--kv-cache-dtype"))

	// Attention backend: 0.11 reads only the env var; from 0.12 the flag,
	// with the env var still honoured when the flag is absent.
	envBackend := strings.TrimSpace(env["VLLM_ATTENTION_BACKEND"])
	valid := vllmAttention017
	if c == vllm011 {
		valid = vllmAttention011
	}
	switch {
	case p.has("--attention-backend"):
		pr.AttentionBackend = p.str("--attention-backend")
	case envBackend != "":
		up := strings.ToUpper(envBackend)
		if !contains(valid, up) {
			return nil, startupError("vllm", "ValueError", fmt.Sprintf("Invalid attention backend: '%s'. Valid backends are: [%s]", envBackend, quoteList(valid, ", ")))
		}
		pr.AttentionBackend = up
		if c != vllm011 {
			res.Warnings = append(res.Warnings, "VLLM_ATTENTION_BACKEND is deprecated; use --attention-backend")
		}
	}

	pr.MaxNumSeqs = p.int("--max-num-seqs")
	pr.MaxNumBatchedTokens = p.int("--max-num-batched-tokens")
	if v, ok := p.vals["--enable-chunked-prefill"]; ok {
		pr.ChunkedPrefill = boolp(v.on)
	}
	if v, ok := p.vals["--enable-prefix-caching"]; ok {
		pr.PrefixCaching = boolp(v.on)
	}
	if v, ok := p.vals["--async-scheduling"]; ok {
		pr.AsyncScheduling = boolp(v.on)
	}
	pr.EnforceEager = p.vals["--enforce-eager"].on
	pr.MaxModelLen = p.int("--max-model-len")
	pr.PerformanceMode = p.str("--performance-mode")
	if p.has("--gpu-memory-utilization") {
		u := p.vals["--gpu-memory-utilization"].num
		if !(u > 0 && u <= 1) || math.IsNaN(u) {
			return nil, startupError("vllm", "pydantic_core._pydantic_core.ValidationError",
				fmt.Sprintf("1 validation error for CacheConfig\ngpu_memory_utilization\n  Input should be less than or equal to 1 [type=less_than_equal, input_value=%s, input_type=float]", p.str("--gpu-memory-utilization")))
		}
		pr.MemFraction = u
	}
	for _, n := range []string{"--tensor-parallel-size", "--data-parallel-size", "--max-num-seqs", "--max-num-batched-tokens", "--max-model-len"} {
		if p.has(n) && p.vals[n].num < 1 {
			return nil, startupError("vllm", "ValueError", fmt.Sprintf("%s must be a positive integer, got %s", n, p.str(n)))
		}
	}
	if v, ok := p.vals["--speculative-config"]; ok {
		if err := vllmSpec(v.obj, pr); err != nil {
			return nil, err
		}
	}

	res.Server = Server{Host: p.str("--host"), Port: DefaultPort(sim.EngineVLLM), APIKey: p.str("--api-key"), Tokenizer: p.str("--tokenizer")}
	if p.has("--port") {
		res.Server.Port = p.int("--port")
	}
	res.Server.Metrics = true // vLLM mounts /metrics unconditionally
	res.Server.ServedModelNames = p.vals["--served-model-name"].list
	if len(res.Server.ServedModelNames) == 0 {
		res.Server.ServedModelNames = []string{pr.Model}
	}
	return res, nil
}

// vllmSpec reads --speculative-config's JSON into the method and draft count.
func vllmSpec(obj map[string]any, pr *sim.Params) error {
	method, _ := obj["method"].(string)
	if method == "" {
		// vLLM infers the method from the draft model's name.
		model, _ := obj["model"].(string)
		lm := strings.ToLower(model)
		switch {
		case model == "":
			return startupError("vllm", "ValueError", "num_speculative_tokens was provided but without speculative model.")
		case strings.Contains(lm, "eagle3"):
			method = "eagle3"
		case strings.Contains(lm, "eagle"):
			method = "eagle"
		default:
			method = "draft_model"
		}
	}
	if !contains(vllmSpecMethods, method) {
		return startupError("vllm", "pydantic_core._pydantic_core.ValidationError",
			fmt.Sprintf("1 validation error for SpeculativeConfig\nmethod\n  Input should be %s [type=literal_error, input_value='%s', input_type=str]", quoteList(vllmSpecMethods, ", "), method))
	}
	n := 0
	switch v := obj["num_speculative_tokens"].(type) {
	case float64:
		if v != math.Trunc(v) || v < 1 {
			return startupError("vllm", "ValueError", fmt.Sprintf("Expected num_speculative_tokens to be greater than zero (%v).", v))
		}
		n = int(v)
	case nil:
		if !strings.HasSuffix(method, "mtp") {
			return startupError("vllm", "ValueError", "num_speculative_tokens must be provided with speculative model unless the draft model config contains an n_predict parameter.")
		}
		n = 1 // MTP defaults to the checkpoint's single next-token head
	default:
		return startupError("vllm", "pydantic_core._pydantic_core.ValidationError",
			fmt.Sprintf("1 validation error for SpeculativeConfig\nnum_speculative_tokens\n  Input should be a valid integer [type=int_type, input_value=%v]", v))
	}
	if strings.HasSuffix(method, "mtp") {
		method = "mtp"
	}
	pr.SpecMethod, pr.SpecTokens = method, n
	return nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
