package labspec

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestPathResolver: unconfined (perflab lab), relative paths resolve
// against the spec's directory and "~/" is the home directory; confined
// (perflab serve), every path stays under the root, whatever ".." or a
// link says, and names that are not files there are Hub ids.
func TestPathResolver(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(root, "toks", "q"), 0o755)
	os.Symlink(outside, filepath.Join(root, "link"))
	home, _ := os.UserHomeDir()
	free := PathResolver{Base: root}
	jail := PathResolver{Base: root, Confined: true}
	for _, tc := range []struct {
		r       PathResolver
		v, want string
		local   bool
		outside bool // refused as outside the root
		bad     bool // refused
	}{
		{free, "toks/q", filepath.Join(root, "toks", "q"), true, false, false},
		{free, "../x", filepath.Join(filepath.Dir(root), "x"), true, false, false},
		{free, "~/x", filepath.Join(home, "x"), true, false, false},
		{free, "Qwen/Qwen3-14B", "Qwen/Qwen3-14B", false, false, false},
		{jail, "toks/q", filepath.Join(root, "toks", "q"), true, false, false},
		{jail, "./toks/q", filepath.Join(root, "toks", "q"), true, false, false},
		{jail, "Qwen/Qwen3-14B", "Qwen/Qwen3-14B", false, false, false},
		{jail, "private/nope", "private/nope", false, false, false},
		{jail, "../x", "", false, true, true},
		{jail, outside, "", false, true, true},
		{jail, "link/x", "", false, true, true},
		{jail, "./link/x", "", false, true, true},
		{jail, "~/x", "", false, false, true},
		{jail, "a/b/c", "", false, false, true},
		{jail, "a--b", "", false, false, true},
	} {
		got, local, err := tc.r.Ref(tc.v)
		var pe *PathError
		switch {
		case tc.bad && !errors.As(err, &pe):
			t.Errorf("confined %v, Ref(%q) = %q, %v: want a *PathError", tc.r.Confined, tc.v, got, err)
		case tc.bad && pe.Outside != tc.outside:
			t.Errorf("Ref(%q): Outside %v, want %v", tc.v, pe.Outside, tc.outside)
		case !tc.bad && (err != nil || got != tc.want || local != tc.local):
			t.Errorf("confined %v, Ref(%q) = %q, %v, %v; want %q, %v", tc.r.Confined, tc.v, got, local, err, tc.want, tc.local)
		}
	}
}
