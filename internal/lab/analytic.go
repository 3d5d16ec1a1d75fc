package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
)

// AnalyticPredictor is a closed-form serving model (weights and KV memory,
// a memory-bound decode step, compute-bound prefill, per-engine overheads).
// It is the stand-in Predictor used until the simulator's in-process face
// (sim.Predict via simargs.Parse) is wired in, and an independent cheap
// model for the lab's own tests. Summaries made with it say so in Runtime.
type AnalyticPredictor struct{}

var _ Predictor = AnalyticPredictor{}

var paramsRe = regexp.MustCompile(`(?i)(\d+(?:\.\d+)?)b\b`)

// modelParamsB guesses the parameter count in billions from the model name.
func modelParamsB(model string) float64 {
	m := paramsRe.FindStringSubmatch(strings.ReplaceAll(model, "-FP8", ""))
	if m == nil {
		return 8
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	return f
}

// Predict implements Predictor.
func (AnalyticPredictor) Predict(ctx context.Context, cfg engine.Config, hw labspec.Hardware, reqs []dataset.Request, w labspec.Workload) (Prediction, error) {
	if err := ctx.Err(); err != nil {
		return Prediction{}, err
	}
	cmd := strings.TrimSpace(cfg.Engine + " " + cfg.Model + " " + fmt.Sprint(cfg))
	if len(reqs) == 0 {
		return Prediction{Command: cmd, FailureClass: FailInvalidConfig, Reason: "no requests"}, nil
	}
	tp, dp := max(cfg.TensorParallel, 1), max(cfg.DataParallel, 1)
	if tp*dp > hw.Count {
		return Prediction{Command: cmd, FailureClass: FailInvalidConfig, Reason: fmt.Sprintf("needs %d GPUs, have %d", tp*dp, hw.Count)}, nil
	}
	pb := modelParamsB(cfg.Model)
	bpp := 2.0
	fp8 := cfg.Quantization != ""
	if fp8 {
		bpp = 1
	}
	// An unknown engine keeps zero defaults (Validate has refused it
	// before a prediction is asked for).
	var def engine.Defaults
	if k, ok := engine.KindOf(cfg.Engine); ok {
		def = k.Defaults
	}
	memFrac := def.GPUMemoryFraction
	if cfg.GPUMemoryFraction > 0 {
		memFrac = cfg.GPUMemoryFraction
	}
	weightsGB := pb * bpp / float64(tp)
	kvPerTokMB := 0.16 * math.Sqrt(pb/14) / float64(tp)
	if strings.HasPrefix(cfg.KVCacheDtype, "fp8") {
		kvPerTokMB /= 2
	}
	freeGB := 80*memFrac - weightsGB - 3
	if freeGB <= 1 {
		return Prediction{Command: cmd, FailureClass: FailOOM, Reason: fmt.Sprintf("weights %.1f GB leave no KV cache", weightsGB)}, nil
	}
	kvTokens := freeGB * 1024 / kvPerTokMB
	var in, out, ctxSum float64
	for _, r := range reqs {
		in += float64(r.PromptLen)
		out += float64(r.OutputLen)
		ctxSum += float64(r.PromptLen) + float64(r.OutputLen)/2
	}
	n := float64(len(reqs))
	avgCtx := ctxSum / n
	seqs := def.MaxNumSeqs
	if k, ok := engine.KindOf(cfg.Engine); ok {
		// The cap the engine picks on this GPU (vLLM's 1024 on an H100,
		// 256 on an A100). The device is read from the GPU's name when
		// the caller's copy of the hardware predates the lab filling it.
		dev := hw.Device
		if !dev.Known() {
			dev = DeviceOf(hw.GPU)
		}
		if b := k.BatchDefaults(cfg, dev); b.MaxNumSeqs > 0 {
			seqs = float64(b.MaxNumSeqs)
		}
	}
	if cfg.MaxNumSeqs > 0 {
		seqs = float64(cfg.MaxNumSeqs)
	}
	conc := math.Min(math.Min(seqs, kvTokens/avgCtx), n/float64(dp))
	if w.MaxConcurrency > 0 {
		conc = math.Min(conc, float64(w.MaxConcurrency)/float64(dp))
	}
	conc = math.Max(conc, 1)
	overheadMs := def.StepOverheadMs
	if cfg.PerformanceMode == "throughput" {
		overheadMs *= 0.9
	}
	attn := map[string]float64{
		"FLASHINFER": 1.02, "TRITON_ATTN": 1.08, "fa3": 0.998, "flashinfer": 1.14, "triton": 1.04, "VANILLA": 1.2,
	}[cfg.AttentionBackend]
	if attn == 0 {
		attn = 1
	}
	// Decode: weights and the batch's KV read once per step (3.35 TB/s).
	stepMs := overheadMs + (weightsGB+conc*avgCtx*kvPerTokMB/1024)/3.35*attn
	if tp > 1 {
		stepMs *= 1 + 0.06*math.Log2(float64(tp)) // all-reduce
	}
	decodeTokS := conc / stepMs * 1000
	// Prefill: compute bound, 40% MFU on 990 TFLOPS (x1.6 with FP8).
	flops := 990e12 * 0.4 * float64(tp)
	if fp8 {
		flops *= 1.6
	}
	mbt := def.MaxNumBatchedTokens
	if cfg.MaxNumBatchedTokens > 0 {
		mbt = float64(cfg.MaxNumBatchedTokens)
	}
	prefillEff := 1 - 0.25*math.Exp(-mbt/6000)
	prefillTokS := flops / (2 * pb * 1e9) * prefillEff
	chunked := def.ChunkedPrefill
	if cfg.ChunkedPrefill != nil {
		chunked = *cfg.ChunkedPrefill
	}
	overlap := 1.0
	if chunked {
		// Chunked prefill overlaps prefill with decode; large budgets with
		// many sequences stretch decode steps (the interaction the joint
		// search is for).
		overlap = 0.82 + 0.06*math.Min(mbt/32768, 1)*math.Min(seqs/1024, 1)
		if mbt < 4096 {
			overlap += 0.1
		}
	}
	dur := (in/prefillTokS + out/decodeTokS) * overlap / float64(dp)
	if cfg.PrefixCaching != nil && *cfg.PrefixCaching {
		dur *= 1.01
	}
	completed := int(n)
	if sp := cfg.Speculative; sp != nil {
		dur *= 0.8
		if sp.Method == "mtp" || sp.Method == "ngram" {
			completed = int(math.Round(n * 0.515))
		}
	}
	if cfg.EnforceEager {
		dur *= 1.3
	}
	tpot := stepMs
	res := map[string]any{
		"completed": completed, "num_prompts": len(reqs), "duration": dur,
		"total_input_tokens": int(in), "total_output_tokens": int(out),
		"request_throughput": float64(completed) / dur, "output_throughput": out / dur,
		"total_token_throughput": (in + out) / dur,
		"mean_ttft_ms":           dur * 1000 / 2, "p99_ttft_ms": dur * 1000 * 0.97,
		"mean_tpot_ms": tpot, "p99_tpot_ms": tpot * 3,
	}
	b, _ := json.Marshal(res)
	return Prediction{Command: cmd, Result: b, Seconds: dur}, nil
}

// StandinRequests builds requests without a tokenizer: random workloads at
// their exact lengths, ShareGPT with lengths estimated as characters/4 and
// vLLM's filters. It is the stand-in until dataset.Sample is wired in.
func StandinRequests(w labspec.Workload) ([]dataset.Request, error) {
	n := w.NumPrompts
	switch w.Dataset {
	case "random":
		out := make([]dataset.Request, n)
		for i := range out {
			out[i] = dataset.Request{PromptLen: w.InputLen, OutputLen: w.OutputLen, IgnoreEOS: true}
		}
		return out, nil
	case "sharegpt":
		data, err := os.ReadFile(labspec.ResolvePath(w.Path))
		if err != nil {
			return nil, fmt.Errorf("lab: workload %s: %w", w.Name, err)
		}
		var convs []struct {
			ID            string `json:"id"`
			Conversations []struct {
				Value string `json:"value"`
			} `json:"conversations"`
		}
		if err := json.Unmarshal(data, &convs); err != nil {
			return nil, fmt.Errorf("lab: workload %s: decode %s: %w", w.Name, w.Path, err)
		}
		var out []dataset.Request
		for _, c := range convs {
			if len(out) >= n {
				break
			}
			if len(c.Conversations) < 2 {
				continue
			}
			pl, ol := len(c.Conversations[0].Value)/4, len(c.Conversations[1].Value)/4
			if pl < 4 || ol < 4 || pl > 1024 || pl+ol > 2048 {
				continue
			}
			out = append(out, dataset.Request{PromptLen: pl, OutputLen: ol, SourceID: c.ID})
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("lab: workload %s: no usable conversations in %s", w.Name, w.Path)
		}
		return out, nil
	}
	return nil, fmt.Errorf("lab: workload %s: dataset %q not supported by the stand-in", w.Name, w.Dataset)
}
