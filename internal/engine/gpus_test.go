package engine

import "testing"

// TestConfigGPUs: a config occupies tensor × data parallel GPUs, an unset
// size counting as 1 (the report reads a stored config's count this way
// too, so the two cannot disagree).
func TestConfigGPUs(t *testing.T) {
	cases := []struct {
		tp, dp, want int
	}{
		{0, 0, 1}, {1, 1, 1}, {2, 0, 2}, {0, 4, 4}, {2, 4, 8}, {-1, 3, 3},
	}
	for _, tc := range cases {
		if got := (Config{TensorParallel: tc.tp, DataParallel: tc.dp}).GPUs(); got != tc.want {
			t.Errorf("tp %d dp %d: GPUs() = %d, want %d", tc.tp, tc.dp, got, tc.want)
		}
	}
}
