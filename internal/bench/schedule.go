package bench

import (
	"fmt"
	"math"

	"github.com/perflab/perflab/internal/mt19937"
)

// RampUp names vLLM's --ramp-up-strategy values.
const (
	RampLinear      = "linear"
	RampExponential = "exponential"
)

// ScheduleOptions is the full load description vLLM's get_request takes.
// The zero value of the ramp fields means "no ramp-up".
type ScheduleOptions struct {
	// N is the number of requests.
	N int
	// Rate is requests per second; math.Inf(1) sends everything at t=0.
	// Ignored (must be Inf or 0) when RampUpStrategy is set.
	Rate float64
	// Burstiness is the gamma shape; 1 is a Poisson process, +Inf a constant
	// interval of 1/rate. Zero means 1.
	Burstiness float64
	// Seed seeds the MT19937 stream exactly as np.random.seed(seed) does.
	Seed int64
	// RampUpStrategy is "", "linear" or "exponential".
	RampUpStrategy string
	// RampUpStartRPS and RampUpEndRPS bound the ramp (vLLM takes integers).
	RampUpStartRPS float64
	RampUpEndRPS   float64
}

// Schedule returns the intended send offsets, in seconds from the start of
// the run, of n requests at rate requests/s with the given burstiness, drawn
// the way vLLM's get_request draws them: each gap is
// gamma(shape=burstiness, scale=1/(rate*burstiness)), the gaps are summed,
// and the sums are rescaled so the last request is due at exactly n/rate.
// rate = +Inf gives all zeros. The simulator calls this too, so predicted and
// measured runs see the same arrivals.
//
// Invalid input (n < 0, rate <= 0, burstiness <= 0) yields nil; use
// ScheduleWith for an error.
func Schedule(n int, rate, burstiness float64, seed int64) []float64 {
	s, err := ScheduleWith(ScheduleOptions{N: n, Rate: rate, Burstiness: burstiness, Seed: seed})
	if err != nil {
		return nil
	}
	return s
}

// RequestRate returns the rate vLLM's _get_current_request_rate gives
// request i of n under o.
func (o ScheduleOptions) RequestRate(i int) float64 {
	if o.RampUpStrategy == "" {
		return o.Rate
	}
	progress := float64(i) / float64(max(o.N-1, 1))
	switch o.RampUpStrategy {
	case RampExponential:
		return o.RampUpStartRPS * math.Pow(o.RampUpEndRPS/o.RampUpStartRPS, progress)
	default:
		return o.RampUpStartRPS + (o.RampUpEndRPS-o.RampUpStartRPS)*progress
	}
}

// Validate reports the first inconsistency in o, with vLLM's rules for the
// ramp-up flags.
func (o ScheduleOptions) Validate() error {
	b := o.Burstiness
	if b == 0 {
		b = 1
	}
	switch {
	case o.N < 0:
		return fmt.Errorf("bench: schedule: negative request count %d", o.N)
	case b <= 0 || math.IsNaN(b):
		return fmt.Errorf("bench: schedule: burstiness must be positive, got %v", o.Burstiness)
	}
	switch o.RampUpStrategy {
	case "":
		if !(o.Rate > 0) {
			return fmt.Errorf("bench: schedule: request rate must be positive, got %v", o.Rate)
		}
	case RampLinear, RampExponential:
		if o.Rate != 0 && !math.IsInf(o.Rate, 1) {
			return fmt.Errorf("bench: schedule: a ramp-up sets the rate; do not also give a request rate (%v)", o.Rate)
		}
		if o.RampUpStartRPS < 0 || o.RampUpEndRPS < 0 {
			return fmt.Errorf("bench: schedule: ramp-up start and end RPS must be non-negative")
		}
		if o.RampUpStartRPS > o.RampUpEndRPS {
			return fmt.Errorf("bench: schedule: ramp-up start RPS %v exceeds end RPS %v", o.RampUpStartRPS, o.RampUpEndRPS)
		}
		if o.RampUpStrategy == RampExponential && o.RampUpStartRPS == 0 {
			return fmt.Errorf("bench: schedule: exponential ramp-up cannot start at 0 RPS")
		}
		if o.RampUpEndRPS == 0 {
			return fmt.Errorf("bench: schedule: ramp-up end RPS must be positive")
		}
	default:
		return fmt.Errorf("bench: schedule: unknown ramp-up strategy %q (want linear or exponential)", o.RampUpStrategy)
	}
	return nil
}

