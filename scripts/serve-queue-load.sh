#!/usr/bin/env bash
# Posts N labs at once to perflab serve (sim-predict, a small spec each,
# different seeds so each is a run of its own) and follows the server's
# memory: peak RSS while they run, RSS once all have ended, and RSS after
# IDLE seconds more. Prints how many were answered queued and how many
# ended done.
#
#   scripts/serve-queue-load.sh                # N=50, --max-labs default
#   N=20 MAX_LABS=4 scripts/serve-queue-load.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-50} IDLE=${IDLE:-60} PORT=${PORT:-18488}
work=$(mktemp -d)
trap 'kill ${srv:-} ${sampler:-} 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/perflab" ./cmd/perflab
args=(serve --addr "127.0.0.1:$PORT" --db "sqlite:$work/p.db" --data-root ../shared/data)
[ -n "${MAX_LABS:-}" ] && args+=(--max-labs "$MAX_LABS")
"$work/perflab" "${args[@]}" 2>"$work/serve.log" &
srv=$!
url="http://127.0.0.1:$PORT"
for _ in $(seq 100); do curl -sf "$url/healthz" >/dev/null && break; sleep 0.1; done
rss() { awk '/^VmRSS/ {print $2}' "/proc/$srv/status"; }
echo "start: RSS $(( $(rss) / 1024 )) MiB; $(head -1 "$work/serve.log")"
( peak=0; while kill -0 "$srv" 2>/dev/null; do r=$(rss || echo 0); [ "${r:-0}" -gt "$peak" ] && peak=$r && echo "$peak" >"$work/peak"; sleep 0.2; done ) &
sampler=$!
spec() {
	cat <<YAML
name: load$1
model: Qwen/Qwen3-14B
fp8_model: Qwen/Qwen3-14B-FP8
tokenizer: tokenizers/qwen3
hardware: {gpu: H100-SXM-80GB, count: 1}
engines:
  - {name: vllm, version: 0.11.0}
  - {name: sglang, version: 0.5.5.post1}
runtime: sim-predict
tuning: {name: rnd, dataset: random, input_len: 512, output_len: 128, num_prompts: 100, seed: $1}
stages:
  - name: engine
  - name: quantization
    values: [fp8-checkpoint]
search:
  knobs: [engine, quantization, max_num_seqs]
  max_trials: 6
repeats: 1
YAML
}
t0=$(date +%s.%N)
posts=()
for i in $(seq "$N"); do
	spec "$i" | curl -s -H 'Content-Type: application/yaml' --data-binary @- "$url/api/v1/labs" >"$work/ans$i" &
	posts+=($!)
done
wait "${posts[@]}"
queued=$(cat "$work"/ans* | grep -c '"status":"queued"' || true)
accepted=$(cat "$work"/ans* | grep -c '"id":' || true)
echo "posted $N at once: $accepted accepted, $queued answered queued; $(curl -s "$url/healthz")"
while :; do
	done_n=$(curl -s "$url/api/v1/runs?status=done&limit=1" | sed -n 's/.*"total":\([0-9]*\).*/\1/p')
	failed_n=$(curl -s "$url/api/v1/runs?status=failed&limit=1" | sed -n 's/.*"total":\([0-9]*\).*/\1/p')
	[ $((done_n + failed_n)) -ge "$accepted" ] && break
	sleep 1
done
t1=$(date +%s.%N)
echo "all ended in $(echo "$t1 - $t0" | bc) s: $done_n done, $failed_n failed"
echo "peak RSS while they ran: $(( $(cat "$work/peak") / 1024 )) MiB"
echo "RSS once all ended: $(( $(rss) / 1024 )) MiB"
sleep "$IDLE"
echo "RSS after ${IDLE} s idle: $(( $(rss) / 1024 )) MiB"
