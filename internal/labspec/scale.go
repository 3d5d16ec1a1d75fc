package labspec

import (
	"math"

	"github.com/perflab/perflab/internal/metrics"
)

// Scale is the sim runtime's clock speed-up: its server runs Scale times
// faster than the simulated time it reports. The lab offers it the load
// that much faster and stretches what it measures back, so every figure is
// in simulated time; a plan's wall time shrinks by it. 0 and 1 are no
// speed-up (real engines, sim-predict).
type Scale float64

// on says whether the scale changes anything.
func (k Scale) on() bool { return k > 0 && k != 1 }

// Send is the request rate to offer a server at this scale so that, in
// simulated time, it gets rate. An infinite rate (every request due at
// once) stays infinite.
func (k Scale) Send(rate float64) float64 {
	if !k.on() || math.IsInf(rate, 1) {
		return rate
	}
	return rate * float64(k)
}

// Stretch maps records and a duration measured on a server at this scale
// back to simulated time, before the one metrics.Compute, so quantiles and
// CDFs are in simulated time too. ok is false (and the input returned as
// it is) when the scale changes nothing.
func (k Scale) Stretch(recs []metrics.Record, dur float64) (out []metrics.Record, simDur float64, ok bool) {
	if !k.on() {
		return recs, dur, false
	}
	out = make([]metrics.Record, len(recs))
	for i, rc := range recs {
		out[i] = rc.Stretched(float64(k))
	}
	return out, dur * float64(k), true
}

// Wall is the wall time, in seconds, of simSeconds of simulated time at
// this scale.
func (k Scale) Wall(simSeconds float64) float64 {
	if !k.on() {
		return simSeconds
	}
	return simSeconds / float64(k)
}

// Scale is the spec's clock speed-up where its runtime has one (none
// elsewhere, whatever time_scale says).
func (s *Spec) Scale() Scale {
	if s.RuntimeKind().DefaultTimeScale() > 0 && s.TimeScale > 0 {
		return Scale(s.TimeScale)
	}
	return 1
}