// ScheduleWith is Schedule with vLLM's ramp-up strategies. The draws come
// from numpy's legacy global generator (MT19937 seeded by np.random.seed,
// legacy gamma / exponential / polar Gaussian), so for the same seed the
// offsets equal vLLM's to the last bit of float64 rounding — provided
// nothing else drew from numpy's global stream first (vLLM's dataset
// samplers use their own generators or Python's random module).
func ScheduleWith(o ScheduleOptions) ([]float64, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	b := o.Burstiness
	if b == 0 {
		b = 1
	}
	out := make([]float64, o.N)
	if o.N == 0 {
		return out, nil
	}
	rng := newNumpyRand(uint32(o.Seed))
	for i := range out {
		r := o.RequestRate(i)
		if !(r > 0) {
			// vLLM asserts here; a linear ramp from 0 gives rate 0 to the
			// first request, which would never be sent.
			return nil, fmt.Errorf("bench: schedule: request %d has non-positive rate %v", i, r)
		}
		switch {
		case math.IsInf(r, 1):
			out[i] = 0
		case math.IsInf(b, 1):
			out[i] = 1 / r
		default:
			out[i] = rng.gamma(b, 1/(r*b))
		}
	}
	for i := 1; i < len(out); i++ {
		out[i] += out[i-1]
	}
	if o.RampUpStrategy == "" && out[len(out)-1] != 0 {
		f := (float64(o.N) / o.Rate) / out[len(out)-1]
		for i := range out {
			out[i] *= f
		}
	}
	return out, nil
}

// numpyRand reproduces numpy's legacy RandomState stream: MT19937 seeded
// with init_genrand (what np.random.seed(int) does), 53-bit doubles, and
// the legacy gamma, exponential and polar-Gaussian samplers.
type numpyRand struct {
	mt       mt19937.MT
	hasGauss bool
	gauss    float64
}

func newNumpyRand(seed uint32) *numpyRand {
	r := &numpyRand{}
	r.mt.InitGenrand(seed)
	return r
}

func (r *numpyRand) next32() uint32 { return r.mt.Uint32() }

func (r *numpyRand) double() float64 { return r.mt.Float53() }

func (r *numpyRand) exponential() float64 { return -math.Log(1.0 - r.double()) }

func (r *numpyRand) gaussian() float64 {
	if r.hasGauss {
		r.hasGauss = false
		return r.gauss
	}
	var x1, x2, r2 float64
	for {
		x1 = 2*r.double() - 1
		x2 = 2*r.double() - 1
		r2 = x1*x1 + x2*x2
		if r2 < 1 && r2 != 0 {
			break
		}
	}
	f := math.Sqrt(-2 * math.Log(r2) / r2)
	r.gauss = f * x1
	r.hasGauss = true
	return f * x2
}

// standardGamma is numpy's legacy_standard_gamma (Marsaglia–Tsang for
// shape > 1, Johnk-style rejection below 1).
func (r *numpyRand) standardGamma(shape float64) float64 {
	switch {
	case shape == 1:
		return r.exponential()
	case shape == 0:
		return 0
	case shape < 1:
		for {
			u := r.double()
			v := r.exponential()
			if u <= 1-shape {
				x := math.Pow(u, 1/shape)
				if x <= v {
					return x
				}
			} else {
				y := -math.Log((1 - u) / shape)
				x := math.Pow(1-shape+shape*y, 1/shape)
				if x <= v+y {
					return x
				}
			}
		}
	default:
		b := shape - 1.0/3.0
		c := 1 / math.Sqrt(9*b)
		for {
			var x, v float64
			for {
				x = r.gaussian()
				v = 1 + c*x
				if v > 0 {
					break
				}
			}
			v = v * v * v
			u := r.double()
			if u < 1-0.0331*(x*x)*(x*x) {
				return b * v
			}
			if math.Log(u) < 0.5*x*x+b*(1-v+math.Log(v)) {
				return b * v
			}
		}
	}
}

func (r *numpyRand) gamma(shape, scale float64) float64 { return scale * r.standardGamma(shape) }
