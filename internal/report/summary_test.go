package report

import "testing"

// TestSummarySentence: the reference reports' "Summary:" wording, from
// the 9B report's own figures, both ways round.
func TestSummarySentence(t *testing.T) {
	for _, tc := range []struct {
		a, b Candidate
		want string
	}{
		{
			Candidate{Name: "32k", Metrics: Metrics{TotalTPS: 11672.72, MeanTPOTMs: 16.53}},
			Candidate{Name: "24k", Metrics: Metrics{TotalTPS: 11512.90, MeanTPOTMs: 15.83}},
			"`32k` Total TPS = 11672.72, `24k` Total TPS = 11512.90. `32k` is faster by 159.82 tok/s (1.39%); Mean TPOT = 16.53 ms vs 15.83 ms, increased by 0.70 ms (4.42% slower).",
		},
		{
			Candidate{Name: "SGLang", Metrics: Metrics{TotalTPS: 6499.41, MeanTPOTMs: 138.86}},
			Candidate{Name: "vLLM", Metrics: Metrics{TotalTPS: 11527.14, MeanTPOTMs: 15.12}},
			"`vLLM` Total TPS = 11527.14, `SGLang` Total TPS = 6499.41. `vLLM` is faster by 5027.73 tok/s (77.36%); Mean TPOT = 15.12 ms vs 138.86 ms, reduced by 123.74 ms (89.11%).",
		},
		{
			// An exact tie (the simulator gives vLLM's three attention
			// backends one figure): not "faster by 0.00 tok/s".
			Candidate{Name: "vLLM", Metrics: Metrics{TotalTPS: 5833.93, MeanTPOTMs: 37.36}},
			Candidate{Name: "vLLM + FLASHINFER", Metrics: Metrics{TotalTPS: 5833.93, MeanTPOTMs: 37.36}},
			"`vLLM` Total TPS = 5833.93, `vLLM + FLASHINFER` Total TPS = 5833.93: the same; Mean TPOT = 37.36 ms vs 37.36 ms, the same.",
		},
	} {
		if got := summarySentence(tc.a, tc.b); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

// TestRankingTies: candidates equal at the precision shown are joined by
// "=", not ranked.
func TestRankingTies(t *testing.T) {
	got := ranking([]Candidate{
		{Name: "A", Status: "ok", Metrics: Metrics{TotalTPS: 5833.93}},
		{Name: "B", Status: "ok", Metrics: Metrics{TotalTPS: 6000}},
		{Name: "C", Status: "ok", Metrics: Metrics{TotalTPS: 5833.931}},
	})
	if want := "B (6000.00 tok/s) > C (5833.93 tok/s) = A (5833.93 tok/s)"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
