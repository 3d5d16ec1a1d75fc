package sim

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"

	"github.com/perflab/perflab/internal/metrics"
)

// FitOptions tunes the calibration fit.
type FitOptions struct {
	// Rounds of coordinate descent (0 = 6).
	Rounds int
	// Prior is the weight pulling each coefficient toward its starting
	// value (log scale); 0 = 0.02.
	Prior float64
	// Log receives progress lines when set.
	Log func(format string, args ...any)
}

// coefParam names one fitted scalar of a Coef.
type coefParam struct {
	name string
	get  func(*Coef) *float64
}

var fitParams = []coefParam{
	{"gemm_eff", func(c *Coef) *float64 { return &c.GEMMEff }},
	{"fp8_eff", func(c *Coef) *float64 { return &c.FP8Eff }},
	{"mem_eff", func(c *Coef) *float64 { return &c.MemEff }},
	{"attn_eff", func(c *Coef) *float64 { return &c.AttnEff }},
	{"step_ms", func(c *Coef) *float64 { return &c.StepMs }},
	{"seq_us", func(c *Coef) *float64 { return &c.SeqUs }},
	{"frontend_ms", func(c *Coef) *float64 { return &c.FrontendMs }},
	{"eager_ms", func(c *Coef) *float64 { return &c.EagerMs }},
}

// caseKey is the coefficient key a case is fitted under.
func caseKey(c Case) (string, error) {
	p, err := c.Params.WithDefaults()
	if err != nil {
		return "", err
	}
	return Key(p.GPU, p.Engine, p.Version), nil
}

// Fit fits coefficients per GPU/engine/version to the cases (each with
// Measured filled), starting from start (nil = embedded). Each group is fitted
// by coordinate descent on the squared log errors of total throughput
// (weight 4), mean TTFT and mean TPOT (weight 1 each), with a weak prior
// pulling toward the starting values so sparsely measured groups stay sane.
func Fit(cases []Case, start *Coefficients, opt FitOptions) (*Coefficients, error) {
	if start == nil {
		start = DefaultCoefficients()
	}
	if opt.Rounds == 0 {
		opt.Rounds = 6
	}
	if opt.Prior == 0 {
		opt.Prior = 0.02
	}
	groups := map[string][]Case{}
	for _, c := range cases {
		if c.Exclude != "" {
			continue
		}
		k, err := caseKey(c)
		if err != nil {
			return nil, fmt.Errorf("sim: fit: case %s: %w", c.ID, err)
		}
		groups[k] = append(groups[k], c)
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("sim: fit: no usable cases")
	}
	out := &Coefficients{Source: "fitted", Entries: map[string]Coef{}}
	for k, v := range start.Entries {
		out.Entries[k] = cloneCoef(v)
	}
	// Groups with more cases first, so a thin group can start from a
	// fitted sibling (same engine, other version).
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(groups[keys[i]]) != len(groups[keys[j]]) {
			return len(groups[keys[i]]) > len(groups[keys[j]])
		}
		return keys[i] < keys[j]
	})
	// Groups are independent: fit them in parallel, one goroutine each,
	// big groups first; a thin group starts from its engine's prior.
	type res struct {
		k string
		c Coef
	}
	ch := make(chan res, len(keys))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for _, k := range keys {
		gpu, engine, _ := strings.Cut(k, "/")
		engine, _, _ = strings.Cut(engine, "/")
		var init Coef
		if e, ok := start.Entries[k]; ok {
			init = cloneCoef(e)
		} else {
			e, _ := start.Lookup(gpu, engine, "")
			init = cloneCoef(e)
		}
		go func(k string, init Coef) {
			sem <- struct{}{}
			defer func() { <-sem }()
			c := fitGroup(groups[k], init, opt)
			if opt.Log != nil {
				opt.Log("fitted %s on %d cases: %+v", k, len(groups[k]), c)
			}
			ch <- res{k, c}
		}(k, init)
	}
	for range keys {
		r := <-ch
		out.Entries[r.k] = r.c
	}
	return out, nil
}

func cloneCoef(c Coef) Coef {
	if c.Backend != nil {
		m := make(map[string]float64, len(c.Backend))
		for k, v := range c.Backend {
			m[k] = v
		}
		c.Backend = m
	}
	return c
}

