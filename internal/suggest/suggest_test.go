package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"objectve", "objective", 1},
		{"valeus", "values", 2},
		{"kitten", "sitting", 3},
		{"max_num_seqs", "max_num_seqs", 0},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
	long := string(make([]byte, 65))
	if d := Distance(long, "x"); d < 1<<20 {
		t.Errorf("a 65-byte word: distance %d, want larger than any name's", d)
	}
}
