package labspec

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/perflab/perflab/internal/runtimes"
)

// runtimeSection is a spec's `runtime: {kind: NAME, settings: {...}}`:
// the runtime's name and its settings, which the runtime decodes itself
// (runtimes.SettingsDecoder). A spec written so means what the same spec
// means with `runtime: NAME` and the settings at its top level (images:,
// volumes:, kubernetes:): it is stored, keyed and reported in that form,
// so its run key is the one the top-level form always had.
type runtimeSection struct {
	kind     string
	settings ast.Node // nil when the section has none
}

// splitRuntime finds a runtime section written as a mapping. It returns
// the document's body with the section's value replaced by its kind's
// node, which keeps its place in the file, so the decoder's errors about
// any other field keep their lines; body is nil when runtime: is a plain
// name, is absent, or the document does not parse (the plain decode then
// says why).
func splitRuntime(name string, data []byte) (body ast.Node, sec *runtimeSection, err error) {
	f, perr := parser.ParseBytes(data, 0)
	if perr != nil || f == nil || len(f.Docs) == 0 {
		return nil, nil, nil
	}
	var values []*ast.MappingValueNode
	switch b := f.Docs[0].Body.(type) {
	case *ast.MappingNode:
		values = b.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{b}
	default:
		return nil, nil, nil
	}
	for _, mv := range values {
		if mv.Key.String() != "runtime" {
			continue
		}
		var fields []*ast.MappingValueNode
		switch v := mv.Value.(type) {
		case *ast.MappingNode:
			fields = v.Values
		case *ast.MappingValueNode:
			fields = []*ast.MappingValueNode{v}
		default:
			return nil, nil, nil
		}
		sec = &runtimeSection{}
		var kind ast.Node
		for _, fv := range fields {
			switch k := fv.Key.String(); k {
			case "kind":
				s, ok := fv.Value.(*ast.StringNode)
				if !ok || strings.TrimSpace(s.Value) == "" {
					return nil, nil, &SpecError{File: name, Line: fv.Key.GetToken().Position.Line, Field: "$.runtime.kind",
						Msg: fmt.Sprintf("runtime.kind: %q is not a runtime's name (want %s)", fv.Value.String(), strings.Join(runtimes.Names(), ", "))}
				}
				sec.kind, kind = s.Value, s
			case "settings":
				sec.settings = fv.Value
			default:
				return nil, nil, &SpecError{File: name, Line: fv.Key.GetToken().Position.Line, Field: "$.runtime." + k,
					Msg: fmt.Sprintf("runtime: unknown field %q (a runtime section has kind and settings)", k)}
			}
		}
		if kind == nil {
			return nil, nil, &SpecError{File: name, Line: mv.Key.GetToken().Position.Line, Field: "$.runtime",
				Msg: "runtime: kind is required when runtime is a section (runtime: {kind: docker, settings: {...}})"}
		}
		mv.Value = kind
		return f.Docs[0].Body, sec, nil
	}
	return nil, nil, nil
}

// apply decodes the section's settings with its runtime's own decoder and
// sets them on s; a setting also given at the spec's top level is refused
// (two values, neither of them obviously meant).
func (sec *runtimeSection) apply(s *Spec, line func(string) int) error {
	bad := func(path, format string, a ...any) error {
		return &SpecError{File: s.file, Line: line(path), Msg: fmt.Sprintf(format, a...), Field: path}
	}
	if sec.settings == nil {
		return nil
	}
	if _, isNull := sec.settings.(*ast.NullNode); isNull {
		return nil
	}
	k, err := runtimes.Lookup(sec.kind)
	if err != nil {
		return bad("$.runtime.kind", "%v", err)
	}
	d, ok := k.(runtimes.SettingsDecoder)
	if !ok {
		return bad("$.runtime.settings", "runtime %s has no settings", sec.kind)
	}
	v, err := d.DecodeSettings(func(v any) error { return yaml.NodeToValue(sec.settings, v, yaml.Strict()) })
	if err != nil {
		var ye yaml.Error
		if errors.As(err, &ye) && ye.GetToken() != nil {
			return &SpecError{File: s.file, Line: ye.GetToken().Position.Line, Field: "$.runtime.settings",
				Msg: fmt.Sprintf("runtime.settings: %s: %s", sec.kind, ye.GetMessage())}
		}
		return bad("$.runtime.settings", "runtime.settings: %s: %v", sec.kind, err)
	}
	set := d.Store(v)
	twice := func(key string) error {
		return bad("$.runtime.settings."+key, "runtime.settings.%s: %s is also given at the spec's top level ($.%s); give it once", key, key, key)
	}
	if set.Images != nil {
		if s.Images != nil {
			return twice("images")
		}
		s.Images = set.Images
	}
	if set.Volumes != nil {
		if s.Volumes != nil {
			return twice("volumes")
		}
		s.Volumes = set.Volumes
	}
	if set.Kubernetes != nil {
		if s.Kubernetes != nil {
			return bad("$.runtime.settings", "runtime.settings: the cluster settings are also given at the spec's top level ($.kubernetes); give them once")
		}
		s.Kubernetes = set.Kubernetes
	}
	return nil
}

// RuntimeSettings are the spec's runtime settings as its runtime (the
// one it runs on now, after a command line's --runtime) decodes them:
// the value runtimes.Env and runtimes.Choice carry, which only that
// runtime reads. A setting the runtime has none of (volumes: on
// kubernetes, images: on process) is a *SpecError at its line, wrapping
// the runtime's *runtimes.SettingError.
func (s *Spec) RuntimeSettings() (any, error) {
	v, err := runtimes.SettingsFor(s.RuntimeKind(), runtimes.Stored{Images: s.Images, Volumes: s.Volumes, Kubernetes: s.Kubernetes})
	var se *runtimes.SettingError
	if errors.As(err, &se) {
		path := "$." + se.Field
		line, msg := s.settingLines[se.Field], se.Error()
		if line == 0 {
			// Not written in the file: a command line's --image,
			// --kube-context or --namespace set it.
			msg += "; it was set on the command line (--image, --kube-context, --namespace)"
		}
		return nil, &SpecError{File: s.file, Line: line, Field: path, Msg: msg, Err: se}
	}
	return v, err
}

// storedLines are the lines of the spec's stored runtime settings, by
// key, where they were written (at the top level or under the runtime
// section), for RuntimeSettings' errors after a command line chose the
// runtime.
func storedLines(line func(string) int) map[string]int {
	out := map[string]int{}
	for _, k := range []string{"images", "volumes", "kubernetes"} {
		if n := line("$." + k); n > 0 {
			out[k] = n
		}
	}
	return out
}

// settingsLine is line for a spec whose runtime section held its
// settings: a check of $.images, $.volumes or $.kubernetes points at
// where they were written.
func (sec *runtimeSection) settingsLine(line func(string) int) func(string) int {
	return func(path string) int {
		if n := line(path); n > 0 {
			return n
		}
		for _, top := range []string{"$.images", "$.volumes"} {
			if rest, ok := strings.CutPrefix(path, top); ok {
				return line("$.runtime.settings" + top[1:] + rest)
			}
		}
		if rest, ok := strings.CutPrefix(path, "$.kubernetes"); ok {
			return line("$.runtime.settings" + rest)
		}
		return 0
	}
}
