package engine

import (
	"strings"
	"testing"
)

// TestCapacity: which failures a wait for capacity may cure, and how.
func TestCapacity(t *testing.T) {
	for _, tc := range []struct {
		class     FailureClass
		retries   int
		needsRoom bool
		settle    bool
		again     string
	}{
		{ClassGPUBusy, 3, false, true, "GPU not yet free at start (free 3 GiB); started again"},
		{ClassUnschedulable, 50, true, false, "not placed while this lab's own servers held the GPUs; started again"},
		{ClassOOM, 0, false, false, ""},
		{ClassStartupCrash, 0, false, false, ""},
		{ClassHung, 0, false, false, ""},
	} {
		w := tc.class.Capacity()
		if w.Retries != tc.retries || w.NeedsRoom != tc.needsRoom || w.Settle != tc.settle {
			t.Errorf("%s: %+v", tc.class, w)
		}
		if got := w.Again("free 3 GiB"); got != tc.again {
			t.Errorf("%s: Again %q, want %q", tc.class, got, tc.again)
		}
		if w.Retries > 0 && !strings.Contains(w.Again("x"), "started again") {
			t.Errorf("%s: the record does not say it started again", tc.class)
		}
	}
}
