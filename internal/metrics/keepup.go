package metrics

import (
	"math"
	"sort"
)

// KeepUp holds the figures that tell whether a server kept up with the
// arrivals of a measured window (see loadsearch, which judges them): in a
// stable queue the number of requests in flight and each request's latency
// do not depend on when it arrived; in an overloaded one both grow for as
// long as requests keep arriving. The trends are least-squares slopes
// against the arrival (send) time over the requests sent once the window
// has lasted one median end-to-end latency, the time an empty server takes
// to fill (while it fills, requests in flight grow at any load); each
// comes with its t statistic (slope over its standard error), and is 0
// when fewer than minTrend requests were sent after the fill.
type KeepUp struct {
	// Arrivals counts the window's requests and SpanS the seconds from
	// its first to its last send.
	Arrivals int     `json:"arrivals"`
	SpanS    float64 `json:"span_s"`
	// CompletedInSpan counts the window's requests that had finished by
	// its last send: a server that keeps up completes all but the ones
	// still in flight.
	CompletedInSpan int `json:"completed_in_span"`
	// MedianE2ES is the median end-to-end latency (s) of the window's
	// successful requests: how long the fill-up of an empty server lasts.
	MedianE2ES float64 `json:"median_e2e_s"`
	// InFlightSlope is the growth of the requests in flight (req/s);
	// TTFTSlope and E2ESlope the growth of a request's TTFT and end-to-end
	// latency per second of arrival time (s/s: in a saturated FIFO queue,
	// the load over the capacity, less one).
	InFlightSlope float64 `json:"in_flight_slope"`
	InFlightT     float64 `json:"in_flight_t"`
	TTFTSlope     float64 `json:"ttft_slope"`
	TTFTT         float64 `json:"ttft_t"`
	E2ESlope      float64 `json:"e2e_slope"`
	E2ET          float64 `json:"e2e_t"`
	// Trended counts the requests sent after the fill, which the trends
	// and the two medians below cover.
	Trended int `json:"trended"`
	// TTFTEarlyMs and TTFTLateMs are the median TTFT of the first and the
	// second half of the requests sent after the fill.
	TTFTEarlyMs float64 `json:"ttft_early_ms"`
	TTFTLateMs  float64 `json:"ttft_late_ms"`
}

// ComputeKeepUp computes the keep-up figures of a measured window's
// records; nil for no records.
func ComputeKeepUp(recs []Record) *KeepUp {
	n := len(recs)
	if n == 0 {
		return nil
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return recs[idx[a]].Sent < recs[idx[b]].Sent })
	ends := make([]float64, n)
	var e2e []float64
	for i, r := range recs {
		ends[i] = r.Sent + max(r.Latency, 0)
		if r.Success {
			e2e = append(e2e, r.Latency)
		}
	}
	sort.Float64s(ends)
	first, last := recs[idx[0]].Sent, recs[idx[n-1]].Sent
	k := &KeepUp{Arrivals: n, SpanS: last - first}
	k.CompletedInSpan = sort.SearchFloat64s(ends, math.Nextafter(last, math.Inf(1)))
	if len(e2e) > 0 {
		sort.Float64s(e2e)
		k.MedianE2ES = quantileSorted(e2e, 0.5)
	}
	// The requests sent after the fill, by send time.
	from := sort.Search(n, func(j int) bool { return recs[idx[j]].Sent >= first+k.MedianE2ES })
	if n-from < minTrend {
		return k
	}
	k.Trended = n - from
	var xs, inflight, tx, ttft, e2ey []float64
	for j := from; j < n; j++ {
		r := recs[idx[j]]
		// Requests sent up to and including this one, less those ended.
		ended := sort.SearchFloat64s(ends, math.Nextafter(r.Sent, math.Inf(1)))
		xs = append(xs, r.Sent)
		inflight = append(inflight, float64(j+1-ended))
		if r.Success {
			tx = append(tx, r.Sent)
			ttft = append(ttft, r.TTFT)
			e2ey = append(e2ey, r.Latency)
		}
	}
	k.InFlightSlope, k.InFlightT = trend(xs, inflight)
	k.TTFTSlope, k.TTFTT = trend(tx, ttft)
	k.E2ESlope, k.E2ET = trend(tx, e2ey)
	half := func(lo, hi int) float64 {
		var v []float64
		for j := lo; j < hi; j++ {
			if r := recs[idx[j]]; r.Success {
				v = append(v, r.TTFT*1000)
			}
		}
		if len(v) == 0 {
			return 0
		}
		sort.Float64s(v)
		return quantileSorted(v, 0.5)
	}
	mid := from + (n-from)/2
	k.TTFTEarlyMs, k.TTFTLateMs = half(from, mid), half(mid, n)
	return k
}

// minTrend is the fewest requests a trend is fitted to.
const minTrend = 10

// trend is the least-squares slope of y on x and its t statistic (0, 0
// with fewer than three points or no spread in x). A perfect fit has an
// infinite t; it is capped so the figure stays JSON.
func trend(x, y []float64) (slope, t float64) {
	n := float64(len(x))
	if len(x) < 3 {
		return 0, 0
	}
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx /= n
	my /= n
	var sxx, sxy, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	if !(sxx > 0) {
		return 0, 0
	}
	slope = sxy / sxx
	rss := max(syy-slope*sxy, 0)
	se := math.Sqrt(rss / (n - 2) / sxx)
	const tMax = 1e6
	switch {
	case se > 0:
		t = math.Min(math.Max(slope/se, -tMax), tMax)
	case slope > 0:
		t = tMax
	case slope < 0:
		t = -tMax
	}
	return slope, t
}

// quantileSorted is numpy's linear-interpolation quantile of sorted values.
func quantileSorted(v []float64, q float64) float64 {
	pos := q * float64(len(v)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(v)-1)
	return v[lo] + (pos-float64(lo))*(v[hi]-v[lo])
}
