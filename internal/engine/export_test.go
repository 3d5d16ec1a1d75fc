package engine

import "testing"

// FakeLaunch is a launch of the fake engine that stays up, for the
// runtime checks of package enginetest (run from package engine_test).
func FakeLaunch(t *testing.T) Launch { return fakeLaunch(t, nil) }
