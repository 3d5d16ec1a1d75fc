package serve

// How each imitated engine's HTTP server differs from the others, read
// from its source at the pinned versions (docs/protocols.md names file and
// commit): registered once, in faces, and asked by the server instead of
// switching on the engine's name.

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"

	"github.com/perflab/perflab/internal/engine"
)

// face is one engine's HTTP protocol and start-up log, as far as the
// simulator imitates them.
type face struct {
	// name is the engine.Kind name.
	name string
	// log is how the engine's start-up log reads.
	log logStyle
	// owner is /v1/models' owned_by.
	owner string
	// promPath is where Prometheus text is served when the engine was
	// started with its metrics on (Config.Metrics).
	promPath string
	// metricsAlways: promPath is served whatever the flags (vLLM).
	metricsAlways bool
	// statsPath, when set, serves JSON iteration stats whatever the flags
	// (trtllm-serve's /metrics).
	statsPath string
	// names are the engine's Prometheus metric names.
	names metricNames
	// reset is the route of the prefix-cache reset ("" for none); with
	// resetDevMode it exists only under VLLM_SERVER_DEV_MODE=1, and with
	// resetBlind it answers 200 even when nothing was reset.
	reset        string
	resetDevMode bool
	resetBlind   bool
	// healthGenerates: /health runs a one-token generation unless
	// Config.NoHealthGeneration.
	healthGenerates bool
	// fields, when set, are the only request fields accepted: any other
	// is a 400, as pydantic's extra="forbid" answers.
	fields map[string]bool
	// memoryGuard: the engine refuses to start when the free GPU memory
	// is below what it asks for (Options.OccupiedGiB).
	memoryGuard bool
}

// metricNames are one engine's names for what the simulator counts.
// An empty name is a series the engine does not have.
type metricNames struct {
	running, waiting, kvUsage, kvUsageOld, preemptions string
	promptTokens, generationTokens, success            string
	prefixQueries, prefixHits, prefixHitRate           string
}

// faces is the one place the imitated engines' protocols are registered;
// the first, vLLM's, is also an unknown engine's.
var faces = []face{
	// vLLM: /metrics always (vllm/entrypoints/openai/api_server.py,
	// mount_metrics); /reset_prefix_cache only under VLLM_SERVER_DEV_MODE
	// and answering 200 whether or not the scheduler reset anything
	// ("we currently do not check if the prefix cache is successfully
	// reset"); V1 metric names from vllm/v1/metrics/loggers.py.
	{
		name: engine.VLLM, log: vllmLog{},
		owner: "vllm", promPath: "/metrics", metricsAlways: true,
		names: metricNames{
			running: "vllm:num_requests_running", waiting: "vllm:num_requests_waiting",
			kvUsage: "vllm:kv_cache_usage_perc", kvUsageOld: "vllm:gpu_cache_usage_perc",
			preemptions: "vllm:num_preemptions_total", promptTokens: "vllm:prompt_tokens_total",
			generationTokens: "vllm:generation_tokens_total", success: "vllm:request_success_total",
			prefixQueries: "vllm:prefix_cache_queries_total", prefixHits: "vllm:prefix_cache_hits_total",
		},
		reset: "POST /reset_prefix_cache", resetDevMode: true, resetBlind: true,
		memoryGuard: true,
	},
	// SGLang: /metrics only with --enable-metrics, names from
	// python/sglang/srt/metrics/collector.py; /flush_cache refuses (400)
	// while requests run; /health generates one token while
	// SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is on, its default
	// (environ.py; entrypoints/http_server.py health_generate).
	{
		name: engine.SGLang, log: sglangLog{},
		owner: "sglang", promPath: "/metrics",
		names: metricNames{
			running: "sglang:num_running_reqs", waiting: "sglang:num_queue_reqs", kvUsage: "sglang:token_usage",
			promptTokens: "sglang:prompt_tokens_total", generationTokens: "sglang:generation_tokens_total",
			success: "sglang:num_requests_total", prefixHitRate: "sglang:cache_hit_rate",
		},
		reset: "/flush_cache", healthGenerates: true,
	},
	// trtllm-serve: /metrics is JSON iteration stats; Prometheus at
	// /prometheus/metrics with return_perf_metrics (trtllm_ names from
	// tensorrt_llm/metrics/collector.py); no reset endpoint; requests are
	// pydantic models with extra="forbid" (tensorrt_llm/serve/
	// openai_protocol.py), refused with 400 (openai_server.py's
	// RequestValidationError handler).
	{
		name: engine.TRTLLM, log: trtllmLog{},
		owner: "tensorrt_llm", promPath: "/prometheus/metrics", statsPath: "/metrics",
		names: metricNames{
			running: "trtllm_num_requests_running", waiting: "trtllm_num_requests_waiting",
			kvUsage: "trtllm_kv_cache_utilization", promptTokens: "trtllm_prompt_tokens_total",
			generationTokens: "trtllm_generation_tokens_total", success: "trtllm_request_success_total",
			prefixHitRate: "trtllm_kv_cache_hit_rate",
		},
		fields: setOf(
			// CompletionRequest and ChatCompletionRequest, OpenAI's fields
			// and the sampling extensions trtllm-serve adds.
			"model", "prompt", "messages", "max_tokens", "max_completion_tokens", "stream", "stream_options",
			"temperature", "top_p", "top_k", "min_p", "n", "best_of", "seed", "stop", "stop_token_ids",
			"ignore_eos", "min_tokens", "repetition_penalty", "length_penalty", "frequency_penalty",
			"presence_penalty", "logprobs", "top_logprobs", "prompt_logprobs", "logit_bias", "echo", "suffix",
			"user", "use_beam_search", "include_stop_str_in_output", "skip_special_tokens",
			"spaces_between_special_tokens", "truncate_prompt_tokens", "add_special_tokens",
			"add_generation_prompt", "response_format", "tools", "tool_choice", "parallel_tool_calls",
			"chat_template", "chat_template_kwargs", "documents", "return_context_logits",
			"return_generation_logits", "lora_request", "disaggregated_params", "reasoning_effort",
			"cache_salt", "detokenize"),
	},
}

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// faceFor is the face of the engine named name; an unknown engine gets
// vLLM's.
func faceFor(name string) face {
	if i := slices.IndexFunc(faces, func(f face) bool { return f.name == name }); i >= 0 {
		return faces[i]
	}
	return faces[0]
}

