package metrics

import (
	"math"
	"slices"
)

// Options selects what Compute reports, spelled after vLLM's flags.
type Options struct {
	// PercentileMetrics is --percentile-metrics: any of "ttft", "tpot",
	// "itl", "e2el", "client_queue_time", "e2el_including_client_queue".
	// Empty means vLLM's default for generative models, ttft,tpot,itl.
	PercentileMetrics []string
	// Percentiles is --metric-percentiles; empty means vLLM's default [99].
	Percentiles []float64
	// Goodput is --goodput: SLOs in milliseconds keyed "ttft", "tpot",
	// "e2el". A request is good when every given SLO is met (value ≤ SLO).
	Goodput map[string]float64
	// IncludeQueueInTTFT adds each request's client queue time to its TTFT
	// (for the TTFT figures and the TTFT goodput check). vLLM leaves the wait
	// for a --max-concurrency slot out of TTFT, and so does perflab unless
	// this is set. TPOT still uses the raw TTFT so it stays a decode figure.
	IncludeQueueInTTFT bool

	// MaxConcurrency is --max-concurrency (0: none). vLLM prints it and
	// reports client queue figures only when it is set.
	MaxConcurrency int
	// RequestRate is --request-rate; 0 or +Inf means inf.
	RequestRate float64
	// Burstiness is --burstiness; 0 means vLLM's default 1.
	Burstiness float64
	// Detailed keeps the per-request arrays (vLLM's --save-detailed).
	Detailed bool
	// KeepUp adds the figures that tell whether the server kept up with
	// the arrivals (Perflab.KeepUp), which a load search judges.
	KeepUp bool
}

