//go:build race

package bench

// The race detector slows every goroutine switch several times over, so
// clock tolerances widen under -race.
const raceEnabled = true
