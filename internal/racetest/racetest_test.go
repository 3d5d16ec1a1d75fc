package racetest

import "testing"

// TestSkipCPUBound: a test that calls SkipCPUBound runs without -race and
// is skipped with it; Enabled follows the build.
func TestSkipCPUBound(t *testing.T) {
	ran := false
	t.Run("cpu-bound", func(t *testing.T) {
		SkipCPUBound(t)
		ran = true
	})
	if ran == Enabled {
		t.Errorf("ran = %v with the race detector %v: want it run exactly when the detector is off", ran, Enabled)
	}
}
