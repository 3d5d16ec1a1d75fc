package labspec

import (
	"strings"
	"testing"
)

func TestTrimUnbinding(t *testing.T) {
	for _, tc := range []struct {
		values        []string
		inFlight      int
		keep          string
		admits        bool
		kept, dropped string
	}{
		{[]string{"", "1024", "2048", "256", "512"}, 48, "", false, " 256", "512 1024 2048"},
		{[]string{"", "1024", "2048", "256", "512"}, 48, "1024", false, " 1024 256", "512 2048"},
		{[]string{"", "1024", "2048", "256", "512"}, 300, "", false, " 256 512", "1024 2048"},
		{[]string{"", "1024", "2048", "256", "512"}, 512, "", false, " 256 512", "1024 2048"},
		{[]string{"", "1024", "2048", "256", "512"}, 5000, "", false, " 1024 2048 256 512", ""},
		{[]string{"", "1024", "256"}, 0, "", false, " 1024 256", ""},
		// The default admits 48 already (vLLM's least is 256): every limit
		// at or above 48 is the default's server.
		{[]string{"", "1024", "2048", "256", "512"}, 48, "", true, "", "256 512 1024 2048"},
		{[]string{"", "1024", "2048", "256", "512"}, 300, "", true, " 256", "512 1024 2048"},
	} {
		kept, dropped := TrimUnbinding(tc.values, tc.inFlight, tc.keep, tc.admits)
		if got := strings.Join(kept, " "); got != tc.kept {
			t.Errorf("%v at %d: kept %q, want %q", tc.values, tc.inFlight, got, tc.kept)
		}
		if got := strings.Join(dropped, " "); got != tc.dropped {
			t.Errorf("%v at %d: dropped %q, want %q", tc.values, tc.inFlight, got, tc.dropped)
		}
	}
}

func TestInFlightCap(t *testing.T) {
	for _, tc := range []struct {
		w    Workload
		want int
	}{
		{Workload{MaxConcurrency: 48, NumPrompts: 240}, 48},
		{Workload{MaxConcurrency: 480, NumPrompts: 240}, 240},
		{Workload{NumPrompts: 1000}, 1000},
		{Workload{}, 0},
	} {
		if got := tc.w.InFlightCap(); got != tc.want {
			t.Errorf("%+v: %d, want %d", tc.w, got, tc.want)
		}
	}
}
