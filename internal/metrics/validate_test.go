package metrics

import (
	"strings"
	"testing"
)

// TestValidatePeakBelowMean: vLLM's peak counts one per streamed chunk, so
// a peak below the mean output rate is flagged unless perflab's
// chunk-weighted peak, which counts the tokens each chunk carried, reaches
// the mean (chunks of several tokens explain it); an imported result has no
// such figure and is flagged.
func TestValidatePeakBelowMean(t *testing.T) {
	for _, tc := range []struct {
		name     string
		weighted float64 // 0: no perflab section
		flagged  bool
	}{
		{"imported, no chunk-weighted peak", 0, true},
		{"chunks of several tokens explain it", 150, false},
		{"the chunk-weighted peak is below the mean too", 50, true},
	} {
		r, err := ParseJSON([]byte(`{"completed": 9, "num_prompts": 10, "duration": 20, "output_throughput": 100, "max_output_tokens_per_s": 10}`))
		if err != nil {
			t.Fatal(err)
		}
		if tc.weighted > 0 {
			r.Perflab.PeakOutputTokensPerS = tc.weighted
		} else {
			r.Perflab = nil
		}
		got := strings.Contains(strings.Join(r.Validate(), "\n"), "below the mean output throughput")
		if got != tc.flagged {
			t.Errorf("%s: flagged %v, want %v (%q)", tc.name, got, tc.flagged, r.Validate())
		}
	}
}