func fitGroup(cases []Case, init Coef, opt FitOptions) Coef {
	// Backends named by the cases, other than each engine's default, get a
	// multiplier of their own.
	backends := map[string]bool{}
	for _, c := range cases {
		p, _ := c.Params.WithDefaults()
		def, _ := (Params{Engine: p.Engine, Version: p.Version, Model: p.Model, GPU: p.GPU}).WithDefaults()
		if p.AttentionBackend != def.AttentionBackend {
			backends[p.AttentionBackend] = true
		}
	}
	params := append([]coefParam(nil), fitParams...)
	if init.Backend == nil {
		init.Backend = map[string]float64{}
	}
	var bnames []string
	for b := range backends {
		bnames = append(bnames, b)
	}
	sort.Strings(bnames)
	for _, b := range bnames {
		if init.Backend[b] == 0 {
			init.Backend[b] = 1
		}
		name := b
		params = append(params, coefParam{"backend:" + name, func(c *Coef) *float64 {
			v := c.Backend[name]
			p := &v
			return p
		}})
	}
	prior := cloneCoef(init)
	cur := cloneCoef(init)
	loss := func(c Coef) float64 {
		l := 0.0
		coefs := &Coefficients{Entries: map[string]Coef{"*": c}}
		for _, cs := range cases {
			r := PredictCase(cs, coefs)
			if r.Err != nil {
				l += 10
				continue
			}
			a, b, d := r.Errors()
			l += 4 * sq(math.Log1p(a))
			l += sq(math.Log1p(b))
			if cs.NoTPOT == "" {
				l += sq(math.Log1p(d))
			}
		}
		l /= float64(len(cases))
		for _, p := range fitParams {
			x, x0 := *p.get(&c), *p.get(&prior)
			if x > 0 && x0 > 0 {
				l += opt.Prior * sq(math.Log(x/x0))
			}
		}
		return l
	}
	get := func(c *Coef, p coefParam) float64 {
		if b, ok := strings.CutPrefix(p.name, "backend:"); ok {
			return c.Backend[b]
		}
		return *p.get(c)
	}
	set := func(c *Coef, p coefParam, v float64) {
		if b, ok := strings.CutPrefix(p.name, "backend:"); ok {
			c.Backend[b] = v
			return
		}
		*p.get(c) = v
	}
	best := loss(cur)
	step := 0.4
	for round := 0; round < opt.Rounds; round++ {
		improved := false
		for _, p := range params {
			for _, dir := range []float64{1, -1} {
				for tries := 0; tries < 4; tries++ {
					x := get(&cur, p)
					if x <= 0 {
						x = 1e-3
					}
					nx := x * math.Exp(dir*step)
					if strings.HasSuffix(p.name, "_eff") && nx > 1.2 {
						break
					}
					cand := cloneCoef(cur)
					set(&cand, p, nx)
					l := loss(cand)
					if l < best-1e-9 {
						best, cur, improved = l, cand, true
						continue
					}
					break
				}
			}
		}
		if opt.Log != nil {
			opt.Log("  round %d step %.3f loss %.5f", round, step, best)
		}
		if !improved {
			step /= 2
		}
	}
	if len(cur.Backend) == 0 {
		cur.Backend = nil
	}
	return cur
}

func sq(x float64) float64 { return x * x }

// Calibrate refits the coefficients from measured results: cases give the
// deployment and workload of each run (Measured may be empty), results[i] is
// the measured result of cases[i] (vLLM --save-result JSON or perflab's, as
// metrics.ParseJSON reads them). The fit starts from the embedded
// calibration, so GPUs, engines and versions not measured keep theirs.
func Calibrate(cases []Case, results []*metrics.Result) (*Coefficients, error) {
	if len(cases) != len(results) {
		return nil, fmt.Errorf("sim: calibrate: %d cases but %d results", len(cases), len(results))
	}
	var cs []Case
	for i, c := range cases {
		r := results[i]
		if r == nil {
			return nil, fmt.Errorf("sim: calibrate: case %d (%s): no result", i, c.ID)
		}
		if r.Duration <= 0 || r.Completed == 0 {
			return nil, fmt.Errorf("sim: calibrate: case %d (%s): result has no completed requests", i, c.ID)
		}
		c.Measured = Measured{Completed: r.Completed, Duration: r.Duration, TotalTPS: r.TotalTokenThroughput,
			OutputTPS: r.OutputThroughput, MeanTTFTMs: r.MeanTTFTMs, MedianTTFT: r.MedianTTFTMs, MeanTPOTMs: r.MeanTPOTMs,
			MedianTPOT: r.MedianTPOTMs, MeanITLMs: r.MeanITLMs, TotalInput: r.TotalInputTokens, TotalOutput: r.TotalOutputTokens}
		if c.Workload.NumPrompts == 0 {
			c.Workload.NumPrompts = r.Completed + r.Failed
		}
		if c.Workload.Kind == "" {
			c.Workload.Kind = "random"
		}
		if c.Workload.TotalInput == 0 {
			c.Workload.TotalInput = r.TotalInputTokens
		}
		if c.Workload.TotalOutput == 0 {
			c.Workload.TotalOutput = r.TotalOutputTokens
		}
		if c.Workload.Kind == "random" && c.Workload.InputLen == 0 {
			n := max(c.Workload.NumPrompts, 1)
			c.Workload.InputLen = max(1, c.Workload.TotalInput/n)
			c.Workload.OutputLen = max(1, c.Workload.TotalOutput/n)
		}
		if c.Workload.Client == "" {
			c.Workload.Client = "vllm"
		}
		if c.ID == "" {
			c.ID = fmt.Sprintf("result-%d", i+1)
		}
		cs = append(cs, c)
	}
	coef, err := Fit(cs, DefaultCoefficients(), FitOptions{})
	if err != nil {
		return nil, err
	}
	coef.Source = fmt.Sprintf("calibrated on %d results", len(cs))
	return coef, nil
}
