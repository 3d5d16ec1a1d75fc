package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// version is a parsed engine version: numeric release parts plus an optional
// development ("dev3"), pre-release ("a1", "b1", "rc1") or post-release
// ("post1") tag, ordered as PEP 440 orders them: dev < a < b < rc <
// release < post, and each tag by its number. This is the one version
// order of the module: the renderer's gates, the simulator's defaults and
// quirks and its calibration lookup all compare through it
// (CompareVersions, VersionAtLeast).
type version struct {
	parts []int
	// pre < 0 for devN/aN/bN/rcN (sorts before the release), > 0 for
	// postN.
	pre    int
	preNum int
	raw    string
}

// parseVersion reads "0.11.0", "v0.17.1", "0.5.5.post1", "1.2.0rc1".
func parseVersion(s string) (version, error) {
	v := version{raw: s}
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if t == "" {
		return v, fmt.Errorf("engine: empty version")
	}
	// Split off a suffix: ".postN", "rcN", "aN", "bN", ".devN".
	for _, tag := range []struct {
		sep  string
		sign int
	}{{".post", 2}, {"post", 2}, {"rc", -1}, {".dev", -4}, {"a", -3}, {"b", -2}} {
		if i := strings.Index(t, tag.sep); i > 0 {
			n, err := strconv.Atoi(t[i+len(tag.sep):])
			if err != nil {
				return v, fmt.Errorf("engine: bad version %q: suffix %q", s, t[i:])
			}
			v.pre, v.preNum = tag.sign, n
			t = t[:i]
			break
		}
	}
	for _, p := range strings.Split(t, ".") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("engine: bad version %q: part %q is not a number", s, p)
		}
		v.parts = append(v.parts, n)
	}
	return v, nil
}

// cmp orders two versions: -1, 0, +1.
func (v version) cmp(o version) int {
	for i := 0; i < max(len(v.parts), len(o.parts)); i++ {
		a, b := 0, 0
		if i < len(v.parts) {
			a = v.parts[i]
		}
		if i < len(o.parts) {
			b = o.parts[i]
		}
		if a != b {
			if a < b {
				return -1
			}
			return 1
		}
	}
	switch {
	case v.pre != o.pre:
		if v.pre < o.pre {
			return -1
		}
		return 1
	case v.preNum != o.preNum:
		if v.preNum < o.preNum {
			return -1
		}
		return 1
	}
	return 0
}

// atLeast reports v >= s; s must be a valid literal.
func (v version) atLeast(s string) bool {
	o, err := parseVersion(s)
	if err != nil {
		panic("engine: bad version literal " + s)
	}
	return v.cmp(o) >= 0
}

// lenientVersion is parseVersion for a version that may be malformed
// ("0.17.x", "nightly"): each dotted part counts by its leading digits
// (none: 0), any suffix ignored, so a caller that must order whatever a
// user typed still gets an answer.
func lenientVersion(s string) version {
	if v, err := parseVersion(s); err == nil {
		return v
	}
	v := version{raw: s}
	for _, f := range strings.Split(strings.TrimPrefix(strings.TrimSpace(s), "v"), ".") {
		n := 0
		for _, c := range f {
			if c < '0' || c > '9' || n > 1e6 {
				break
			}
			n = n*10 + int(c-'0')
		}
		v.parts = append(v.parts, n)
	}
	return v
}

// CompareVersions orders two engine versions, -1, 0 or +1, as PEP 440
// does: 0.9 < 0.11.0 = v0.11 < 1.2.0.dev1 < 1.2.0rc1 < 1.2.0rc10 < 1.2.0 <
// 1.2.0.post1. A malformed version compares by its numeric parts.
func CompareVersions(a, b string) int {
	return lenientVersion(a).cmp(lenientVersion(b))
}

// VersionAtLeast reports v >= min in CompareVersions' order: a release
// candidate is not yet its release (1.2.0rc1 < 1.2.0), a post-release is
// past it.
func VersionAtLeast(v, min string) bool { return CompareVersions(v, min) >= 0 }
