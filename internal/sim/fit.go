package sim

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/perflab/perflab/internal/metrics"
)

// FitOptions tunes the calibration fit.
type FitOptions struct {
	// Rounds is the most Levenberg-Marquardt iterations per group (0 = 12).
	Rounds int
	// Orderings are published decisions the fit must keep (a hinge on
	// the throughput ratio of each pair whose cases share a group).
	Orderings []Ordering
	// Prior is the weight pulling each coefficient toward its starting
	// value (log scale); 0 = 0.02.
	Prior float64
	// Log receives progress lines when set.
	Log func(format string, args ...any)
	// PoolMin is the fewest scored cases a GPU/engine/version needs to be
	// fitted on its own (0 = 3; negative = every group on its own). A
	// thinner group is fitted after the others, from their pooled values
	// and pulled toward them with weight PoolPrior, because a single
	// block cannot pin a dozen coefficients: left free, it lands on
	// whatever fits that block (an API server that takes 77 ms a request).
	PoolMin int
	// PoolPrior is the weight pulling a thin group toward the pool (log
	// scale); 0 = 0.5.
	PoolPrior float64

	// stepModel is the step model the fit runs under (the start's).
	stepModel StepModel
	// fixedTPS holds, for orderings across groups, the predicted and
	// measured throughput of cases outside the group being fitted.
	fixedTPS map[string][2]float64
	// center, when set, is what the prior pulls toward instead of the
	// starting values.
	center *Coef
	// held names the coefficients kept at the prior's center instead of
	// fitted (see MinInfluence).
	held map[string]bool
	// MinInfluence is the least share of a coefficient's fitted value
	// that a well-measured group's own blocks must decide, rather than
	// the prior, for it to stay fitted (0 = 0.05; negative = keep all).
	// Below it, the coefficient is held at the prior's center and the
	// group refitted without it: a figure the data do not pin is a
	// stated prior, not a fitted parameter.
	MinInfluence float64
}

// coefParam names one fitted scalar of a Coef.
type coefParam struct {
	name string
	get  func(*Coef) float64
	set  func(*Coef, float64)
	// lo, hi bound the value.
	lo, hi float64
	// kernel marks a kernel class's share of a peak (a property of the
	// GPU and its kernels more than of the engine's code).
	kernel bool
}

func scalarParam(name string, f func(*Coef) *float64, lo, hi float64) coefParam {
	return coefParam{name: name, lo: lo, hi: hi,
		get: func(c *Coef) float64 { return *f(c) },
		set: func(c *Coef, v float64) { *f(c) = v }}
}

// kernelParam is a scalarParam that is a kernel class's share of a peak.
func kernelParam(name string, f func(*Coef) *float64, lo, hi float64) coefParam {
	p := scalarParam(name, f, lo, hi)
	p.kernel = true
	return p
}

func mapParam(name string, m func(*Coef) *map[string]float64, key string) coefParam {
	return coefParam{name: name + ":" + key, lo: 0.2, hi: 5,
		get: func(c *Coef) float64 {
			if v := (*m(c))[key]; v > 0 {
				return v
			}
			return 1
		},
		set: func(c *Coef, v float64) {
			if *m(c) == nil {
				*m(c) = map[string]float64{}
			}
			(*m(c))[key] = v
		}}
}

