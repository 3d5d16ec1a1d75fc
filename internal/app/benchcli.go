package app

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

	"github.com/perflab/perflab/internal/atomicfile"
	"github.com/perflab/perflab/internal/bench"
	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/loadsearch"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/tokenizer"
)

// BenchArgs are perflab bench's arguments: `vllm bench serve`'s argparse
// namespace, then perflab's own. The command line fills them (flag names
// in the comments are vLLM's); RunBench checks and runs them.
type BenchArgs struct {
	Backend, BaseURL, Host, Endpoint, Model, ServedModelName, Tokenizer string
	Port                                                                int

	Dataset           dataset.Options
	InputLen          int
	OutputLen         int
	RequestRate       float64
	Burstiness        float64
	MaxConcurrency    int
	RampUp            string
	RampStart         int
	RampEnd           int
	Seed              int64
	IgnoreEOS         bool
	Temperature       float64
	TopP, MinP        float64
	TopK              int
	ExtraBody         string
	Headers           []string
	PercentileMetrics string
	MetricPercentiles string
	Goodput           []string
	SaveDetailed      bool
	Result            ResultFiles
	Metadata          []string
	NumWarmups        int
	ReadyCheckSec     int
	DisableTqdm       bool
	Transport         string
	PerflabMetrics    bool
	RequestIDPrefix   string
	TrustRemoteCode   bool

	Profile            string
	MaxSeconds         float64
	MaxErrors          int
	AllowAllFailed     bool
	MaxErrorRate       float64
	Output             string
	IncludeQueueInTTFT bool
	RequestTimeout     float64

	SLO, Search        string
	SearchStart        float64
	SearchMax          float64
	SearchTolerance    float64
	SearchWarmup       int
	SearchPointSeconds float64
	// ResetCache names the engine whose prefix-cache reset runs before
	// each --slo point ("": none, and a note says why it matters).
	ResetCache string

	// APIKey is sent as a Bearer token (vLLM reads OPENAI_API_KEY).
	APIKey string
	// Progress receives the progress bar (nil: none; the command line
	// gives a terminal's stderr).
	Progress io.Writer
	// Changed says whether the user set the flag of that name (vLLM's
	// spelling: "request-rate", "temperature", "num-prompts", ...): vLLM
	// tells a flag left at its default from one set to the same value,
	// and so must a profile's merge. Nil: none was set.
	Changed func(flag string) bool
}

func (f *BenchArgs) changed() func(string) bool {
	if f.Changed == nil {
		return func(string) bool { return false }
	}
	return f.Changed
}

// ResultFiles are vllm bench serve's result-file switches (--save-result,
// --result-dir, --result-filename, --label), shared by every command that
// writes a result: bench and sim predict.
type ResultFiles struct {
	Save     bool
	Dir      string
	Filename string
	Label    string
}

// LoadShape is what vLLM's result file name says of the load.
type LoadShape struct {
	Backend            string
	Rate               float64
	MaxConcurrency     int
	RampUp             string
	RampStart, RampEnd int
}

// Name is vLLM's compute_result_filename: --result-filename when given,
// else label-rate[-concurrency]-model-date.json, under --result-dir.
func (r *ResultFiles) Name(model string, ld LoadShape, dt string) string {
	base := model[strings.LastIndex(model, "/")+1:]
	conc := ""
	if ld.MaxConcurrency > 0 {
		conc = fmt.Sprintf("-concurrency%d", ld.MaxConcurrency)
	}
	label := r.Label
	if label == "" {
		label = ld.Backend
	}
	var name string
	if ld.RampUp != "" {
		name = fmt.Sprintf("%s-ramp-up-%s-%dqps-%dqps%s-%s-%s.json", label, ld.RampUp, ld.RampStart, ld.RampEnd, conc, base, dt)
	} else {
		name = fmt.Sprintf("%s-%sqps%s-%s-%s.json", label, bench.PyFloat(ld.Rate), conc, base, dt)
	}
	if r.Filename != "" {
		name = r.Filename
	}
	if r.Dir != "" {
		name = filepath.Join(r.Dir, name)
	}
	return name
}