// unknownField is the first field of a JSON object body that f does not
// accept, or "".
func (f face) unknownField(body []byte) string {
	if f.fields == nil {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	first := ""
	for k := range m {
		if !f.fields[k] && (first == "" || k < first) {
			first = k
		}
	}
	return first
}

// prefixBlockBytes is the simulator's stand-in for a KV block of prompt
// text: 64 bytes, about 16 tokens (vLLM's block size) at the estimate's
// 4 bytes a token.
const prefixBlockBytes = 64

// prefixCounter imitates the engines' prefix-cache lookups and hits, in
// tokens, on the prompts' text: each prompt's leading full blocks are
// chain-hashed, hits are the leading blocks already seen, and a reset
// forgets them all. It feeds vLLM's prefix_cache_queries/hits counters
// (what perflab reads to prove a reset) and the hit-rate gauges.
type prefixCounter struct {
	mu            sync.Mutex
	seen          map[[32]byte]bool
	queries, hits int64
}

// observe counts one prompt of promptLen tokens whose text is text.
func (c *prefixCounter) observe(text string, promptLen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[[32]byte]bool{}
	}
	c.queries += int64(promptLen)
	var h [32]byte
	hit := true
	for i := 0; i+prefixBlockBytes <= len(text); i += prefixBlockBytes {
		h = sha256.Sum256(append(h[:], text[i:i+prefixBlockBytes]...))
		if hit && c.seen[h] {
			c.hits += int64(prefixBlockBytes / 4)
			continue
		}
		hit = false
		c.seen[h] = true
	}
}

func (c *prefixCounter) reset() {
	c.mu.Lock()
	c.seen = nil
	c.mu.Unlock()
}

func (c *prefixCounter) counts() (queries, hits int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queries, c.hits
}

// health answers /health: 200, or, on an engine whose /health generates
// (SGLang), 200 only once a one-token generation went through the
// simulated engine like any request (it counts, and it queues).
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if !s.face.healthGenerates || s.cfg.NoHealthGeneration {
		w.WriteHeader(http.StatusOK)
		return
	}
	body := `{"model":` + strconvQuote(s.cfg.ServedModelNames[0]) + `,"prompt":[0],"max_tokens":1}`
	req := httptest.NewRequestWithContext(r.Context(), http.MethodPost, "/v1/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.generate(rec, req, false)
	if rec.Code != http.StatusOK {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// iterationStats answers trtllm-serve's /metrics: a JSON list of recent
// iteration stats (openai_server.py get_iteration_stats), here one entry
// from the simulator's current counts.
func (s *Server) iterationStats(w http.ResponseWriter, r *http.Request) {
	st, _ := s.loop.snapshot()
	writeJSON(w, []map[string]any{{
		"numActiveRequests": st.Running, "numQueuedRequests": st.Waiting,
		"kvCacheStats": map[string]any{"usedNumBlocks": 0, "utilization": st.KVUsage},
	}})
}