var fitParams = []coefParam{
	kernelParam("gemm_eff", func(c *Coef) *float64 { return &c.GEMMEff }, 0.05, 1.0),
	kernelParam("fp8_eff", func(c *Coef) *float64 { return &c.FP8Eff }, 0.05, 1.0),
	kernelParam("mem_eff", func(c *Coef) *float64 { return &c.MemEff }, 0.1, 1.0),
	kernelParam("attn_eff", func(c *Coef) *float64 { return &c.AttnEff }, 0.05, 1.0),
	scalarParam("step_ms", func(c *Coef) *float64 { return &c.StepMs }, 0.05, 60),
	scalarParam("seq_us", func(c *Coef) *float64 { return &c.SeqUs }, 0.5, 2000),
	scalarParam("frontend_ms", func(c *Coef) *float64 { return &c.FrontendMs }, 0.01, 100),
	scalarParam("output_us", func(c *Coef) *float64 { return &c.OutputUs }, 0.5, 5000),
	scalarParam("core_add_ms", func(c *Coef) *float64 { return &c.CoreAddMs }, 0.01, 100),
	scalarParam("eager_ms", func(c *Coef) *float64 { return &c.EagerMs }, 0.1, 100),
	kernelParam("scan_eff", func(c *Coef) *float64 { return &c.ScanEff }, 0.005, 1.0),
	scalarParam("prefill_us", func(c *Coef) *float64 { return &c.PrefillUs }, 0.001, 500),
	scalarParam("kernel_scale", func(c *Coef) *float64 { return &c.KernelScale }, 0.5, 4),
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
// (weight 4), mean TTFT, mean TPOT and median ITL (weight 1 each), with a weak prior
// pulling toward the starting values so sparsely measured groups stay sane.
func Fit(cases []Case, start *Coefficients, opt FitOptions) (*Coefficients, error) {
	if start == nil {
		start = DefaultCoefficients()
	}
	if opt.Rounds == 0 {
		opt.Rounds = 12
	}
	if opt.Prior == 0 {
		opt.Prior = 0.02
	}
	opt.stepModel = start.StepModel
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
	out := &Coefficients{Source: "fitted", StepModel: start.StepModel, Entries: map[string]Coef{}}
	for k, v := range start.Entries {
		out.Entries[k] = cloneCoef(v)
	}
	// A group this fit leaves alone keeps the start's record of what it
	// held; a refitted one gets its own.
	for k, v := range start.Held {
		if _, refit := groups[k]; !refit {
			if out.Held == nil {
				out.Held = map[string][]string{}
			}
			out.Held[k] = slices.Clone(v)
		}
	}
	// What each group's blocks ran, so a model of another attention kind
	// does not take this group's coefficients for its own (For).
	for k, v := range start.Models {
		if _, refit := groups[k]; !refit {
			if out.Models == nil {
				out.Models = map[string][]string{}
			}
			out.Models[k] = slices.Clone(v)
		}
	}
	for k, cs := range groups {
		seen := map[string]bool{}
		for _, c := range cs {
			seen[c.Params.Model] = true
		}
		if out.Models == nil {
			out.Models = map[string][]string{}
		}
		out.Models[k] = slices.Sorted(maps.Keys(seen))
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
	poolMin := opt.PoolMin
	if poolMin == 0 {
		poolMin = 3
	}
	if opt.PoolPrior == 0 {
		opt.PoolPrior = 0.5
	}
	var full, thin []string
	for _, k := range keys {
		if poolMin > 0 && len(groups[k]) < poolMin {
			thin = append(thin, k)
		} else {
			full = append(full, k)
		}
	}
	if len(full) == 0 {
		full, thin = keys, nil
	}
	// Each group's options: a thin one is pulled toward its GPU's pool.
	optOf := map[string]FitOptions{}
	fitAll := func(ks []string, initOf func(k string) Coef) {
		type res struct {
			k string
			f groupFit
		}
		ch := make(chan res, len(ks))
		sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
		for _, k := range ks {
			go func(k string, init Coef, o FitOptions) {
				sem <- struct{}{}
				defer func() { <-sem }()
				f := fitGroup(groups[k], init, o)
				if opt.Log != nil {
					opt.Log("fitted %s on %d cases: %+v", k, len(groups[k]), f.c)
					opt.Log("  influence: %s", formatInfluence(f.influence, f.held))
				}
				ch <- res{k, f}
			}(k, initOf(k), optOf[k])
		}
		for range ks {
			r := <-ch
			out.Entries[r.k] = r.f.c
			if len(r.f.held) > 0 {
				o := optOf[r.k]
				o.held = r.f.held
				optOf[r.k] = o
				if out.Held == nil {
					out.Held = map[string][]string{}
				}
				out.Held[r.k] = slices.Sorted(maps.Keys(r.f.held))
			}
		}
	}
	// Groups are independent: fit them in parallel, one goroutine each,
	// big groups first, each from its own start or its engine's prior.
	for _, k := range full {
		optOf[k] = opt
	}
	fitAll(full, func(k string) Coef {
		if e, ok := start.Entries[k]; ok {
			return cloneCoef(e)
		}
		gpu, engine, _ := strings.Cut(k, "/")
		engine, _, _ = strings.Cut(engine, "/")
		e, _ := start.Lookup(gpu, engine, "")
		return cloneCoef(e)
	})
	// The pool: per GPU, what the well-measured groups agree on. It
	// starts and anchors the thin groups, fills the kernel efficiencies a
	// group's own blocks could not inform, and is what an engine never
	// measured on that GPU gets.
	pools := poolByGPU(groups, full, out.Entries, start)
	for gpu, p := range pools {
		out.Entries[gpu] = p
	}
	for _, k := range thin {
		o := opt
		gpu, _, _ := strings.Cut(k, "/")
		if p, ok := pools[gpu]; ok {
			c := cloneCoef(p)
			o.center, o.Prior = &c, opt.PoolPrior
		}
		optOf[k] = o
	}
	fitAll(thin, func(k string) Coef {
		gpu, _, _ := strings.Cut(k, "/")
		init := cloneCoef(pools[gpu])
		if e, ok := start.Entries[k]; ok {
			// Keep a backend's speeds a start may know; the rest is
			// the pool's.
			init.Backend, init.BackendDecode = cloneMap(e.Backend), cloneMap(e.BackendDecode)
		}
		return init
	})
	// Orderings across groups (engine choice: two engines, two groups)
	// cannot enter a group's loss directly. Refit each group that holds
	// one side of a reversed ordering, holding the other side at its
	// current prediction, one pass.
	byID := map[string]Case{}
	for _, k := range keys {
		for _, c := range groups[k] {
			byID[c.ID] = c
		}
	}
	fixed := map[string][2]float64{}
	redo := map[string]bool{}
	for _, o := range opt.Orderings {
		b, ok1 := byID[o.Better]
		w, ok2 := byID[o.Worse]
		if !ok1 || !ok2 || b.Measured.TotalTPS <= 1.03*w.Measured.TotalTPS {
			continue
		}
		kb, _ := caseKey(b)
		kw, _ := caseKey(w)
		if kb == kw {
			continue
		}
		pb, pw := PredictCase(b, out), PredictCase(w, out)
		if pb.Err == nil && pw.Err == nil && pb.TotalTPS > pw.TotalTPS {
			continue
		}
		fixed[b.ID] = [2]float64{pb.TotalTPS, b.Measured.TotalTPS}
		fixed[w.ID] = [2]float64{pw.TotalTPS, w.Measured.TotalTPS}
		redo[kb], redo[kw] = true, true
	}
	for _, k := range keys {
		if !redo[k] {
			continue
		}
		o := optOf[k]
		o.fixedTPS = fixed
		c := fitGroupFrom(groups[k], out.Entries[k], o).c
		if opt.Log != nil {
			opt.Log("refitted %s for orderings across groups: %+v", k, c)
		}
		out.Entries[k] = c
	}
	fillFromPool(groups, out.Entries, out.Held, pools)
	return out, nil
}

func cloneCoef(c Coef) Coef {
	c.Backend = cloneMap(c.Backend)
	c.BackendDecode = cloneMap(c.BackendDecode)
	return c
}

func cloneMap(m map[string]float64) map[string]float64 {
	if m == nil {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// fitGroup fits one GPU/engine/version by Levenberg-Marquardt on the log
// coefficients: residuals are the log errors of total throughput (weight
// 2, i.e. 4 in the squared loss), mean TTFT, mean TPOT and median ITL
// (where CaseResult.StepError says it is a decode step), a weak prior
// toward the starting values (a thin group's: the pool), and a hinge on every published ordering
// (gap > 3%) whose two cases are both in the group, so that the decisions
// come out right and not only the averages. A Jacobian costs one
// prediction of the group per coefficient; a fit converges in about ten.
func fitGroup(cases []Case, init Coef, opt FitOptions) groupFit {
	// A thin group leans on the pool by design (opt.center), so its low
	// influences say nothing new.
	thin := opt.center != nil
	// Two starts: the given coefficients, and one where the API server is
	// the bottleneck (costly admissions and outputs, light steps). The
	// frontend terms have no gradient where they are not binding, so a
	// single start below their true values never finds them.
	alt := cloneCoef(init)
	alt.FrontendMs, alt.OutputUs, alt.StepMs, alt.MemEff = 8, 150, 2, 0.8
	a := fitGroupFrom(cases, init, opt)
	b := fitGroupFrom(cases, alt, opt)
	if opt.Log != nil {
		opt.Log("  starts: given %.5f, frontend-bound %.5f", a.loss, b.loss)
	}
	best, start := a, init
	if b.loss < a.loss {
		best, start = b, alt
	}
	// A well-measured group holds what its blocks do not pin at the
	// prior and is fitted again without it.
	if thin || opt.MinInfluence < 0 {
		return best
	}
	minInf := opt.MinInfluence
	if minInf == 0 {
		minInf = 0.05
	}
	held := map[string]bool{}
	for name, v := range best.influence {
		if v < minInf {
			held[name] = true
		}
	}
	if len(held) == 0 {
		return best
	}
	o := opt
	o.held = held
	// The held figures go back to the given coefficients, the stated
	// prior; the rest start where the first fit left them, pulled toward
	// the start that won, as in the first fit (the frontend-bound start
	// is a regime the data may choose, not a prior to pay against).
	next := cloneCoef(best.c)
	for _, p := range groupParamsFor(cases, opt.stepModel) {
		if held[p.name] {
			p.set(&next, startValue(p, &init))
		}
	}
	o.center = &start
	again := fitGroupFrom(cases, next, o)
	again.held = held
	for name, v := range best.influence {
		if held[name] {
			again.influence[name] = v
		}
	}
	if opt.Log != nil {
		opt.Log("  held at the prior (influence < %.2g): %v; loss %.5f -> %.5f", minInf, slices.Sorted(maps.Keys(held)), best.loss, again.loss)
	}
	return again
}

// logErr is the log of predicted over measured for a relative error e,
// floored at a hundredth: a prediction of zero (a TPOT of 0 where the API
// server delivers a short output in one chunk) is a large error the fit
// can move away from, not an infinite one that stops it.
func logErr(e float64) float64 {
	return math.Log(math.Max(1+e, 0.01))
}

// startValue is where the fit starts p from c: c's value, or for one c
// leaves unset (zero), the figure that stands for the prior.
func startValue(p coefParam, c *Coef) float64 {
	if v := p.get(c); v > 0 {
		return v
	}
	switch p.name {
	case "output_us":
		return 20
	case "scan_eff":
		return defaultScanEff
	case "prefill_us":
		return 0.1
	}
	return 1
}

// groupFit is one group's fit: its coefficients, its loss, and per fitted
// coefficient the share of its value its blocks decided (influence).
type groupFit struct {
	c         Coef
	loss      float64
	influence map[string]float64
	// held names the coefficients kept at the prior.
	held map[string]bool
}

// formatInfluence lists each coefficient's influence, sorted by name, a
// held one marked.
func formatInfluence(inf map[string]float64, held map[string]bool) string {
	names := slices.Sorted(maps.Keys(inf))
	var b strings.Builder
	sum := 0.0
	for _, k := range names {
		mark := ""
		if held[k] {
			mark = " (held)"
		} else {
			sum += inf[k]
		}
		fmt.Fprintf(&b, "%s %.2f%s, ", k, inf[k], mark)
	}
	fmt.Fprintf(&b, "effective %.1f of %d fitted", sum, len(names)-len(held))
	return b.String()
}

func fitGroupFrom(cases []Case, init Coef, opt FitOptions) groupFit {
	var params []coefParam
	for _, p := range groupParamsFor(cases, opt.stepModel) {
		if !opt.held[p.name] {
			params = append(params, p)
		}
	}
	init = cloneCoef(init)
	for _, p := range params {
		p.set(&init, startValue(p, &init))
	}
	x0 := make([]float64, len(params))
	for i, p := range params {
		x0[i] = math.Log(p.get(&init))
	}
	// The prior's center: the start, or the pool a thin group leans on.
	xc := append([]float64(nil), x0...)
	if opt.center != nil {
		for i, p := range params {
			xc[i] = math.Log(startValue(p, opt.center))
		}
	}
	coefAt := func(x []float64) Coef {
		c := cloneCoef(init)
		for i, p := range params {
			p.set(&c, math.Exp(x[i]))
		}
		return c
	}
	ids := map[string]int{}
	for i, c := range cases {
		ids[c.ID] = i
	}
	// An ordering side is a case of this group (predicted on each
	// evaluation) or, across groups, a fixed throughput.
	type side struct {
		idx   int // case index, or -1
		fixed float64
		meas  float64
	}
	type ord struct{ b, w side }
	var ords []ord
	sideOf := func(id string) (side, bool) {
		if i, ok := ids[id]; ok {
			return side{idx: i, meas: cases[i].Measured.TotalTPS}, true
		}
		return side{}, false
	}
	for _, o := range opt.Orderings {
		b, okb := sideOf(o.Better)
		w, okw := sideOf(o.Worse)
		if !okb && !okw {
			continue
		}
		if !okb || !okw {
			if !okb {
				v, ok := opt.fixedTPS[o.Better]
				if !ok {
					continue
				}
				b = side{idx: -1, fixed: v[0], meas: v[1]}
			} else if v, ok := opt.fixedTPS[o.Worse]; ok {
				w = side{idx: -1, fixed: v[0], meas: v[1]}
			} else {
				continue
			}
		}
		ords = append(ords, ord{b, w})
	}
	prior := math.Sqrt(opt.Prior)
	resid := func(x []float64) []float64 {
		c := coefAt(x)
		coefs := &Coefficients{StepModel: opt.stepModel, Entries: map[string]Coef{"*": c}}
		r := make([]float64, 0, 3*len(cases)+len(x)+len(ords))
		tps := make([]float64, len(cases))
		n := math.Sqrt(float64(len(cases)))
		for i, cs := range cases {
			res := PredictCase(cs, coefs)
			if res.Err != nil {
				r = append(r, 3/n, 3/n, 3/n, 3/n)
				continue
			}
			tps[i] = res.TotalTPS
			a, b, d := res.Errors()
			r = append(r, 2*logErr(a)/n, logErr(b)/n)
			if cs.NoTPOT == "" {
				r = append(r, logErr(d)/n)
			} else {
				r = append(r, 0)
			}
			// The median gap is the decode step itself, the one figure
			// that pins how fast a step streams weights and KV cache
			// where throughput and mean TPOT are set by prefill (the
			// 14B's blocks: fitted without it, its decode steps came
			// out 15-30% too fast, and so did the 32B's held out).
			if s, ok := res.StepError(); ok {
				r = append(r, logErr(s)/n)
			} else {
				r = append(r, 0)
			}
		}
		for i := range x {
			r = append(r, prior*(x[i]-xc[i]))
		}
		val := func(sd side) float64 {
			if sd.idx < 0 {
				return sd.fixed
			}
			return tps[sd.idx]
		}
		for _, o := range ords {
			b, w := val(o.b), val(o.w)
			g := 0.0
			if b > 0 && w > 0 {
				g = math.Log(b / w)
			}
			// Ask for half the measured gap: enough to keep the order
			// without forcing the case errors.
			want := 0.5 * math.Log(o.b.meas/o.w.meas)
			r = append(r, 2*math.Max(0, want-g))
		}
		return r
	}
	clamp := func(x []float64) {
		for i, p := range params {
			x[i] = math.Min(math.Max(x[i], math.Log(p.lo)), math.Log(p.hi))
		}
	}
	x := append([]float64(nil), x0...)
	clamp(x)
	r := resid(x)
	best := dot(r, r)
	lambda := 1e-2
	iters := opt.Rounds
	for it := 0; it < iters; it++ {
		J := jacobian(x, r, resid)
		improved := false
		for try := 0; try < 4; try++ {
			A := make([][]float64, len(x))
			g := make([]float64, len(x))
			for a := range x {
				A[a] = make([]float64, len(x))
				for b := range x {
					A[a][b] = dot(J[a], J[b])
				}
				A[a][a] += lambda*A[a][a] + 1e-9
				g[a] = -dot(J[a], r)
			}
			d := solve(A, g)
			if d == nil {
				lambda *= 10
				continue
			}
			xn := make([]float64, len(x))
			for i := range x {
				// Trust region: at most a factor e per iteration.
				xn[i] = x[i] + math.Max(-1, math.Min(1, d[i]))
			}
			clamp(xn)
			rn := resid(xn)
			if l := dot(rn, rn); l < best-1e-9 {
				x, r, best, improved = xn, rn, l, true
				lambda = math.Max(lambda/5, 1e-6)
				break
			}
			lambda *= 8
		}
		if opt.Log != nil {
			opt.Log("  iteration %d loss %.5f lambda %.2g", it, best, lambda)
		}
		if !improved {
			break
		}
	}
	out := coefAt(x)
	if len(out.Backend) == 0 {
		out.Backend = nil
	}
	if len(out.BackendDecode) == 0 {
		out.BackendDecode = nil
	}
	inf := map[string]float64{}
	for i, v := range influence(x, r, resid, 4*len(cases), opt.Prior) {
		inf[params[i].name] = v
	}
	return groupFit{c: out, loss: best, influence: inf}
}

// jacobian is the forward-difference Jacobian of resid at x (log space),
// r being resid(x): one row per coefficient.
func jacobian(x, r []float64, resid func([]float64) []float64) [][]float64 {
	const h = 0.04
	J := make([][]float64, len(x))
	for j := range x {
		xp := append([]float64(nil), x...)
		xp[j] += h
		rp := resid(xp)
		J[j] = make([]float64, len(r))
		for k := range r {
			J[j][k] = (rp[k] - r[k]) / h
		}
	}
	return J
}

// influence is, per coefficient at x (log scale), the share of its fitted
// value that the data rather than the prior decide: the diagonal of the
// ridge hat matrix (JᵀJ + pI)⁻¹ JᵀJ, with J the Jacobian of every residual
// but the prior's (which follow the first priorAt) and p the prior's
// weight. Near 1 the blocks pin the coefficient; near 0 it stays where the
// prior put it, and the sum is the group's effective number of parameters.
func influence(x, r []float64, resid func([]float64) []float64, priorAt int, prior float64) []float64 {
	n := len(x)
	J := jacobian(x, r, resid)
	for j := range J {
		clear(J[j][priorAt : priorAt+n]) // the prior's own rows
	}
	JtJ := make([][]float64, n)
	A := make([][]float64, n)
	for a := range x {
		JtJ[a] = make([]float64, n)
		A[a] = make([]float64, n)
		for b := range x {
			JtJ[a][b] = dot(J[a], J[b])
			A[a][b] = JtJ[a][b]
		}
		A[a][a] += prior
	}
	out := make([]float64, n)
	for j := range x {
		col := make([]float64, n)
		for a := range x {
			col[a] = JtJ[a][j]
		}
		if s := solve(A, col); s != nil {
			out[j] = math.Max(0, math.Min(1, s[j]))
		}
	}
	return out
}

// poolByGPU is, per GPU, the geometric mean over the well-measured groups
// (keys) of each coefficient those groups could inform; a coefficient no
// group could inform keeps the start's generic value. Each engine version
// counts once, however many blocks it has, so that the engine measured
// most does not become every engine. A coefficient a group held at the
// prior votes at that value: its blocks bound it without pinning it (an
// API server that never binds is cheap, though not how cheap), and
// leaving it out would make the pool of the API-server terms the mean of
// the engines whose server binds, 7.8 ms an admission where the others
// hold 1 ms, and a thin group anchored there fits 66 ms.
func poolByGPU(groups map[string][]Case, keys []string, fitted map[string]Coef, start *Coefficients) map[string]Coef {
	type acc struct {
		sum float64
		n   int
	}
	sums := map[string]map[string]*acc{}
	for _, k := range keys {
		gpu, _, _ := strings.Cut(k, "/")
		if sums[gpu] == nil {
			sums[gpu] = map[string]*acc{}
		}
		c := fitted[k]
		for _, p := range groupParamsFor(groups[k], start.StepModel) {
			if strings.Contains(p.name, ":") {
				continue // a backend's speed is its own, not a pool's
			}
			a := sums[gpu][p.name]
			if a == nil {
				a = &acc{}
				sums[gpu][p.name] = a
			}
			a.sum += math.Log(p.get(&c))
			a.n++
		}
	}
	out := map[string]Coef{}
	for gpu, byName := range sums {
		base, ok := start.Entries["*"]
		if !ok {
			base = defaultCoef
		}
		c := cloneCoef(base)
		c.Backend, c.BackendDecode = nil, nil
		for _, p := range fitParams {
			if a := byName[p.name]; a != nil {
				p.set(&c, math.Exp(a.sum/float64(a.n)))
			}
		}
		out[gpu] = c
	}
	return out
}

// fillFromPool sets, in each fitted group, the kernel efficiencies its
// cases could not inform (FP8 where it ran no FP8 model, the scan where it
// ran no hybrid one) to its GPU's pool. A kernel class on a GPU runs at
// much the same share of peak whichever engine calls it (the engines share
// CUTLASS and FlashInfer kernels), so what two engines measured is better
// evidence than the generic prior: vLLM 0.11 kept fp8_eff at the prior 0.45
// against BF16 GEMMs at 0.36, FP8 2.5x as fast as BF16 where the engines
// that ran FP8 measured 1.1-1.2x.
func fillFromPool(groups map[string][]Case, entries map[string]Coef, held map[string][]string, pools map[string]Coef) {
	for k, cs := range groups {
		gpu, _, _ := strings.Cut(k, "/")
		pool, ok := pools[gpu]
		if !ok {
			continue
		}
		own := map[string]bool{}
		for _, p := range informed(cs, held[k]) {
			own[p.name] = true
		}
		c := entries[k]
		for _, p := range fitParams {
			if p.kernel && !own[p.name] {
				p.set(&c, p.get(&pool))
			}
		}
		entries[k] = c
	}
}

// informed is groupParams less the coefficients the fit held at the prior.
func informed(cases []Case, held []string) []coefParam {
	var out []coefParam
	for _, p := range groupParams(cases) {
		if !slices.Contains(held, p.name) {
			out = append(out, p)
		}
	}
	return out
}

// groupParams lists the coefficients a group of cases can inform: FP8
// efficiency only with FP8 cases, the linear-attention scan only with
// hybrid models, and a prefill and a decode speed for each
// attention backend other than the engine's default.
func groupParams(cases []Case) []coefParam { return groupParamsFor(cases, StepRoofline) }

// groupParamsFor is groupParams under a step model. Under StepKernels the
// kernel table prices every kernel it measured, so the GEMM, memory and
// attention efficiencies are not fitted; the overheads are, with a
// per-prompt-token cost, and the scan, which no table times.
func groupParamsFor(cases []Case, model StepModel) []coefParam {
	fp8, hybrid := false, false
	backends := map[string]bool{}
	for _, c := range cases {
		p, err := c.Params.WithDefaults()
		if err != nil {
			continue
		}
		a, err := p.arch()
		if err == nil && a.FP8Weights {
			fp8 = true
		}
		if err == nil && a.Hybrid() {
			hybrid = true
		}
		def, err := (Params{Engine: p.Engine, Version: p.Version, Model: p.Model, GPU: p.GPU}).WithDefaults()
		if err == nil && p.AttentionBackend != def.AttentionBackend {
			backends[p.AttentionBackend] = true
		}
	}
	var ps []coefParam
	for _, p := range fitParams {
		if p.name == "fp8_eff" && !fp8 || p.name == "scan_eff" && !hybrid {
			continue
		}
		kernelOnly := p.name == "prefill_us" || p.name == "kernel_scale"
		if model == StepKernels && p.kernel && p.name != "scan_eff" || model != StepKernels && kernelOnly {
			continue
		}
		ps = append(ps, p)
	}
	var names []string
	for b := range backends {
		names = append(names, b)
	}
	sort.Strings(names)
	for _, b := range names {
		ps = append(ps, mapParam("backend", func(c *Coef) *map[string]float64 { return &c.Backend }, b))
		ps = append(ps, mapParam("backend_decode", func(c *Coef) *map[string]float64 { return &c.BackendDecode }, b))
	}
	return ps
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// solve solves A x = b by Gaussian elimination with partial pivoting; nil
// when A is singular.
func solve(A [][]float64, b []float64) []float64 {
	n := len(b)
	m := make([][]float64, n)
	for i := range A {
		m[i] = append(append([]float64(nil), A[i]...), b[i])
	}
	for c := 0; c < n; c++ {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(m[r][c]) > math.Abs(m[p][c]) {
				p = r
			}
		}
		if math.Abs(m[p][c]) < 1e-14 {
			return nil
		}
		m[c], m[p] = m[p], m[c]
		for r := c + 1; r < n; r++ {
			f := m[r][c] / m[c][c]
			for k := c; k <= n; k++ {
				m[r][k] -= f * m[c][k]
			}
		}
	}
	x := make([]float64, n)
	for i := n - 1; i >= 0; i-- {
		s := m[i][n]
		for k := i + 1; k < n; k++ {
			s -= m[i][k] * x[k]
		}
		x[i] = s / m[i][i]
	}
	return x
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
