package metrics

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestPythonJSONReader: the stream rewrites as pythonJSONToStrict does,
// whatever the read sizes.
func TestPythonJSONReader(t *testing.T) {
	for _, in := range []string{
		`{"a": NaN, "b": [Infinity, -Infinity, -1.5], "c": "NaN Infinity \"NaN\"", "d": -2}`,
		`{"x": Nope, "y": -Inf, "z": "\\"}NaN`,
		``,
		`[NaN`,
	} {
		want := pythonJSONToStrict([]byte(in))
		for name, r := range map[string]io.Reader{
			"whole":    PythonJSONReader(strings.NewReader(in)),
			"one byte": iotest.OneByteReader(PythonJSONReader(iotest.OneByteReader(strings.NewReader(in)))),
		} {
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s %q: got %q %v, want %q", name, in, got, err, want)
			}
		}
	}
}

// FuzzPythonJSONReader: the stream and the whole-buffer rewrite agree.
func FuzzPythonJSONReader(f *testing.F) {
	for _, s := range []string{`{"a": NaN}`, `[-Infinity, "\"NaN"]`, `Infinit`, `-I`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := io.ReadAll(PythonJSONReader(bytes.NewReader(data)))
		if want := pythonJSONToStrict(data); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%q: got %q, want %q", data, got, want)
		}
	})
}
