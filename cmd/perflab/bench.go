package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/bench"
	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/loadsearch"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/tokenizer"
)

// benchFlags mirrors `vllm bench serve`'s argparse namespace.
type benchFlags struct {
	backend, baseURL, host, endpoint, model, servedModelName, tokenizer string
	port                                                                int

	dataset          dataset.Options
	inputLen         int
	outputLen        int
	requestRate      float64
	burstiness       float64
	maxConcurrency   int
	rampUp           string
	rampStart        int
	rampEnd          int
	seed             int64
	ignoreEOS        bool
	temperature      float64
	topP, minP       float64
	topK             int
	extraBody        string
	headers          []string
	percentileMetric string
	metricPercent    string
	goodput          []string
	saveDetailed     bool
	result           resultFlags
	metadata         []string
	numWarmups       int
	readyCheck       int
	disableTqdm      bool
	transport        string
	perflabMetrics   bool
	requestIDPrefix  string
	trustRemoteCode  bool

	profile        string
	maxSeconds     float64
	maxErrors      int
	allowAllFailed bool
	maxErrorRate   float64
	output         string
	includeQueue   bool
	requestTimeout float64

	slo, search     string
	searchStart     float64
	searchMax       float64
	searchTolerance float64
	searchWarmup    int
	searchPointSecs float64
}

