package main

import (
	"fmt"
	"runtime/debug"
)

// version is the module version and VCS commit the binary was built
// from, as the Go toolchain recorded them ("devel" for a plain go run or a
// build outside a checkout).
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel (no build information)"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev, when string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return fmt.Sprintf("%s (%s, commit unknown: built without VCS stamping, e.g. GOFLAGS=-buildvcs=false)", v, bi.GoVersion)
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return fmt.Sprintf("%s (commit %s, %s, %s)", v, rev, when, bi.GoVersion)
}
