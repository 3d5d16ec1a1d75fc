package objective

import (
	"strings"
	"testing"
)

// TestWordsOf: each objective reads as its own words, and a name the
// registry does not know (an old or imported summary) as total throughput.
func TestWordsOf(t *testing.T) {
	cases := []struct {
		name, noun, sentenceHas string
	}{
		{TotalThroughput, "throughput", "high throughput under"},
		{ThroughputPerGPU, "throughput per GPU", "throughput per GPU"},
		{Goodput, "goodput", "meet every SLO"},
		{MaxLoadUnderSLO, "the load sustained within the SLO", "sustainable load"},
		{"", "throughput", "high throughput under"},
		{"latency", "throughput", "high throughput under"},
	}
	for _, tc := range cases {
		w := WordsOf(tc.name)
		if w.Noun != tc.noun || !strings.Contains(w.Sentence, tc.sentenceHas) {
			t.Errorf("WordsOf(%q) = %+v, want noun %q and a sentence with %q", tc.name, w, tc.noun, tc.sentenceHas)
		}
		if got, want := Known(tc.name), tc.name != "" && tc.name != "latency"; got != want {
			t.Errorf("Known(%q) = %v, want %v", tc.name, got, want)
		}
	}
}