func newBenchCmd() *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark an OpenAI-compatible server like `vllm bench serve` (same flags, same figures)",
		Long: `perflab bench takes vllm bench serve's flags and definitions: it prints vLLM's
result block and writes vLLM's --save-result JSON (plus a "perflab" section).

--goodput and --metadata take several values like vLLM's (--goodput ttft:100 tpot:50).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBench(cmd, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.backend, "backend", bench.BackendOpenAI, "backend / endpoint type: openai, openai-chat or vllm")
	fl.StringVar(&f.baseURL, "base-url", "", "server or API base URL if not using --host and --port")
	fl.StringVar(&f.host, "host", "127.0.0.1", "server host")
	fl.IntVar(&f.port, "port", 8000, "server port")
	fl.StringVar(&f.endpoint, "endpoint", "/v1/completions", "API endpoint (openai-chat defaults to /v1/chat/completions)")
	fl.StringVar(&f.model, "model", "", "model name; default: the first model the server lists")
	fl.StringVar(&f.servedModelName, "served-model-name", "", "model name sent in requests, if not --model")
	fl.StringVar(&f.tokenizer, "tokenizer", "", "tokenizer name or path (default: --model)")
	fl.BoolVar(&f.trustRemoteCode, "trust-remote-code", false, "accepted for vLLM compatibility (no effect)")

	addDatasetFlags(fl, &f.dataset)
	fl.IntVar(&f.inputLen, "input-len", 0, "general input length (maps to --random-input-len)")
	fl.IntVar(&f.outputLen, "output-len", 0, "general output length (maps to each dataset's output length)")

	fl.Float64Var(&f.requestRate, "request-rate", math.Inf(1), "requests per second (inf: all at once)")
	fl.Float64Var(&f.burstiness, "burstiness", 1, "gamma shape of arrivals (1: Poisson)")
	fl.IntVar(&f.maxConcurrency, "max-concurrency", 0, "maximum concurrent requests")
	fl.StringVar(&f.rampUp, "ramp-up-strategy", "", "ramp-up strategy: linear or exponential")
	fl.IntVar(&f.rampStart, "ramp-up-start-rps", 0, "starting request rate of the ramp-up")
	fl.IntVar(&f.rampEnd, "ramp-up-end-rps", 0, "ending request rate of the ramp-up")
	fl.Int64Var(&f.seed, "seed", 0, "random seed (dataset and arrivals)")

	fl.BoolVar(&f.ignoreEOS, "ignore-eos", false, "set ignore_eos on requests")
	fl.Float64Var(&f.temperature, "temperature", 0, "temperature sampling parameter")
	fl.Float64Var(&f.topP, "top-p", 0, "top-p sampling parameter")
	fl.IntVar(&f.topK, "top-k", 0, "top-k sampling parameter")
	fl.Float64Var(&f.minP, "min-p", 0, "min-p sampling parameter")
	fl.StringVar(&f.extraBody, "extra-body", "", "JSON object merged into every request body")
	fl.StringArrayVar(&f.headers, "header", nil, "KEY=VALUE header added to every request (repeatable)")

	fl.StringVar(&f.percentileMetric, "percentile-metrics", "", "comma-separated metrics to report percentiles for (default ttft,tpot,itl)")
	fl.StringVar(&f.metricPercent, "metric-percentiles", "99", "comma-separated percentiles")
	fl.StringArrayVar(&f.goodput, "goodput", nil, "SLOs as KEY:VALUE in ms (ttft, tpot, e2el)")

	f.result.register(fl)
	fl.BoolVar(&f.saveDetailed, "save-detailed", false, "include per-request arrays in the saved result")
	fl.StringArrayVar(&f.metadata, "metadata", nil, "KEY=VALUE saved in the result (repeatable)")

	fl.IntVar(&f.numWarmups, "num-warmups", 0, "warm-up requests before the run")
	fl.IntVar(&f.readyCheck, "ready-check-timeout-sec", 0, "wait up to this long for the endpoint to answer (0: skip)")
	fl.BoolVar(&f.disableTqdm, "disable-tqdm", false, "disable the progress bar")
	fl.StringVar(&f.requestIDPrefix, "request-id-prefix", "", "request id prefix (default bench-<8 hex>-)")

	fl.StringVar(&f.profile, "profile", "", "perflab: workload profile NAME or FILE (dataset, rate, concurrency)")
	fl.Float64Var(&f.maxSeconds, "max-seconds", 0, "perflab: stop after this many seconds")
	fl.IntVar(&f.maxErrors, "max-errors", 0, "perflab: stop after this many failed requests")
	fl.BoolVar(&f.allowAllFailed, "allow-all-failed", false, "perflab: exit 0 even when no request succeeded, as vllm bench serve does (default: exit 1)")
	fl.Float64Var(&f.maxErrorRate, "max-error-rate", 0, "perflab: stop when failed/finished exceeds this fraction")
	fl.BoolVar(&f.perflabMetrics, "perflab-metrics", false, "perflab: after vLLM's block, print perflab's additions (chunk-weighted peak, exact peak concurrency, offered vs achieved rate, dispatch lag, time to first content, failures by class)")
	fl.StringVar(&f.transport, "transport", bench.TransportAuto, "perflab: streaming client: auto (epoll for http:// on Linux), epoll or net/http")
	fl.StringVar(&f.output, "output", "text", "perflab: text (vLLM's block) or json (the result JSON on stdout)")
	fl.BoolVar(&f.includeQueue, "include-queue-in-ttft", false, "perflab: count the wait for a --max-concurrency slot in TTFT")
	fl.Float64Var(&f.requestTimeout, "request-timeout", bench.DefaultTimeout.Seconds(), "perflab: per-request timeout in seconds")
	fl.StringVar(&f.slo, "slo", "", "perflab: search for the highest load within this SLO, e.g. ttft_p99<=200ms,tpot_p99<=30ms,success>=99% (with --search)")
	fl.StringVar(&f.search, "search", "", "perflab: the load the --slo search varies: rate (open loop) or concurrency (closed loop)")
	fl.Float64Var(&f.searchStart, "search-start", 1, "perflab: first load of the --slo search")
	fl.Float64Var(&f.searchMax, "search-max", 4096, "perflab: highest load the --slo search may try")
	fl.Float64Var(&f.searchTolerance, "search-tolerance", loadsearch.DefaultTolerance, "perflab: relative precision of the --slo search")
	fl.IntVar(&f.searchWarmup, "search-warmup", -1, "perflab: leading requests of each --slo point not counted (default: 10% of --num-prompts)")
	fl.Float64Var(&f.searchPointSecs, "search-point-seconds", 600, "perflab: most seconds one --slo point may take, its longer runs included (0: no limit); --max-seconds caps each run too")
	return cmd
}

// goodputNames are vLLM's valid --goodput keys.
var goodputNames = map[string]bool{"ttft": true, "tpot": true, "e2el": true}

// splitNargs assigns the extra positional words of vLLM's nargs flags
// (--goodput ttft:100 tpot:50, --metadata a=1 b=2) to their flag.
func splitNargs(args []string, f *benchFlags) error {
	for _, a := range args {
		k, _, ok := strings.Cut(a, ":")
		switch {
		case ok && goodputNames[k]:
			f.goodput = append(f.goodput, a)
		case strings.Contains(a, "="):
			f.metadata = append(f.metadata, a)
		default:
			return fmt.Errorf("bench: unexpected argument %q", a)
		}
	}
	return nil
}

func parseGoodput(pairs []string) (map[string]float64, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	out := map[string]float64{}
	for _, p := range pairs {
		for _, item := range strings.Fields(strings.ReplaceAll(p, ",", " ")) {
			k, v, ok := strings.Cut(item, ":")
			x, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				return nil, fmt.Errorf("bench: --goodput %q: want KEY:VALUE with VALUE in milliseconds", item)
			}
			if !goodputNames[k] {
				return nil, fmt.Errorf("bench: --goodput: invalid metric name %q (want ttft, tpot or e2el)", k)
			}
			if x < 0 {
				return nil, fmt.Errorf("bench: --goodput %s: the SLO must be non-negative", item)
			}
			out[k] = x
		}
	}
	return out, nil
}

func parseKV(items []string, what string) (map[string]string, error) {
	if len(items) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		if !ok {
			return nil, fmt.Errorf("bench: invalid %s format %q, please use KEY=VALUE", what, it)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// pyFloat formats like Python's str(float): "inf", "10.0", "0.5".
func pyFloat(x float64) string {
	if math.IsInf(x, 1) {
		return "inf"
	}
	s := strconv.FormatFloat(x, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

func runBench(cmd *cobra.Command, f *benchFlags, args []string) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	fl := cmd.Flags()
	if err := splitNargs(args, f); err != nil {
		return err
	}
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("bench: --output %q: want text or json", f.output)
	}
	switch f.transport {
	case bench.TransportAuto, bench.TransportEpoll, bench.TransportNetHTTP:
	default:
		return fmt.Errorf("bench: unknown transport %q for --transport (want auto, epoll or net/http)", f.transport)
	}
	// In json mode stdout carries only the result; the chatter goes to stderr.
	info := stdout
	if f.output == "json" {
		info = stderr
	}
	if f.maxConcurrency < 0 || (fl.Changed("max-concurrency") && f.maxConcurrency == 0) {
		return errors.New("bench: --max-concurrency must be greater than 0")
	}

	// A profile supplies dataset, rate and concurrency; explicit flags win.
	if f.profile != "" {
		p, err := loadProfile(f.profile)
		if err != nil {
			return err
		}
		merged := p.Dataset
		applyDatasetFlags(fl, &merged, &f.dataset)
		f.dataset = merged
		if !fl.Changed("request-rate") && p.RequestRate != 0 {
			f.requestRate = p.RequestRate
		}
		if !fl.Changed("max-concurrency") && p.MaxConcurrency > 0 {
			f.maxConcurrency = p.MaxConcurrency
		}
		if !fl.Changed("seed") && p.Dataset.Seed != 0 {
			f.seed = p.Dataset.Seed
		}
	}
	if f.rampUp != "" {
		if fl.Changed("request-rate") && !math.IsInf(f.requestRate, 1) {
			return errors.New("bench: when using ramp-up, do not specify --request-rate; the ramp-up parameters control the rate")
		}
		if !fl.Changed("ramp-up-start-rps") || !fl.Changed("ramp-up-end-rps") {
			return errors.New("bench: --ramp-up-strategy needs both --ramp-up-start-rps and --ramp-up-end-rps")
		}
	}
	if f.inputLen > 0 {
		f.dataset.RandomInputLen = f.inputLen
	}
	if f.outputLen > 0 {
		f.dataset.RandomOutputLen = f.outputLen
		f.dataset.ShareGPTOutputLen = f.outputLen
		f.dataset.CustomOutputLen = f.outputLen
		f.dataset.GSPOutputLen = f.outputLen
	}
	if f.dataset.Name == dataset.NameRandom && f.dataset.Path != "" {
		return fmt.Errorf("bench: cannot use the 'random' dataset with --dataset-path %s", f.dataset.Path)
	}
	if f.dataset.Name == dataset.NameRandom {
		// vLLM ignores EOS for the random dataset so every request runs to
		// its length.
		f.ignoreEOS = true
	}
	f.dataset.Seed = f.seed
	goodput, err := parseGoodput(f.goodput)
	if err != nil {
		return err
	}
	meta, err := parseKV(f.metadata, "metadata")
	if err != nil {
		return err
	}
	headers, err := parseKV(f.headers, "header")
	if err != nil {
		return err
	}
	var extra map[string]any
	if f.extraBody != "" {
		if err := json.Unmarshal([]byte(f.extraBody), &extra); err != nil {
			return fmt.Errorf("bench: --extra-body: %w", err)
		}
	}
	pcts, err := parsePercentiles(f.metricPercent)
	if err != nil {
		return err
	}
	var pmetrics []string
	if f.percentileMetric != "" {
		for _, m := range strings.Split(f.percentileMetric, ",") {
			m = strings.TrimSpace(m)
			if !isMetric(m) {
				return fmt.Errorf("bench: --percentile-metrics: unknown metric %q (want %s)", m, strings.Join(metrics.AllMetrics, ", "))
			}
			pmetrics = append(pmetrics, m)
		}
	}

	base := strings.TrimRight(f.baseURL, "/")
	if base == "" {
		base = "http://" + joinHostPort(f.host, f.port)
	}
	endpoint := f.endpoint
	if f.backend == bench.BackendOpenAIChat && !fl.Changed("endpoint") {
		endpoint = "/v1/chat/completions"
	}
	model := f.model
	apiKey := os.Getenv("OPENAI_API_KEY")
	if model == "" {
		fmt.Fprintln(info, "Model not specified, fetching first model from server...")
		if model, err = bench.FirstModel(ctx, nil, base, apiKey); err != nil {
			return err
		}
		fmt.Fprintf(info, "First model name: %s\n", model)
	}
	tokID := f.tokenizer
	if tokID == "" {
		tokID = model
	}
	tok, err := tokenizer.Resolve(ctx, tokID, tokenizer.ResolveOptions{Logf: func(format string, a ...any) {
		fmt.Fprintf(stderr, format+"\n", a...)
	}})
	if err != nil {
		return fmt.Errorf("bench: %w%s", err, tokenizerHint(err, "--tokenizer"))
	}
	reqs, err := dataset.Sample(f.dataset, tok)
	if err != nil {
		return fmt.Errorf("bench: %w", err) // it starts "dataset: "
	}

	cfg := bench.Config{
		BaseURL: base, Endpoint: endpoint, Backend: f.backend, Model: model, ServedModelName: f.servedModelName,
		Requests: reqs, RequestRate: f.requestRate, Burstiness: f.burstiness,
		RampUpStrategy: f.rampUp, RampUpStartRPS: float64(f.rampStart), RampUpEndRPS: float64(f.rampEnd),
		MaxConcurrency: f.maxConcurrency, Seed: f.seed, IgnoreEOS: f.ignoreEOS,
		ExtraBody: extra, Headers: headers, NumWarmups: f.numWarmups,
		ReadyCheckTimeout: time.Duration(f.readyCheck) * time.Second,
		RequestIDPrefix:   f.requestIDPrefix, Timeout: time.Duration(f.requestTimeout * float64(time.Second)),
		MaxSeconds: f.maxSeconds, MaxErrors: f.maxErrors, MaxErrorRate: f.maxErrorRate,
		APIKey: apiKey, Tokenizer: tok, KeepText: f.saveDetailed, Log: info,
		Metrics: metrics.Options{PercentileMetrics: pmetrics, Percentiles: pcts, Goodput: goodput,
			IncludeQueueInTTFT: f.includeQueue, Detailed: f.saveDetailed},
	}
	if fl.Changed("temperature") {
		cfg.Temperature = &f.temperature
	} else {
		fmt.Fprintln(info, "WARNING: vllm bench serve no longer sets temperature==0 (greedy) in requests by default. The default will be determined on the server side and can be model/API specific. For the old behavior, include --temperature=0.")
	}
	if fl.Changed("top-p") {
		cfg.TopP = &f.topP
	}
	if fl.Changed("top-k") {
		cfg.TopK = &f.topK
	}
	if fl.Changed("min-p") {
		cfg.MinP = &f.minP
	}
	cfg.Transport = f.transport
	if !f.disableTqdm && isTerminal(os.Stderr) {
		cfg.Progress = os.Stderr
	}
	if f.slo != "" || f.search != "" {
		// A point too short for a verdict runs again on more prompts of
		// the same dataset, not the same prompts again (a server's prefix
		// cache would serve those from memory).
		more := func(n int) ([]dataset.Request, error) {
			o := f.dataset
			o.NumPrompts = n
			return dataset.Sample(o, tok)
		}
		return runSLOSearch(ctx, f, cfg, more, stdout, info, stderr)
	}
	out, runErr := bench.Run(ctx, cfg)
	if out == nil || out.Result == nil {
		return runErr
	}
	res := out.Result
	res.NumPrompts = f.dataset.NumPrompts
	res.Label = f.result.label
	res.TokenizerID = tokID
	res.Metadata = meta
	res.Date = time.Now().Format("20060102-150405")

	printFailures(info, out.Records)
	if f.output == "json" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return fmt.Errorf("bench: encode result: %w", err)
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else if err := res.WriteTextWith(stdout, metrics.TextOptions{Perflab: f.perflabMetrics}); err != nil {
		return err
	}
	if f.result.save {
		name := f.result.name(model, loadShape{backend: f.backend, rate: f.requestRate, maxConcurrency: f.maxConcurrency,
			rampUp: f.rampUp, rampStart: f.rampStart, rampEnd: f.rampEnd}, res.Date)
		if err := f.result.write(stderr, "bench", name, res); err != nil {
			return err
		}
	}
	if runErr == nil && !f.allowAllFailed {
		runErr = allFailed(out.Records)
	}
	return runErr
}

// runSLOSearch is --slo/--search: the load search, the curve and vLLM's
// block at the sustainable load. The points measured are printed even when
// the search stops on an error.
func runSLOSearch(ctx context.Context, f *benchFlags, cfg bench.Config, more func(int) ([]dataset.Request, error), stdout, info, stderr io.Writer) error {
	if f.slo == "" || f.search == "" {
		return errors.New("bench: --slo and --search go together (e.g. --slo ttft_p99<=200ms --search rate)")
	}
	slo, err := loadsearch.ParseSLO(f.slo)
	if err != nil {
		return fmt.Errorf("bench: --slo: %w", err)
	}
	axis, err := loadsearch.ParseAxis(f.search)
	if err != nil {
		return fmt.Errorf("bench: --search: %w", err)
	}
	if f.searchPointSecs < 0 {
		return fmt.Errorf("bench: --search-point-seconds %v: want 0 (no limit) or more", f.searchPointSecs)
	}
	warmup := f.searchWarmup
	if warmup < 0 {
		warmup = len(cfg.Requests) / 10
	}
	if need := slo.MinRequests(); len(cfg.Requests)-warmup < need {
		return fmt.Errorf("bench: --slo %s needs %d measured requests a point; --num-prompts %d less %d warm-up gives %d",
			slo, need, len(cfg.Requests), warmup, len(cfg.Requests)-warmup)
	}
	cfg.Log, cfg.Progress = nil, nil
	b := &loadsearch.Bench{Config: cfg, Axis: axis, SLO: &slo, Warmup: warmup, MaxPointSeconds: f.searchPointSecs, More: more}
	var saveErr error
	b.OnPoint = func(p loadsearch.Point) {
		fmt.Fprintf(info, "measured %s %.4g: %d requests counted after %d warm-up (%d requests sent, %.1f s)\n",
			axis, p.Load, p.Completed, p.Warmup, p.Requests, p.Seconds)
		if f.result.save && saveErr == nil {
			saveErr = savePoint(f, cfg, axis, p, b.Result(p.Load), stderr)
		}
	}
	res, err := loadsearch.Search(ctx, loadsearch.Options{SLO: slo, Axis: axis, Start: f.searchStart, Max: f.searchMax,
		Tolerance: f.searchTolerance}, b.Measure)
	switch {
	case err == nil:
		fmt.Fprintln(stdout, res.Summary())
	case res != nil && len(res.Points) > 0:
		fmt.Fprintf(stdout, "search stopped after %d points:\n", len(res.Points))
	}
	if res != nil && len(res.Points) > 0 {
		if werr := loadsearch.WriteCurve(stdout, res); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if saveErr != nil {
		return saveErr
	}
	if !res.Found {
		return fmt.Errorf("bench: %w: %s", loadsearch.ErrNotFound, res.Summary())
	}
	fmt.Fprintf(stdout, "\nAt the sustainable load (%.4g %s, measured window):\n", res.Sustainable, axis.Unit())
	return b.Result(res.Sustainable).WriteTextWith(stdout, metrics.TextOptions{Perflab: f.perflabMetrics})
}

// savePoint is --save-result under --slo: each point's window result,
// named as vLLM names a run at that load (--result-filename gets the load
// before its extension).
func savePoint(f *benchFlags, cfg bench.Config, axis loadsearch.Axis, p loadsearch.Point, res *metrics.Result, stderr io.Writer) error {
	if res == nil {
		return nil
	}
	ld := loadShape{backend: f.backend, rate: p.Load}
	if axis == loadsearch.AxisConcurrency {
		ld = loadShape{backend: f.backend, rate: math.Inf(1), maxConcurrency: int(p.Load)}
	}
	date := time.Now().Format("20060102-150405")
	res.Label, res.Date = f.result.label, date
	name := f.result.name(cfg.Model, ld, date)
	if f.result.filename != "" {
		ext := filepath.Ext(name)
		name = fmt.Sprintf("%s-%s%g%s", strings.TrimSuffix(name, ext), axis, p.Load, ext)
	}
	return f.result.write(stderr, "bench", name, res)
}

// ErrNoSuccess is wrapped when not one request of a benchmark succeeded.
var ErrNoSuccess = errors.New("no request succeeded")

// allFailed is an error when records were sent and none succeeded: the
// figures are printed and saved, but a script must see the failure (vLLM
// exits 0 here; --allow-all-failed keeps that).
func allFailed(recs []metrics.Record) error {
	if len(recs) == 0 {
		return nil
	}
	first := ""
	for _, r := range recs {
		if r.Success {
			return nil
		}
		if first == "" {
			first = r.Error
		}
	}
	return fmt.Errorf("bench: %w: all %d requests failed; the first: %s (--allow-all-failed exits 0 as vllm bench serve does)",
		ErrNoSuccess, len(recs), first)
}

// printFailures is vLLM's "Failed requests during benchmark run detected"
// listing, capped at 10.
func printFailures(w io.Writer, recs []metrics.Record) {
	n := 0
	for _, r := range recs {
		if r.Success {
			continue
		}
		if n == 0 {
			fmt.Fprintln(w, "Failed requests during benchmark run detected (capping to 10):")
		}
		fmt.Fprintf(w, "Error %d: %s\n", n, r.Error)
		if n++; n == 10 {
			return
		}
	}
}

func parsePercentiles(s string) ([]float64, error) {
	var out []float64
	for _, p := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || x < 0 || x > 100 {
			return nil, fmt.Errorf("bench: --metric-percentiles: %q is not a percentile in [0,100]", p)
		}
		out = append(out, x)
	}
	return out, nil
}

func isMetric(m string) bool {
	for _, k := range metrics.AllMetrics {
		if k == m {
			return true
		}
	}
	return false
}

func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(port)
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// loadProfile takes a built-in profile name or a profile file.
func loadProfile(s string) (dataset.Profile, error) {
	if p, ok := dataset.LookupProfile(s); ok {
		return p, nil
	}
	if _, err := os.Stat(s); err == nil {
		return dataset.LoadProfile(s)
	}
	var names []string
	for _, p := range dataset.Profiles() {
		names = append(names, p.Name)
	}
	return dataset.Profile{}, fmt.Errorf("bench: --profile %q is neither a built-in profile (%s) nor a file", s, strings.Join(names, ", "))
}

// applyDatasetFlags copies the dataset flags the user set over a profile's
// dataset options.
func applyDatasetFlags(fl interface{ Changed(string) bool }, dst, src *dataset.Options) {
	set := func(flag string, apply func()) {
		if fl.Changed(flag) {
			apply()
		}
	}
	set("dataset-name", func() { dst.Name = src.Name })
	set("dataset-path", func() { dst.Path = src.Path })
	set("num-prompts", func() { dst.NumPrompts = src.NumPrompts })
	set("no-oversample", func() { dst.NoOversample = src.NoOversample })
	set("disable-shuffle", func() { dst.DisableShuffle = src.DisableShuffle })
	set("sharegpt-output-len", func() { dst.ShareGPTOutputLen = src.ShareGPTOutputLen })
	set("random-input-len", func() { dst.RandomInputLen = src.RandomInputLen })
	set("random-output-len", func() { dst.RandomOutputLen = src.RandomOutputLen })
	set("random-range-ratio", func() { dst.RandomRangeRatio = src.RandomRangeRatio })
	set("random-prefix-len", func() { dst.RandomPrefixLen = src.RandomPrefixLen })
	set("custom-output-len", func() { dst.CustomOutputLen = src.CustomOutputLen })
	set("gsp-num-groups", func() { dst.GSPNumGroups = src.GSPNumGroups })
	set("gsp-prompts-per-group", func() { dst.GSPPromptsPerGroup = src.GSPPromptsPerGroup })
	set("gsp-system-prompt-len", func() { dst.GSPSystemPromptLen = src.GSPSystemPromptLen })
	set("gsp-question-len", func() { dst.GSPQuestionLen = src.GSPQuestionLen })
	set("gsp-output-len", func() { dst.GSPOutputLen = src.GSPOutputLen })
	if dst.NumPrompts == 0 {
		dst.NumPrompts = src.NumPrompts
	}
}

// tokenizerHint tells a user whose tokenizer was not found how to give
// one, naming the command's own flag ("" for any other error).
func tokenizerHint(err error, flag string) string {
	var nf *tokenizer.NotFoundError
	if !errors.As(err, &nf) {
		return ""
	}
	return "\ngive one with " + flag + " DIR (a directory holding tokenizer.json, or the file itself) or " + flag +
		" ORG/NAME (a Hub id: HF_TOKEN opens gated models, HF_HUB_OFFLINE=1 keeps perflab off the Hub)"
}
