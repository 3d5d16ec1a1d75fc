package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/sim"
	"github.com/perflab/perflab/internal/sim/simargs"
)

// SimPredictor is the simulator's in-process face: the config is rendered
// to the engine's real command line, parsed back the way the engine would
// (simargs rejects what the engine rejects) and predicted by sim.Predict.
// The result goes through metrics.Compute with the objective's SLOs as
// goodput, exactly like a live benchmark's records.
type SimPredictor struct {
	// SLO feeds goodput (tpot/ttft/e2el per request).
	SLO labspec.SLO
	// Coefficients is the calibration (nil: the embedded one), e.g. one
	// `perflab sim calibrate` fitted to the user's own measurements.
	Coefficients *sim.Coefficients
}

var _ Predictor = SimPredictor{}

// Predict implements Predictor.
func (sp SimPredictor) Predict(ctx context.Context, cfg engine.Config, hw labspec.Hardware, reqs []dataset.Request, w labspec.Workload) (Prediction, error) {
	if err := ctx.Err(); err != nil {
		return Prediction{}, err
	}
	cmd, err := engine.Render(cfg)
	if err != nil {
		return Prediction{FailureClass: FailInvalidConfig, Reason: err.Error()}, nil
	}
	out := Prediction{Command: cmd.Script()}
	p, err := simargs.ParseFiles(cfg.Engine, cfg.Version, cmd.Argv, cmd.Env, cmd.Files)
	if err != nil {
		out.FailureClass, out.Reason = FailStartupCrash, err.Error()
		return out, nil
	}
	p.GPU = simGPU(hw.GPU)
	_, load := w.Resolve()
	pred, err := sim.PredictWith(p, sp.Coefficients, reqs, sim.Load{RequestRate: load.Rate, MaxConcurrency: load.MaxConcurrency, Seed: load.Seed})
	if err != nil {
		switch {
		case errors.Is(err, sim.ErrOOM):
			out.FailureClass = FailOOM
		default:
			out.FailureClass = FailStartupCrash
		}
		out.Reason = err.Error()
		return out, nil
	}
	opt := metrics.DefaultOptions()
	opt.RequestRate, opt.MaxConcurrency = load.Rate, load.MaxConcurrency
	if g := sp.SLO.Goodput(); len(g) > 0 {
		opt.Goodput = g
	}
	recs, dur := pointWindow(w.Point, pred.Records, pred.Duration, &opt)
	res := metrics.Compute(recs, dur, opt)
	if a := sim.Assumptions(p, sp.Coefficients); len(a) > 0 && res.Perflab != nil {
		res.Perflab.Assumptions = a
	}
	b, err := res.MarshalJSON()
	if err != nil {
		return out, fmt.Errorf("lab: encode prediction: %w", err)
	}
	out.Result, out.Seconds = b, pred.Duration
	return out, nil
}

// Upside implements Ranged: the throughput spread of the config's engine on
// held-out models, for the embedded calibration only.
func (sp SimPredictor) Upside(cfg engine.Config) (float64, bool) {
	folds := sim.FoldsFor(sp.Coefficients)
	if folds == nil {
		return 0, false
	}
	cmd, err := engine.Render(cfg)
	if err != nil {
		return 0, false
	}
	p, err := simargs.ParseFiles(cfg.Engine, cfg.Version, cmd.Argv, cmd.Env, cmd.Files)
	if err != nil {
		return 0, false
	}
	return folds.SpreadFor(p.Engine).TotalTPS, true
}

var _ Ranged = SimPredictor{}

// DeviceOf is what the engines' start-up defaults read of the GPU a spec
// names (labspec.Hardware.Device): the simulator's catalog entry, with the
// memory the name states where it states one ("A100-40GB" is no 80 GB
// A100: SGLang's default chunk there is 4096, not 8192); the zero Device
// for a GPU the catalog lacks.
func DeviceOf(gpu string) engine.Device {
	g, err := sim.LookupGPU(simGPU(gpu))
	if err != nil {
		return engine.Device{}
	}
	d := engine.Device{Name: g.Name, MemGiB: g.MemGiB}
	if m := statedGB.FindStringSubmatch(gpu); m != nil {
		if gb, err := strconv.Atoi(m[1]); err == nil {
			d.MemGiB = float64(gb)
		}
	}
	return d
}

// statedGB finds the memory a GPU's name states ("H100-SXM-80GB", "NVIDIA
// A100-PCIE-40GB", "H200 141GB"). The marketing figure is near enough to
// the GiB the driver reports for the engines' thresholds (70 GiB for vLLM;
// 35, 60 and 160 for SGLang).
var statedGB = regexp.MustCompile(`(?i)(?:^|[^0-9])([0-9]{2,3}) ?GB`)

