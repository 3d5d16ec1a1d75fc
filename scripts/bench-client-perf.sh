#!/usr/bin/env bash
# Measures perflab bench's streaming client against a loopback fake SSE
# server in a separate process (server pinned to CPU 0, client to CPU 1, so
# getrusage gives the client's own CPU), and optionally vLLM's Python client
# against the same server.
#
#   scripts/bench-client-perf.sh                 # Go client only
#   VLLM_CLIENT=/tmp/vllmclient/run.py scripts/bench-client-perf.sh
#
# VLLM_CLIENT is a driver around vLLM's async_request_openai_completions
# (vllm/benchmarks/lib/endpoint_request_func.py) kept outside the repo; it
# takes URL N CONCURRENCY MAX_TOKENS and prints the same JSON fields. It
# needs python3-aiohttp (Debian).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)
trap 'kill ${srv:-} 2>/dev/null || true; rm -rf "$bin"' EXIT
go build -o "$bin/fakesse" ./internal/bench/benchtest/fakesse
go build -o "$bin/perfclient" ./internal/bench/benchtest/perfclient
port=${PORT:-18400}
N=${N:-2000} CONC=${CONC:-1000} CHUNKS=${CHUNKS:-200}

serve() { # args: fakesse flags
  kill ${srv:-} 2>/dev/null || true
  taskset -c 0 "$bin/fakesse" -addr 127.0.0.1:$port "$@" 2>/dev/null &
  srv=$!
  sleep 0.5
}

echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# date: $(date -u +%FT%TZ)"

echo "## 1. zero-latency server, $CONC concurrent streams, $N requests x $CHUNKS chunks (Go client)"
serve -chunks 0
taskset -c 1 "$bin/perfclient" -url http://127.0.0.1:$port -n "$N" -concurrency "$CONC" -chunks "$CHUNKS"

if [[ -n "${VLLM_CLIENT:-}" ]]; then
  echo "## 1b. same server, vLLM's Python client ($VLLM_CLIENT)"
  taskset -c 1 /usr/bin/python3 "$VLLM_CLIENT" http://127.0.0.1:$port/v1/completions "$N" "$CONC" "$CHUNKS"
fi

echo "## 2. memory per in-flight request: $CONC streams held open (3 chunks, 1.5 s apart)"
serve -chunks 0 -gap 1500ms
taskset -c 1 "$bin/perfclient" -url http://127.0.0.1:$port -n "$CONC" -concurrency "$CONC" -chunks 3 -gap 1500ms -mem-at 2s

echo "## 3. timing accuracy: $CONC streams, TTFT 100 ms, a chunk every 50 ms (20k chunks/s at 1,000 streams)"
serve -chunks 0 -ttft 100ms -gap 50ms
taskset -c 1 "$bin/perfclient" -url http://127.0.0.1:$port -n "$CONC" -concurrency "$CONC" -chunks 20 -ttft 100ms -gap 50ms

echo "## Go benchmarks (in-process; errors judged against the server's actual write times)"
go test ./internal/bench/ -run XXX -bench 'ReadStream|Loopback|Accuracy' -benchtime 1x