// DefaultOptions returns vLLM's defaults: percentiles of ttft, tpot and itl at
// p99, no goodput.
func DefaultOptions() Options {
	return Options{
		PercentileMetrics: []string{MetricTTFT, MetricTPOT, MetricITL},
		Percentiles:       []float64{99},
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if len(o.PercentileMetrics) == 0 {
		o.PercentileMetrics = d.PercentileMetrics
	}
	if len(o.Percentiles) == 0 {
		o.Percentiles = d.Percentiles
	}
	if o.Burstiness == 0 {
		o.Burstiness = 1
	}
	if o.RequestRate == 0 {
		o.RequestRate = math.Inf(1)
	}
	return o
}

// Compute turns records into vLLM's metrics, exactly as vLLM's
// calculate_metrics does (latest vLLM; departures are documented where they
// occur), plus perflab's additions. duration is the benchmark's wall time in
// seconds, drain tail included. Records are taken in request order.
func Compute(recs []Record, duration float64, opt Options) *Result {
	opt = opt.withDefaults()
	r := &Result{
		NumPrompts:        len(recs),
		RequestRate:       opt.RequestRate,
		Burstiness:        opt.Burstiness,
		MaxConcurrency:    opt.MaxConcurrency,
		Duration:          duration,
		PercentileMetrics: canonicalMetrics(opt.PercentileMetrics),
		GoodputConfigured: len(opt.Goodput) > 0,
		Detailed:          opt.Detailed,
		Perflab:           &Perflab{Source: "perflab", IncludeQueueInTTFT: opt.IncludeQueueInTTFT},
	}

	n := len(recs)
	outputLens := make([]int, n)
	var ttfts, tpots, allTPOTs, e2els, itls, queues, e2elsQ []float64
	totalIn, totalOut, good := 0, 0, 0
	for i := range recs {
		rec := &recs[i]
		if !rec.Success {
			r.Failed++
			continue
		}
		r.Completed++
		outLen := rec.OutputLen
		outputLens[i] = outLen
		totalOut += outLen
		totalIn += rec.PromptLen
		tpot := 0.0
		if outLen > 1 {
			tpot = (rec.Latency - rec.TTFT) / float64(outLen-1)
			tpots = append(tpots, tpot)
		}
		// vLLM counts tpot as 0 for single-token outputs in the goodput check.
		allTPOTs = append(allTPOTs, tpot)
		itls = append(itls, rec.ITL...)
		ttft := rec.TTFT
		if opt.IncludeQueueInTTFT {
			ttft += rec.QueueTime
		}
		ttfts = append(ttfts, ttft)
		e2els = append(e2els, rec.Latency)
		queues = append(queues, rec.QueueTime)
		e2elsQ = append(e2elsQ, rec.Latency+rec.QueueTime)
	}
	if len(opt.Goodput) > 0 {
		for i := range ttfts {
			ok := true
			if slo, has := opt.Goodput["ttft"]; has && !(slo/1000 >= ttfts[i]) {
				ok = false
			}
			if slo, has := opt.Goodput["tpot"]; has && !(slo/1000 >= allTPOTs[i]) {
				ok = false
			}
			if slo, has := opt.Goodput["e2el"]; has && !(slo/1000 >= e2els[i]) {
				ok = false
			}
			if ok {
				good++
			}
		}
	}
	r.TotalInputTokens = totalIn
	r.TotalOutputTokens = totalOut
	r.RequestThroughput = float64(r.Completed) / duration
	r.RequestGoodput = float64(good) / duration
	r.OutputThroughput = float64(totalOut) / duration
	r.TotalTokenThroughput = float64(totalIn+totalOut) / duration

	values := map[string][]float64{
		MetricTTFT: ttfts, MetricTPOT: tpots, MetricITL: itls, MetricE2EL: e2els,
		MetricClientQueueTime: queues, MetricE2ELIncludingQueue: e2elsQ,
	}
	for _, m := range AllMetrics {
		if slices.Contains(r.PercentileMetrics, m) {
			r.setStats(m, summarize(values[m], opt.Percentiles))
		}
	}
	// Always keep the four core means/medians even when not reported, so
	// callers that read MeanE2ELMs get a number; JSON and text still follow
	// PercentileMetrics.
	for _, m := range []string{MetricTTFT, MetricTPOT, MetricITL, MetricE2EL} {
		if !slices.Contains(r.PercentileMetrics, m) {
			s := summarize(values[m], nil)
			*r.statField(m, "mean") = s.Mean
			*r.statField(m, "median") = s.Median
			*r.statField(m, "std") = s.Std
		}
	}

	r.Perflab.Quantiles = map[string][]float64{}
	for _, m := range []string{MetricTTFT, MetricTPOT} {
		if q := quantiles(values[m]); q != nil {
			r.Perflab.Quantiles[m] = q
		}
	}
	r.MaxOutputTokensPerS, r.MaxConcurrentRequests, r.Perflab.MaxConcurrentRequestsV011, r.Perflab.PeakOutputTokensPerS = peaks(recs)
	computePerflab(r, recs, duration, e2els)
	if opt.KeepUp {
		r.Perflab.KeepUp = ComputeKeepUp(recs)
	}

	if opt.Detailed {
		r.OutputLens = outputLens
		p := r.Perflab
		for i := range recs {
			rec := &recs[i]
			r.InputLens = append(r.InputLens, rec.PromptLen)
			r.TTFTs = append(r.TTFTs, rec.TTFT)
			itl := rec.ITL
			if itl == nil {
				itl = []float64{}
			}
			r.ITLs = append(r.ITLs, itl)
			r.Latencies = append(r.Latencies, rec.Latency)
			r.StartTimes = append(r.StartTimes, rec.Sent)
			r.QueueTimes = append(r.QueueTimes, rec.QueueTime)
			r.GeneratedTexts = append(r.GeneratedTexts, rec.GeneratedText)
			r.Errors = append(r.Errors, rec.Error)
			p.ScheduledTimes = append(p.ScheduledTimes, rec.Scheduled)
			p.SentTimes = append(p.SentTimes, rec.Sent)
			p.DispatchLags = append(p.DispatchLags, rec.Sent-rec.Scheduled-rec.QueueTime)
			p.OutputLenSource = append(p.OutputLenSource, rec.OutputLenSource)
			p.ErrorClasses = append(p.ErrorClasses, rec.ErrorClass)
			p.RequestIDs = append(p.RequestIDs, rec.ID)
		}
	}
	return r
}

// canonicalMetrics keeps the known metric names, in vLLM's print order.
func canonicalMetrics(sel []string) []string {
	var out []string
	for _, m := range AllMetrics {
		if slices.Contains(sel, m) {
			out = append(out, m)
		}
	}
	return out
}

// peaks computes, over successful requests:
//   - vLLM's max_output_tokens_per_s: one count per choices chunk, bucketed by
//     int(t - min_start) into ceil(max_end-min_start)+1 one-second buckets;
//   - vLLM's (latest) max_concurrent_requests: an exact sweep-line over
//     [start, start+latency), departures before arrivals at equal times;
//   - vLLM v0.11's max_concurrent_requests: requests counted in every bucket
//     from int(start) to int(end) inclusive, maximum over buckets;
//   - perflab's chunk-weighted peak: the same buckets, each chunk counted as
//     the tokens it carried (ChunkTokens, 1 when unknown).
func peaks(recs []Record) (vllmPeak float64, sweep int, v011 int, weighted float64) {
	minStart, maxEnd := math.Inf(1), math.Inf(-1)
	any := false
	for i := range recs {
		if !recs[i].Success {
			continue
		}
		any = true
		minStart = min(minStart, recs[i].Sent)
		maxEnd = max(maxEnd, recs[i].Sent+recs[i].Latency)
	}
	if !any {
		return 0, 0, 0, 0
	}
	span := maxEnd - minStart
	if math.IsNaN(span) || math.IsInf(span, 0) || span > 1e8 {
		return 0, 0, 0, 0
	}
	nb := int(math.Ceil(span)) + 1
	tokens := make([]float64, nb)
	wtokens := make([]float64, nb)
	conc := make([]int, nb)
	events := make([]concEvent, 0, 2*len(recs))
	for i := range recs {
		rec := &recs[i]
		if !rec.Success {
			continue
		}
		// Same accumulation order as vLLM so bucket edges agree bit for bit.
		t := rec.Sent + rec.TTFT
		for k := 0; k <= len(rec.ITL); k++ {
			if k > 0 {
				t += rec.ITL[k-1]
			}
			b := int(t - minStart) // Python int() truncates toward zero
			if b >= 0 && b < nb && !math.IsNaN(t) {
				tokens[b]++
				w := 1.0
				if k < len(rec.ChunkTokens) && rec.ChunkTokens[k] > 0 {
					w = float64(rec.ChunkTokens[k])
				}
				wtokens[b] += w
			}
		}
		startB := int(rec.Sent - minStart)
		endB := int(rec.Sent + rec.Latency - minStart)
		for s := max(startB, 0); s <= endB && s < nb; s++ {
			conc[s]++
		}
		events = append(events, concEvent{rec.Sent, 1}, concEvent{rec.Sent + rec.Latency, -1})
	}
	sweep = peakOverlap(events)
	for b := range nb {
		vllmPeak = max(vllmPeak, tokens[b])
		weighted = max(weighted, wtokens[b])
		v011 = max(v011, conc[b])
	}
	return vllmPeak, sweep, v011, weighted
}

// computePerflab fills the perflab section from the records.
func computePerflab(r *Result, recs []Record, duration float64, e2els []float64) {
	p := r.Perflab
	// Exact peak concurrency including failed requests that held a slot.
	var events []concEvent
	var lags, queues, ttfcs []float64
	minSched, maxSched := math.Inf(1), math.Inf(-1)
	minSent, maxSent := math.Inf(1), math.Inf(-1)
	for i := range recs {
		rec := &recs[i]
		if rec.Latency > 0 {
			events = append(events, concEvent{rec.Sent, 1}, concEvent{rec.Sent + rec.Latency, -1})
		}
		lags = append(lags, rec.Sent-rec.Scheduled-rec.QueueTime)
		queues = append(queues, rec.QueueTime)
		minSched, maxSched = min(minSched, rec.Scheduled), max(maxSched, rec.Scheduled)
		minSent, maxSent = min(minSent, rec.Sent), max(maxSent, rec.Sent)
		p.ReasoningTokens += rec.ReasoningTokens
		if rec.Success {
			if rec.TTFC > 0 {
				ttfcs = append(ttfcs, rec.TTFC)
			}
			src := rec.OutputLenSource
			if src == "" {
				src = "unknown"
			}
			if p.OutputLenSources == nil {
				p.OutputLenSources = map[string]int{}
			}
			p.OutputLenSources[src]++
		} else {
			c := rec.ErrorClass
			if c == "" {
				c = "unknown"
			}
			if p.ErrorsByClass == nil {
				p.ErrorsByClass = map[string]int{}
			}
			p.ErrorsByClass[c]++
		}
	}
	p.PeakConcurrency = peakOverlap(events)
	if duration > 0 {
		p.MeanConcurrency = pairwiseSum(e2els) / duration
	}
	n := len(recs)
	p.OfferedRate = rateOver(n, maxSched-minSched)
	p.AchievedRate = rateOver(n, maxSent-minSent)
	pcts := []float64{50, 90, 99}
	p.DispatchLag = summarizeMax(lags, pcts)
	p.ClientQueue = summarizeMax(queues, pcts)
	p.TTFC = summarizeMax(ttfcs, pcts)
	p.TTFCCount = len(ttfcs)
}

// rateOver is (n-1)/span, +Inf when every request was due at once.
func rateOver(n int, span float64) float64 {
	if n < 2 {
		return 0
	}
	if !(span > 0) {
		return math.Inf(1)
	}
	return float64(n-1) / span
}

// summarizeMax is summarize plus the maximum as percentile 100.
func summarizeMax(xs []float64, pcts []float64) LatencyStats {
	return summarize(xs, append(slices.Clone(pcts), 100))
}

// quantiles returns xs (seconds) at p0, p5, …, p100 in ms, or nil when empty.
func quantiles(xs []float64) []float64 {
	if len(xs) == 0 {
		return nil
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	out := make([]float64, 21)
	for i := range out {
		out[i] = percentileSorted(sorted, float64(5*i)) * 1000
	}
	return out
}

// concEvent is a request starting (d=+1) or ending (d=-1) at t.
type concEvent struct {
	t float64
	d int
}

// peakOverlap is the most intervals open at once, by a sweep-line over
// half-open [start, end) intervals: at equal times an end is counted before
// a start, so back-to-back requests do not overlap. It sorts events.
func peakOverlap(events []concEvent) int {
	slices.SortFunc(events, func(a, b concEvent) int {
		if a.t != b.t {
			if a.t < b.t {
				return -1
			}
			return 1
		}
		return a.d - b.d
	})
	cur, peak := 0, 0
	for _, e := range events {
		cur += e.d
		peak = max(peak, cur)
	}
	return peak
}
