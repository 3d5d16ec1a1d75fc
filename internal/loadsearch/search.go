package loadsearch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
)

// DefaultTolerance is the relative width the bisection stops at.
const DefaultTolerance = 0.05

// Options configure a search.
type Options struct {
	SLO  SLO
	Axis Axis
	// Start is the first load measured (default 1). Min and Max bound the
	// loads the search may measure (defaults: Start/1024 for the rate,
	// 1 for concurrency; Max 4096).
	Start, Min, Max float64
	// Tolerance is the relative bracket width at which the bisection
	// stops (default DefaultTolerance): the load found is within it of the
	// true threshold, when latency grows with load.
	Tolerance float64
	// Step, when set, is the bracket's first step as a fraction of the
	// load (0.1: from Start to 1.1·Start or Start/1.1), doubled at each
	// further step up to a factor of 2; 0 doubles and halves from the
	// first. A Start taken from a prediction of the answer (the lab's
	// simulator guide) brackets it in two or three points instead of the
	// log2(answer/Start) doublings from a blind start.
	Step float64
}

// factor is the bracket's k-th step (k from 0) as a multiplier.
func (o Options) factor(k int) float64 {
	if o.Step <= 0 {
		return 2
	}
	return math.Min(1+o.Step*math.Pow(2, float64(k)), 2)
}

func (o Options) withDefaults() (Options, error) {
	if o.Axis == "" {
		o.Axis = AxisRate
	}
	if _, err := ParseAxis(string(o.Axis)); err != nil {
		return o, err
	}
	if o.Tolerance == 0 {
		o.Tolerance = DefaultTolerance
	}
	if !(o.Step >= 0 && o.Step <= 1) {
		return o, fmt.Errorf("loadsearch: step %v: want a fraction within [0, 1]", o.Step)
	}
	if !(o.Tolerance > 0 && o.Tolerance < 1) {
		return o, fmt.Errorf("loadsearch: tolerance %v: want a fraction within (0, 1)", o.Tolerance)
	}
	if o.Start == 0 {
		o.Start = 1
	}
	if o.Min == 0 {
		o.Min = o.Start / 1024
		if o.Axis == AxisConcurrency {
			o.Min = 1
		}
	}
	if o.Max == 0 {
		o.Max = 4096
	}
	if o.Axis == AxisConcurrency {
		o.Start, o.Min, o.Max = math.Round(o.Start), math.Max(1, math.Ceil(o.Min)), math.Floor(o.Max)
	}
	if !(o.Min > 0 && o.Min <= o.Start && o.Start <= o.Max) || math.IsInf(o.Max, 0) {
		return o, fmt.Errorf("loadsearch: loads: want 0 < min (%v) <= start (%v) <= max (%v)", o.Min, o.Start, o.Max)
	}
	return o, nil
}

// Validate reports the first bad option (tolerance, load range, axis).
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}

// MaxPoints is the most points a search of o measures: the bracket spans
// log2(max/min) doublings at most and the bisection log2(1/tolerance)
// halvings, plus the two ends.
func (o Options) MaxPoints() int {
	o, err := o.withDefaults()
	if err != nil {
		return 0
	}
	return int(math.Ceil(math.Log2(o.Max/o.Min)+math.Log2(1/o.Tolerance))) + 3
}

// Measure measures one load. An error stops the search (the lab is
// canceled, the server is gone); a point the client could not deliver is
// not an error but a flagged Point.
type Measure func(ctx context.Context, load float64) (Point, error)

// Result is a finished search.
type Result struct {
	Axis Axis `json:"axis"`
	SLO  SLO  `json:"slo"`
	// Sustainable is the highest measured load that met the SLO (0 when
	// none did); Found says whether one did.
	Sustainable float64 `json:"sustainable"`
	Found       bool    `json:"found"`
	// Ceiling is the lowest load known not to be sustainable (failed the
	// SLO or could not be measured), 0 when none was.
	Ceiling float64 `json:"ceiling,omitempty"`
	// Points are every measured point, by load.
	Points []Point `json:"points"`
	// Limit says why the search stopped short of a bracketed answer
	// ("" when the bracket closed to the tolerance).
	Limit string `json:"limit,omitempty"`
	// Unmeasured says that the load above Sustainable is a point that
	// could not be scored (the client did not deliver it, no verdict
	// within the point's limits): the threshold lies somewhere above, and
	// Sustainable is a lower bound, not an answer to rank by.
	Unmeasured bool    `json:"unmeasured,omitempty"`
	Tolerance  float64 `json:"tolerance"`
	// MinRequests is how many completed requests a point's window needed.
	MinRequests int `json:"min_requests"`
}

