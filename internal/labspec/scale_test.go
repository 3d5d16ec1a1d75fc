package labspec

import (
	"math"
	"testing"

	"github.com/perflab/perflab/internal/metrics"
)

func TestScale(t *testing.T) {
	recs := []metrics.Record{{Sent: 1, TTFT: 0.1, Latency: 0.5}}
	cases := []struct {
		k               Scale
		send, wall, dur float64
		ttft            float64
		stretched       bool
	}{
		{0, 5, 100, 2, 0.1, false},
		{1, 5, 100, 2, 0.1, false},
		{20, 100, 5, 40, 2, true},
		{0.5, 2.5, 200, 1, 0.05, true},
	}
	for _, tc := range cases {
		if got := tc.k.Send(5); got != tc.send {
			t.Errorf("%v: Send(5) = %v, want %v", tc.k, got, tc.send)
		}
		if got := tc.k.Send(math.Inf(1)); !math.IsInf(got, 1) {
			t.Errorf("%v: an infinite rate became %v", tc.k, got)
		}
		if got := tc.k.Wall(100); got != tc.wall {
			t.Errorf("%v: Wall(100) = %v, want %v", tc.k, got, tc.wall)
		}
		out, dur, ok := tc.k.Stretch(recs, 2)
		if ok != tc.stretched || dur != tc.dur || math.Abs(out[0].TTFT-tc.ttft) > 1e-12 {
			t.Errorf("%v: Stretch = %v ttft %v, %v; want %v ttft %v, %v", tc.k, dur, out[0].TTFT, ok, tc.dur, tc.ttft, tc.stretched)
		}
		if recs[0].TTFT != 0.1 {
			t.Fatalf("%v: Stretch changed its input", tc.k)
		}
	}
}
