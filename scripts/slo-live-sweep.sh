#!/usr/bin/env bash
# The live half of issue 27's "against a dense sweep" check: for each kept
# config of the 14B SLO example (examples/qwen3-14b-h100-slo.yaml) it starts
# one `perflab sim serve` with the command line the lab renders for that
# config, runs `perflab bench --slo ... --search rate` with the example's
# workload (ShareGPT sample, 1,000 prompts, 100 of them warm-up, seed 0),
# then a dense sweep of long plain benchmarks (`--request-rate R`, STEP apart,
# NUM prompts each) to find the true threshold: the highest swept rate whose
# long benchmark meets the SLO below the first rate that misses (as
# TestSLOExampleSweep takes it in process). It checks that the search's
# answer is within the example's 5% tolerance of that threshold and that a
# long benchmark at 1.2x the answer misses; a sweep whose first rate (0.9x
# the answer) misses already fails. One server at a time; a trap stops it.
# It exits 1 when a config fails.
#
# At TIME_SCALE K the simulated engine runs K times faster, so rates are sent
# K times higher and the SLO's latency bounds are divided by K; every figure
# printed is scaled back to simulated time. The "behind" column is the client
# falling behind its schedule (achieved below 99% of offered): a row with it
# set measured the client, not the engine.
#
#   scripts/slo-live-sweep.sh                      # the winner only, K=2
#   CONFIGS="trtllm-fp8 trtllm vllm" scripts/slo-live-sweep.sh
#   PERFLAB_BIN=/tmp/perflab TIME_SCALE=1 NUM=1500 scripts/slo-live-sweep.sh
#
# It builds nothing: PERFLAB_BIN names the binary, else `go run ./cmd/perflab`.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIGS=${CONFIGS:-trtllm-fp8}
K=${TIME_SCALE:-2}
NUM=${NUM:-1000}
STEP=${STEP:-0.025}
PORT=${PORT:-18627}
DATA=${DATA:-../shared/data}
if [ -n "${PERFLAB_BIN:-}" ]; then
	perflab=("$PERFLAB_BIN")
else
	perflab=(go run ./cmd/perflab)
fi
# The example's SLO in simulated time, and its tolerance.
TTFT_MS=2000 TPOT_MS=50 SUCCESS=0.99 TOL=0.05
work=$(mktemp -d)
srv=
stop() {
	if [ -n "$srv" ]; then
		# The server leads a process group of its own (setsid), so that
		# `go run`'s child goes too.
		kill -- -"$srv" 2>/dev/null || true
		wait "$srv" 2>/dev/null || true
		srv=
	fi
}
trap 'stop; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# config NAME -> the lab's first point for it (its guided start, req/s),
# engine, model and the serving argv the lab renders for it (the report's
# "Serving script" of each kept config; the load table's first rows).
config() {
	case $1 in
	vllm) echo "12.1 vllm Qwen/Qwen3-14B vllm serve Qwen/Qwen3-14B" ;;
	trtllm) echo "20 trtllm Qwen/Qwen3-14B trtllm-serve Qwen/Qwen3-14B" ;;
	trtllm-fp8) echo "26.7 trtllm Qwen/Qwen3-14B-FP8 trtllm-serve Qwen/Qwen3-14B-FP8" ;;
	*)
		echo "slo-live-sweep: unknown config $1 (want vllm, trtllm or trtllm-fp8)" >&2
		exit 2
		;;
	esac
}
version() {
	case $1 in
	vllm) echo 0.11.0 ;;
	sglang) echo 0.5.5.post1 ;;
	trtllm) echo 1.2.0rc1 ;;
	esac
}

# up starts the config's server and waits until it answers. Every long
# benchmark gets a server of its own: the lab measures each point on a cold
# prefix cache (reset, or a new server for an engine with no reset endpoint,
# such as trtllm-serve), and ShareGPT's prompts repeat from run to run.
up() {
	stop
	if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then
		echo "slo-live-sweep: something already answers on port $PORT; set PORT" >&2
		exit 1
	fi
	setsid "${perflab[@]}" sim serve --engine "$engine" --engine-version "$(version "$engine")" --gpu H100 \
		--time-scale "$K" --startup-delay 0s --tokenizer "$DATA/tokenizers/qwen3" -- $argv --port "$PORT" >"$work/serve.log" 2>&1 &
	srv=$!
	for _ in $(seq 600); do
		curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && return
		kill -0 "$srv" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
		sleep 0.1
	done
	echo "slo-live-sweep: $argv: not ready after 60 s" >&2
	exit 1
}

calc() { awk "BEGIN { printf \"%.4f\", $* }"; }
slo="ttft_p99<=$(calc "$TTFT_MS / $K")ms,tpot_p99<=$(calc "$TPOT_MS / $K")ms,success>=99%"
common=(--port "$PORT" --backend openai-chat --endpoint /v1/chat/completions
	--dataset-name sharegpt --dataset-path "$DATA/sharegpt/sharegpt_v3_sample_1000.json"
	--tokenizer "$DATA/tokenizers/qwen3" --seed 0 --num-prompts "$NUM")

# long RATE (simulated req/s) sets row: rate, achieved, ttft p99, tpot p99,
# success, the client's dispatch lag p99 (live ms: a busy host shows here
# first), behind, meets (scaled back to simulated time). It runs in this
# shell, not in $(...): the server it starts must be the one stop kills.
long() {
	local r=$1 out=$work/long.json
	up
	"${perflab[@]}" bench "${common[@]}" --model "$model" --request-rate "$(calc "$r * $K")" --output json >"$out" 2>"$work/long.err" || {
		echo "slo-live-sweep: bench at $r req/s failed:" >&2
		tail -5 "$work/long.err" >&2
		exit 1
	}
	row=$(jq -r --argjson k "$K" --argjson r "$r" --argjson ttft "$TTFT_MS" --argjson tpot "$TPOT_MS" --argjson succ "$SUCCESS" '
		(.completed / .num_prompts) as $s
		| (.perflab.achieved_rate < 0.99 * .perflab.offered_rate) as $behind
		| ([.perflab.dispatch_lag_ms.percentiles[] | select(.p == 99) | .value][0] // 0) as $lag
		| [$r, (.perflab.achieved_rate / $k), (.p99_ttft_ms * $k), (.p99_tpot_ms * $k), $s, $lag, $behind,
		   (.p99_ttft_ms * $k <= $ttft and .p99_tpot_ms * $k <= $tpot and $s >= $succ and ($behind | not))]
		| @tsv' "$out")
}

summary=()
for name in $CONFIGS; do
	read -r guided engine model argv < <(config "$name")
	up
	echo "== $name: $argv (sim serve, time scale $K; SLO sent as $slo)"
	t0=$(date +%s)
	# The lab starts each config's search at the simulator guide's predicted
	# load; START (simulated req/s) overrides that start here.
	start=${START:-$guided}
	"${perflab[@]}" bench "${common[@]}" --model "$model" --slo "$slo" --search rate \
		--search-start "$(calc "$start * $K")" --search-max "$(calc "256 * $K")" --search-tolerance "$TOL" \
		--search-warmup 100 >"$work/search.out" 2>"$work/search.err" || true
	echo "  the search (live rates and latencies, time scale $K):"
	sed -n '/^sustainable load\|^no load\|^search stopped/,/^$/p' "$work/search.out" | sed 's/^/  /'
	ans=$(sed -n 's/^sustainable load: \([0-9.e+]*\) .*/\1/p' "$work/search.out")
	if [ -z "$ans" ]; then
		echo "slo-live-sweep: $name: the search found no sustainable load" >&2
		tail -5 "$work/search.err" >&2
		exit 1
	fi
	ans=$(calc "$ans / $K")
	echo "  search: $ans req/s (simulated), $(($(date +%s) - t0)) s wall"
	printf '  %-8s %-9s %-10s %-10s %-8s %-8s %-6s %s\n' rate achieved ttft_p99 tpot_p99 success lag_p99 behind meets
	# The sweep: from 90% of the answer upwards, STEP apart, until two misses
	# in a row above the answer; then the 1.2x point.
	thr=0 misses=0 first_miss=
	r=$(calc "0.9 * $ans")
	while :; do
		long "$r"
		printf '  %-8.3f %-9.3f %-10.1f %-10.2f %-8.3f %-8.1f %-6s %s\n' $row
		if [ "${row##*$'\t'}" = true ]; then
			[ -z "$first_miss" ] && thr=$r
			misses=0
		else
			[ -z "$first_miss" ] && first_miss=$r
			misses=$((misses + 1))
		fi
		if [ "$misses" -ge 2 ] && awk "BEGIN { exit !($r > $ans) }"; then break; fi
		awk "BEGIN { exit !($r > 1.15 * $ans) }" && break
		r=$(calc "$r * (1 + $STEP)")
	done
	long "$(calc "1.2 * $ans")"
	over=$row
	printf '  %-8.3f %-9.3f %-10.1f %-10.2f %-8.3f %-8.1f %-6s %s   <- 1.2x the answer\n' $over
	stop
	rel=$(calc "($ans - $thr) / ($thr > 0 ? $thr : 1)")
	ok=PASS
	# rel goes into awk as a variable: spliced into the program, a negative
	# one read "--0.0179", a syntax error, and failed a passing config.
	awk -v r="$rel" -v thr="$thr" -v tol="$TOL" 'BEGIN { exit !(thr > 0 && (r < 0 ? -r : r) <= tol) }' || ok=FAIL
	[ "${over##*$'\t'}" = false ] || ok=FAIL
	summary+=("$(printf '%-11s %-9s %-10s %-8s %-10s %s' "$name" "$ans" "$thr" "$(calc "100 * $rel")%" "${over##*$'\t'}" "$ok ($(($(date +%s) - t0)) s)")")
done
echo
printf '%-11s %-9s %-10s %-8s %-10s %s\n' config search threshold apart "1.2x meets" verdict
printf '%s\n' "${summary[@]}"
case "${summary[*]}" in *FAIL*) exit 1 ;; esac
