#!/usr/bin/env bash
# Measures perflab bench's streaming client, both transports (epoll and
# net/http), against a loopback fake SSE server in a separate process
# (server pinned to CPU 0, client to CPU 1, so getrusage gives the
# client's own CPU), and optionally vLLM's Python client against the same
# server.
#
#   scripts/bench-client-perf.sh                 # Go client only
#   VLLM_CLIENT=/tmp/vllmclient/run.py scripts/bench-client-perf.sh
#
# The server is benchtest.Fast (fakesse -fast): pre-rendered chunks, BATCH
# SSE events per write at zero latency, so one core can feed several
# hundred thousand chunks/s. BATCH=1 is the client's worst case (one read
# per chunk).
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
N=${N:-5000} CONC=${CONC:-1000} CHUNKS=${CHUNKS:-200}
TRANSPORTS=${TRANSPORTS:-"epoll net/http"}

serve() { # args: fakesse flags
  kill ${srv:-} 2>/dev/null || true
  wait ${srv:-} 2>/dev/null || true
  taskset -c 0 "$bin/fakesse" -addr 127.0.0.1:$port -fast "$@" 2>/dev/null &
  srv=$!
  sleep 0.5
}
client() { # args: transport, perfclient flags
  local tr=$1
  shift
  taskset -c 1 "$bin/perfclient" -url http://127.0.0.1:$port -transport "$tr" "$@"
}

echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# date: $(date -u +%FT%TZ)"

for batch in 16 1; do
  echo "## 1. zero-latency server ($batch events per write), $CONC concurrent streams, $N requests x $CHUNKS chunks"
  serve -chunks 0 -batch $batch
  for tr in $TRANSPORTS; do
    client "$tr" -n "$N" -concurrency "$CONC" -chunks "$CHUNKS"
  done
done

if [[ -n "${VLLM_CLIENT:-}" ]]; then
  echo "## 1b. same server, vLLM's Python client ($VLLM_CLIENT)"
  taskset -c 1 /usr/bin/python3 "$VLLM_CLIENT" http://127.0.0.1:$port/v1/completions "$N" "$CONC" "$CHUNKS"
fi

echo "## 2. memory per in-flight request: $CONC streams held open (3 chunks, 1.5 s apart), sampled mid-stream"
serve -chunks 0 -gap 1500ms
for tr in $TRANSPORTS; do
  client "$tr" -n "$CONC" -concurrency "$CONC" -chunks 3 -gap 1500ms -mem-at 2s
done

echo "## 3. timing accuracy: $CONC streams, TTFT 100 ms, a chunk every 50 ms (20k chunks/s at 1,000 streams)"
echo "##    *_vs_server_*: against the server's logged write times; the others: against the nominal schedule"
log=$bin/server.log
serve -chunks 0 -ttft 100ms -gap 50ms -log "$log"
for tr in $TRANSPORTS; do
  client "$tr" -n "$CONC" -concurrency "$CONC" -chunks 20 -ttft 100ms -gap 50ms -server-log "$log"
done

echo "## Go benchmarks (in-process, client and server sharing the process; errors judged against the server's write times)"
go test ./internal/bench/ -run XXX -bench 'ReadStream' -benchtime 2000x
go test ./internal/bench/ -run XXX -bench 'Loopback|Accuracy' -benchtime 1x