// At returns the point measured at load.
func (r *Result) At(load float64) (Point, bool) {
	for _, p := range r.Points {
		if p.Load == load {
			return p, true
		}
	}
	return Point{}, false
}

// floorShare: halving the load must bring the broken latency bound down to
// below this share of its excess, or the search stops descending.
const floorShare = 0.9

// Search finds the highest load within the SLO: from Start it doubles while
// the SLO holds (halves while it does not) until a bracket [lo, hi) holds
// the threshold, then bisects until hi-lo is at most Tolerance·lo. The
// descent stops early when a load at most half a failed one does not bring
// the broken latency bound down by a tenth (floorShare): the SLO is below
// what the server does unloaded. A
// point judged overloaded misses the SLO (see SLO.Judge). A point
// the client could not deliver, or with too few requests for the SLO's
// percentile, is not scored: it bounds the search from above as the load
// the client cannot measure, and the Result's Limit says so. No load is
// measured twice.
func Search(ctx context.Context, o Options, measure Measure) (*Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	res := &Result{Axis: o.Axis, SLO: o.SLO, Tolerance: o.Tolerance, MinRequests: o.SLO.MinRequests()}
	// The points measured so far are the caller's even when the search
	// stops on an error: a user sees what was measured before it.
	defer func() { sort.Slice(res.Points, func(i, j int) bool { return res.Points[i].Load < res.Points[j].Load }) }()
	seen := map[float64]int{}
	// probe measures a load once and says whether it met the SLO; a
	// flagged point counts as not met (not scored).
	probe := func(load float64) (ok, flagged bool, err error) {
		if i, have := seen[load]; have {
			p := res.Points[i]
			return p.Meets, !p.Scored(), nil
		}
		p, err := measure(ctx, load)
		if err != nil {
			return false, false, fmt.Errorf("loadsearch: measure %s %s: %w", fmtLoad(load), o.Axis.Unit(), err)
		}
		p.Load = load
		p, _ = o.SLO.Judge(p, res.MinRequests)
		seen[load] = len(res.Points)
		res.Points = append(res.Points, p)
		return p.Meets, !p.Scored(), nil
	}
	// floor says whether a point failed for a latency that halving the
	// load did not bring down: the SLO asks for less than the server's
	// unloaded latency, and lower loads cannot meet it either. It compares
	// lower with the lowest failed point at twice its load or more, never
	// with the step just taken: a guided search descends by 10% first, and
	// a latency bound near the knee (TPOT, say) drops by less than a tenth
	// over 10% of load, so "no lower load can meet the SLO" fired one small
	// step below the start, with the threshold a few steps further down.
	floor := func(lower float64) (string, bool) {
		higher := 0.0
		for _, p := range res.Points {
			if p.Load >= 2*lower && !p.Meets && p.Scored() && (higher == 0 || p.Load < higher) {
				higher = p.Load
			}
		}
		if higher == 0 {
			return "", false
		}
		pl, pok := res.At(lower)
		ph, hok := res.At(higher)
		// Only a lower point known to be light counts: measured long
		// enough, kept up with, its arrivals all served.
		if !pok || !hok || !pl.Scored() || !ph.Scored() || pl.KeepUp == nil || pl.Overload != "" || pl.Short != "" ||
			pl.Completed+pl.Failed != pl.KeepUp.Arrivals {
			return "", false
		}
		b, rl := o.SLO.worst(pl)
		_, rh := o.SLO.worst(ph)
		if rl > 1 && rl >= floorShare*rh {
			v, _ := pl.Latency(b.Metric, b.P)
			return fmt.Sprintf("%s p%g stays at %.4g ms (bound %g ms) from %s down to %s %s: the bound is below the latency of a lightly loaded server",
				b.Metric, b.P, v, b.MaxMs, fmtLoad(higher), fmtLoad(lower), o.Axis.Unit()), true
		}
		return "", false
	}
	round := func(x float64) float64 {
		if o.Axis == AxisConcurrency {
			return math.Floor(x)
		}
		return x
	}
	lo, hi := 0.0, 0.0
	hiFlagged := false
	load := o.Start
	ok, fl, err := probe(load)
	if err != nil {
		return res, err
	}
	if ok {
		lo = load
		for k := 0; hi == 0; k++ {
			if lo >= o.Max {
				res.Limit = fmt.Sprintf("the highest load allowed (%s %s) meets the SLO", fmtLoad(o.Max), o.Axis.Unit())
				break
			}
			next := lo * o.factor(k)
			if o.Axis == AxisConcurrency {
				next = math.Max(math.Ceil(next), lo+1)
			}
			next = math.Min(next, o.Max)
			ok, fl, err = probe(next)
			if err != nil {
				return res, err
			}
			if ok {
				lo = next
			} else {
				hi, hiFlagged = next, fl
			}
		}
	} else {
		hi, hiFlagged = load, fl
		for k := 0; lo == 0; k++ {
			next := round(hi / o.factor(k))
			if o.Axis == AxisConcurrency && next >= hi && hi > 1 {
				next = hi - 1
			}
			if next < o.Min || next >= hi {
				res.Limit = fmt.Sprintf("even the lowest load allowed (%s %s) breaks the SLO", fmtLoad(o.Min), o.Axis.Unit())
				break
			}
			ok, fl, err = probe(next)
			if err != nil {
				return res, err
			}
			if ok {
				lo = next
				continue
			}
			hi, hiFlagged = next, fl
			if why, stuck := floor(next); stuck {
				res.Limit = "no lower load can meet the SLO: " + why
				break
			}
			if p, _ := res.At(next); p.Limited {
				res.Limit = fmt.Sprintf("the point at %s %s reached its limits undecided (%s); a lower load's points last longer", fmtLoad(next), o.Axis.Unit(), p.Flag)
				break
			}
		}
	}
	// A bracket one tolerance wide is done: the relative slack keeps a
	// step of exactly the tolerance (a repeat's search from its first
	// answer) from reading as wider by a rounding error and measuring one
	// point more.
	for lo > 0 && hi > 0 && hi-lo > o.Tolerance*lo*(1+1e-9) {
		mid := round((lo + hi) / 2)
		if mid <= lo || mid >= hi {
			break // concurrency: adjacent integers
		}
		ok, fl, err = probe(mid)
		if err != nil {
			return res, err
		}
		if ok {
			lo = mid
		} else {
			hi, hiFlagged = mid, fl
		}
	}
	res.Sustainable, res.Found, res.Ceiling = lo, lo > 0, hi
	res.Unmeasured = hiFlagged && res.Found
	if hiFlagged && res.Limit == "" {
		p, _ := res.At(hi)
		res.Limit = fmt.Sprintf("the load above %s %s could not be measured: %s", fmtLoad(lo), o.Axis.Unit(), p.Flag)
	}
	return res, nil
}

