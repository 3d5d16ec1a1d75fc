package metrics

import (
	"math"
	"slices"
)

// The helpers below reproduce numpy's reductions as `vllm bench serve` calls
// them (np.mean, np.median, np.std with ddof=0, np.percentile with the default
// "linear" method). vLLM passes `values or 0`, so an empty list reduces to 0
// rather than NaN; every helper here follows that rule.

// mean returns the arithmetic mean, 0 for an empty slice.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return pairwiseSum(xs) / float64(len(xs))
}

// pairwiseSum sums like numpy's add.reduce (pairwise, blocks of 8 below 128
// elements) so that means agree with numpy to the last bit on typical inputs.
func pairwiseSum(xs []float64) float64 {
	n := len(xs)
	switch {
	case n < 8:
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s
	case n <= 128:
		var r [8]float64
		copy(r[:], xs[:8])
		i := 8
		for ; i+8 <= n; i += 8 {
			for j := range 8 {
				r[j] += xs[i+j]
			}
		}
		s := ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
		for ; i < n; i++ {
			s += xs[i]
		}
		return s
	default:
		m := n / 2
		m -= m % 8
		return pairwiseSum(xs[:m]) + pairwiseSum(xs[m:])
	}
}

// std is the population standard deviation (numpy's default ddof=0).
func std(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := mean(xs)
	d := make([]float64, len(xs))
	for i, x := range xs {
		v := x - m
		d[i] = v * v
	}
	return math.Sqrt(pairwiseSum(d) / float64(len(xs)))
}

// percentileSorted is np.percentile(xs, p) with method="linear" on an
// already sorted slice; 0 for an empty slice.
func percentileSorted(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if n == 1 {
		return sorted[0]
	}
	idx := p / 100 * float64(n-1)
	if idx <= 0 {
		return sorted[0]
	}
	if idx >= float64(n-1) {
		return sorted[n-1]
	}
	lo := math.Floor(idx)
	t := idx - lo
	a, b := sorted[int(lo)], sorted[int(lo)+1]
	return lerp(a, b, t)
}

// lerp is numpy's _lerp: it interpolates from the nearer end so the result
// stays monotone and exact at t=0 and t=1.
func lerp(a, b, t float64) float64 {
	d := b - a
	if t >= 0.5 {
		return b - d*(1-t)
	}
	return a + d*t
}

// medianSorted is np.median on a sorted slice: the mean of the two middle
// values for an even count.
func medianSorted(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// summarize computes mean, median, std and the requested percentiles of xs
// (seconds) and returns them in milliseconds, as vLLM's process_one_metric
// reports them.
func summarize(xs []float64, percentiles []float64) LatencyStats {
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	s := LatencyStats{
		Mean:   mean(xs) * 1000,
		Median: medianSorted(sorted) * 1000,
		Std:    std(xs) * 1000,
	}
	for _, p := range percentiles {
		s.Percentiles = append(s.Percentiles, PercentileValue{P: p, Value: percentileSorted(sorted, p) * 1000})
	}
	return s
}
