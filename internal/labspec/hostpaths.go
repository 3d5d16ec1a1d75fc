package labspec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// HostPath is a host file or directory a spec names, with the field that
// names it.
type HostPath struct {
	// Field is the spec's field ("tokenizer", "tuning.path",
	// "volumes[0]").
	Field string
	// Path is the path as the lab uses it: absolute once the spec is
	// loaded.
	Path string
}

// HostPaths lists every host path the loaded spec reads or mounts: the
// tokenizer, model and FP8 model when they are paths rather than Hub ids,
// the workloads' dataset files (the default ShareGPT sample included),
// the bind mounts' host sides and the kubernetes HF cache host path. A
// server checks them against the directory it may expose.
func (s *Spec) HostPaths() []HostPath {
	var out []HostPath
	ref := func(field, v string) {
		if v != "" && filepath.IsAbs(v) {
			out = append(out, HostPath{field, v})
		}
	}
	ref("tokenizer", s.Tokenizer)
	ref("model", s.Model)
	ref("fp8_model", s.FP8Model)
	if s.Tuning != nil && s.Tuning.Path != "" {
		out = append(out, HostPath{"tuning.path", s.Tuning.Path})
	}
	for i, w := range s.Generalization {
		if w.Path != "" {
			out = append(out, HostPath{fmt.Sprintf("generalization[%d].path", i), w.Path})
		}
	}
	for i, v := range s.Volumes {
		if host, _, ok := strings.Cut(v, ":"); ok && host != "" {
			out = append(out, HostPath{fmt.Sprintf("volumes[%d]", i), host})
		}
	}
	if s.Kubernetes != nil && s.Kubernetes.HFCacheHostPath != "" {
		out = append(out, HostPath{"kubernetes.hf_cache_host_path", s.Kubernetes.HFCacheHostPath})
	}
	return out
}

// PathResolver decides what a host path named by a spec or an API body
// (tokenizer, model, dataset files, bind mounts, caches) means on this
// host: the one place that does, for the CLI's specs and the server's
// labs and benchmarks alike.
type PathResolver struct {
	// Base is the directory relative paths resolve against: the spec's
	// own directory for perflab lab, the data root for perflab serve.
	Base string
	// Confined keeps every path under Base (perflab serve's --data-root):
	// a path leading out of it by "..", by being absolute or through a
	// symbolic link is refused, "~" is refused, and a name that is not a
	// path under Base is a Hub id only, never a file of the working
	// directory. Its errors name paths only as the caller wrote them or
	// under Base, so they tell nothing of the host outside it.
	Confined bool
}

// PathError says why a host path was refused.
type PathError struct {
	// Value is the path as the spec or body wrote it.
	Value string
	// Reason says what is wrong with it.
	Reason string
	// Outside is set when the path leads out of a confined base.
	Outside bool
}

func (e *PathError) Error() string { return e.Value + ": " + e.Reason }

// hubID is a Hugging Face repository id as the Hub accepts one: OWNER/NAME
// or NAME, of letters, digits, "-", "_" and ".", neither part starting
// with "." nor holding "--" or "..".
var hubID = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,95}(/[A-Za-z0-9_][A-Za-z0-9_.-]{0,95})?$`)

// IsHubID says whether v can name a Hub repository.
func IsHubID(v string) bool {
	return hubID.MatchString(v) && !strings.Contains(v, "--") && !strings.Contains(v, "..")
}

// Path resolves a value that can only be a path (a dataset file, a bind
// mount's host side) to an absolute one.
func (r PathResolver) Path(v string) (string, error) {
	if !r.Confined {
		return under(r.Base, v), nil
	}
	if strings.HasPrefix(v, "~") {
		return "", &PathError{Value: v, Reason: "~ (a home directory) cannot be named here: name a path under the data root (relative to it, or absolute)"}
	}
	p := v
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.Base, p)
	}
	p = filepath.Clean(p)
	if !r.inside(p) {
		return "", &PathError{Value: v, Reason: "outside the data root " + r.Base + " (--data-root): a spec or body sent to the server may name only files under it", Outside: true}
	}
	return p, nil
}

// Ref resolves a value that is a local path or a Hub id (tokenizer,
// model): a path when it is written as one (absolute, ./, ../, ~/) or
// names something that exists under Base; a Hub id otherwise, returned
// as it is with local false.
func (r PathResolver) Ref(v string) (p string, local bool, err error) {
	if pathLike(v) {
		p, err := r.Path(v)
		return p, err == nil, err
	}
	p, err = r.Path(v)
	var pe *PathError
	if errors.As(err, &pe) && pe.Outside {
		// Under the root by its name, out of it through a link: a path,
		// refused whether or not the file exists.
		return "", false, err
	}
	if err == nil {
		if _, serr := os.Stat(p); serr == nil {
			return p, true, nil
		}
	}
	if r.Confined && !IsHubID(v) {
		return "", false, &PathError{Value: v, Reason: "neither a file under the data root nor a Hub id (OWNER/NAME)"}
	}
	return v, false, nil
}

// Check refuses an absolute path outside a confined Base (a path filled
// in after resolution, such as the default dataset); it passes anything
// when not confined.
func (r PathResolver) Check(p string) error {
	if !r.Confined {
		return nil
	}
	_, err := r.Path(p)
	return err
}

// inside says whether the absolute path p stays under Base once every
// symbolic link of it is followed: those of its longest existing prefix,
// so a link cannot lead out whether or not the rest exists (and a missing
// file behind an outward link is refused as outside, not reported
// missing: no existence oracle for the host outside Base).
func (r PathResolver) inside(p string) bool {
	within := func(q string) bool {
		rel, err := filepath.Rel(r.Base, q)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
	}
	if !within(p) {
		return false
	}
	return within(realPath(p))
}

// realPath follows the symbolic links of p's longest existing prefix and
// joins the rest.
func realPath(p string) string {
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	parent := filepath.Dir(p)
	if parent == p {
		return p
	}
	return filepath.Join(realPath(parent), filepath.Base(p))
}
