package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
)

// explorationBonus is the factor by which the joint search credits each
// knob value a config has that no trial has measured (under its engine):
// the guide's error there is unknown, and an uncalibrated simulator is off
// by this much or more.
const explorationBonus = 1.5

// calibration is a multiplicative correction of the guide: log(measured /
// predicted) ≈ a + Σ b[knob=value], fitted by ridge backfitting on the
// trials already run, so a knob the simulator over- or under-rates is
// corrected for every untested config that has it.
type calibration struct {
	a float64
	b map[string]float64
}

type calObs struct {
	feats []string
	logr  float64
}

// features are a point's calibration features: its engine, and each other
// knob's value under that engine. A knob's error in the guide is engine
// specific (FP8 or a batch limit does not gain the same on vLLM as on
// TensorRT-LLM, and the guide's engines are wrong in different ways), so a
// value measured on one engine says nothing of it on another.
func features(p labspec.Point, ks []string) []string {
	out := make([]string, 0, len(ks))
	eng := p[labspec.KnobEngine]
	for _, k := range ks {
		if k == labspec.KnobEngine {
			out = append(out, k+"="+eng)
			continue
		}
		out = append(out, eng+"|"+k+"="+p[k])
	}
	return out
}

// featureLabels says which calibration features a config had that no
// trial had measured, in the report's words ("max_num_seqs=256 on vLLM"),
// not the features' keys ("vllm|max_num_seqs=256").
func featureLabels(fs []string) string {
	out := make([]string, len(fs))
	for i, f := range fs {
		eng, kv, ok := strings.Cut(f, "|")
		if !ok {
			// The engine feature itself: "engine=vllm".
			_, v, _ := strings.Cut(f, "=")
			out[i] = Label(labspec.Point{labspec.KnobEngine: v})
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		name := Label(labspec.Point{labspec.KnobEngine: eng, k: v})
		if _, rest, ok := strings.Cut(name, " + "); ok {
			name = rest
		} else {
			name = k + "=" + v // a default value: Label leaves it out
		}
		out[i] = name + " on " + Label(labspec.Point{labspec.KnobEngine: eng})
	}
	return strings.Join(out, ", ")
}

func fitCalibration(obs []calObs) calibration {
	c := calibration{b: map[string]float64{}}
	if len(obs) == 0 {
		return c
	}
	const lambda = 2.0
	for _, o := range obs {
		c.a += o.logr
	}
	c.a /= float64(len(obs))
	// Gauss-Seidel over knobs: each observation has exactly one feature
	// per knob, so updating one knob's values at a time from the current
	// residuals converges where a simultaneous update would overshoot.
	nk := len(obs[0].feats)
	for iter := 0; iter < 30; iter++ {
		for j := 0; j < nk; j++ {
			sum := map[string]float64{}
			n := map[string]float64{}
			for _, o := range obs {
				pred := c.a
				for i, f := range o.feats {
					if i != j {
						pred += c.b[f]
					}
				}
				sum[o.feats[j]] += o.logr - pred
				n[o.feats[j]]++
			}
			for f := range sum {
				c.b[f] = sum[f] / (n[f] + lambda)
			}
		}
	}
	return c
}

func (c calibration) factor(feats []string) float64 {
	x := c.a
	for _, f := range feats {
		x += c.b[f]
	}
	return math.Exp(x)
}

// joint is the search beyond the greedy pass: the guide predicts every
// config of the joint space, the predictions are recalibrated on the trials
// run so far, and the most promising untested config is run, until none is
// predicted to beat the incumbent by more than the noise floor or the
// search's budget ends.
func (l *Lab) joint(ctx context.Context, inc *result, incScore float64) (*result, float64, error) {
	s := l.Spec
	ks := s.SearchKnobs()
	js := &JointSummary{Knobs: ks}
	l.sum.Joint = js
	staged := inc
	axes := s.Axes(ks)
	if vs, ok := axes[labspec.KnobMaxNumSeqs]; ok && l.inFlightCap() > 0 {
		n := l.inFlightCap()
		var engs []string
		for _, e := range s.Engines {
			engs = append(engs, e.Name)
		}
		admits := defaultAdmits(n, s.Hardware.Device, s.EngineVersions(), engs...)
		kept, dropped := labspec.TrimUnbinding(vs, n, inc.spec.Point[labspec.KnobMaxNumSeqs], admits)
		axes[labspec.KnobMaxNumSeqs] = kept
		same := "so a larger limit admits the same batches"
		if admits {
			same = "which every engine's default limit admits already"
		}
		if len(dropped) > 0 {
			js.LeftOut = fmt.Sprintf("max_num_seqs %s not searched: %s never has more than %d requests in flight, %s",
				strings.Join(dropped, ", "), s.Tuning.Name, n, same)
		}
	}
	pts := s.Enumerate(inc.spec.Point, axes, 20000)
	js.Space = len(pts)
	if l.Progress != nil {
		l.Progress.Stage("joint search (guide)", len(pts))
	}
	t0 := time.Now()
	guess, err := l.guessAll(ctx, pts)
	if a, ok := l.Progress.(asider); ok {
		a.Aside(time.Since(t0))
	}
	if err != nil {
		return inc, incScore, err
	}
	// The guide's range for each config it predicted (by engine, so a
	// cheap lookup), and the ranges the ranking used, for the stop reason.
	ups := map[string]float64{}
	for _, p := range pts {
		cfg, _ := s.Config(p)
		if _, ok := guess[labspec.ConfigHash(cfg)]; !ok {
			continue
		}
		if u, ok := upside(l.guide, cfg); ok {
			ups[labspec.ConfigHash(cfg)] = u
		}
	}
	tried := 0
	prunes := kindOf(s.Objective).prunes()
	for {
		// Fit the calibration on every tuning measurement that has a guess.
		var obs []calObs
		for _, p := range pts {
			cfg, _ := s.Config(p)
			g, ok := guess[labspec.ConfigHash(cfg)]
			if !ok || g <= 0 {
				continue
			}
			t, ok := l.used(measurementKey(TrialKey("", cfg, *s.Tuning, 0)))
			if !ok {
				continue
			}
			r := l.evaluate(TrialSpec{Config: cfg, Point: p}, t)
			if r.failed != "" || r.score <= 0 {
				continue
			}
			obs = append(obs, calObs{features(p, ks), math.Log(r.score / g)})
		}
		cal := fitCalibration(obs)
		js.Calibration = map[string]float64{"*": math.Exp(cal.a)}
		for f, b := range cal.b {
			js.Calibration[f] = math.Exp(b)
		}
		// The calibration corrects only what it has seen measured: a knob
		// value no trial has under an engine (vLLM with FP8 when the stages
		// ran FP8 on another engine) keeps the guide's error, however
		// wrong. So configs are ranked optimistically and the search stops
		// only when even that optimistic figure cannot beat the incumbent:
		// with a good guide this costs a few trials, with a wrong one it is
		// what finds the optimum (TestGridWrongGuide). Each unmeasured
		// value is credited with the top of the guide's range for the
		// config's engine where the guide has a measured one (sim
		// predict's, for the embedded calibration): its effect is as
		// uncertain as that engine's predictions have been on models they
		// never saw, and the credits multiply as the calibration's factors
		// do, so a config that tries several unmeasured values at once,
		// which teaches the calibration most, ranks first. A guide without
		// a range gets explorationBonus for each.
		seen := map[string]bool{}
		for _, o := range obs {
			for _, f := range o.feats {
				seen[f] = true
			}
		}
		var cands []rankedPoint
		ranged := map[string]float64{}
		hopeless := 0
		incPred := 0.0
		if prunes {
			incPred = l.predict(ctx, inc.spec.Config)
		}
		for _, p := range pts {
			cfg, _ := s.Config(p)
			g, ok := guess[labspec.ConfigHash(cfg)]
			if !ok {
				continue
			}
			if _, measured := l.used(measurementKey(TrialKey("", cfg, *s.Tuning, 0))); measured {
				continue
			}
			// Where a candidate costs a load search, one whose range
			// cannot reach the incumbent is not ranked at all.
			if _, below := l.rangeBelow(cfg, g, incPred, incScore); prunes && below {
				hopeless++
				continue
			}
			fs := features(p, ks)
			var unseen []string
			for _, f := range fs {
				if !seen[f] {
					unseen = append(unseen, f)
				}
			}
			pred := g * cal.factor(fs)
			per := explorationBonus
			if u, ok := ups[labspec.ConfigHash(cfg)]; ok {
				per = 1 + u
				if len(unseen) > 0 {
					ranged[cfg.Engine] = u
				}
			}
			cands = append(cands, rankedPoint{p, pred, pred * math.Pow(per, float64(len(unseen))), unseen})
		}
		js.Hopeless = hopeless
		sort.SliceStable(cands, func(i, j int) bool { return cands[i].opt > cands[j].opt })
		thr := math.Max(l.sum.NoiseFloor, s.MinGain)
		bar := incScore * (1 + thr)
		if len(cands) == 0 {
			js.StopReason = "every config of the joint space is measured"
			if hopeless > 0 {
				js.StopReason = fmt.Sprintf("every config of the joint space is measured or hopeless (%d: the top of the guide's range below the incumbent's %.4g %s)",
					hopeless, incScore, ObjectiveUnit(s.Objective))
			}
			break
		}
		if cands[0].opt <= bar {
			u := ObjectiveUnit(s.Objective)
			js.StopReason = fmt.Sprintf("no untested config is predicted to beat the incumbent by more than the noise floor%s: the best of them, %s, is predicted at %.1f %s, and beating the incumbent's %.1f %s by the floor (%.2f%%) needs %.1f",
				optimism(ranged, len(ups) > 0), Label(cands[0].p), cands[0].opt, u, incScore, u, 100*thr, bar)
			break
		}
		if tried >= s.Search.MaxTrials {
			js.StopReason = fmt.Sprintf("search budget spent (%d trials)", tried)
			break
		}
		// The batch is the spec's, not the run's parallelism, so a rerun
		// with another --parallel takes the same path (see Spec.Key).
		n := max(1, min(s.SearchBatch(), s.Search.MaxTrials-tried))
		var batch []labspec.Point
		preds := map[string]float64{}
		why := map[string]string{}
		// A batch holds no two configs the guide cannot tell apart (the
		// same prediction to five digits, the same values unmeasured): the
		// second waits for the first's measurement, which recalibrates
		// it. The 32B example measured TensorRT-LLM's chunked and
		// unchunked twins side by side, predicted alike, round after round.
		alike := map[string]bool{}
		for _, c := range cands {
			if len(batch) >= n || c.opt <= bar {
				break
			}
			twin := fmt.Sprintf("%.5g|%s", c.pred, strings.Join(c.unseen, ","))
			if alike[twin] {
				continue
			}
			alike[twin] = true
			batch = append(batch, c.p)
			preds[c.p.String()] = c.pred
			if len(c.unseen) > 0 {
				why[c.p.String()] = "not yet measured: " + featureLabels(c.unseen)
			}
		}

		tried += len(batch)
		res, err := l.measureMany(ctx, "joint", batch, *s.Tuning, 0)
		if err != nil {
			if errors.Is(err, ErrBudget) {
				js.StopReason = l.stopped
				js.Tried = append(js.Tried, l.undecided(batch, res, err)...)
			}
			return inc, incScore, err
		}
		var cs []Candidate
		newInc, newScore, _, err := l.decide(ctx, "joint", inc, incScore, res, &cs)
		for i := range cs {
			pred := preds[labspec.Point(cs[i].Point).String()]
			note := ""
			if w := why[labspec.Point(cs[i].Point).String()]; w != "" {
				note = " (" + w + ")"
			}
			cs[i].Reason = strings.TrimSpace(fmt.Sprintf("predicted %.1f%s; %s", pred, note, cs[i].Reason))
		}
		js.Tried = append(js.Tried, cs...)
		if err != nil {
			return inc, incScore, err
		}
		if newInc != inc && !likelyBeaten(cands, batch, newScore*(1+thr)) {
			if err := l.incumbentFollowUps(ctx, newInc); err != nil {
				return newInc, newScore, err
			}
		}
		inc, incScore = newInc, newScore
	}
	js.Improved = inc != staged
	return inc, incScore, nil
}

// optimism says how the ranking credited configs with unmeasured knob
// values: at the top of the guide's range, by engine, or with the fixed
// bonus.
func optimism(ranged map[string]float64, hasRange bool) string {
	if len(ranged) == 0 && hasRange {
		return "; every knob value of the untested configs is measured under its engine, so their calibrated predictions stand without credit"
	}
	if len(ranged) == 0 {
		return fmt.Sprintf(", even crediting each unmeasured knob value with +%.0f%%", 100*(explorationBonus-1))
	}
	var parts []string
	for e, u := range ranged {
		parts = append(parts, fmt.Sprintf("%s +%.0f%%", e, 100*u))
	}
	sort.Strings(parts)
	return ", even crediting each unmeasured knob value with the top of the guide's range for its engine (" + strings.Join(parts, ", ") + ")"
}

// rankedPoint is an untested config of the joint space, as the search
// ranks it.
type rankedPoint struct {
	p      labspec.Point
	pred   float64 // calibrated prediction
	opt    float64 // with the bonus for unmeasured values
	unseen []string
}

// likelyBeaten says whether an untested config outside the batch just
// measured is predicted, without the exploration bonus, to beat bar. When
// none is, the search goes on only on the bonus's optimism, and the new
// incumbent is most likely the winner.
func likelyBeaten(cands []rankedPoint, batch []labspec.Point, bar float64) bool {
	measured := map[string]bool{}
	for _, p := range batch {
		measured[p.String()] = true
	}
	for _, c := range cands {
		if !measured[c.p.String()] && c.pred > bar {
			return true
		}
	}
	return false
}

// guessAll predicts every point with the guide (in parallel, once per
// config), returning the objective by config hash; a config the guide
// predicts to fail is left out.
func (l *Lab) guessAll(ctx context.Context, pts []labspec.Point) (map[string]float64, error) {
	s := l.Spec
	out := map[string]float64{}
	var mu sync.Mutex
	work := make(chan labspec.Point)
	var wg sync.WaitGroup
	workers := max(1, l.sem.conc)
	var firstErr error
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				cfg, _ := s.Config(p)
				o, err := l.guide.Guess(ctx, cfg, *s.Tuning, s.Search.GuidePrompts)
				if err != nil {
					if ctx.Err() != nil {
						mu.Lock()
						firstErr = ctx.Err()
						mu.Unlock()
					}
					continue
				}
				sc := scoreUnder(s.Objective, o, labspec.GPUs(cfg))
				// A config predicted to break a P99 bound is no lead either.
				if o.SuccessRate() < s.MinSuccessRate || !(sc > 0) || math.IsInf(sc, 0) || sloViolation(s.Objective, o) != "" {
					continue
				}
				mu.Lock()
				out[labspec.ConfigHash(cfg)] = sc
				mu.Unlock()
			}
		}()
	}
	for _, p := range pts {
		if ctx.Err() != nil {
			break
		}
		work <- p
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// grid runs every config of the space (stage knobs × search knobs) once on
// the tuning workload and compares the lab's winner with the best.
func (l *Lab) grid(ctx context.Context, base, win *result) error {
	s := l.Spec
	from := labspec.Point{labspec.KnobEngine: s.BaselineEngine()}
	pts := s.Enumerate(from, s.Axes(s.GridKnobs()), 0)
	if l.Progress != nil {
		l.Progress.Stage("grid", len(pts))
	}
	specs := make([]TrialSpec, 0, len(pts))
	for _, p := range pts {
		cfg, _ := s.Config(p)
		specs = append(specs, l.trialSpec("grid", p, cfg, *s.Tuning, 0))
	}
	// The grid is a reference, not part of the lab: no budget stops it.
	res, err := l.runSpecsNoBudget(ctx, specs)
	if err != nil {
		return err
	}
	var best *result
	for _, r := range res {
		if r.eligible() && (best == nil || r.score > best.score) {
			best = r
		}
	}
	g := &GridSummary{Size: len(pts), LabTrials: len(l.tuning)}
	if len(pts) > 0 {
		g.LabShare = float64(g.LabTrials) / float64(len(pts))
	}
	l.sum.Grid = g
	if best == nil {
		return nil
	}
	g.Best = l.candidate(best, nil)
	// Compare single runs (repeat 0) with single runs, so the gap is not an
	// artefact of averaging.
	score0 := func(c *Candidate) float64 {
		if c == nil {
			return 0
		}
		for _, r := range res {
			if r.eligible() && labspec.ConfigHash(r.spec.Config) == c.ConfigHash {
				return r.score
			}
		}
		return c.Score
	}
	g.WinnerGap = 1 - score0(l.sum.Winner)/best.score
	g.StagedGap = 1 - score0(l.sum.Staged)/best.score
	return nil
}

// hopeless says whether the guide's range for cfg lies wholly below the
// incumbent's measured score, with the reason: such a candidate cannot
// win, and under an objective that prunes (a candidate costs a load
// search, 4-12 benchmarks) it is not measured. A config the guide cannot
// predict, or predicts no score for, is never hopeless.
func (l *Lab) hopeless(ctx context.Context, cfg engine.Config, inc *result, incScore float64) (string, bool) {
	if l.guide == nil || inc == nil || !(incScore > 0) || !kindOf(l.Spec.Objective).prunes() {
		return "", false
	}
	return l.rangeBelow(cfg, l.predict(ctx, cfg), l.predict(ctx, inc.spec.Config), incScore)
}

// predict is the guide's score for cfg on the tuning workload (0 when it
// has none).
func (l *Lab) predict(ctx context.Context, cfg engine.Config) float64 {
	s := l.Spec
	o, err := l.guide.Guess(ctx, cfg, *s.Tuning, s.Search.GuidePrompts)
	if err != nil {
		return 0
	}
	if sc := scoreUnder(s.Objective, o, labspec.GPUs(cfg)); sc > 0 && !math.IsInf(sc, 0) {
		return sc
	}
	return 0
}

// rangeBelow is hopeless's rule on the guide's predictions for cfg (pred)
// and for the incumbent (incPred): the top of cfg's range is pred times 1
// + the guide's upside for it (explorationBonus without a measured
// range), scaled up by how far the guide underpredicted the incumbent
// (never down: a guide that overpredicts the incumbent prunes no more for
// it).
func (l *Lab) rangeBelow(cfg engine.Config, pred, incPred, incScore float64) (string, bool) {
	if !(pred > 0) || !(incScore > 0) {
		return "", false
	}
	u, ranged := upside(l.guide, cfg)
	if !ranged {
		u = explorationBonus - 1
	}
	scale := 1.0
	if incPred > 0 {
		scale = math.Max(1, incScore/incPred)
	}
	top := pred * (1 + u) * scale
	if top >= incScore {
		return "", false
	}
	note := ""
	if scale > 1 {
		note = fmt.Sprintf(", ×%.2f as the guide underpredicted the incumbent", scale)
	}
	return fmt.Sprintf("not searched: the guide's range for it tops at %.3g %s (predicted %.3g, +%.0f%%%s), below the incumbent's measured %.3g",
		top, ObjectiveUnit(l.Spec.Objective), pred, 100*u, note, incScore), true
}
