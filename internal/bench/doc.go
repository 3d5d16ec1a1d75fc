// Package bench is perflab's serving benchmark: a drop-in for
// `vllm bench serve` with absolute-time pacing, a streaming SSE client and
// per-request records that package metrics turns into vLLM's figures.
package bench