// Cache memoizes a Measure by load, so loads shared by several searches
// (a rerun, the same config asked for twice) are measured once. It is safe
// for concurrent use; concurrent calls for one load measure it once.
type Cache struct {
	mu      sync.Mutex
	measure Measure
	points  map[float64]*cacheEntry
	// Misses counts the measurements actually taken.
	Misses int
}

type cacheEntry struct {
	done chan struct{}
	p    Point
	err  error
}

// NewCache wraps measure.
func NewCache(measure Measure) *Cache {
	return &Cache{measure: measure, points: map[float64]*cacheEntry{}}
}

// Measure is the memoized Measure; an error is not cached.
func (c *Cache) Measure(ctx context.Context, load float64) (Point, error) {
	c.mu.Lock()
	e, ok := c.points[load]
	if !ok {
		e = &cacheEntry{done: make(chan struct{})}
		c.points[load] = e
		c.Misses++
		c.mu.Unlock()
		e.p, e.err = c.measure(ctx, load)
		close(e.done)
		if e.err != nil {
			c.mu.Lock()
			delete(c.points, load)
			c.mu.Unlock()
		}
		return e.p, e.err
	}
	c.mu.Unlock()
	select {
	case <-e.done:
	case <-ctx.Done():
		return Point{}, ctx.Err()
	}
	if e.err != nil {
		return c.Measure(ctx, load)
	}
	return e.p, nil
}

var (
	_ Measure = (*Cache)(nil).Measure
	_ Measure = (*Bench)(nil).Measure
)

// ErrNotFound is wrapped when no load within the search's range meets the
// SLO.
var ErrNotFound = errors.New("no load meets the SLO")

// fmtLoad writes a load for a person: six significant digits, so a
// bisected 3.7904999999999998 reads 3.7905 and a start/1024 floor
// 0.0035253906250000002 reads 0.00352539.
func fmtLoad(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }
