package main

import (
	"math"
	"os"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/bench"
	"github.com/perflab/perflab/internal/loadsearch"
)

// newBenchCmd is `perflab bench`: its flags fill app.BenchArgs, and
// app.RunBench does the rest.
func newBenchCmd() *cobra.Command {
	f := &app.BenchArgs{}
	var result resultFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark an OpenAI-compatible server like `vllm bench serve` (same flags, same figures)",
		Long: `perflab bench takes vllm bench serve's flags and definitions: it prints vLLM's
result block and writes vLLM's --save-result JSON (plus a "perflab" section).

--goodput and --metadata take several values like vLLM's (--goodput ttft:100 tpot:50).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.Result = result.files()
			f.APIKey = os.Getenv("OPENAI_API_KEY")
			f.Changed = cmd.Flags().Changed
			if isTerminal(os.Stderr) {
				f.Progress = os.Stderr
			}
			return app.RunBench(cmd.Context(), f, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Backend, "backend", bench.BackendOpenAI, "backend / endpoint type: openai, openai-chat or vllm")
	fl.StringVar(&f.BaseURL, "base-url", "", "server or API base URL if not using --host and --port")
	fl.StringVar(&f.Host, "host", "127.0.0.1", "server host")
	fl.IntVar(&f.Port, "port", 8000, "server port")
	fl.StringVar(&f.Endpoint, "endpoint", "/v1/completions", "API endpoint (openai-chat defaults to /v1/chat/completions)")
	fl.StringVar(&f.Model, "model", "", "model name; default: the first model the server lists")
	fl.StringVar(&f.ServedModelName, "served-model-name", "", "model name sent in requests, if not --model")
	fl.StringVar(&f.Tokenizer, "tokenizer", "", "tokenizer name or path (default: --model)")
	fl.BoolVar(&f.TrustRemoteCode, "trust-remote-code", false, "accepted for vLLM compatibility (no effect)")

	addDatasetFlags(fl, &f.Dataset)
	fl.IntVar(&f.InputLen, "input-len", 0, "general input length (maps to --random-input-len)")
	fl.IntVar(&f.OutputLen, "output-len", 0, "general output length (maps to each dataset's output length)")

	fl.Float64Var(&f.RequestRate, "request-rate", math.Inf(1), "requests per second (inf: all at once)")
	fl.Float64Var(&f.Burstiness, "burstiness", 1, "gamma shape of arrivals (1: Poisson)")
	fl.IntVar(&f.MaxConcurrency, "max-concurrency", 0, "maximum concurrent requests")
	fl.StringVar(&f.RampUp, "ramp-up-strategy", "", "ramp-up strategy: linear or exponential")
	fl.IntVar(&f.RampStart, "ramp-up-start-rps", 0, "starting request rate of the ramp-up")
	fl.IntVar(&f.RampEnd, "ramp-up-end-rps", 0, "ending request rate of the ramp-up")
	fl.Int64Var(&f.Seed, "seed", 0, "random seed (dataset and arrivals)")

	fl.BoolVar(&f.IgnoreEOS, "ignore-eos", false, "set ignore_eos on requests")
	fl.Float64Var(&f.Temperature, "temperature", 0, "temperature sampling parameter")
	fl.Float64Var(&f.TopP, "top-p", 0, "top-p sampling parameter")
	fl.IntVar(&f.TopK, "top-k", 0, "top-k sampling parameter")
	fl.Float64Var(&f.MinP, "min-p", 0, "min-p sampling parameter")
	fl.StringVar(&f.ExtraBody, "extra-body", "", "JSON object merged into every request body")
	fl.StringArrayVar(&f.Headers, "header", nil, "KEY=VALUE header added to every request (repeatable)")

	fl.StringVar(&f.PercentileMetrics, "percentile-metrics", "", "comma-separated metrics to report percentiles for (default ttft,tpot,itl)")
	fl.StringVar(&f.MetricPercentiles, "metric-percentiles", "99", "comma-separated percentiles")
	fl.StringArrayVar(&f.Goodput, "goodput", nil, "SLOs as KEY:VALUE in ms (ttft, tpot, e2el)")

	result.register(fl)
	fl.BoolVar(&f.SaveDetailed, "save-detailed", false, "include per-request arrays in the saved result")
	fl.StringArrayVar(&f.Metadata, "metadata", nil, "KEY=VALUE saved in the result (repeatable)")

	fl.IntVar(&f.NumWarmups, "num-warmups", 0, "warm-up requests before the run")
	fl.IntVar(&f.ReadyCheckSec, "ready-check-timeout-sec", 0, "wait up to this long for the endpoint to answer (0: skip)")
	fl.BoolVar(&f.DisableTqdm, "disable-tqdm", false, "disable the progress bar")
	fl.StringVar(&f.RequestIDPrefix, "request-id-prefix", "", "request id prefix (default bench-<8 hex>-)")

	fl.StringVar(&f.Profile, "profile", "", "perflab: workload profile NAME or FILE (dataset, rate, concurrency)")
	fl.Float64Var(&f.MaxSeconds, "max-seconds", 0, "perflab: stop after this many seconds")
	fl.IntVar(&f.MaxErrors, "max-errors", 0, "perflab: stop after this many failed requests")
	fl.BoolVar(&f.AllowAllFailed, "allow-all-failed", false, "perflab: exit 0 even when no request succeeded, as vllm bench serve does (default: exit 1)")
	fl.Float64Var(&f.MaxErrorRate, "max-error-rate", 0, "perflab: stop when failed/finished exceeds this fraction")
	fl.BoolVar(&f.PerflabMetrics, "perflab-metrics", false, "perflab: after vLLM's block, print perflab's additions (chunk-weighted peak, exact peak concurrency, offered vs achieved rate, dispatch lag, time to first content, failures by class)")
	fl.StringVar(&f.Transport, "transport", bench.TransportAuto, "perflab: streaming client: auto (epoll for http:// on Linux), epoll or net/http")
	fl.StringVar(&f.Output, "output", "text", "perflab: text (vLLM's block) or json (the result JSON on stdout)")
	fl.BoolVar(&f.IncludeQueueInTTFT, "include-queue-in-ttft", false, "perflab: count the wait for a --max-concurrency slot in TTFT")
	fl.Float64Var(&f.RequestTimeout, "request-timeout", bench.DefaultTimeout.Seconds(), "perflab: per-request timeout in seconds")
	fl.StringVar(&f.SLO, "slo", "", "perflab: search for the highest load within this SLO, e.g. ttft_p99<=200ms,tpot_p99<=30ms,success>=99% (with --search)")
	fl.StringVar(&f.Search, "search", "", "perflab: the load the --slo search varies: rate (open loop) or concurrency (closed loop)")
	fl.Float64Var(&f.SearchStart, "search-start", 1, "perflab: first load of the --slo search")
	fl.Float64Var(&f.SearchMax, "search-max", 4096, "perflab: highest load the --slo search may try")
	fl.Float64Var(&f.SearchTolerance, "search-tolerance", loadsearch.DefaultTolerance, "perflab: relative precision of the --slo search")
	fl.IntVar(&f.SearchWarmup, "search-warmup", -1, "perflab: leading requests of each --slo point not counted (default: 10% of --num-prompts)")
	fl.Float64Var(&f.SearchPointSeconds, "search-point-seconds", 600, "perflab: most seconds one --slo point may take, its longer runs included (0: no limit); --max-seconds caps each run too")
	fl.StringVar(&f.ResetCache, "reset-cache", "", "perflab: before each --slo point, reset the server's prefix cache as this engine does (vllm: POST /reset_prefix_cache, served under VLLM_SERVER_DEV_MODE=1; sglang: POST /flush_cache)")
	return cmd
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// tokenizerHint is app.TokenizerHint: how to give a tokenizer that was
// not found, naming the command's own flag.
func tokenizerHint(err error, flag string) string { return app.TokenizerHint(err, flag) }
