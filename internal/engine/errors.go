package engine

import (
	"errors"
	"fmt"
)

// ErrUnsupported is the sentinel wrapped by every UnsupportedError, so callers
// can test with errors.Is(err, engine.ErrUnsupported).
var ErrUnsupported = errors.New("unsupported")

// UnsupportedError says that a knob does not exist in an engine at a version.
// It is returned before anything launches.
type UnsupportedError struct {
	Engine  string
	Version string
	// Knob is the Config field (its YAML name), e.g. "performance_mode".
	Knob string
	// Value is the requested value, as written.
	Value string
	// Hint says what to do instead, when there is something to say.
	Hint string
}

func (e *UnsupportedError) Error() string {
	msg := fmt.Sprintf("engine: %s %s does not support %s", e.Engine, e.Version, e.Knob)
	if e.Value != "" {
		msg += fmt.Sprintf("=%q", e.Value)
	}
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrUnsupported) true.
func (e *UnsupportedError) Unwrap() error { return ErrUnsupported }

// ValidationError is a config value that is wrong whatever the engine: a
// missing model, a negative size, a fraction above 1.
type ValidationError struct {
	// Field is the YAML name of the field, e.g. "gpu_memory_fraction".
	Field string
	// Value is the offending value, formatted.
	Value string
	// Reason says what is wrong.
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("engine: invalid %s %q: %s", e.Field, e.Value, e.Reason)
}

// ValidationErrors collects every problem in one config, so a user fixes them
// in one pass instead of one per run.
type ValidationErrors []error

func (es ValidationErrors) Error() string {
	if len(es) == 1 {
		return es[0].Error()
	}
	msg := fmt.Sprintf("engine: %d problems in config:", len(es))
	for _, e := range es {
		msg += "\n  - " + e.Error()
	}
	return msg
}

// Unwrap lets errors.As/Is see each problem.
func (es ValidationErrors) Unwrap() []error { return es }
