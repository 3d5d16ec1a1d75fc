package labspec

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/perflab/perflab/internal/suggest"
)

// unknownField is a key a spec carries that no field takes, at its line,
// with the field of the same mapping it most likely meant ("" if none is
// near).
type unknownField struct {
	key     string
	line    int
	suggest string
}

// unknownFields lists, in the order of the document, the keys of n that
// no field of t takes, as the decoder's strict mode judges them. The
// decoder names one of a mapping's unknown keys, picked by map order, so
// two runs of one spec could name two different ones; this walk is how
// the error names them all, first to last.
func unknownFields(n ast.Node, t reflect.Type) []unknownField {
	var out []unknownField
	walkUnknown(n, t, &out)
	return out
}

var (
	bytesUnmarshaler = reflect.TypeFor[yaml.BytesUnmarshaler]()
	ifaceUnmarshaler = reflect.TypeFor[yaml.InterfaceUnmarshaler]()
)

func walkUnknown(n ast.Node, t reflect.Type, out *[]unknownField) {
	for {
		switch v := n.(type) {
		case *ast.TagNode:
			n = v.Value
			continue
		case *ast.AnchorNode:
			n = v.Value
			continue
		}
		break
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n == nil || reflect.PointerTo(t).Implements(bytesUnmarshaler) || reflect.PointerTo(t).Implements(ifaceUnmarshaler) {
		return // decoded by its own method, which judges its own keys
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := map[string]reflect.Type{}
		structFields(t, fields)
		for _, mv := range mappingValues(n) {
			if mv.Key == nil || mv.Key.GetToken() == nil {
				continue
			}
			key := mv.Key.GetToken().Value
			if key == "<<" {
				continue // a merge key: its mapping is checked where it is anchored
			}
			ft, ok := fields[key]
			if !ok {
				*out = append(*out, unknownField{key: key, line: mv.Key.GetToken().Position.Line, suggest: nearestKey(key, fields)})
				continue
			}
			walkUnknown(mv.Value, ft, out)
		}
	case reflect.Map:
		for _, mv := range mappingValues(n) {
			walkUnknown(mv.Value, t.Elem(), out)
		}
	case reflect.Slice, reflect.Array:
		if s, ok := n.(*ast.SequenceNode); ok {
			for _, v := range s.Values {
				walkUnknown(v, t.Elem(), out)
			}
		}
	}
}

// structFields maps the keys a struct takes to their types, inline
// structs' keys included, named as the decoder names them.
func structFields(t reflect.Type, into map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "" {
			tag = f.Tag.Get("json")
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				structFields(ft, into)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		into[name] = f.Type
	}
}

func mappingValues(n ast.Node) []*ast.MappingValueNode {
	switch v := n.(type) {
	case *ast.MappingNode:
		return v.Values
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{v}
	}
	return nil
}

// unknownMessage names every unknown key, first to last; it starts as the
// decoder's own message does ("unknown field "x""), with the others after.
func unknownMessage(u []unknownField) string {
	msg := fmt.Sprintf("unknown field %q%s", u[0].key, u[0].meant())
	if len(u) == 1 {
		return msg
	}
	const most = 10
	var rest []string
	for i, f := range u[1:] {
		if i == most {
			rest = append(rest, fmt.Sprintf("%d more", len(u)-1-most))
			break
		}
		also := fmt.Sprintf("%q (line %d", f.key, f.line)
		if f.suggest != "" {
			also += fmt.Sprintf("; did you mean %q?", f.suggest)
		}
		rest = append(rest, also+")")
	}
	return msg + "; also unknown: " + strings.Join(rest, ", ")
}

// meant is " (did you mean "x"?)" for a key with a suggestion, else "".
func (f unknownField) meant() string {
	if f.suggest == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", f.suggest)
}

// nearestKey is the field of fields a mistyped key most likely meant: the
// one within two edits (hyphens read as underscores, case ignored) and
// nearer than half the key's length, the alphabetically first of equals;
// "" when none is.
func nearestKey(key string, fields map[string]reflect.Type) string {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "_")) }
	k := norm(key)
	best, bestD := "", 3
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if d := suggest.Distance(k, norm(name)); d < bestD && 2*d < len(k) {
			best, bestD = name, d
		}
	}
	return best
}
