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
		kept, dropped string
	}{
		{[]string{"", "1024", "2048", "256", "512"}, 48, "", " 256", "512 1024 2048"},
		{[]string{"", "1024", "2048", "256", "512"}, 48, "1024", " 1024 256", "512 2048"},
		{[]string{"", "1024", "2048", "256", "512"}, 300, "", " 256 512", "1024 2048"},
		{[]string{"", "1024", "2048", "256", "512"}, 512, "", " 256 512", "1024 2048"},
		{[]string{"", "1024", "2048", "256", "512"}, 5000, "", " 1024 2048 256 512", ""},
		{[]string{"", "1024", "256"}, 0, "", " 1024 256", ""},
	} {
		kept, dropped := TrimUnbinding(tc.values, tc.inFlight, tc.keep)
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