// withDevice fills what the engines' defaults read of the spec's GPU and
// model, unless the caller set it: s.Hardware.Device from the GPU it
// names, s.Hardware.AttentionDefaults from the simulator's engines.
func withDevice(s *labspec.Spec) {
	if !s.Hardware.Device.Known() {
		s.Hardware.Device = DeviceOf(s.Hardware.GPU)
	}
	if s.Hardware.AttentionDefaults == nil {
		s.Hardware.AttentionDefaults = attentionDefaults(s)
	}
}

// attentionDefaults are the attention backend each of the spec's engines
// picks for the spec's model on its GPU when none is named, as the
// simulator's engines resolve it from the engine's own command (their
// defaults are read from the engines' sources: sim's vllmDefaults and
// sglangDefaults). An engine or model the simulator cannot resolve is left
// out, and no backend of it is taken for its default.
func attentionDefaults(s *labspec.Spec) map[string]string {
	out := map[string]string{}
	// On Blackwell vLLM prefers FlashInfer and SGLang trtllm_mha, which
	// the simulator's engines do not model: there no backend is taken for
	// a default, and every candidate is measured.
	if g, err := sim.LookupGPU(simGPU(s.Hardware.GPU)); err != nil || g.SM >= 100 {
		return out
	}
	for _, e := range s.Engines {
		cfg, ok := s.Config(labspec.Point{labspec.KnobEngine: e.Name})
		if !ok {
			continue
		}
		cfg.AttentionBackend = ""
		cmd, err := engine.Render(cfg)
		if err != nil {
			continue
		}
		p, err := simargs.ParseFiles(cfg.Engine, cfg.Version, cmd.Argv, cmd.Env, cmd.Files)
		if err != nil {
			continue
		}
		p.GPU = simGPU(s.Hardware.GPU)
		if p, err = p.WithDefaults(); err == nil && p.AttentionBackend != "" {
			out[e.Name] = p.AttentionBackend
		}
	}
	return out
}

// simGPU maps a hardware name to the simulator's catalog name: a spelling
// the catalog knows, or else the catalog name the hardware name contains,
// blanks, hyphens and underscores aside, the longest first ("NVIDIA H100
// PCIe 80GB" → "H100-PCIe", "H100-SXM-80GB" → "H100"). A name that holds
// none is returned as it is, for the simulator to refuse.
func simGPU(name string) string {
	if g, err := sim.LookupGPU(name); err == nil {
		return g.Name
	}
	squash := strings.NewReplacer(" ", "", "-", "", "_", "").Replace
	up := squash(strings.ToUpper(name))
	names := sim.GPUNames()
	slices.SortStableFunc(names, func(a, b string) int { return len(b) - len(a) })
	for _, g := range names {
		if strings.Contains(up, squash(strings.ToUpper(g))) {
			return g
		}
	}
	return name
}

// DatasetRequests samples a workload's requests with dataset.Sample and the
// tokenizer, exactly as vllm bench serve would.
func DatasetRequests(tok dataset.Tokenizer) Requests {
	return func(w labspec.Workload) ([]dataset.Request, error) {
		opt, _ := w.Resolve()
		reqs, err := dataset.Sample(opt, tok)
		if err != nil {
			return nil, fmt.Errorf("lab: workload %s: %w", w.Name, err)
		}
		return reqs, nil
	}
}

// info describes a workload and the bench commands that reproduce it.
func workloadInfo(w labspec.Workload, model string) WorkloadInfo {
	opt, ld := w.Resolve()
	var desc string
	args := []string{"--model", model, "--backend", "openai-chat", "--endpoint", "/v1/chat/completions", "--dataset-name", opt.Name}
	switch opt.Name {
	case "random":
		desc = fmt.Sprintf("random %d in / %d out", opt.RandomInputLen, opt.RandomOutputLen)
		args = append(args, "--random-input-len", strconv.Itoa(opt.RandomInputLen), "--random-output-len", strconv.Itoa(opt.RandomOutputLen))
	default:
		desc = opt.Name
		args = append(args, "--dataset-path", opt.Path)
	}
	n := opt.NumPrompts
	if n == 0 {
		n = 1000
	}
	desc += fmt.Sprintf(", %d prompts, seed %d, rate %s", n, opt.Seed, labspec.Rate(ld.Rate))
	args = append(args, "--num-prompts", strconv.Itoa(n))
	if opt.Seed != 0 {
		args = append(args, "--seed", strconv.FormatInt(opt.Seed, 10))
	}
	if !math.IsInf(ld.Rate, 1) {
		args = append(args, "--request-rate", strconv.FormatFloat(ld.Rate, 'g', -1, 64))
	}
	if ld.MaxConcurrency > 0 {
		desc += fmt.Sprintf(", max concurrency %d", ld.MaxConcurrency)
		args = append(args, "--max-concurrency", strconv.Itoa(ld.MaxConcurrency))
	}
	// Quoted as a shell needs: a dataset under a directory with a space
	// in its name is one argument.
	line := func(prog ...string) string { return engine.Command{Argv: append(prog, args...)}.String() }
	return WorkloadInfo{Name: w.Name, Description: desc, Perflab: line("perflab", "bench"), VLLM: line("vllm", "bench", "serve")}
}
