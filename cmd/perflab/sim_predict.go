package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/hfhub"
	"github.com/perflab/perflab/internal/sim"
	"github.com/perflab/perflab/internal/sim/simargs"
	"github.com/perflab/perflab/internal/tokenizer"
)

type simPredictFlags struct {
	engine, version, gpu, tokenizer, coefficients, output string
	modelConfig                                           string
	result                                                resultFlags
	gpus                                                  int
	dataset                                               dataset.Options
	requestRate, burstiness                               float64
	maxConcurrency                                        int
	seed                                                  int64
	noFaults                                              bool
	offline                                               bool
}

func newSimPredictCmd() *cobra.Command {
	f := &simPredictFlags{}
	cmd := &cobra.Command{
		Use:   "predict --engine vllm|sglang|trtllm --gpu H100 [dataset and load flags] -- ENGINE ARGV...",
		Short: "Predict a benchmark run on the simulator, without a server or a GPU",
		Long: `Predict what "perflab bench" (or "vllm bench serve") would measure against the
engine started with the argv after "--", from the simulator's step-level model,
in a fraction of a second. The dataset and load flags are perflab bench's.

  perflab sim predict --engine vllm --gpu H100 --dataset-name sharegpt \
    --dataset-path ../shared/data/sharegpt/sharegpt_v3_sample_1000.json \
    --tokenizer ../shared/data/tokenizers/qwen3 -- vllm serve Qwen/Qwen3-14B

Prints vLLM's result block (--output json: the --save-result JSON).

With --offline it predicts an offline throughput benchmark instead (vllm bench
throughput, trtllm-bench throughput, sglang.bench_offline_throughput): every
request handed to the engine core at once, no API server, and prints their
figures (requests/s, input, output and total tokens/s, latency, per GPU).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runSimPredict(cmd, f, args) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.engine, "engine", "vllm", "engine to simulate: vllm, sglang or trtllm")
	fl.StringVar(&f.version, "engine-version", "", "engine version (default: the simulator's default for the engine)")
	fl.StringVar(&f.gpu, "gpu", "H100", gpuFlagHelp())
	fl.IntVar(&f.gpus, "gpus", 0, "GPUs available (default: what the argv's parallelism needs)")
	fl.StringVar(&f.coefficients, "coefficients", "", "coefficients JSON from perflab sim calibrate (default: the embedded calibration)")
	fl.StringVar(&f.tokenizer, "tokenizer", "", "tokenizer name or path for sampling the dataset (default: the argv's model)")
	addDatasetFlags(fl, &f.dataset)
	fl.Float64Var(&f.requestRate, "request-rate", math.Inf(1), "requests per second (inf: all at once)")
	fl.Float64Var(&f.burstiness, "burstiness", 1, "gamma shape of arrivals (1: Poisson)")
	fl.IntVar(&f.maxConcurrency, "max-concurrency", 0, "maximum concurrent requests")
	fl.Int64Var(&f.seed, "seed", 0, "random seed (dataset and arrivals)")
	f.result.register(fl)
	fl.StringVar(&f.modelConfig, "model-config", "", "the model's HF config.json (default: a local model directory, the HF cache, the catalog, then the Hub)")
	fl.StringVar(&f.output, "output", "text", "stdout format: text (vLLM's block) or json")
	fl.BoolVar(&f.offline, "offline", false, "predict an offline throughput benchmark (vllm bench throughput, trtllm-bench throughput, sglang.bench_offline_throughput): all requests at once into the engine core, no API server")
	fl.BoolVar(&f.noFaults, "no-faults", false, "do not reproduce known engine bugs (a configuration the real engine crashes on runs to the end)")
	return cmd
}

func runSimPredict(cmd *cobra.Command, f *simPredictFlags, args []string) error {
	if cmd.ArgsLenAtDash() < 0 || len(args) == 0 {
		return errors.New("sim predict: give the engine's command after --, e.g. -- vllm serve Qwen/Qwen3-14B")
	}
	if cmd.ArgsLenAtDash() > 0 {
		return fmt.Errorf("sim predict: unexpected arguments before --: %q", args[:cmd.ArgsLenAtDash()])
	}
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("sim predict: --output %q: want text or json", f.output)
	}
	if f.maxConcurrency < 0 || (cmd.Flags().Changed("max-concurrency") && f.maxConcurrency == 0) {
		return errors.New("sim predict: --max-concurrency must be greater than 0")
	}
	if f.requestRate <= 0 || math.IsNaN(f.requestRate) {
		return fmt.Errorf("sim predict: --request-rate %g: want a positive rate or inf", f.requestRate)
	}
	if f.burstiness <= 0 || math.IsNaN(f.burstiness) {
		return fmt.Errorf("sim predict: --burstiness %g: want a positive gamma shape", f.burstiness)
	}
	if f.offline {
		for _, name := range []string{"request-rate", "burstiness", "save-result"} {
			if cmd.Flags().Changed(name) {
				return fmt.Errorf("sim predict: --%s: an offline run (--offline) hands every request to the engine at once and has no serving result", name)
			}
		}
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	p, err := simargs.Parse(f.engine, f.version, args, env)
	if err != nil {
		return fmt.Errorf("sim predict: %w", err)
	}
	p.GPU = f.gpu
	if f.gpus > 0 {
		p.GPUs = f.gpus
	}
	p.ModelConfig = f.modelConfig
	modelFrom := "--model-config"
	if p.ModelConfig == "" {
		src, err := sim.ResolveModel(cmd.Context(), p.Model, hfhub.Options{Logf: func(format string, a ...any) {
			fmt.Fprintf(cmd.ErrOrStderr(), "sim predict: "+format+"\n", a...)
		}})
		if err != nil {
			return fmt.Errorf("sim predict: %w", err)
		}
		p.ModelConfig, modelFrom = src.ConfigPath, src.From
	}
	p.NoFaults = f.noFaults
	var coef *sim.Coefficients
	if f.coefficients != "" {
		if coef, err = sim.LoadCoefficients(f.coefficients); err != nil {
			return fmt.Errorf("sim predict: %w", err)
		}
	}
	tokID := f.tokenizer
	if tokID == "" {
		tokID = p.Model
	}
	tok, err := tokenizer.Resolve(cmd.Context(), tokID, tokenizer.ResolveOptions{Logf: func(format string, a ...any) {
		fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", a...)
	}})
	if err != nil {
		return fmt.Errorf("sim predict: %w%s", err, tokenizerHint(err, "--tokenizer"))
	}
	f.dataset.Seed = f.seed
	reqs, err := dataset.Sample(f.dataset, tok)
	if err != nil {
		return fmt.Errorf("sim predict: %w", err)
	}
	if f.offline {
		return runSimPredictOffline(cmd, f, p, coef, reqs, modelFrom)
	}
	pr, err := sim.PredictWith(p, coef, reqs, sim.Load{RequestRate: f.requestRate, Burstiness: f.burstiness,
		MaxConcurrency: f.maxConcurrency, Seed: f.seed})
	if err != nil {
		return fmt.Errorf("sim predict: %w", err)
	}
	if err := pr.Err(); err != nil {
		return fmt.Errorf("sim predict: %w", err)
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "sim predict: "+simulating(pr.Params.Engine, pr.Params.Version, f.version != "", pr.Params.GPU, pr.Params.GPUs)+
		"; "+p.Model+" from "+modelFrom)
	printCapacity(cmd, pr)
	if kernel, share, ok := sim.WeightOnlyKernel(pr.Params); ok {
		fmt.Fprintf(cmd.ErrOrStderr(), "sim predict: weight-only GEMMs through %s, priced at %.2f of the 16-bit GEMMs' rate once compute-bound\n", kernel, share)
	}
	// The range: the same run under the leave-one-model-out calibrations,
	// i.e. how far the prediction moves when the calibration lacks a model,
	// widened by how far this engine's predictions were off on the models
	// each fold held out.
	span, err := sim.PredictSpan(p, coef, nil, reqs, sim.Load{RequestRate: f.requestRate, Burstiness: f.burstiness,
		MaxConcurrency: f.maxConcurrency, Seed: f.seed})
	if err != nil {
		return fmt.Errorf("sim predict: range: %w", err)
	}
	if span.Borrowed != "" {
		why := borrowedWhy(pr.Params, span)
		fmt.Fprintf(cmd.ErrOrStderr(), "sim predict: %s; this prediction borrows %s's, and its range also holds the run under each other fitted version of %s\n",
			why, span.Borrowed, p.Engine)
	}
	for _, u := range span.Unseen {
		fmt.Fprintln(cmd.ErrOrStderr(), "sim predict: unseen by the calibration: "+u)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "sim predict: range over %d calibrations (this one and the leave-one-model-out fits, widened to hold 9 in 10 of %s's errors on held-out models): Total TPS %.0f..%.0f tok/s, mean TTFT %.0f..%.0f ms, mean TPOT %.1f..%.1f ms\n",
		span.Fits, p.Engine, span.Lo.TotalTPS, span.Hi.TotalTPS, span.Lo.MeanTTFTMs, span.Hi.MeanTTFTMs, span.Lo.MeanTPOTMs, span.Hi.MeanTPOTMs)
	res := pr.Result
	if k, ok := engine.KindOf(p.Engine); ok {
		res.Backend, res.EndpointType = k.ResultBackend, k.ResultBackend
	} else {
		res.Backend, res.EndpointType = p.Engine, p.Engine
	}
	res.ModelID = p.Model
	res.TokenizerID = tokID
	res.NumPrompts = f.dataset.NumPrompts
	res.Date = time.Now().Format("20060102-150405")
	res.Metadata = map[string]string{"simulated": "true", "engine": p.Engine, "engine_version": pr.Params.Version,
		"gpu": pr.Params.GPU, "kv_capacity_tokens": fmt.Sprint(pr.KVCapacityTokens),
		"max_running_requests": fmt.Sprint(pr.MaxRunning),
		"range_fits":           fmt.Sprint(span.Fits),
		"range_total_tps":      fmt.Sprintf("%.1f..%.1f", span.Lo.TotalTPS, span.Hi.TotalTPS),
		"range_mean_ttft_ms":   fmt.Sprintf("%.2f..%.2f", span.Lo.MeanTTFTMs, span.Hi.MeanTTFTMs),
		"range_mean_tpot_ms":   fmt.Sprintf("%.2f..%.2f", span.Lo.MeanTPOTMs, span.Hi.MeanTPOTMs)}
	if span.Borrowed != "" {
		res.Metadata["calibration_borrowed_from"] = span.Borrowed
	}
	if len(span.Unseen) > 0 {
		res.Metadata["range_widened_for"] = strings.Join(span.Unseen, "; ")
	}
	out := cmd.OutOrStdout()
	if f.output == "json" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return fmt.Errorf("sim predict: encode result: %w", err)
		}
		fmt.Fprintf(out, "%s\n", b)
	} else if err := res.WriteText(out); err != nil {
		return err
	}
	if f.result.save {
		res.Label = f.result.label
		name := f.result.name(p.Model, loadShape{backend: res.Backend, rate: f.requestRate, maxConcurrency: f.maxConcurrency}, res.Date)
		if err := f.result.write(cmd.ErrOrStderr(), "sim predict", name, res); err != nil {
			return err
		}
	}
	return nil
}

// runSimPredictOffline is sim predict --offline: the offline benchmarks'
// figures, with their range, instead of the serving result block.
func runSimPredictOffline(cmd *cobra.Command, f *simPredictFlags, p sim.Params, coef *sim.Coefficients, reqs []dataset.Request, modelFrom string) error {
	pr, off, err := sim.PredictOffline(p, coef, reqs, f.maxConcurrency)
	if err != nil {
		return fmt.Errorf("sim predict: %w", err)
	}
	if err := pr.Err(); err != nil {
		return fmt.Errorf("sim predict: %w", err)
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "sim predict: offline, "+simulating(pr.Params.Engine, pr.Params.Version, f.version != "", pr.Params.GPU, pr.Params.GPUs)+
		"; "+p.Model+" from "+modelFrom)
	printCapacity(cmd, pr)
	span, err := sim.OfflineSpan(p, coef, nil, reqs, f.maxConcurrency)
	if err != nil {
		return fmt.Errorf("sim predict: range: %w", err)
	}
	if span.Borrowed != "" {
		why := borrowedWhy(pr.Params, span)
		fmt.Fprintf(cmd.ErrOrStderr(), "sim predict: %s; this prediction borrows %s's\n", why, span.Borrowed)
	}
	for _, u := range span.Unseen {
		fmt.Fprintln(cmd.ErrOrStderr(), "sim predict: unseen by the calibration: "+u)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "sim predict: range over %d calibrations and the served run (the calibration saw only served runs): Total TPS %.0f..%.0f tok/s\n",
		span.Fits, span.Lo.TotalTPS, span.Hi.TotalTPS)
	out := cmd.OutOrStdout()
	if f.output == "json" {
		b, err := json.MarshalIndent(struct {
			sim.OfflineResult
			Simulated     bool    `json:"simulated"`
			Engine        string  `json:"engine"`
			EngineVersion string  `json:"engine_version"`
			GPU           string  `json:"gpu"`
			RangeTotalLo  float64 `json:"range_tokens_per_second_lo"`
			RangeTotalHi  float64 `json:"range_tokens_per_second_hi"`
			Borrowed      string  `json:"calibration_borrowed_from,omitempty"`
		}{off, true, p.Engine, pr.Params.Version, pr.Params.GPU, span.Lo.TotalTPS, span.Hi.TotalTPS, span.Borrowed}, "", "  ")
		if err != nil {
			return fmt.Errorf("sim predict: encode result: %w", err)
		}
		fmt.Fprintf(out, "%s\n", b)
		return nil
	}
	return off.WriteText(out, &span)
}

// tokenizer.Tokenizer satisfies the dataset sampler's interface.
var _ dataset.Tokenizer = (*tokenizer.Tokenizer)(nil)

// borrowedWhy says why a prediction on p (defaults applied) runs on
// another calibration than its own engine version's.
func borrowedWhy(p sim.Params, span sim.Span) string {
	if span.PassedOver {
		return fmt.Sprintf("%s %s on %s was calibrated on the other attention kind only", p.Engine, p.Version, p.GPU)
	}
	return fmt.Sprintf("no calibration was fitted to %s %s on %s", p.Engine, p.Version, p.GPU)
}

// printCapacity says what the memory model left the deployment: a run's
// queueing follows from how many requests fit at once, which for SGLang on
// a hybrid model is its state pool, not its KV cache.
func printCapacity(cmd *cobra.Command, pr *sim.Prediction) {
	fmt.Fprintf(cmd.ErrOrStderr(), "sim predict: KV cache %d tokens; at most %d requests running at once\n", pr.KVCapacityTokens, pr.MaxRunning)
}
