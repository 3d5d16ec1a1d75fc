package runtimes

import (
	"fmt"
	"slices"
	"strings"
)

// Stored is the form a spec stores a runtime's settings in: its top-level
// images:, volumes: and kubernetes: fields, the form every stored run and
// run key was made in. It is not what a runtime reads: the runtime the
// spec names turns it into its own settings value (SettingsFor), refusing
// a field it has no use for, and only that runtime reads the value (Env,
// Choice). A spec that writes `runtime: {kind, settings}` is stored in
// this form too (SettingsDecoder.Store), so its run key is the one the
// top-level form always had.
type Stored struct {
	// Images overrides the container image per engine.
	Images map[string]string
	// Volumes are extra bind mounts "HOST:CONTAINER[:ro]".
	Volumes []string
	// Kubernetes are the cluster settings.
	Kubernetes *KubeSettings
}

// fields names the stored fields that are set, by their keys in a spec.
func (st Stored) fields() []string {
	var out []string
	if st.Images != nil {
		out = append(out, "images")
	}
	if st.Volumes != nil {
		out = append(out, "volumes")
	}
	if st.Kubernetes != nil {
		out = append(out, "kubernetes")
	}
	return out
}

// SettingsDecoder is a Kind with settings of its own, as a database/sql
// driver parses its own data source name: it decodes them, keeps them in
// its own type, and is the only code that reads that type.
type SettingsDecoder interface {
	// DecodeSettings decodes the settings of a spec's
	// `runtime: {kind, settings: {...}}` with decode, which fills a value
	// of the runtime's own type and refuses a field that type lacks.
	DecodeSettings(decode func(v any) error) (any, error)
	// FromStored is the runtime's settings from a spec's stored form; a
	// field set there that the runtime has no use for is a
	// *SettingError.
	FromStored(st Stored) (any, error)
	// Store is the stored form of settings the runtime made.
	Store(settings any) Stored
}

// SettingError says that a spec sets a field its runtime has none of:
// volumes: for the kubernetes runtime, images: for the process runtime.
type SettingError struct {
	// Runtime is the runtime's name; Field is the spec's top-level key.
	Runtime, Field string
	// Has lists the runtime's settings (none: it takes no settings).
	Has []string
}

func (e *SettingError) Error() string {
	if len(e.Has) == 0 {
		return fmt.Sprintf("runtime %s has no settings, so %s: does not apply to it", e.Runtime, e.Field)
	}
	return fmt.Sprintf("runtime %s has no setting %s (its settings: %s)", e.Runtime, e.Field, strings.Join(e.Has, ", "))
}

// Unused is FromStored's check for a runtime whose settings are the
// stored fields has: the first other field set is a *SettingError.
func Unused(runtime string, st Stored, has ...string) error {
	for _, f := range st.fields() {
		if !slices.Contains(has, f) {
			return &SettingError{Runtime: runtime, Field: f, Has: has}
		}
	}
	return nil
}

// SettingsFor is the runtime k's own settings from a spec's stored form
// (nil for a runtime without settings, which refuses every stored field
// with a *SettingError).
func SettingsFor(k Kind, st Stored) (any, error) {
	if d, ok := k.(SettingsDecoder); ok {
		return d.FromStored(st)
	}
	return nil, Unused(k.Name(), st)
}

// SettingsOf is the settings value of type T a runtime's New or
// Specialize is handed: the zero T for none, an error for a value another
// runtime made.
func SettingsOf[T any](runtime string, v any) (T, error) {
	var zero T
	switch s := v.(type) {
	case nil:
		return zero, nil
	case T:
		return s, nil
	case *T:
		if s == nil {
			return zero, nil
		}
		return *s, nil
	}
	return zero, fmt.Errorf("runtimes: %s: settings of type %T are another runtime's (want %T)", runtime, v, zero)
}
