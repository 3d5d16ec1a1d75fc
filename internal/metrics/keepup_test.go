package metrics

import (
	"math"
	"testing"
)

// TestKeepUp: a queue that grows by one request a second (two arrive, one
// leaves) shows in flight growing at 1/s and each request's wait growing
// by half a second a second; the figures survive the result JSON.
func TestKeepUp(t *testing.T) {
	var recs []Record
	for i := range 200 {
		sent := float64(i) / 2
		// Served one a second in arrival order, 0.5 s each.
		start := math.Max(sent, float64(i)*1)
		recs = append(recs, Record{Success: true, Sent: sent, Scheduled: sent, TTFT: start - sent + 0.1, Latency: start - sent + 0.5, OutputLen: 2, PromptLen: 1})
	}
	opt := DefaultOptions()
	opt.KeepUp = true
	r := Compute(recs, 200, opt)
	k := r.Perflab.KeepUp
	if k == nil || k.Arrivals != 200 || math.Abs(k.SpanS-99.5) > 1e-9 {
		t.Fatalf("keep-up %+v", k)
	}
	if math.Abs(k.InFlightSlope-1) > 0.05 || math.Abs(k.TTFTSlope-1) > 0.01 || k.InFlightT < 10 || k.TTFTT < 10 {
		// The wait of request i is i-i/2 = i/2 s, sent at i/2 s: 1 s a second.
		t.Errorf("slopes: in flight %.3f (t %.1f), ttft %.3f (t %.1f)", k.InFlightSlope, k.InFlightT, k.TTFTSlope, k.TTFTT)
	}
	if k.CompletedInSpan >= 110 || k.TTFTLateMs <= k.TTFTEarlyMs {
		t.Errorf("completed %d in span, ttft %v then %v", k.CompletedInSpan, k.TTFTEarlyMs, k.TTFTLateMs)
	}
	b, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Perflab.KeepUp == nil || *back.Perflab.KeepUp != *k {
		t.Errorf("keep-up read back %+v, want %+v", back.Perflab.KeepUp, k)
	}
	// Asked for nothing, a result carries nothing (vLLM's JSON unchanged).
	if r := Compute(recs, 200, DefaultOptions()); r.Perflab.KeepUp != nil {
		t.Error("keep-up figures without Options.KeepUp")
	}
}
