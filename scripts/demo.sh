#!/usr/bin/env bash
# End-to-end demo on the embedded simulator, as CI runs it:
#   1. the README's main job: the Qwen3-14B lab (in-process simulator, SQLite),
#      which writes its report;
#   2. the live loop with real processes: `perflab sim serve` imitating vLLM
#      from vLLM's own command line, benchmarked over HTTP by `perflab bench`;
#   3. the report rewritten from the store alone;
#   4. a user's calibration: `perflab sim calibrate` on the result measured in
#      step 2, then a lab that uses it (--coefficients).
# Each step checks what it produced; any failure stops the demo non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/perflab-demo.XXXXXX)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# PERFLAB_BIN when .ci/run built it once; else built here.
if [ -n "${PERFLAB_BIN:-}" ]; then
  pl=$PERFLAB_BIN
else
  go build -o "$work/perflab" ./cmd/perflab
  pl="$work/perflab"
fi
db="sqlite:$work/perflab.db"

echo "--- 1. perflab lab examples/qwen3-14b-h100.yaml (sim-predict)"
start=$(date +%s)
"$pl" lab examples/qwen3-14b-h100.yaml --db "$db" --out "$work/lab" --fresh 2>"$work/lab.log" | tail -n 5
echo "lab took $(( $(date +%s) - start ))s"
grep -q '^## Conclusion' "$work/lab/report.md"
grep -q 'Recommended configuration' "$work/lab/report.md"
test -s "$work/lab/baseline-vs-optimized.png"
sed -n '/^| Benchmark Case/,/^$/p' "$work/lab/report.md"

echo "--- 2. perflab sim serve (vLLM 0.11 argv) + perflab bench over HTTP"
port=$(( 20000 + RANDOM % 20000 ))
"$pl" sim serve --engine vllm --engine-version 0.11.0 --gpu H100 --time-scale 5 --startup-delay 1s \
  --tokenizer ../shared/data/tokenizers/qwen3 -- vllm serve Qwen/Qwen3-14B --port "$port" >"$work/serve.log" 2>&1 &
server_pid=$!
"$pl" bench --backend openai-chat --endpoint /v1/chat/completions --base-url "http://127.0.0.1:$port" \
  --model Qwen/Qwen3-14B --tokenizer ../shared/data/tokenizers/qwen3 \
  --dataset-name sharegpt --dataset-path ../shared/data/sharegpt/sharegpt_v3_sample_1000.json \
  --num-prompts 100 --ready-check-timeout-sec 60 --save-result --result-dir "$work" --result-filename bench.json
grep -q '"total_token_throughput"' "$work/bench.json"
curl -fsS "http://127.0.0.1:$port/metrics" | grep -E '^vllm:(generation_tokens_total|num_preemptions_total)' || true
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=

echo "--- 3. perflab report from the store"
"$pl" report qwen3-14b-h100 --db "$db" --out "$work/report" --format md,html
cmp <(grep -v '^$' "$work/lab/report.md") <(grep -v '^$' "$work/report/report.md")
echo "--- 4. perflab sim calibrate on step 2's result, then a lab with that calibration"
"$pl" sim calibrate "$work/bench.json" --engine vllm --engine-version 0.11.0 --gpu H100 --dataset-name sharegpt \
  -o "$work/coef.json" -- vllm serve Qwen/Qwen3-14B 2>"$work/calibrate.log"
grep -q '"H100/vllm/0.11.0"' "$work/coef.json"
"$pl" lab examples/qwen3-14b-h100.yaml --db "sqlite:$work/own.db" --out "$work/own" --fresh \
  --coefficients "$work/coef.json" 2>"$work/own.log" | tail -n 2
grep -q '^## Conclusion' "$work/own/report.md"
# The calibration changed the simulated vLLM: its baseline differs from step 1's
# (step 2 ran the simulator 5x faster than real time, so this "GPU" is fast).
base() { sed -n 's/^| \*\*ShareGPT\*\* | Total TPS: \([0-9.]*\).*/\1/p' "$1" | head -n 1; }
echo "baseline ShareGPT TPS: embedded $(base "$work/lab/report.md"), own calibration $(base "$work/own/report.md")"
[ "$(base "$work/lab/report.md")" != "$(base "$work/own/report.md")" ]
echo "demo: ok"
