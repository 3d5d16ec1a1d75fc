package metrics

// ScaleSpeed multiplies the result's rates (request, goodput, output and
// total throughput, peak output tokens/s) by f and its durations (the run's
// duration, every latency summary and percentile) by 1/f: a server f times
// as fast. Counts, the setup keys and perflab's own section are left as
// they are. The lab's simulated run-to-run noise is this with f near 1.
func (r *Result) ScaleSpeed(f float64) {
	for _, x := range []*float64{&r.RequestThroughput, &r.RequestGoodput, &r.OutputThroughput,
		&r.TotalTokenThroughput, &r.MaxOutputTokensPerS} {
		*x *= f
	}
	r.Duration /= f
	for _, m := range AllMetrics {
		for _, which := range []string{"mean", "median", "std"} {
			*r.statField(m, which) /= f
		}
	}
	for m, ps := range r.Percentiles {
		// A fresh slice: the caller's percentiles may share their array.
		scaled := make([]PercentileValue, len(ps))
		for i, p := range ps {
			scaled[i] = PercentileValue{P: p.P, Value: p.Value / f}
		}
		r.Percentiles[m] = scaled
	}
}
