package engine

import "testing"

// TestCompareVersions is the module's one version order against PEP 440.
// Before issue 24 four comparators disagreed; the old columns record what
// each said (engine's cmp, sim's versionAtLeast, simargs' atLeast = sim's,
// sim/coef's versionLess), each wrong somewhere:
//   - sim and simargs ignored suffixes: 1.2.0rc1 >= 1.2.0, 0.12.0.dev3 >= 0.12.0;
//   - coef compared non-numeric parts as strings: 1.2.0rc10 < 1.2.0rc2,
//     1.2.0 < 1.2.0rc1, v0.17.1 != 0.17.1, 0.17 < 0.17.0.
func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
		// What the old comparators answered for a vs b: simAtLeast is
		// sim.versionAtLeast(a, b), coefLess is sim.versionLess(a, b).
		simAtLeast, coefLess bool
	}{
		{"1.2.0rc1", "1.2.0", -1, true, false},
		{"1.2.0", "1.2.0rc1", 1, true, true},
		{"0.5.5.post1", "0.5.5", 1, true, false},
		{"0.5.5", "0.5.5.post1", -1, true, true},
		{"0.9", "0.11.0", -1, false, true},
		{"0.12.0.dev3", "0.12.0", -1, true, false},
		{"0.12.0.dev3", "0.12.0rc1", -1, true, true},
		{"0.12.0a1", "0.12.0b1", -1, true, true},
		{"0.12.0b1", "0.12.0rc1", -1, true, true},
		{"1.2.0rc10", "1.2.0rc2", 1, true, true},
		{"0.17", "0.17.0", 0, true, true},
		{"v0.17.1", "0.17.1", 0, true, false},
		{"0.17.1", "v0.17.1", 0, true, true},
		{"1.2.0rc1", "1.2.0.post1", -1, true, false},
		{"0.5.10", "0.5.9", 1, true, false},
		// Malformed versions compare by their numeric parts.
		{"0.17.x", "0.17.0", 0, true, false},
		{"nightly", "0.1", -1, false, false},
	} {
		if got := CompareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := VersionAtLeast(tc.a, tc.b); got != (tc.want >= 0) {
			t.Errorf("VersionAtLeast(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want >= 0)
		}
		if r := CompareVersions(tc.b, tc.a); r != -tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d, not the reverse of %d", tc.b, tc.a, r, tc.want)
		}
		// Where the old comparators were wrong, say so: the table
		// documents the disagreement the single order removes.
		if tc.simAtLeast != (tc.want >= 0) {
			t.Logf("old sim/simargs: %s >= %s was %v", tc.a, tc.b, tc.simAtLeast)
		}
		if tc.coefLess != (tc.want < 0) {
			t.Logf("old sim/coef: %s < %s was %v", tc.a, tc.b, tc.coefLess)
		}
	}
}
