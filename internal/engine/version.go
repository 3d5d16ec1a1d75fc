package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// version is a parsed engine version: numeric release parts plus an optional
// pre-release ("rc1") or post-release ("post1") tag, as PEP 440 orders them.
type version struct {
	parts []int
	// pre < 0 for rcN/aN/bN (sorts before the release), > 0 for postN.
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
	}{{".post", 2}, {"post", 2}, {"rc", -1}, {".dev", -3}, {"a", -2}, {"b", -2}} {
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