// Write saves res as JSON under name, atomically, and says where on
// stderr; cmdName starts its errors.
func (r *ResultFiles) Write(stderr io.Writer, cmdName, name string, res any) error {
	if dir := filepath.Dir(name); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%s: result dir: %w", cmdName, err)
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("%s: encode result: %w", cmdName, err)
	}
	if err := atomicfile.WriteFile(name, b, 0o644); err != nil {
		return fmt.Errorf("%s: save result: %w", cmdName, err)
	}
	fmt.Fprintf(stderr, "Saved result to %s\n", name)
	return nil
}

// goodputNames are vLLM's valid --goodput keys.
var goodputNames = map[string]bool{"ttft": true, "tpot": true, "e2el": true}

// splitNargs assigns the extra positional words of vLLM's nargs flags
// (--goodput ttft:100 tpot:50, --metadata a=1 b=2) to their flag.
func splitNargs(args []string, f *BenchArgs) error {
	for _, a := range args {
		k, _, ok := strings.Cut(a, ":")
		switch {
		case ok && goodputNames[k]:
			f.Goodput = append(f.Goodput, a)
		case strings.Contains(a, "="):
			f.Metadata = append(f.Metadata, a)
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

// RunBench is perflab bench: vllm bench serve's checks and defaults on f,
// the benchmark (or the --slo load search), vLLM's result block on stdout
// (or the result JSON, with --output json), the result file. args are
// the positional words of vLLM's nargs flags (--goodput, --metadata). f
// is completed in place (the profile's and the dataset's defaults).
func RunBench(ctx context.Context, f *BenchArgs, args []string, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	fl := f.changed()
	if err := splitNargs(args, f); err != nil {
		return err
	}
	if f.Output != "text" && f.Output != "json" {
		return fmt.Errorf("bench: --output %q: want text or json", f.Output)
	}
	switch f.Transport {
	case bench.TransportAuto, bench.TransportEpoll, bench.TransportNetHTTP:
	default:
		return fmt.Errorf("bench: unknown transport %q for --transport (want auto, epoll or net/http)", f.Transport)
	}
	// In json mode stdout carries only the result; the chatter goes to stderr.
	info := stdout
	if f.Output == "json" {
		info = stderr
	}
	if f.MaxConcurrency < 0 || (fl("max-concurrency") && f.MaxConcurrency == 0) {
		return errors.New("bench: --max-concurrency must be greater than 0")
	}

	// A profile supplies dataset, rate and concurrency; explicit flags win.
	if f.Profile != "" {
		p, err := loadProfile(f.Profile)
		if err != nil {
			return err
		}
		merged := p.Dataset
		applyDatasetFlags(fl, &merged, &f.Dataset)
		f.Dataset = merged
		if !fl("request-rate") && p.RequestRate != 0 {
			f.RequestRate = p.RequestRate
		}
		if !fl("max-concurrency") && p.MaxConcurrency > 0 {
			f.MaxConcurrency = p.MaxConcurrency
		}
		if !fl("seed") && p.Dataset.Seed != 0 {
			f.Seed = p.Dataset.Seed
		}
	}
	if f.RampUp != "" {
		if fl("request-rate") && !math.IsInf(f.RequestRate, 1) {
			return errors.New("bench: when using ramp-up, do not specify --request-rate; the ramp-up parameters control the rate")
		}
		if !fl("ramp-up-start-rps") || !fl("ramp-up-end-rps") {
			return errors.New("bench: --ramp-up-strategy needs both --ramp-up-start-rps and --ramp-up-end-rps")
		}
	}
	if f.InputLen > 0 {
		f.Dataset.RandomInputLen = f.InputLen
	}
	if f.OutputLen > 0 {
		f.Dataset.RandomOutputLen = f.OutputLen
		f.Dataset.ShareGPTOutputLen = f.OutputLen
		f.Dataset.CustomOutputLen = f.OutputLen
		f.Dataset.GSPOutputLen = f.OutputLen
	}
	if f.Dataset.Name == dataset.NameRandom && f.Dataset.Path != "" {
		return fmt.Errorf("bench: cannot use the 'random' dataset with --dataset-path %s", f.Dataset.Path)
	}
	if f.Dataset.Name == dataset.NameRandom {
		// vLLM ignores EOS for the random dataset so every request runs to
		// its length.
		f.IgnoreEOS = true
	}
	f.Dataset.Seed = f.Seed
	goodput, err := parseGoodput(f.Goodput)
	if err != nil {
		return err
	}
	meta, err := parseKV(f.Metadata, "metadata")
	if err != nil {
		return err
	}
	headers, err := parseKV(f.Headers, "header")
	if err != nil {
		return err
	}
	var extra map[string]any
	if f.ExtraBody != "" {
		if err := json.Unmarshal([]byte(f.ExtraBody), &extra); err != nil {
			return fmt.Errorf("bench: --extra-body: %w", err)
		}
	}
	pcts, err := parsePercentiles(f.MetricPercentiles)
	if err != nil {
		return err
	}
	var pmetrics []string
	if f.PercentileMetrics != "" {
		for _, m := range strings.Split(f.PercentileMetrics, ",") {
			m = strings.TrimSpace(m)
			if !isMetric(m) {
				return fmt.Errorf("bench: --percentile-metrics: unknown metric %q (want %s)", m, strings.Join(metrics.AllMetrics, ", "))
			}
			pmetrics = append(pmetrics, m)
		}
	}

	base := strings.TrimRight(f.BaseURL, "/")
	if base == "" {
		base = "http://" + joinHostPort(f.Host, f.Port)
	}
	endpoint := f.Endpoint
	if f.Backend == bench.BackendOpenAIChat && !fl("endpoint") {
		endpoint = "/v1/chat/completions"
	}
	model := f.Model
	apiKey := f.APIKey
	if model == "" {
		fmt.Fprintln(info, "Model not specified, fetching first model from server...")
		if model, err = bench.FirstModel(ctx, nil, base, apiKey); err != nil {
			return err
		}
		fmt.Fprintf(info, "First model name: %s\n", model)
	}
	tokID := f.Tokenizer
	if tokID == "" {
		tokID = model
	}
	tok, err := tokenizer.Resolve(ctx, tokID, tokenizer.ResolveOptions{Logf: func(format string, a ...any) {
		fmt.Fprintf(stderr, format+"\n", a...)
	}})
	if err != nil {
		return fmt.Errorf("bench: %w%s", err, TokenizerHint(err, "--tokenizer"))
	}
	reqs, err := dataset.Sample(f.Dataset, tok)
	if err != nil {
		return fmt.Errorf("bench: %w", err) // it starts "dataset: "
	}

	cfg := bench.Config{
		BaseURL: base, Endpoint: endpoint, Backend: f.Backend, Model: model, ServedModelName: f.ServedModelName,
		Requests: reqs, RequestRate: f.RequestRate, Burstiness: f.Burstiness,
		RampUpStrategy: f.RampUp, RampUpStartRPS: float64(f.RampStart), RampUpEndRPS: float64(f.RampEnd),
		MaxConcurrency: f.MaxConcurrency, Seed: f.Seed, IgnoreEOS: f.IgnoreEOS,
		ExtraBody: extra, Headers: headers, NumWarmups: f.NumWarmups,
		ReadyCheckTimeout: time.Duration(f.ReadyCheckSec) * time.Second,
		RequestIDPrefix:   f.RequestIDPrefix, Timeout: time.Duration(f.RequestTimeout * float64(time.Second)),
		MaxSeconds: f.MaxSeconds, MaxErrors: f.MaxErrors, MaxErrorRate: f.MaxErrorRate,
		APIKey: apiKey, Tokenizer: tok, KeepText: f.SaveDetailed, Log: info,
		Metrics: metrics.Options{PercentileMetrics: pmetrics, Percentiles: pcts, Goodput: goodput,
			IncludeQueueInTTFT: f.IncludeQueueInTTFT, Detailed: f.SaveDetailed},
	}
	if fl("temperature") {
		cfg.Temperature = &f.Temperature
	} else {
		fmt.Fprintln(info, "WARNING: vllm bench serve no longer sets temperature==0 (greedy) in requests by default. The default will be determined on the server side and can be model/API specific. For the old behavior, include --temperature=0.")
	}
	if fl("top-p") {
		cfg.TopP = &f.TopP
	}
	if fl("top-k") {
		cfg.TopK = &f.TopK
	}
	if fl("min-p") {
		cfg.MinP = &f.MinP
	}
	cfg.Transport = f.Transport
	if !f.DisableTqdm {
		cfg.Progress = f.Progress
	}
	if f.ResetCache != "" && f.SLO == "" && f.Search == "" {
		return errors.New("bench: --reset-cache resets the server's prefix cache between --slo points; a single run measures the server as it is")
	}
	if f.SLO != "" || f.Search != "" {
		// A point too short for a verdict runs again on more prompts of
		// the same dataset, not the same prompts again (a server's prefix
		// cache would serve those from memory).
		more := func(n int) ([]dataset.Request, error) {
			o := f.Dataset
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
	res.NumPrompts = f.Dataset.NumPrompts
	res.Label = f.Result.Label
	res.TokenizerID = tokID
	res.Metadata = meta
	res.Date = time.Now().Format("20060102-150405")

	printFailures(info, out.Records)
	if f.Output == "json" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return fmt.Errorf("bench: encode result: %w", err)
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else if err := res.WriteTextWith(stdout, metrics.TextOptions{Perflab: f.PerflabMetrics}); err != nil {
		return err
	}
	if f.Result.Save {
		name := f.Result.Name(model, LoadShape{Backend: f.Backend, Rate: f.RequestRate, MaxConcurrency: f.MaxConcurrency,
			RampUp: f.RampUp, RampStart: f.RampStart, RampEnd: f.RampEnd}, res.Date)
		if err := f.Result.Write(stderr, "bench", name, res); err != nil {
			return err
		}
	}
	if runErr == nil && !f.AllowAllFailed {
		runErr = allFailed(out.Records)
	}
	return runErr
}

// runSLOSearch is --slo/--search: the load search, the curve and vLLM's
// block at the sustainable load. The points measured are printed even when
// the search stops on an error.
func runSLOSearch(ctx context.Context, f *BenchArgs, cfg bench.Config, more func(int) ([]dataset.Request, error), stdout, info, stderr io.Writer) error {
	if f.SLO == "" || f.Search == "" {
		return errors.New("bench: --slo and --search go together (e.g. --slo ttft_p99<=200ms --search rate)")
	}
	slo, err := loadsearch.ParseSLO(f.SLO)
	if err != nil {
		return fmt.Errorf("bench: --slo: %w", err)
	}
	axis, err := loadsearch.ParseAxis(f.Search)
	if err != nil {
		return fmt.Errorf("bench: --search: %w", err)
	}
	if f.SearchPointSeconds < 0 {
		return fmt.Errorf("bench: --search-point-seconds %v: want 0 (no limit) or more", f.SearchPointSeconds)
	}
	warmup := f.SearchWarmup
	if warmup < 0 {
		warmup = len(cfg.Requests) / 10
	}
	if need := slo.MinRequests(); len(cfg.Requests)-warmup < need {
		return fmt.Errorf("bench: --slo %s needs %d measured requests a point; --num-prompts %d less %d warm-up gives %d",
			slo, need, len(cfg.Requests), warmup, len(cfg.Requests)-warmup)
	}
	cfg.Log, cfg.Progress = nil, nil
	b := &loadsearch.Bench{Config: cfg, Axis: axis, SLO: &slo, Warmup: warmup, MaxPointSeconds: f.SearchPointSeconds, More: more}
	var saveErr error
	b.OnPoint = func(p loadsearch.Point) {
		fmt.Fprintf(info, "measured %s %.4g: %d requests counted after %d warm-up (%d requests sent, %.1f s)\n",
			axis, p.Load, p.Completed, p.Warmup, p.Requests, p.Seconds)
		if f.Result.Save && saveErr == nil {
			saveErr = savePoint(f, cfg, axis, p, b.Result(p.Load), stderr)
		}
	}
	measure, err := resetBeforePoints(f.ResetCache, cfg, axis, b.Measure, stderr)
	if err != nil {
		return err
	}
	res, err := loadsearch.Search(ctx, loadsearch.Options{SLO: slo, Axis: axis, Start: f.SearchStart, Max: f.SearchMax,
		Tolerance: f.SearchTolerance}, measure)
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
	return b.Result(res.Sustainable).WriteTextWith(stdout, metrics.TextOptions{Perflab: f.PerflabMetrics})
}

// resetBeforePoints is --reset-cache: measure with the named engine's
// prefix-cache reset before each point. Every point sends the same prompts
// again, so a server that caches prefixes (vLLM's and SGLang's default)
// would serve a later point's prompts from what an earlier point left, and
// the search would call a load sustainable that a cold server is not.
// Without the flag a note says so.
func resetBeforePoints(name string, cfg bench.Config, axis loadsearch.Axis, measure loadsearch.Measure, stderr io.Writer) (loadsearch.Measure, error) {
	if name == "" {
		fmt.Fprintln(stderr, "bench: every --slo point sends the same prompts; a server that caches prefixes (vLLM's and SGLang's default) "+
			"serves a later point's prompts from what earlier points left: --reset-cache ENGINE resets it before each point")
		return measure, nil
	}
	k, ok := engine.KindOf(name)
	if !ok {
		return nil, fmt.Errorf("bench: --reset-cache %q: want %s", name, engine.KindList())
	}
	reset := engine.ResetFor(engine.Config{Engine: name})
	if reset.Path == "" {
		return nil, fmt.Errorf("bench: --reset-cache %s: %s has no endpoint that resets its prefix cache; measure a server started without prefix caching instead", name, k.Display)
	}
	return func(ctx context.Context, load float64) (loadsearch.Point, error) {
		if err := resetIdle(ctx, reset, cfg.BaseURL, cfg.Model); err != nil {
			why := ""
			if len(reset.Env) > 0 {
				// The assignments as the engine's own command line writes them.
				env := strings.TrimSpace(engine.Command{Env: reset.Env}.String())
				why = " (" + k.Display + " serves it only when started with " + env + ")"
			}
			return loadsearch.Point{}, fmt.Errorf("--reset-cache %s before the point at %g %s: %w%s", name, load, axis.Unit(), err, why)
		}
		return measure(ctx, load)
	}, nil
}

// resetIdle resets the prefix cache once the server has let go of the
// previous point's requests: those the client stopped early may run on
// for a moment, and an engine refuses (SGLang) or skips (vLLM) a reset
// while blocks are held, so those answers are tried again for up to ten
// seconds; an endpoint the server does not serve is not.
func resetIdle(ctx context.Context, reset engine.CacheReset, base, model string) error {
	var err error
	for try := 0; try < 10; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
		if model == "" {
			err = reset.Do(ctx, base)
		} else {
			_, err = reset.DoVerified(ctx, base, model)
		}
		var refused *engine.ResetRefused
		if err == nil || ctx.Err() != nil || errors.As(err, &refused) && !refused.Busy() {
			return err
		}
	}
	return err
}

// savePoint is --save-result under --slo: each point's window result,
// named as vLLM names a run at that load (--result-filename gets the load
// before its extension).
func savePoint(f *BenchArgs, cfg bench.Config, axis loadsearch.Axis, p loadsearch.Point, res *metrics.Result, stderr io.Writer) error {
	if res == nil {
		return nil
	}
	ld := LoadShape{Backend: f.Backend, Rate: p.Load}
	if axis == loadsearch.AxisConcurrency {
		ld = LoadShape{Backend: f.Backend, Rate: math.Inf(1), MaxConcurrency: int(p.Load)}
	}
	date := time.Now().Format("20060102-150405")
	res.Label, res.Date = f.Result.Label, date
	name := f.Result.Name(cfg.Model, ld, date)
	if f.Result.Filename != "" {
		ext := filepath.Ext(name)
		name = fmt.Sprintf("%s-%s%g%s", strings.TrimSuffix(name, ext), axis, p.Load, ext)
	}
	return f.Result.Write(stderr, "bench", name, res)
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
func applyDatasetFlags(changed func(string) bool, dst, src *dataset.Options) {
	set := func(flag string, apply func()) {
		if changed(flag) {
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

// TokenizerHint tells a user whose tokenizer was not found how to give
// one, naming the command's own flag ("" for any other error).
func TokenizerHint(err error, flag string) string {
	var nf *tokenizer.NotFoundError
	if !errors.As(err, &nf) {
		return ""
	}
	return "\ngive one with " + flag + " DIR (a directory holding tokenizer.json, or the file itself) or " + flag +
		" ORG/NAME (a Hub id: HF_TOKEN opens gated models, HF_HUB_OFFLINE=1 keeps perflab off the Hub)"
}
