package safeyaml

import (
	"errors"
	"fmt"

	"github.com/goccy/go-yaml"
)

// ErrDecoderPanic is wrapped by Unmarshal when the YAML decoder panicked on
// a document: a malformed file is the user's error to fix, not a crash.
var ErrDecoderPanic = errors.New("the YAML decoder failed on this document")

// Unmarshal is yaml.UnmarshalWithOptions made safe for a user's document:
// goccy's decoder dereferences nil on some malformed input (the fuzzer
// found "generalization:\n ! 0\n0: #" for a struct with a slice field), and
// one file or request must not take the process or its handler down. The
// caller still runs Check first for size, nesting and alias expansion.
func Unmarshal(data []byte, v any, opts ...yaml.DecodeOption) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w (%v): check its syntax", ErrDecoderPanic, r)
		}
	}()
	return yaml.UnmarshalWithOptions(data, v, opts...)
}
