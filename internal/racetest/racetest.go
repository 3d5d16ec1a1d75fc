// Package racetest tells a test whether its binary has the race detector
// in it, so that a CPU-bound test of a computation can leave the race
// step to a run without it.
//
// The race detector makes instrumented code 5 to 10 times slower and
// finds races only between goroutines that share memory. A test that
// spends its minutes computing (a whole example's dry run, a calibration
// fit) costs CI's race step most of its time and adds little there that
// the smaller tests of the same code do not already give the detector.
// Such a test calls SkipCPUBound; .ci/run runs every one of them without
// -race (its list is checked against the calls), so CI keeps each
// assertion.
package racetest

import "testing"

// Enabled reports whether this binary was built with -race.
const Enabled = enabled

// SkipCPUBound skips t when the race detector is on, saying where it runs
// instead. Call it only in a test whose claim is about what a computation
// gives, or about what a page shows while one runs in process (the
// dashboard's browser tests), not about goroutines.
func SkipCPUBound(t testing.TB) {
	t.Helper()
	if Enabled {
		t.Skip("CPU-bound: skipped under -race; .ci/run runs it without -race (internal/racetest)")
	}
}
