package bench

import (
	"math"
	"testing"
)

// TestPyFloat checks Python's str(float) spellings, which vLLM prints and
// puts in its result files' names.
func TestPyFloat(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want string
	}{
		{math.Inf(1), "inf"}, {0.5, "0.5"}, {3, "3.0"}, {10, "10.0"}, {1e300, "1e+300"},
	} {
		if got := PyFloat(tc.x); got != tc.want {
			t.Errorf("PyFloat(%v) = %q, want %q", tc.x, got, tc.want)
		}
	}
}
